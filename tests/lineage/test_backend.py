"""LINEAGE_BACKEND (lineage/backend.py): a value that is none of auto, reference, triton runs on
the reference and is said, naming the accepted values, never silently ignored (issue 51)."""
from pathlib import Path

from lineage.backend import env_problem, resolve
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
RECALL = str(ROOT / "lineage" / "scenarios" / "recall.yaml")


def test_a_mistyped_backend_names_the_accepted_values(monkeypatch):
    monkeypatch.setenv("LINEAGE_BACKEND", "tirton")
    backend, note = resolve("cpu")
    assert backend == "reference" and note == env_problem()
    assert note == ("LINEAGE_BACKEND='tirton' is not one of auto, reference, triton (did you mean 'triton'?): "
                    "using the reference")
    for fine in ("auto", "Reference", " triton ", ""):
        monkeypatch.setenv("LINEAGE_BACKEND", fine)
        assert env_problem() is None


def test_record_says_a_mistyped_backend_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LINEAGE_BACKEND", "refrence")
    assert main(["record", RECALL, "-o", str(tmp_path / "t.trace"), "--steps", "1"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["lineage: warning: LINEAGE_BACKEND='refrence' is not one of auto, reference, triton "
                   "(did you mean 'reference'?): using the reference"], err
    monkeypatch.delenv("LINEAGE_BACKEND")
    assert main(["record", RECALL, "-o", str(tmp_path / "u.trace"), "--steps", "1"]) == 0
    assert capsys.readouterr().err == ""
