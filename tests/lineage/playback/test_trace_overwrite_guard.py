"""A trace never replaces a file without --force, and says so before any work: `lineage record
SCENARIO -o EXISTING` refuses before the scenario is opened (no model built, no step run), in
one line, exit 2, the file byte for byte as it was; TraceWriter refuses when it is made, not
when it publishes at the end (a whole recording later), and leaves no partial."""
import os
from pathlib import Path

import pytest

from lineage.cli import export
from lineage.cli.main import main
from lineage.playback import session as session_mod
from lineage.playback.trace import TraceReader, TraceWriter

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = str(ROOT / "lineage" / "scenarios" / "recall.yaml")
OLD = b"an older trace, or anything: not to be lost\n"
INFO = {"title": "t", "models": []}


def partials(where: Path) -> list[str]:
    return sorted(p.name for p in where.iterdir() if p.name.endswith(".partial"))


def no_work(monkeypatch):
    """Opening the scenario, building a model or making a step fails the test."""
    def never(*a, **kw):
        raise AssertionError("the scenario was opened: the guard came after the work")
    monkeypatch.setattr(export, "open_file", never)
    monkeypatch.setattr(session_mod.Session, "__init__", never)
    monkeypatch.setattr(session_mod.Session, "frame", never)


def test_record_to_an_existing_file_refuses_in_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    out = tmp_path / "old.trace"
    out.write_bytes(OLD)
    before = os.stat(out)
    no_work(monkeypatch)
    assert main(["record", SCENARIO, "-o", str(out)]) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "--force" in lines[0], cap.err
    assert cap.out == ""
    assert out.read_bytes() == OLD and os.stat(out).st_mtime_ns == before.st_mtime_ns
    assert partials(tmp_path) == []


def test_record_refuses_a_link_there_too(tmp_path, monkeypatch, capsys):
    out = tmp_path / "link.trace"
    out.symlink_to(tmp_path / "nowhere")                        # dangling: no file, but a name taken
    no_work(monkeypatch)
    assert main(["record", SCENARIO, "-o", str(out)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert out.is_symlink() and not (tmp_path / "nowhere").exists() and partials(tmp_path) == []


def test_record_with_force_replaces_it(tmp_path, capsys):
    out = tmp_path / "old.trace"
    out.write_bytes(OLD)
    assert main(["record", SCENARIO, "-o", str(out), "--steps", "2", "--force"]) == 0
    reader = TraceReader(out)
    assert len(reader) == 2 and not reader.truncated
    reader.close()
    assert partials(tmp_path) == []


@pytest.mark.parametrize("what", ["file", "dangling link", "link to a file"])
def test_trace_writer_refuses_when_made(tmp_path, what):
    out = tmp_path / "out.trace"
    target = tmp_path / "target"
    if what == "file":
        out.write_bytes(OLD)
    else:
        if what == "link to a file":
            target.write_bytes(OLD)
        out.symlink_to(target)
    with pytest.raises(FileExistsError, match="--force"):
        TraceWriter(out, "scenario text", INFO)                  # at once: no frame written, none to write
    assert partials(tmp_path) == []
    if what == "file":
        assert out.read_bytes() == OLD
    else:
        assert out.is_symlink() and os.readlink(out) == str(target)
        assert (target.read_bytes() == OLD) if what == "link to a file" else not target.exists()


def test_trace_writer_with_overwrite_replaces_at_close(tmp_path):
    out = tmp_path / "out.trace"
    out.write_bytes(OLD)
    w = TraceWriter(out, "scenario text", INFO, overwrite=True)
    assert out.read_bytes() == OLD                               # nothing replaced until it is whole
    w.close()
    reader = TraceReader(out)
    assert len(reader) == 0 and not reader.truncated
    reader.close()
    assert partials(tmp_path) == []
