"""The trace cache stops writing an entry once it outgrows the whole budget (kept, it would be
evicted whole by the next write), and says so once."""
from pathlib import Path

import pytest

from lineage.playback import cache
from lineage.scenario import load
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
TOUR = ROOT / "lineage" / "scenarios" / "tour.yaml"      # a tour frame is ~120 KB


@pytest.fixture
def base(tmp_path, monkeypatch):
    where = tmp_path / "cache"
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(where))
    return where


def _own(base: Path) -> list[str]:
    return sorted(p.name for p in (base / cache.FOLDER).iterdir())


def test_an_entry_past_the_budget_stops_at_once_and_says_so_once(base, monkeypatch):
    monkeypatch.setattr(cache, "BUDGET", 1 << 20)
    s = cache.caching_session(load(TOUR))
    entry = s._publish
    s.frame(29)
    assert entry.abandoned and entry.frames < 12           # stopped near 1 MiB, not at step 30
    assert _own(base) == ["CACHEDIR.TAG"]                   # the partial is gone before the session ends
    said = [n for n in s.notes if "budget" in n]
    assert said == ["trace cache: this run's frames are not kept "
                    f"(by step {entry.frames} they pass the cache's 1.0 MiB budget)"]
    s.frame(40)                                             # more frames: nothing written, nothing said again
    s.close()
    assert [n for n in s.notes if "budget" in n] == said
    assert _own(base) == ["CACHEDIR.TAG"] and cache.lookup(load(TOUR)) is None


def test_an_entry_within_the_budget_is_kept(base, monkeypatch):
    monkeypatch.setattr(cache, "BUDGET", 64 << 20)
    s = cache.caching_session(load(TOUR))
    s.frame(29)
    s.close()
    assert not any("budget" in n for n in s.notes)
    held = cache.lookup(load(TOUR), 30)
    assert held is not None and held.made >= 30
    held.close()


def test_snapshot_says_it_in_one_line(base, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cache, "BUDGET", 1 << 20)
    out = tmp_path / "a.txt"
    assert main(["snapshot", str(TOUR), "--step", "30", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("budget") == 1 and "note: trace cache: this run's frames are not kept (by step" in err
    assert "step 30 / 1000" in out.read_text()
    assert _own(base) == ["CACHEDIR.TAG"]
