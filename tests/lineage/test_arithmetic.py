"""The one byte formatter (where it changes unit; the panels and `lineage memory` use it) and the
one dtype map."""
import json

import pytest

from lineage.arithmetic import fmt_bytes


@pytest.mark.parametrize("n, shown", [
    (0, "0 B"), (1000, "1000 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (126 * 1024, "126.0 KiB"),
    (1_048_000, "1023.4 KiB"),          # the cli said '1,023 KiB', the panels '1023.4 KiB'
    (1_048_575, "1.0 MiB"),             # never '1024.0 KiB'
    (480 * 2**20, "480.0 MiB"),         # the cli said '480 MiB'
    (int(4.5 * 2**30), "4.5 GiB"), (3 * 2**40, "3.0 TiB"),
])
def test_fmt_bytes(n, shown):
    assert fmt_bytes(n) == shown


def test_the_memory_command_prints_sizes_as_the_panels_do(capsys):
    from tui.cli import main
    assert main(["memory", "k3-mini", "--context", "4096", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert main(["memory", "k3-mini", "--context", "4096"]) == 0
    table = capsys.readouterr().out.splitlines()[-len(rows):]
    for r, line in zip(rows, table):
        assert f"{fmt_bytes(r['cache_bytes'])} " in line and f"{fmt_bytes(r['state_bytes'])} " in line


def test_the_one_dtype_map_is_torchs():
    """Each name is torch's, with its element size; the short names config.json uses read the same."""
    import torch
    from lineage.arithmetic import DTYPE_BYTES, dtype_name
    for name, size in DTYPE_BYTES.items():
        assert getattr(torch, name).itemsize == size and dtype_name(name) == name
    assert [dtype_name(s) for s in ("fp32", "bf16", "fp16", "fp64", "int8", None)] == \
        ["float32", "bfloat16", "float16", "float64", None, None]
