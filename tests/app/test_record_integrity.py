"""`lineage record` never loses or mixes a file: an existing output, the scenario itself, a
concurrent recording, a directory, a missing directory, a read-only directory, a full disk and
Ctrl-C each give one line (and keep what they can)."""
import errno
import os
from pathlib import Path

import pytest

from lineage.playback.session import Session
from lineage.playback.trace import TraceError, TraceReader, TraceWriter
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
RECALL = str(ROOT / "lineage" / "scenarios" / "recall.yaml")


def _one_line(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0] and all(n in err[0] for n in needles), err
    return err[0]


def test_existing_output_needs_force(tmp_path, capsys):
    out = tmp_path / "r.trace"
    assert main(["record", RECALL, "-o", str(out), "--steps", "3"]) == 0
    first = out.read_bytes()
    assert main(["record", RECALL, "-o", str(out), "--steps", "5"]) == 2
    _one_line(capsys, str(out), "exists", "--force")
    assert out.read_bytes() == first
    assert main(["record", RECALL, "-o", str(out), "--steps", "5", "--force"]) == 0
    assert len(TraceReader(out)) == 5 and not (tmp_path / "r.trace.partial").exists()


@pytest.mark.parametrize("steps", ["0", "-5"])
def test_steps_below_one_are_refused(tmp_path, capsys, steps):
    """`--steps 0` or `-5` wrote a trace of no frames (issue 51): refused, one line, exit 2, no file."""
    out = tmp_path / "r.trace"
    assert main(["record", RECALL, "-o", str(out), "--steps", steps]) == 2
    _one_line(capsys, f"--steps {steps}", "at least 1")
    assert list(tmp_path.iterdir()) == []


def test_output_that_is_the_scenario_is_refused(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text(Path(RECALL).read_text())
    before = mine.read_bytes()
    for force in ([], ["--force"]):
        assert main(["record", str(mine), "-o", str(mine), *force]) == 2
        _one_line(capsys, "is the input file")
    assert mine.read_bytes() == before


def test_concurrent_recording_is_refused(tmp_path, capsys):
    out = tmp_path / "r.trace"
    other = TraceWriter(out, "x", {"title": "x", "models": []})    # another recording holds r.trace.partial
    assert main(["record", RECALL, "-o", str(out), "--steps", "3"]) == 2
    _one_line(capsys, "another recording")
    other.close()
    assert len(TraceReader(out)) == 0          # the first recording's file, untouched by the second


def test_bad_output_places(tmp_path, capsys, monkeypatch):
    assert main(["record", RECALL, "-o", str(tmp_path)]) == 2
    _one_line(capsys, "is a directory")
    assert main(["record", RECALL, "-o", str(tmp_path / "no" / "x.trace")]) == 2
    _one_line(capsys, "no such directory")
    real_open = os.open

    def read_only(path, flags, *a):
        if str(path).endswith(".partial"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *a)
    monkeypatch.setattr(os, "open", read_only)   # root ignores chmod, so a read-only directory is simulated
    assert main(["record", RECALL, "-o", str(tmp_path / "x.trace")]) == 2
    _one_line(capsys, "Permission denied")


def test_full_disk_keeps_the_frames_written(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.trace"
    real = TraceWriter._record

    def record(self, kind, payload, level=None):
        if self.frames >= 4 and kind in (b"F", b"E"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, kind, payload, level)
    monkeypatch.setattr(TraceWriter, "_record", record)
    assert main(["record", RECALL, "-o", str(out), "--steps", "10"]) == 2
    _one_line(capsys, "No space left on device", "after 4 frames", "--salvage")
    assert len(TraceReader(out, salvage=True)) == 4


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_full_disk_before_the_first_frame_leaves_no_file_and_no_false_hint(tmp_path, capsys, monkeypatch, force):
    """A full disk at the first frame published a 0-frame trace whose --salvage hint opened
    nothing (issue 51): now nothing is published, no partial is left, a --force'd file stays."""
    out = tmp_path / "r.trace"
    if force:
        out.write_bytes(b"the file --force was given for")
    real = TraceWriter._record

    def record(self, kind, payload, level=None):
        if kind in (b"F", b"E"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, kind, payload, level)
    monkeypatch.setattr(TraceWriter, "_record", record)
    assert main(["record", RECALL, "-o", str(out), "--steps", "10", *force]) == 2
    line = _one_line(capsys, "No space left on device", "nothing was written")
    assert "--salvage" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == (["r.trace"] if force else [])
    if force:
        assert out.read_bytes() == b"the file --force was given for"


def test_a_trace_cut_before_its_first_frame_offers_no_salvage(tmp_path):
    """A header and nothing after it: truncated, and --salvage is not offered (it opens no frame)."""
    path = tmp_path / "cut.trace"
    w = TraceWriter(path, "x", {"title": "x", "models": []})
    w._f.close()                                  # killed before the footer: published as it is
    w._publish()
    with pytest.raises(TraceError) as e:
        TraceReader(path)
    assert "no frame was written" in str(e.value) and "--salvage" not in str(e.value), str(e.value)


def test_ctrl_c_keeps_a_complete_trace(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.trace"
    real = Session._make

    def make(self, i):
        if i == 6:
            raise KeyboardInterrupt
        return real(self, i)
    monkeypatch.setattr(Session, "_make", make)
    assert main(["record", RECALL, "-o", str(out), "--steps", "10"]) == 130
    _one_line(capsys, "interrupted", "6 frames")
    assert len(TraceReader(out)) == 6          # closed with its footer: no --salvage needed


def test_a_model_error_mid_record_is_one_line_and_frees_the_output(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.trace"
    real = Session._make

    def make(self, i):
        if i == 3:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real(self, i)
    monkeypatch.setattr(Session, "_make", make)
    assert main(["record", RECALL, "-o", str(out), "--steps", "10"]) == 2
    _one_line(capsys, "step 4", "CUDA error: an illegal memory access was encountered")
    assert len(TraceReader(out)) == 3 and not (tmp_path / "r.trace.partial").exists()
    monkeypatch.setattr(Session, "_make", real)
    assert main(["record", RECALL, "-o", str(out), "--steps", "2", "--force"]) == 0     # not locked out


@pytest.mark.parametrize("command", ["record", "snapshot", "slides"])
def test_a_bug_in_a_step_is_raised_not_told_as_the_files_fault(tmp_path, monkeypatch, command):
    """A NameError in our step (graph_step's missing import, once, on a GPU) read as
    "scenario: step 1: name 'StepObs' is not defined", exit 2: a user blames the file. It goes
    out with its traceback, and a recording still leaves no .partial behind."""
    def make(self, i):
        raise NameError("name 'StepObs' is not defined")
    monkeypatch.setattr(Session, "_make", make)
    argv = {"record": ["record", RECALL, "-o", str(tmp_path / "r.trace")],
            "snapshot": ["snapshot", RECALL, "--step", "1", "-o", str(tmp_path / "x.txt")],
            "slides": ["slides", RECALL, "-o", str(tmp_path / "deck")]}[command]
    with pytest.raises(NameError, match="StepObs"):
        main(argv)
    assert not (tmp_path / "r.trace.partial").exists()


def test_snapshot_of_a_step_the_model_fails_is_one_line(tmp_path, capsys, monkeypatch):
    real = Session._make

    def make(self, i):
        if i == 2:
            raise FloatingPointError("weights are not finite")
        return real(self, i)
    monkeypatch.setattr(Session, "_make", make)
    for out in ("x.txt", "x.svg"):
        assert main(["snapshot", RECALL, "--step", "3", "-o", str(tmp_path / out)]) == 2
        _one_line(capsys, "step 3", "weights are not finite")
        assert not (tmp_path / out).exists()
