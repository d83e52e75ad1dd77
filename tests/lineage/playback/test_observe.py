"""The frame contract (lineage/playback/observe.py): frames keep the write the model made, and
the panels read typed records, never keys."""
import re
from pathlib import Path

import numpy as np
import pytest

from lineage.playback.session import Session
from lineage.scenario import load

ROOT = Path(__file__).resolve().parents[3]


def test_toy_frames_keep_the_write_the_memory_made():
    """S after a step is the decayed S before it plus dS, exactly (the toy runs in float64)."""
    s = Session(load(ROOT / "lineage/scenarios/recall.yaml"), device="cpu")
    for m in range(2):
        prev = np.zeros_like(s.frame(0).state(m, 0).S)
        for i in range(8):
            st, d = s.frame(i).state(m, 0), s.frame(i).decay(m, 0)
            decayed = prev * d.alpha[:, :, None]                           # (H, K, V)
            assert np.abs(st.S - (decayed + st.dS)).max() < 1e-12
            prev = st.S


def test_language_model_frames_keep_the_write():
    """A linear-attention layer adds k^T v: the frame's dS is that write (stored in float16)."""
    s = Session(load(ROOT / "lineage/scenarios/lineage_compare.yaml"), device="cpu")
    f = s.frame(3)
    st = f.state(1, 0)                                  # model 0 is softmax attention: no state
    assert f.state(0, 0) is None and st.mixer == "linear" and st.dS.dtype == np.float16
    want = st.k[:, :, None].astype(np.float64) * st.v[:, None, :]            # (H, K, V)
    assert np.abs(st.dS - want).max() <= 1e-3 * np.abs(want).max()


def test_panels_read_records_not_keys():
    for path in (ROOT / "lineage/app/panels").glob("*.py"):
        src = path.read_text()
        for bad in (r"\.arrays\b", r"\.meta\b", r"layer_meta|model_meta|last_write", r"\.get\(m\b",
                    r"np\.outer|einsum", r"measured_memory"):
            assert not re.search(bad, src), f"{path.name} reads a frame by key or redoes its arithmetic: {bad}"


def test_compact_keeps_float16_only_where_it_holds_the_values():
    """A state goes to the host in float16 when its range allows, rounded as numpy rounds;
    a NaN, an inf or a value past float16's range keeps float32 (the panels show them as such)."""
    import torch
    from lineage.playback.host_copy import compact as _compact
    rng = np.random.default_rng(7)
    x = torch.from_numpy(rng.standard_normal((3, 60, 63)) * 100)            # float64, awkward sizes
    got = _compact(x)
    assert got.dtype == np.float16 and np.array_equal(got, x.numpy().astype(np.float32).astype(np.float16))
    assert _compact(x.bfloat16()).dtype == np.float16
    x16 = x.half()
    assert not np.shares_memory(_compact(x16), x16.numpy())                # a copy, never the live state
    for bad in (np.nan, np.inf, -np.inf, 7e4):
        y = x.clone()
        y[1, 5, 7] = bad
        got = _compact(y)
        assert got.dtype == np.float32 and np.array_equal(got, y.float().numpy(), equal_nan=True)


def test_attention_short_conv_counts_in_the_element_size_the_cache_was_measured_in():
    """A softmax-only model has no S to measure: its short conv's inputs take the element size of
    its KV cache (bf16 here), not a default fp32."""
    from lineage.arithmetic import measured_memory
    from lineage.presets import get_preset
    cfg = get_preset("tiny-softmax")                      # 2 layers, q|k|v 192 channels, conv 4
    H, D = cfg.attention.n_heads, cfg.attention.dim
    layers = [{"cache_len": 10, "cache_bytes": 10 * 2 * H * D * 2}] * 2      # K and V, bf16
    got = measured_memory(layers, cfg)
    assert got["conv"] == got["state"] == 2 * (3 * H * D) * 3 * 2 and got["dtypes"].startswith("bf16")


def _observed(device):
    import torch
    g = torch.Generator().manual_seed(4)
    big = torch.randn(3, 7, 5, generator=g)
    wide = big * 1e5                                        # past float16: keeps float32
    nan = big.clone()
    nan[0, 0, 0] = float("nan")
    return {"S": (big.to(device, torch.bfloat16), "compact"), "dS": (wide.to(device), "compact"),
            "bad": (nan.to(device), "compact"), "none": (torch.empty(0, 4, device=device), "compact"),
            "k": (torch.randn(3, 7, generator=g).to(device), "f32"),
            "ids": (torch.tensor([5, 2, 9], device=device), "i32"),
            "attn": (torch.rand(2, 9, generator=g).to(device)[:, :6], "compact")}   # a slice, not contiguous


def test_to_host_keeps_each_tensor_as_it_is_stored():
    """host_copy.to_host: each tensor as its kind stores it (float16 where it holds, float32 past
    float16's range and for NaN, int32 ids), in the order asked."""
    from lineage.playback.host_copy import to_host
    want = _observed("cpu")
    got = to_host(want)
    assert list(got) == list(want)
    assert got["S"].dtype == np.float16 and got["dS"].dtype == np.float32 and got["bad"].dtype == np.float32
    assert got["ids"].dtype == np.int32 and got["ids"].tolist() == [5, 2, 9] and got["none"].shape == (0, 4)
    assert got["attn"].shape == (2, 6) and got["k"].dtype == np.float32


def test_packed_copies_equal_one_copy_each_on_any_device():
    """The packing a GPU's frame goes through (host_copy._batched), run here on the CPU: packed by
    source dtype, cast once, float16 taken only where every matrix of a device fits, the same
    arrays as copying each alone, with ids, bf16, several of a kind and one past float16."""
    import torch

    from lineage.playback.host_copy import _batched, _one
    want = _observed("cpu")
    want["k2"] = (torch.randn(5, dtype=torch.bfloat16), "f32")
    want["ids2"] = (torch.tensor([[1, 7]], dtype=torch.int32), "i32")
    got = _batched([(k, t, how) for k, (t, how) in want.items()])
    assert set(got) == set(want)
    for k, (t, how) in want.items():
        one = _one(t, how)
        assert got[k].dtype == one.dtype and got[k].shape == one.shape, k
        assert np.array_equal(got[k], one, equal_nan=True), k
    fine = {k: want[k] for k in ("S", "attn", "k")}          # every matrix fits: float16, one pack
    got = _batched([(k, t, how) for k, (t, how) in fine.items()])
    assert got["S"].dtype == got["attn"].dtype == np.float16 and got["k"].dtype == np.float32


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_to_host_from_a_gpu_in_few_copies_equals_one_copy_each():
    """On a GPU the tensors cross packed by dtype: the same arrays, dtypes and shapes as copying
    each alone, with a CPU tensor among them (a model spread over cuda and cpu)."""
    import torch

    from lineage.playback.host_copy import _one, to_host
    want = _observed("cuda")
    want["cpu_k"] = (torch.randn(4, 2), "f32")
    got = to_host(want)
    assert list(got) == list(want)
    for k, (t, how) in want.items():
        one = _one(t, how)
        assert got[k].dtype == one.dtype and got[k].shape == one.shape, k
        assert np.array_equal(got[k], one, equal_nan=True), k
