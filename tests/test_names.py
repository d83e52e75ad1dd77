"""Every name the project's code reads is defined: pyflakes over the packages, undefined names
only. A branch the CPU suite never runs (the captured CUDA step, a Triton-only path) fails on
the first GPU box that reaches it otherwise: `StepObs` used in lineage/graph_step.py without its
import passed the whole CPU suite and broke 45 tests on an H200."""
import ast
from pathlib import Path

from pyflakes import checker, messages

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lineage", "tests")
UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)


def undefined_names(source: str, filename: str) -> list[str]:
    found = checker.Checker(ast.parse(source, filename), filename=filename).messages
    return [str(m) for m in found if isinstance(m, UNDEFINED)]


def test_no_module_reads_a_name_it_never_defines():
    problems = []
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            problems += undefined_names(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)))
    assert problems == []


def test_a_missing_import_is_found():
    source = "from dataclasses import replace\n\ndef run():\n    return StepObs(), replace\n"
    assert undefined_names(source, "graph_step.py") == ["graph_step.py:4:12: undefined name 'StepObs'"]
