"""`lineage snapshot SCENARIO --step N` and the app keep the frames they made in a trace cache
and read them back next time; an entry that does not hold up is made again, never trusted."""
import asyncio
from pathlib import Path

import pytest

from lineage.playback import cache, cache_key
from lineage.playback.session import Session
from lineage.playback.trace import TraceReader
from lineage.scenario import load
from lineage.app.app import LineageApp
from lineage.cli.main import main

from tests.app.helpers import settle  # until the frame asked for is shown

SC = Path(__file__).resolve().parents[2] / "lineage" / "scenarios"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """The cache's own folder (where its entries are) in LINEAGE_CACHE_DIR."""
    where = tmp_path / "cache"
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(where))
    return where / cache.FOLDER


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
    assert {p.name for p in cache_dir.iterdir()} == {"CACHEDIR.TAG", entry.name}    # nothing left over
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
    for n, bad in enumerate((good[:middle],                                     # cut short
                             good[:middle] + bytes([good[middle] ^ 0x5A]) + good[middle + 1:],  # one byte flipped
                             b"junk")):
        entry.write_bytes(bad)
        again, err = snap(tmp_path, capsys, f"b{n}.txt")
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
    tour = (SC / "tour_random.yaml").read_text()
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
    monkeypatch.setattr(cache_key, "_code_digest", lambda: "other code")
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


def test_the_app_opens_a_cached_scenario_on_its_frames(tmp_path, capsys, cache_dir, monkeypatch):
    snap(tmp_path, capsys, "a.txt", step=12)
    [entry] = cache_dir.glob("*.trace")
    made = Session._make
    no_model_steps(monkeypatch)

    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, 0)
            await pilot.press("g", *"12", "enter")
            await settle(pilot, app, 11)                   # read from the entry: no model step
            assert type(app.cursor).__name__ == "Warm" and app.cursor.session is None
            monkeypatch.setattr(Session, "_make", made)
            await pilot.press("n", "n")
            await settle(pilot, app, 13)                   # past the entry: a session, from step 1
            assert app.cursor.session.made == 14 and len(app.screen_stack) == 1
    asyncio.run(go())
    reader = TraceReader(entry)                            # closing the app kept the longer run
    assert len(reader) == 14
    reader.close()


def test_the_app_does_not_open_on_a_corrupt_entry(tmp_path, capsys, cache_dir):
    snap(tmp_path, capsys, "a.txt", step=12)
    [entry] = cache_dir.glob("*.trace")
    reader = TraceReader(entry)
    offset, n, _ = reader._offsets[9]
    reader.close()
    data = bytearray(entry.read_bytes())
    data[offset + n // 2] ^= 0x5A                          # frame 10 is corrupt; the header is fine
    entry.write_bytes(bytes(data))

    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, 0)
            assert type(app.cursor).__name__ != "Warm" and not entry.exists()    # checked before use
            await pilot.press("g", *"11", "enter")
            await settle(pilot, app, 10)
            assert len(app.screen_stack) == 1
    asyncio.run(go())
    reader = TraceReader(entry)                            # the session's frames replaced it
    assert len(reader) == 11 and reader.frame(9).step == 9
    reader.close()


def test_a_cached_frame_found_bad_late_is_made_instead(tmp_path, capsys, cache_dir, monkeypatch):
    """A frame whose checksum holds but which does not decode (only a crafted file): the open
    cursor drops the entry and a session makes the frame."""
    from lineage.playback.trace import TraceError
    snap(tmp_path, capsys, "a.txt", step=12)
    warm = cache.open_scenario(load(SC / "tour.yaml"))
    assert type(warm).__name__ == "Warm"
    good = warm.frame(9)
    real = warm.held.replay.frame
    monkeypatch.setattr(warm.held.replay, "frame",
                        lambda i: (_ for _ in ()).throw(TraceError("corrupt: frame 9")) if i == 9 else real(i))
    again = warm.frame(9)
    assert again == good and warm.held is None and warm.session.made == 10
    warm.close()


def test_closing_under_a_reader_stops_it_and_keeps_the_entry(tmp_path, capsys, cache_dir):
    """Opening another file closes the cursor a worker may still read: that worker stops, and
    neither the entry is deleted nor a session started for a cursor nobody shows."""
    import threading
    import time

    from lineage.playback.session import Stopped
    snap(tmp_path, capsys, "a.txt", step=12)
    [entry] = cache_dir.glob("*.trace")
    warm = cache.open_scenario(load(SC / "tour.yaml"))
    warm.close()
    for i in (3, 20):                                      # in the entry, and past it
        with pytest.raises(Stopped):
            warm.frame(i)
    assert entry.exists() and warm.session is None

    session = cache.caching_session(load(SC / "tour.yaml"))
    session.frame(0)
    errors = []

    def far():
        try:
            session.frame(900)
        except Stopped as e:
            errors.append(e)
    worker = threading.Thread(target=far)
    worker.start()
    while session.made < 5 and worker.is_alive():
        time.sleep(0.01)
    session.close()                                        # waits at most one step for the worker
    worker.join(30)
    assert errors and not worker.is_alive() and session.made < 900
    reader = TraceReader(entry)                            # the longer run was published, whole
    assert len(reader) == max(12, session.made)
    reader.close()


def test_the_key_follows_a_checkpoint_directorys_files(tmp_path):
    """A real checkpoint is a directory: rewriting a shard in place must change the key too."""
    from transformers import GPT2Config, GPT2LMHeadModel
    ckpt = tmp_path / "ckpt"          # a real one: loading a scenario checks its tensors' headers
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16, n_positions=32)).save_pretrained(ckpt)
    shard = ckpt / "model.safetensors"
    sc = tmp_path / "s.yaml"
    sc.write_text("version: 1\ntitle: t\nmodel: {pretrained: ckpt}\ninput: {ids: [1, 2]}\n"
                  "panels: [{kind: tokens}]\n")
    k = cache.key(load(sc))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1                     # one weight's last byte, same size, same header
    shard.write_bytes(bytes(data))
    assert cache.key(load(sc)) != k
