"""The benchmark scripts of tests/benchmarks/ still start: each answers --help, which also
imports what it needs at the top (so a moved module shows up here, not on the GPU box)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPTS = sorted(p.stem for p in (ROOT / "tests" / "benchmarks").glob("*.py") if p.stem != "timing")


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_script_starts(name):
    run = subprocess.run([sys.executable, "-m", f"tests.benchmarks.{name}", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "python -m tests.benchmarks" in run.stdout or "usage" in run.stdout
