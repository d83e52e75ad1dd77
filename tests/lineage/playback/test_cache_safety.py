"""The trace cache among other people's files: it deletes only what it made (its own folder,
tagged, its own names), clears what a killed run left as soon as that run is gone, is not used
in a directory another user could write, never breaks a session when it cannot be written (a
full disk, its folder removed), and never reads or writes through a symbolic link. Real files
throughout; a full disk is a small tmpfs where one can be mounted (root), skipped elsewhere."""
import errno
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lineage.playback import cache, trace
from lineage.playback.session import Session
from lineage.playback.trace import TraceReader
from lineage.scenario import load
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
TOUR = ROOT / "lineage" / "scenarios" / "tour.yaml"
OLD = time.time() - 3 * 86400          # three days ago: past every age the cache waits for


@pytest.fixture
def base(tmp_path, monkeypatch):
    """LINEAGE_CACHE_DIR, not made yet."""
    where = tmp_path / "cache"
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(where))
    return where


@pytest.fixture(scope="module")
def tour():
    return load(TOUR)


def _file(path: Path, size: int, mtime: float = OLD) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)                # sparse: a 2 GiB file costs no disk
    os.utime(path, (mtime, mtime))
    return path


def _entry(base: Path, sc, steps: int = 3) -> Path:
    """A real entry of `sc` with `steps` frames, made the way the app makes one."""
    s = cache.caching_session(sc)
    s.frame(steps - 1)
    s.close()
    return base / cache.FOLDER / f"{cache.key(sc)}.trace"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- 1. only what it made ---------------------------------------------------------------------

def test_the_users_files_survive_tidying_and_the_budget(base, tour, monkeypatch):
    base.mkdir(mode=0o700)
    theirs = {"talk.tmpl.md": 4096, "old.tmp": 1 << 20, "recording.trace": 2 << 30,
              f"{'a' * 32}.trace": 2 << 30, f"{'b' * 32}.{cache._HOST}-{_dead_pid()}-0.partial": 1 << 20}
    for name, size in theirs.items():       # old, big, some even named like the cache's own files
        _file(base / name, size)
    entry = _entry(base, tour)
    for name, size in theirs.items():
        assert (base / name).stat().st_size == size, name
    assert entry.exists()
    own = base / cache.FOLDER
    assert {p.name for p in own.iterdir()} == {"CACHEDIR.TAG", entry.name}
    assert (own / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")

    # in its own folder, past the budget, the oldest of its own entries go: nothing else does
    monkeypatch.setattr(cache, "BUDGET", 3 << 30)
    mine = [_file(own / f"{c * 32}.trace", 1 << 30, OLD + k) for k, c in enumerate("cde")]
    strangers = [_file(own / n, 2 << 30) for n in ("notes.trace", "x.tmp", f"{'f' * 31}.trace", "talk.tmpl.md")]
    cache.record_into_cache(Session(tour))()
    assert not mine[0].exists() and mine[1].exists() and mine[2].exists() and entry.exists()
    assert all(p.exists() for p in strangers)


def test_a_folder_without_its_tag_is_not_touched(base, tour):
    own = base / cache.FOLDER
    own.mkdir(parents=True, mode=0o700)
    planted = [_file(own / f"{'a' * 32}.trace", 2 << 30),
               _file(own / f"{'b' * 32}.{cache._HOST}-{_dead_pid()}-0.partial", 1 << 20)]
    assert cache.record_into_cache(Session(tour)) is None
    assert "CACHEDIR.TAG" in cache.cache_problem() and str(own) in cache.cache_problem()
    assert all(p.exists() for p in planted) and sorted(own.iterdir()) == sorted(planted)
    assert cache.lookup(tour) is None


# -- 2. what a killed run left ----------------------------------------------------------------

def test_a_killed_runs_partial_goes_as_soon_as_it_is_gone(base, tour):
    code = ("import os, signal\nfrom lineage.playback import cache\nfrom lineage.scenario import load\n"
            f"s = cache.caching_session(load({str(TOUR)!r}))\ns.frame(20)\nos.kill(os.getpid(), signal.SIGKILL)\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])))
    assert run.returncode == -signal.SIGKILL
    own = base / cache.FOLDER
    [left] = own.glob("*.partial")                  # what quitting badly leaves: MBs of frames
    assert left.stat().st_size > 1 << 20
    cache.record_into_cache(Session(tour))()       # the next run, minutes later, not a day
    assert not left.exists()


def test_partials_by_pid_host_and_age(base, tour):
    _entry(base, tour)                               # the folder, made and tagged
    own = base / cache.FOLDER
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        k, host, other = "c" * 32, cache._HOST, "0" * 8 if cache._HOST != "0" * 8 else "1" * 8
        now = time.time()
        dead = _file(own / f"{k}.{host}-{_dead_pid()}-0.partial", 1 << 20, now)
        running = _file(own / f"{k}.{host}-{live.pid}-0.partial", 1 << 20, now)
        running_long = _file(own / f"{k}.{host}-{live.pid}-1.partial", 1 << 20)
        elsewhere = _file(own / f"{k}.{other}-{_dead_pid()}-0.partial", 1 << 20, now)   # its pid means nothing here
        elsewhere_old = _file(own / f"{k}.{other}-{_dead_pid()}-1.partial", 1 << 20)
        ours_before = _file(own / f"{k}.{host}-{os.getpid()}-999.partial", 1 << 20, now)   # a container's last run
        writing = cache.caching_session(tour)          # this process's own, being written
        [ours_now] = set(own.glob(f"*-{os.getpid()}-*.partial")) - {ours_before}
        cache.record_into_cache(Session(tour))()
        assert not dead.exists() and running.exists() and not running_long.exists()
        assert elsewhere.exists() and not elsewhere_old.exists()
        assert not ours_before.exists() and ours_now.exists()
        writing.close()
        assert not ours_now.exists()
    finally:
        live.kill()
        live.wait()


# -- 3. whose directory -----------------------------------------------------------------------

def test_made_private(base, tour):
    old = os.umask(0)                               # the modes are the cache's, not the umask's
    try:
        entry = _entry(base, tour)
    finally:
        os.umask(old)
    own = base / cache.FOLDER
    assert (base.stat().st_mode & 0o777, own.stat().st_mode & 0o777) == (0o700, 0o700)
    assert entry.stat().st_mode & 0o777 == 0o600 and (own / "CACHEDIR.TAG").stat().st_mode & 0o777 == 0o600
    assert cache.cache_problem() is None


@pytest.mark.parametrize("loose", ["base", "folder"])
def test_a_directory_others_can_write_is_not_used(base, tour, loose, monkeypatch):
    entry = _entry(base, tour, steps=5)
    (base if loose == "base" else base / cache.FOLDER).chmod(0o777)
    why = cache.cache_problem()
    assert why is not None and "writable by its group and others" in why and "chmod go-w" in why
    assert cache.lookup(tour) is None and cache.open_scenario(tour) is None     # its frames are not read

    def refuse(self, i):
        raise AssertionError("the refused entry was read")
    monkeypatch.setattr(cache.Held, "frame", refuse)
    s = cache.caching_session(tour)                 # the app runs uncached and says so
    assert why in s.notes and why in s.info["notes"]
    s.frame(6)
    s.close()
    assert len(TraceReader(entry)) == 5             # nothing written there either
    assert cache.record_into_cache(Session(tour)) is None


def test_a_directory_of_another_user_is_not_used(base, tour, monkeypatch):
    _entry(base, tour)
    uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: uid + 1)
    why = cache.cache_problem()
    assert why is not None and f"belongs to user id {uid}" in why
    assert cache.lookup(tour) is None and cache.record_into_cache(Session(tour)) is None


# -- 4. a cache that cannot be written --------------------------------------------------------

def _used(where: Path) -> int:
    st = os.statvfs(where)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def test_snapshot_with_a_full_cache_disk(tmp_path, capsys, monkeypatch, small_fs):
    small = small_fs(1024)      # 30 tour frames are 3.6 MB
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(small))
    out = tmp_path / "a.txt"
    assert main(["snapshot", str(TOUR), "--step", "30", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "step 30 / 1000" in out.read_text()
    assert sorted(p.name for p in (small / cache.FOLDER).iterdir()) == ["CACHEDIR.TAG"]   # nothing left
    assert _used(small) < 64 << 10                     # the disk is not kept full
    assert "note: trace cache: this run's frames are not kept (No space left on device)" in err   # and said so
    assert cache.cache_problem() is None               # a full disk is no reason to refuse the cache next time


def test_the_app_steps_on_when_the_cache_disk_fills_and_frees(tmp_path, tour, monkeypatch, small_fs):
    small = small_fs(1024)
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(small))
    s = cache.caching_session(tour)
    s.frame(20)                                        # the disk filled on the way
    assert any("No space left on device" in n for n in s.notes)
    assert not list((small / cache.FOLDER).glob("*.partial"))      # abandoned at once: space freed
    for i in range(21, 90):                            # every step past it
        assert s.frame(i).step == i
    s.close()
    assert sorted(p.name for p in (small / cache.FOLDER).iterdir()) == ["CACHEDIR.TAG"]


def test_a_full_disk_mid_frame_abandons_the_entry(base, tour, monkeypatch):
    """The same without a mount: the entry's writes fail (ENOSPC) after 300 KB, then succeed."""
    real, written = trace._write, [0]

    def write(fd, data):
        if written[0] > 300_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = real(fd, data[:len(data) // 2 or 1])           # short writes on the way
        written[0] += n
        return n
    monkeypatch.setattr(trace, "_write", write)
    s = cache.caching_session(tour)
    clean = Session(tour)
    for i in range(40):
        assert s.frame(i) == clean.frame(i)
    monkeypatch.setattr(trace, "_write", real)            # room again: the session goes on, uncached
    assert s.frame(60) == clean.frame(60)
    assert s.notes[-1] == "trace cache: this run's frames are not kept (No space left on device)"
    s.close()
    assert sorted(p.name for p in (base / cache.FOLDER).iterdir()) == ["CACHEDIR.TAG"]


def test_a_recording_the_user_asked_for_still_reports_its_full_disk(tmp_path, capsys, monkeypatch, small_fs):
    monkeypatch.setenv("LINEAGE_CACHE_DIR", "off")
    small = small_fs(1024)
    assert main(["record", str(TOUR), "-o", str(small / "r.trace"), "--steps", "30"]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err


def test_clearing_the_cache_while_the_app_is_open(base, tour, capsys):
    s = cache.caching_session(tour)
    s.frame(5)
    shutil.rmtree(base)                                    # rm -rf while the app is open
    assert s.frame(8).step == 8
    s.close()                                              # at quit: no traceback, a note
    assert not base.exists() and "its folder was removed" in s.notes[-1]
    assert s.frame(3).step == 3 and "Traceback" not in capsys.readouterr().err


# -- 6. links ---------------------------------------------------------------------------------

def test_a_link_at_an_entrys_name_is_neither_read_nor_written_through(base, tour, tmp_path):
    entry = _entry(base, tour, steps=5)
    elsewhere = tmp_path / "elsewhere.trace"
    entry.rename(elsewhere)                                # a valid trace of this very scenario
    before = elsewhere.read_bytes()
    entry.symlink_to(elsewhere)
    assert cache.lookup(tour) is None                      # not read through the link
    s = cache.caching_session(tour)
    s.frame(9)                                             # longer: it would replace the entry
    s.close()
    assert entry.is_symlink() and elsewhere.read_bytes() == before       # nor written through it
    assert "not an entry lineage made" in s.notes[-1]
    assert not list(entry.parent.glob("*.partial"))


def test_a_link_at_a_partials_name_is_not_written_through(base, tour, tmp_path, monkeypatch):
    _entry(base, tour)
    victim = tmp_path / "victim"
    victim.write_text("mine")
    monkeypatch.setattr(cache, "_SEQ", itertools.count(7))
    name = f"{cache.key(tour)}.{cache._HOST}-{os.getpid()}-7.partial"
    (base / cache.FOLDER / name).symlink_to(victim)
    s = Session(tour)
    assert cache.record_into_cache(s) is None             # the cache declines, the session runs
    assert s.frame(3).step == 3 and victim.read_text() == "mine"
    assert (base / cache.FOLDER / name).is_symlink()


def test_a_linked_folder_or_tag_is_not_used(base, tour, tmp_path):
    real = tmp_path / "real"
    _entry(base, tour)
    (base / cache.FOLDER).rename(real)
    (base / cache.FOLDER).symlink_to(real)                 # the folder a link onto a tagged one
    assert "is not a directory lineage made" in cache.cache_problem()
    assert cache.lookup(tour) is None
    (base / cache.FOLDER).unlink()
    real.rename(base / cache.FOLDER)
    tag = base / cache.FOLDER / "CACHEDIR.TAG"
    tag.rename(tmp_path / "tag")
    tag.symlink_to(tmp_path / "tag")                       # the tag a link
    assert "has no CACHEDIR.TAG" in cache.cache_problem() and cache.lookup(tour) is None
