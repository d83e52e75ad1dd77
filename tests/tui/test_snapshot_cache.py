"""`lineage snapshot SCENARIO --step N` keeps the frames it made in a trace cache and reads
them back next time; an entry that does not hold up is made again, never trusted."""
from pathlib import Path

import pytest

from lineage.playback import cache
from lineage.playback.session import Session
from lineage.scenario import load
from tui.cli import main

SC = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    where = tmp_path / "cache"
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(where))
    return where


def snap(tmp_path, capsys, name, *extra, scenario=str(SC / "tour.yaml"), step=12):
    out = tmp_path / name
    assert main(["snapshot", scenario, "--step", str(step), "-o", str(out), *extra]) == 0
    return out.read_text(), capsys.readouterr().err


def no_model_steps(monkeypatch):
    def refuse(self, i):
        raise AssertionError("a frame was made although the cache holds it")
    monkeypatch.setattr(Session, "_make", refuse)


def test_the_cache_is_reused(tmp_path, capsys, cache_dir, monkeypatch):
    text, err = snap(tmp_path, capsys, "a.txt")
    assert "computing steps 1 - 12" in err
    [entry] = cache_dir.glob("*.trace")
    assert not list(cache_dir.glob("*.tmp*"))                # published, nothing left over
    no_model_steps(monkeypatch)
    again, err = snap(tmp_path, capsys, "b.txt")
    assert again == text and "computing" not in err
    earlier, _ = snap(tmp_path, capsys, "c.txt", step=5)     # an earlier step of the same entry
    assert "step 5 / 1000" in earlier
    svg = tmp_path / "a.svg"
    assert main(["snapshot", str(SC / "tour.yaml"), "--step", "12", "--panel", "state", "-o", str(svg)]) == 0
    assert "<svg" in svg.read_text()


def test_a_corrupt_entry_is_rebuilt(tmp_path, capsys, cache_dir):
    text, _ = snap(tmp_path, capsys, "a.txt")
    [entry] = cache_dir.glob("*.trace")
    good = entry.read_bytes()
    middle = len(good) // 2                 # inside a frame: found only when that frame is read
    for bad in (good[:middle],                                                  # cut short
                good[:middle] + bytes([good[middle] ^ 0x5A]) + good[middle + 1:],  # one byte flipped
                b"junk"):
        entry.write_bytes(bad)
        again, err = snap(tmp_path, capsys, "b.txt")
        assert again == text and "computing steps 1 - 12" in err, err
        assert entry.read_bytes() == good                  # made again, the same bytes (deterministic)


def test_an_entry_of_another_scenario_under_the_key_is_not_trusted(tmp_path, capsys, cache_dir):
    text, _ = snap(tmp_path, capsys, "a.txt")
    [entry] = cache_dir.glob("*.trace")
    snap(tmp_path, capsys, "o.txt", scenario=str(SC / "recall.yaml"), step=3)
    other = next(p for p in cache_dir.glob("*.trace") if p != entry)
    entry.write_bytes(other.read_bytes())                  # a valid trace, but not of this scenario
    again, err = snap(tmp_path, capsys, "b.txt")
    assert again == text and "computing" in err


def test_the_key_follows_the_text_the_place_and_the_code(tmp_path, monkeypatch):
    tour = (SC / "tour.yaml").read_text()
    a = tmp_path / "a.yaml"
    a.write_text(tour)
    k = cache.key(load(a))
    assert cache.key(load(a)) == k
    a.write_text(tour + "\n# a comment changes the text\n")
    assert cache.key(load(a)) != k
    a.write_text(tour)
    assert cache.key(load(a)) == k
    (tmp_path / "sub").mkdir()                  # a checkpoint would be read from another place
    (tmp_path / "sub" / "a.yaml").write_text(tour)
    assert cache.key(load(tmp_path / "sub" / "a.yaml")) != k
    monkeypatch.setattr(cache, "_code_digest", lambda: "other code")
    assert cache.key(load(a)) != k


def test_longer_steps_extend_and_no_cache_skips(tmp_path, capsys, cache_dir):
    snap(tmp_path, capsys, "a.txt", step=4)
    _, err = snap(tmp_path, capsys, "b.txt", step=9)        # more than the entry holds: made again, kept
    assert "computing steps 1 - 9" in err
    _, err = snap(tmp_path, capsys, "c.txt", step=9)
    assert "computing" not in err
    _, err = snap(tmp_path, capsys, "d.txt", "--no-cache", step=9)
    assert "computing" not in err and len(list(cache_dir.glob("*.trace"))) == 1


def test_no_cache_dir_means_no_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LINEAGE_CACHE_DIR", "off")
    assert cache.cache_dir() is None
    text, err = snap(tmp_path, capsys, "a.txt", step=3)
    assert "step 3 / 1000" in text and "computing" not in err
