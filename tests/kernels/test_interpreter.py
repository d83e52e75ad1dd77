"""Runs tests/kernels/interpreted/ in a child pytest under TRITON_INTERPRET=1.

Triton reads the variable once per process, and it would turn every later kernel into an
interpreted one (and the GPU tests into skips), so the interpreted tests get a process of
their own. Their output is shown when they fail.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="triton is not installed: the kernels cannot run")

ROOT = Path(__file__).parents[2]
INTERPRETED = Path(__file__).parent / "interpreted"


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                    reason="this run is under the interpreter: it collects those tests itself")
@pytest.mark.parametrize("module", sorted(p.name for p in INTERPRETED.glob("test_*.py")))
def test_module_under_the_interpreter(module):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(INTERPRETED / module)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"{module} under TRITON_INTERPRET=1:\n{run.stdout}\n{run.stderr}"
