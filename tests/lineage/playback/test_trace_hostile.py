"""Trace files built to hurt: huge declared lengths, zlib bombs, JSON nested a million deep,
bogus tables, special files. Each must be one line and exit 2, in bounded memory, through every
command that reads a trace (`--salvage` included). How fast: tests/benchmarks/hostile_traces.py."""
import dataclasses
import hashlib
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from lineage.playback.frame import Frame
from lineage.presets import get_preset
from lineage.playback.trace import MAGIC, TraceError, TraceReader, TraceWriter
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = (ROOT / "lineage" / "scenarios" / "recall.yaml").read_text()
REC = struct.Struct("<cII")


def _env() -> dict:
    """A child's environment that imports this checkout first (and keeps what else was on the path)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _rec(kind: bytes, payload: bytes, level: int = 6) -> bytes:
    z = zlib.compress(payload, level)
    return REC.pack(kind, len(z), zlib.crc32(z)) + z


def _trace(records: list[bytes], footer: bool = True) -> bytes:
    """Records with a footer whose count and digest are right, so only the content is wrong."""
    digest = hashlib.sha256()
    frames = 0
    for r in records:
        digest.update(r[5:9])
        frames += r[:1] == b"F"
    foot = _rec(b"E", json.dumps({"frames": frames, "digest": digest.hexdigest()}).encode()) if footer else b""
    return MAGIC + b"".join(records) + foot


def _header(**over) -> bytes:
    head = {"format": 1, "lineage": "0.1.0", "scenario": SCENARIO, "info": {"title": "t", "models": []}} | over
    return _rec(b"H", json.dumps(head).encode())


def _lm_info(**over) -> dict:
    """A trace info with one language model whose config dict is tiny-kda's, some keys replaced
    (a dict value is merged into that section)."""
    cfg = dataclasses.asdict(get_preset("tiny-kda"))
    for k, v in over.items():
        cfg[k] = cfg[k] | v if isinstance(v, dict) else v
    return {"title": "t", "models": [{"name": "m", "kind": "lm", "config": cfg}]}


def _frame_bytes(table: list, body: bytes = b"", step: int = 0) -> bytes:
    head = json.dumps({"step": step, "meta": {}, "arrays": table}).encode()
    return struct.pack("<I", len(head)) + head + body


def _hostile() -> dict[str, bytes]:
    ok = Frame(0, {}, {"m0/x": np.zeros((2, 3), np.float16)}).to_bytes()
    deep = b"[" * 1_000_000 + b"]" * 1_000_000
    return {
        "record_claims_1gb": MAGIC + _header() + REC.pack(b"F", 1 << 30, 0) + b"x" * 100,
        "record_claims_4gb": MAGIC + _header() + REC.pack(b"F", (1 << 32) - 1, 0),
        "frame_zlib_bomb": _trace([_header(), _rec(b"F", b"\0" * (100 << 20), 9)]),
        "header_zlib_bomb": _trace([_rec(b"H", b" " * (32 << 20), 9)]),
        "header_nested_deep": _trace([_rec(b"H", deep)]),
        "frame_table_nested_deep": _trace([_header(), _rec(b"F", struct.pack("<I", len(deep)) + deep)]),
        "frame_head_claims_1gb": _trace([_header(), _rec(b"F", struct.pack("<I", 1 << 30) + b"{}")]),
        "array_nbytes_1gb": _trace([_header(), _rec(b"F", _frame_bytes([["a", "<f4", [1 << 28], 0, 1 << 30]]))]),
        "array_nbytes_2_63": _trace([_header(), _rec(b"F", _frame_bytes([["a", "<f4", [2], 0, 2 ** 63]]))]),
        "array_offset_negative": _trace([_header(), _rec(b"F", _frame_bytes([["a", "<f4", [1], -8, 4]], b"\0" * 8))]),
        "array_shape_negative": _trace([_header(), _rec(b"F", _frame_bytes([["a", "<f4", [-1, -4], 0, 16]], b"\0" * 16))]),
        "array_shape_mismatch": _trace([_header(), _rec(b"F", _frame_bytes([["a", "<f4", [1 << 40], 0, 4]], b"\0" * 4))]),
        "array_bogus_dtype": _trace([_header(), _rec(b"F", _frame_bytes([["a", "<x9", [1], 0, 4]], b"\0" * 4))]),
        "array_object_dtype": _trace([_header(), _rec(b"F", _frame_bytes([["a", "|O", [1], 0, 8]], b"\0" * 8))]),
        "frame_table_not_a_table": _trace([_header(), _rec(b"F", _frame_bytes("nope"))]),  # type: ignore[arg-type]
        "footer_is_a_list": MAGIC + _header() + _rec(b"F", ok) + _rec(b"E", b"[1, 2]"),
        "header_without_info": _trace([_rec(b"H", json.dumps({"format": 1, "scenario": SCENARIO}).encode())]),
        "header_is_a_string": _trace([_rec(b"H", b'"hello"')]),
        "info_without_models": _trace([_header(info={"title": "t"})]),
        "info_model_without_kind": _trace([_header(info={"title": "t", "models": [{"name": "m"}]})]),
        "config_wrong_type": _trace([_header(info=_lm_info(kda={"n_heads": "two"}))]),
        "config_unknown_mixer": _trace([_header(info=_lm_info(mixers=["mamba", "kda"]))]),
        "config_not_a_mapping": _trace([_header(info={"title": "t", "models": [
            {"name": "m", "kind": "lm", "config": [1, 2]}]})]),
        "config_unknown_field_set": _trace([_header(info=_lm_info(flux_capacitor=3))]),
        "model_of_unknown_kind": _trace([_header(info={"title": "t", "models": [{"name": "m", "kind": "ghost"}]})]),
        "empty_records": _trace([_header()] + [REC.pack(b"F", 0, 0)] * 1000),     # crc32(b"") is 0
        "frame_truncated_zlib": _trace([_header(), (lambda z: REC.pack(b"F", len(z), zlib.crc32(z)) + z)(
            zlib.compress(ok)[:-6])]),
    }


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile")
    out = {}
    for name, data in _hostile().items():
        out[name] = d / f"{name}.trace"
        out[name].write_bytes(data)
    return out


@pytest.mark.parametrize("salvage", [False, True])
def test_each_hostile_trace_is_one_line_exit_2(hostile, capsys, salvage):
    for name, path in hostile.items():
        with pytest.raises(TraceError):
            r = TraceReader(path, salvage=salvage)
            for i in range(len(r)):
                r.frame(i)
        argv = ["snapshot", str(path), "--step", "1", "-o", "-"] + (["--salvage"] if salvage else [])
        assert main(argv) == 2, name
        assert main(["validate", str(path)]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert err and all(line.startswith(str(path)) for line in err), (name, err)


def test_hostile_traces_stay_in_bounded_memory(hostile):
    """All of them validated in one child process: its peak resident memory stays small."""
    # VmHWM, not getrusage's ru_maxrss: the latter survives exec, so it reports pytest's own size
    code = ("import sys; from lineage.cli.main import main; "
            "[main(['validate', p]) for p in sys.argv[1:]]; "
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])")
    out = subprocess.run([sys.executable, "-c", code, *map(str, hostile.values())], capture_output=True, text=True,
                         env=_env(), timeout=120)
    peak_mb = int(out.stdout.split()[-1]) / 1024
    assert peak_mb < 800, f"peak {peak_mb:.0f} MB"       # the 100 MB frame bomb alone would pass 100 MB


def test_special_files_are_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.trace"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):     # each would block or read forever if opened
        out = subprocess.run([sys.executable, "-m", "lineage.cli.main", "validate", str(path)], capture_output=True,
                             text=True, timeout=120, env=_env())     # a loaded box's import, not a read
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        # a directory is read as a checkpoint directory (lineage run DIR), which this one is not
        said = "no config.json" if path == tmp_path else "not a regular file"
        assert said in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr


def test_empty_records_are_refused_at_the_first(tmp_path):
    """11 million empty records (99 MB) took 20.8 s and 1.14 GB to refuse (issue 51): no record
    is shorter than a zlib stream, so the first empty one is refused, named by its byte."""
    path = tmp_path / "empty.trace"
    head = _header()
    path.write_bytes(_trace([head] + [REC.pack(b"F", 0, 0)] * 1000))
    for salvage in (False, True):
        with pytest.raises(TraceError, match=rf"^{path}: corrupt: the record at byte {len(MAGIC) + len(head)} is 0 "
                                             "bytes"):
            TraceReader(path, salvage=salvage)


def test_frames_past_the_most_a_trace_holds_are_refused(tmp_path, monkeypatch):
    """A trace of more frame records than any recording writes is refused at the first one
    past the bound, before it is indexed; the writer never writes one."""
    import lineage.playback.trace as trace
    monkeypatch.setattr(trace, "MAX_FRAMES", 5)
    frame = _rec(b"F", Frame(0, {}, {}).to_bytes())
    head = _header()
    path = tmp_path / "many.trace"
    path.write_bytes(_trace([head] + [frame] * 6))
    at = len(MAGIC) + len(head) + 5 * len(frame)
    with pytest.raises(TraceError, match=rf"^{path}: corrupt: the frame record at byte {at} is past 5 frames"):
        TraceReader(path)
    path.write_bytes(_trace([head] + [frame] * 5))
    assert len(TraceReader(path)) == 5
    with TraceWriter(tmp_path / "w.trace", SCENARIO, {}) as w:
        for i in range(5):
            w.write(Frame(i, {}, {}))
        with pytest.raises(ValueError, match="at most 5 frames"):
            w.write(Frame(5, {}, {}))


def test_writer_refuses_a_frame_no_reader_would_take(tmp_path, monkeypatch):
    import lineage.playback.trace as trace
    monkeypatch.setattr(trace, "MAX_FRAME_BYTES", 1000)
    with TraceWriter(tmp_path / "t.trace", SCENARIO, {}) as w:
        with pytest.raises(ValueError, match="limit"):
            w.write(Frame(0, {}, {"m0/x": np.zeros(1000, np.float32)}))


def test_a_good_trace_still_reads(tmp_path):
    frames = [Frame(i, {"token": str(i)}, {"m0/x": np.full((3, 5), i, np.float16), "m0/b": np.ones(2, bool)})
              for i in range(3)]
    with TraceWriter(tmp_path / "t.trace", SCENARIO, {"title": "t", "models": []}) as w:
        for f in frames:
            w.write(f)
    r = TraceReader(tmp_path / "t.trace")
    assert [r.frame(i) for i in range(3)] == frames
