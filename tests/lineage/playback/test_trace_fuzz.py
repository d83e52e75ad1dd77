"""Traces mutated at random: bytes flipped, the file cut, records duplicated, dropped or
swapped, junk inserted. Reading (and --salvage reading) either works or raises TraceError:
no other exception, whatever the bytes. The number of cases is the hypothesis profile's
(`HYPOTHESIS_PROFILE=long` for a long local run; see tests/conftest.py)."""
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.playback.trace import MAGIC, TraceError, TraceReader
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
REC = struct.Struct("<cII")


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("fuzz") / "good.trace"
    assert main(["record", str(ROOT / "lineage" / "scenarios" / "recall.yaml"), "-o", str(path), "--steps", "6"]) == 0
    return path.read_bytes()


def _records(data: bytes) -> list[bytes]:
    out, pos = [], len(MAGIC)
    while pos < len(data):
        _, n, _ = REC.unpack_from(data, pos)
        out.append(data[pos:pos + REC.size + n])
        pos += REC.size + n
    return out


mutation = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("dup"), st.integers(0, 20), st.just(0)),
    st.tuples(st.just("drop"), st.integers(0, 20), st.just(0)),
    st.tuples(st.just("swap"), st.integers(0, 20), st.integers(0, 20)),
    st.tuples(st.just("junk"), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
)


def _mutate(data: bytes, ops) -> bytes:
    for op, a, b in ops:
        recs = _records(data) if op in ("dup", "drop", "swap") and data.startswith(MAGIC) else None
        if op == "flip" and data:
            i = int(a * (len(data) - 1))
            data = data[:i] + bytes([data[i] ^ b]) + data[i + 1:]
        elif op == "cut":
            data = data[:int(a * len(data))]
        elif op == "junk":
            i = int(a * len(data))
            data = data[:i] + b + data[i:]
        elif recs:
            i, j = a % len(recs), b % len(recs)
            if op == "dup":
                recs.insert(i, recs[i])
            elif op == "drop":
                del recs[i]
            else:
                recs[i], recs[j] = recs[j], recs[i]
            data = MAGIC + b"".join(recs)
    return data


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(mutation, min_size=1, max_size=3), st.booleans())
def test_mutated_traces_read_or_refuse(good, tmp_path, ops, salvage):
    path = tmp_path / "m.trace"
    try:
        path.write_bytes(_mutate(good, ops))
    except struct.error:                 # a record table broken by an earlier op: nothing to mutate
        return
    try:
        r = TraceReader(path, salvage=salvage)
        for i in range(len(r)):
            r.frame(i).state(0, 0)       # decoded and read through the typed records
        r.close()
    except TraceError:
        pass
