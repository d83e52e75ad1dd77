"""The trace cache keys a scenario with `input: {file: ...}` by the file's contents too: the same
file replays from the cache, an edited one (the YAML unchanged) is computed again."""
import textwrap
from pathlib import Path

import pytest

from lineage.playback import cache
from lineage.scenario import load


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "s.yaml").write_text(textwrap.dedent("""\
        version: 1
        title: an input file
        model: {preset: tiny-hybrid}
        input: {file: doc.txt}
        panels: [{kind: tokens}]
        """), encoding="utf-8")
    return tmp_path


def _record(path: Path, steps: int = 3) -> list[str]:
    """The app's way: a session that keeps its frames in the cache; the tokens it made."""
    s = cache.caching_session(load(path))
    texts = [s.frame(i).token().text for i in range(steps)]
    s.close()
    return texts


def test_each_input_file_replays_from_its_own_entry(folder):
    """Two contents of doc.txt under one YAML: each is recorded once, then opened again from the
    cache (no session, no torch) with its own tokens, not the other's."""
    doc = folder / "doc.txt"
    for text in ("aaaaaaaaaa", "bbbbbbbbbb"):
        doc.write_text(text, encoding="utf-8")
        assert _record(folder / "s.yaml") == [text[0]] * 3
    for text in ("aaaaaaaaaa", "bbbbbbbbbb"):
        doc.write_text(text, encoding="utf-8")
        cursor = cache.open_scenario(load(folder / "s.yaml"))     # what the app opens without torch
        assert isinstance(cursor, cache.Warm), text
        assert [cursor.frame(i).token().text for i in range(3)] == [text[0]] * 3
        assert cursor.session is None                             # every frame came from the entry
        cursor.close()


def test_an_edited_input_file_is_computed_again(folder):
    doc = folder / "doc.txt"
    doc.write_text("aaaaaaaaaa", encoding="utf-8")
    _record(folder / "s.yaml")
    first = cache.key(load(folder / "s.yaml"))
    doc.write_text("bbbbbbbbbb", encoding="utf-8")              # same length: only the bytes differ
    sc = load(folder / "s.yaml")
    assert cache.key(sc) != first
    assert cache.open_scenario(sc) is None                      # no stale entry for the new text
    assert _record(folder / "s.yaml") == ["b"] * 3
    doc.write_text("aaaaaaaaaa", encoding="utf-8")              # back to the first: its entry is still there
    assert cache.key(load(folder / "s.yaml")) == first
    assert cache.open_scenario(load(folder / "s.yaml")) is not None
