"""Every writer keeps the same rules (lineage/files.py): `snapshot`, `slides` and the app's `s`
key never replace a file without --force, never take their input as output, never write
through a symbolic link, and a failed write (a full disk) leaves nothing behind."""
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lineage import files
from lineage.files import new_file, output_problem, publish, write_new
from lineage.cli.main import main
from lineage.playback.trace import TraceWriter

ROOT = Path(__file__).resolve().parents[2]
FACTS = str(ROOT / "lineage" / "scenarios" / "fig3_two_facts.yaml")


def _one_line(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0] and all(n in err[0] for n in needles), err
    return err[0]


def _snap(out, *more):
    return main(["snapshot", FACTS, "--step", "2", "-o", str(out), *more])


def test_snapshot_never_replaces_without_force(tmp_path, capsys):
    out = tmp_path / "notes.txt"
    out.write_text("my lecture notes")
    assert _snap(out) == 2
    _one_line(capsys, str(out), "exists", "--force")
    assert out.read_text() == "my lecture notes"
    assert _snap(out, "--force") == 0 and "1.21" in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]       # no partial left


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_snapshot_never_writes_through_a_link(tmp_path, capsys, force):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    (tmp_path / "to-file.txt").symlink_to(target)
    (tmp_path / "dangling.svg").symlink_to(tmp_path / "made-by-following.svg")
    for name in ("to-file.txt", "dangling.svg"):
        assert _snap(tmp_path / name, *force) == 2
        _one_line(capsys, "symbolic link")
    assert target.read_text() == "keep" and not (tmp_path / "made-by-following.svg").exists()


def test_snapshot_never_replaces_its_input(tmp_path, capsys):
    scen = tmp_path / "scen.txt"                   # a scenario whose name has an output's suffix
    scen.write_text(Path(FACTS).read_text())
    trace = tmp_path / "t.png"                     # a trace named like a picture
    assert main(["record", FACTS, "-o", str(trace), "--steps", "3"]) == 0
    kept = trace.read_bytes()
    for src in (scen, trace):
        assert main(["snapshot", str(src), "--step", "2", "-o", str(src), "--force"]) == 2
        _one_line(capsys, "is the input file")
    assert trace.read_bytes() == kept and scen.read_text() == Path(FACTS).read_text()


def test_snapshot_on_a_full_disk_leaves_nothing(small_fs, capsys):
    disk = small_fs(4)                             # one page: a whole screen as PNG is larger, fonts or none
    out = disk / "a.png"
    assert _snap(out) == 2
    _one_line(capsys, str(out), "No space left")
    assert list(disk.iterdir()) == []


def test_slides_never_replace_a_note_or_follow_a_link(tmp_path, capsys):
    deck = tmp_path / "deck"
    deck.mkdir()
    note = deck / "01-step0008.txt"                # a text file with a slide's name, and no PNG
    note.write_text("mine")
    assert main(["slides", "fig5_gating", "-o", str(deck), "--scale", "0.3"]) == 2
    _one_line(capsys, "01-step0008.txt", "exists")
    note.unlink()
    (deck / "02-step0009.png").symlink_to(tmp_path / "victim.png")
    for force in ([], ["--force"]):
        assert main(["slides", "fig5_gating", "-o", str(deck), "--scale", "0.3", *force]) == 2
        _one_line(capsys, "02-step0009.png", "symbolic link")
    assert not (tmp_path / "victim.png").exists() and sorted(os.listdir(deck)) == ["02-step0009.png"]
    (deck / "02-step0009.png").unlink()
    assert main(["slides", "fig5_gating", "-o", str(deck), "--scale", "0.3"]) == 0
    first = (deck / "01-step0008.txt").read_text()
    assert main(["slides", "fig5_gating", "-o", str(deck), "--scale", "0.3"]) == 2     # a deck is there
    assert main(["slides", "fig5_gating", "-o", str(deck), "--scale", "0.3", "--force"]) == 0
    assert (deck / "01-step0008.txt").read_text() == first and not [p for p in deck.iterdir() if
                                                                   p.name.startswith(".")]


def test_slides_leave_another_decks_files_alone(tmp_path, capsys):
    deck = tmp_path / "deck"
    deck.mkdir()
    other = deck / "09-step0050.png"
    other.write_bytes(b"another deck")
    assert main(["slides", "fig5_gating", "-o", str(deck), "--scale", "0.3"]) == 2
    _one_line(capsys, "another deck")
    assert main(["slides", "fig5_gating", "-o", str(deck), "--scale", "0.3", "--force"]) == 0
    assert other.read_bytes() == b"another deck" and "left as they were" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["slides", "snapshot"])
def test_a_name_too_long_is_one_line(tmp_path, capsys, cmd):
    long = tmp_path / ("d" * 300)
    args = ["-o", str(long)] if cmd == "slides" else ["--step", "1", "-o", f"{long}.txt"]
    assert main([cmd, "fig5_gating", *args]) == 2
    _one_line(capsys, "255")


def test_new_file_appears_whole_or_not_at_all(tmp_path):
    out = tmp_path / "out.bin"
    with pytest.raises(RuntimeError):
        with new_file(out) as f:
            f.write(b"half")
            raise RuntimeError("the writer failed")
    assert list(tmp_path.iterdir()) == []
    write_new(out, b"whole")
    with pytest.raises(FileExistsError):
        write_new(out, b"again")
    assert out.read_bytes() == b"whole" and output_problem(out) == "exists (--force replaces it)"
    (tmp_path / "link").symlink_to(out)
    write_new(tmp_path / "link", b"new", force=True)           # the link is replaced, its target kept
    assert out.read_bytes() == b"whole" and not (tmp_path / "link").is_symlink()


def _special(tmp_path, kind: str) -> Path:
    """A FIFO or a listening-socket file in tmp_path (device nodes are only looked at, never made)."""
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()                          # the socket file stays, as a server's does
    return path


def _intact(path: Path) -> bool:
    mode = os.lstat(path).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@pytest.mark.parametrize("kind", ["fifo", "sock"])
def test_force_never_replaces_a_fifo_or_socket(tmp_path, capsys, kind):
    """--force replaces regular files only (issue 51): `record`, `snapshot`, and the helpers
    beneath every writer (write_new, publish, TraceWriter) refuse a FIFO or socket with or
    without it, and the refusal never offers --force for them."""
    out = _special(tmp_path, kind)
    for force in ([], ["--force"]):
        assert main(["record", FACTS, "-o", str(out), "--steps", "2", *force]) == 2
        line = _one_line(capsys, str(out), "replaces only regular files")
        assert "--force" not in line
        assert _snap(out, *force) == 2
        _one_line(capsys, "replaces only regular files")
    for force in (False, True):
        with pytest.raises(FileExistsError, match="replaces only regular files"):
            write_new(out, b"x", force=force)
        with pytest.raises(FileExistsError, match="replaces only regular files"):
            TraceWriter(out, "", {}, overwrite=force)
    partial = tmp_path / "p"
    partial.write_bytes(b"done")
    with pytest.raises(FileExistsError, match="replaces only regular files"):
        publish(partial, out, overwrite=True)          # one made after the checks: the last look refuses it
    assert _intact(out) and partial.read_bytes() == b"done"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([kind, "p"])      # no partial left


def test_force_never_replaces_a_device():
    """/dev/null is only asked about, never written: with --force it is still refused."""
    for force in (False, True):
        said = output_problem("/dev/null", force=force)
        assert said is not None and "a character device" in said and "--force" not in said


def test_a_killed_writers_partial_goes_with_the_next_write(tmp_path):
    """kill -9 inside new_file leaves its hidden partial (issue 51); the next writer into that
    folder removes it, as its writer's pid is no longer alive on this host."""
    code = ("import os, signal, sys; from lineage.files import new_file\n"
            "with new_file(sys.argv[1]) as f:\n    f.write(b'half'); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.txt")], cwd=ROOT, timeout=120)
    assert out.returncode == -9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".lineage-") and left[0].endswith(".partial"), left
    write_new(tmp_path / "b.txt", "whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"]


def test_only_dead_writers_partials_are_removed(tmp_path):
    """Which partials a writer removes: this host's whose pid is not alive (one past any pid;
    this process's own pid not written by it), another host's or an unnamed one only after a
    day; never a live writer's, a link, a file of another name, or one being written here."""
    host, me = files._HOST, os.getpid()
    gone, live = 2**31 - 1, 1                     # no pid is 2^31-1; pid 1 always runs
    names = {f".lineage-{host}-{gone}-{'a' * 12}.partial": False,
             f".lineage-{host}-{me}-{'b' * 12}.partial": False,       # an earlier process that had our pid
             f".lineage-{host}-{live}-{'c' * 12}.partial": True,
             f".lineage-00000000-{gone}-{'d' * 12}.partial": True,    # another host's, recent
             f".lineage-11111111-{gone}-{'e' * 12}.partial": False,   # another host's, two days old
             f".lineage-{'f' * 12}.partial": False,                   # named before pids, two days old
             f".lineage-{'0' * 12}.partial": True,                    # named before pids, recent
             ".lineage-notes.partial": True, "notes.partial": True}
    for name in names:
        (tmp_path / name).write_text("x")
    for name in (f".lineage-11111111-{gone}-{'e' * 12}.partial", f".lineage-{'f' * 12}.partial"):
        os.utime(tmp_path / name, (0, os.path.getmtime(tmp_path / name) - 2 * 86400))
    (tmp_path / f".lineage-{host}-{gone}-{'9' * 12}.partial").symlink_to(tmp_path / "notes.partial")
    with new_file(tmp_path / "out.txt") as f:      # its own partial is written meanwhile, and kept
        f.write(b"whole")
        mine = [p.name for p in tmp_path.iterdir() if p.name not in names and p.suffix == ".partial"]
        assert len(mine) == 2 and all(f"-{me}-" in n or "9" * 12 in n for n in mine), mine
    kept = {p.name for p in tmp_path.iterdir()}
    assert kept == {n for n, stays in names.items() if stays} | {"out.txt", f".lineage-{host}-{gone}-{'9' * 12}.partial"}


def test_s_key_on_a_dotted_name_and_a_planted_link(tmp_path):
    """`recall.v2.yaml`: each press writes files of its own (a stem cut at the dot made every
    press write `lineage-recall.*`), and a link at the next name is stepped over, not followed."""
    from tests.app.helpers import run, settle
    from lineage.app.app import LineageApp
    scen = tmp_path / "recall.v2.yaml"
    scen.write_text(Path(FACTS).read_text())
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    outside = tmp_path / "outside.svg"
    (snaps / "lineage-recall.v2-step1-2.svg").symlink_to(outside)

    async def go():
        app = LineageApp(str(scen))
        app.snapshot_dir = snaps
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, 0)
            for _ in range(2):
                await pilot.press("s")
                await pilot.pause(0.1)
            await settle(pilot, app, 0)                       # the PNG workers
            return [n.message for n in app._notifications]
    said = run(go())
    assert not outside.exists()
    names = sorted(p.name for p in snaps.iterdir() if not p.is_symlink())
    assert names == sorted(f"lineage-recall.v2-step1{s}{x}" for s in ("", "-3") for x in (".png", ".svg", ".txt"))
    for m in said:                                    # every file a notice names is there
        stem = m.split("saved ")[1].split(".svg")[0]
        assert Path(stem + ".svg").is_file() and Path(stem + ".txt").is_file(), m
