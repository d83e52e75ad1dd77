"""lineage.files.publish where hard links fail (EPERM, as on some FUSE and SMB mounts): the
finished file is still published whole, an existing file is never replaced without force, a
file that appears while publishing is never replaced either, and no partial is left behind."""
import errno
import os

import pytest

from lineage import files
from lineage.files import new_file, publish, write_new
from lineage.playback.trace import TraceReader, TraceWriter

OTHERS = b"another writer's file"
INFO = {"title": "t", "models": []}


def no_links(monkeypatch, err=errno.EPERM):
    def link(*a, **kw):
        raise OSError(err, os.strerror(err))
    monkeypatch.setattr(os, "link", link)


def no_noreplace_rename(monkeypatch):
    """A file system with no renameat2(RENAME_NOREPLACE) either (SMB answers EINVAL)."""
    monkeypatch.setattr(files, "_rename_noreplace", lambda src, dst: False)


RENAMES = [pytest.param(False, id="renameat2"), pytest.param(True, id="no-renameat2")]


def leftovers(where):
    return sorted(p.name for p in where.iterdir() if p.name.endswith(".partial"))


@pytest.mark.parametrize("plain_rename", RENAMES)
@pytest.mark.parametrize("err", [errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV])
def test_a_file_is_published_whole_without_hard_links(tmp_path, monkeypatch, err, plain_rename):
    no_links(monkeypatch, err)
    if plain_rename:
        no_noreplace_rename(monkeypatch)
    out = tmp_path / "out.txt"
    write_new(out, "all of it\n")
    assert out.read_text() == "all of it\n" and not out.is_symlink()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("plain_rename", RENAMES)
def test_an_existing_file_or_link_is_kept_without_force(tmp_path, monkeypatch, plain_rename):
    no_links(monkeypatch)
    if plain_rename:
        no_noreplace_rename(monkeypatch)
    out = tmp_path / "out.txt"
    out.write_bytes(OTHERS)
    with pytest.raises(FileExistsError):
        write_new(out, "mine")
    assert out.read_bytes() == OTHERS and leftovers(tmp_path) == []
    target = tmp_path / "target"
    link = tmp_path / "dangling"
    link.symlink_to(target)                     # a dangling link: never written through, never replaced
    with pytest.raises(FileExistsError):
        write_new(link, "mine")
    assert link.is_symlink() and not target.exists() and leftovers(tmp_path) == []
    write_new(out, "mine", force=True)          # force replaces
    assert out.read_text() == "mine" and leftovers(tmp_path) == []


@pytest.mark.parametrize("plain_rename", RENAMES)
def test_a_file_that_appears_while_publishing_is_not_replaced(tmp_path, monkeypatch, plain_rename):
    """Another writer's file tries to land at the last moment: after the link failed, and
    again just before any rename (a check, then a rename, replaced it). Whichever file got the
    name stays there whole: the other's (publishing then fails, and new_file removes the
    partial), or ours, where the name was already held and the other writer was refused."""
    out = tmp_path / "out.txt"
    landed = []

    def arrives():
        try:
            with open(out, "xb") as f:          # exclusive, as every writer here creates
                f.write(OTHERS)
            landed.append(True)
        except FileExistsError:
            landed.append(False)

    def link(*a, **kw):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    real_replace, real_rename, real_noreplace = os.replace, os.rename, files._rename_noreplace
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "replace", lambda *a, **kw: (arrives(), real_replace(*a, **kw))[1])
    monkeypatch.setattr(os, "rename", lambda *a, **kw: (arrives(), real_rename(*a, **kw))[1])
    if plain_rename:
        no_noreplace_rename(monkeypatch)
    else:
        monkeypatch.setattr(files, "_rename_noreplace", lambda s, d: (arrives(), real_noreplace(s, d))[1])
    try:
        write_new(out, "mine")
        published = True
    except FileExistsError:
        published = False
    assert landed, "nothing was renamed"
    if any(landed):                             # the other file got the name: it is kept
        assert not published and out.read_bytes() == OTHERS
    else:                                       # the name was ours first: the other was refused
        assert published and out.read_text() == "mine"
    assert leftovers(tmp_path) == []
    if not plain_rename:                        # renameat2: the other lands first, publish keeps the partial
        partial = tmp_path / "p.partial"
        partial.write_text("mine")
        out.unlink()
        with pytest.raises(FileExistsError):
            publish(partial, out)
        assert out.read_bytes() == OTHERS and partial.read_text() == "mine"


def test_a_trace_is_published_without_hard_links(tmp_path, monkeypatch):
    no_links(monkeypatch)
    out = tmp_path / "t.trace"
    with TraceWriter(out, "scenario: text", INFO):
        pass
    reader = TraceReader(out)                   # whole: its footer read, not truncated
    assert len(reader) == 0 and not reader.truncated
    reader.close()
    assert not (tmp_path / "t.trace.partial").exists()
    # published over nothing: a second recording finds it there and refuses, the first kept
    before = out.read_bytes()
    with pytest.raises(FileExistsError):
        TraceWriter(out, "scenario: text", INFO)
    assert out.read_bytes() == before and not (tmp_path / "t.trace.partial").exists()


def test_new_file_failing_body_leaves_nothing_without_links(tmp_path, monkeypatch):
    no_links(monkeypatch)
    out = tmp_path / "out.bin"
    with pytest.raises(RuntimeError):
        with new_file(out) as f:
            f.write(b"half")
            raise RuntimeError("the body failed")
    assert not out.exists() and leftovers(tmp_path) == []
