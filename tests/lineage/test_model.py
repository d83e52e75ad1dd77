"""Whole models from presets: forward equals step, observations are complete and free when off."""
import pytest
import torch

from lineage.model import LM
from lineage.presets import PRESETS, get_preset
from lineage.observed import AttentionObs, StateObs, StepObs

RUNNABLE = [n for n in PRESETS if not get_preset(n).shape_only and n != "gpt2-small"]


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize("name", RUNNABLE)
def test_forward_equals_steps(name):
    torch.manual_seed(0)
    model = LM(get_preset(name)).double()
    ids = torch.randint(0, 256, (2, 21))
    logits, state = model(ids[:, :13])                       # prefill 13 tokens, then step the rest
    st, outs = state, []
    for t in range(13, 21):
        out, st = model.step(ids[:, t], st)
        outs.append(out)
    full, _ = model(ids)
    assert rel(full[:, 13:], torch.stack(outs, 1)) < 1e-10
    assert st.pos == 21


def test_observations_cover_every_panel():
    torch.manual_seed(0)
    cfg = get_preset("k3-mini")
    model = LM(cfg)
    _, st = model(torch.randint(0, 256, (1, 10)))
    obs = StepObs()
    with torch.no_grad():
        logits_obs, _ = model.step(torch.tensor([65]), st, obs)
        logits_plain, _ = model.step(torch.tensor([65]), st)
    assert torch.equal(logits_obs, logits_plain)             # observing changes nothing
    assert len(obs.layers) == cfg.n_layers
    kinds = [type(lo.mixer) for lo in obs.layers]
    assert kinds == [StateObs if m == "kda" else AttentionObs for m in cfg.mixers]
    kda0 = obs.layers[0].mixer
    H, K = cfg.kda.n_heads, cfg.kda.head_dim
    assert kda0.S.shape == (1, H, K, K) and kda0.dS.shape == (1, H, K, K)
    assert kda0.read.shape == (1, H, K) and kda0.alpha.shape == (1, H, K) and kda0.beta.shape == (1, H)
    mla = obs.layers[3].mixer
    assert mla.cache_len == 11 and mla.cache_bytes == 11 * (32 + 8) * 4
    assert obs.layers[0].ffn is None                         # a dense FFN has nothing to show
    moe = obs.layers[1].ffn
    assert moe.experts.shape == (1, cfg.moe.top_k) and moe.scores.shape == (1, cfg.moe.n_experts)
    # AttnRes: layer 0 reads only the embedding; sources grow by one per completed block
    w0 = obs.layers[0].attnres
    assert w0[0].shape[0] == 1 and w0[1].shape[0] == 2
    last = obs.layers[-1].attnres[0]
    assert last.shape[0] == 1 + (cfg.n_layers - 1) // cfg.attnres.block_size + 1
    assert torch.allclose(obs.attnres_final.sum(0), torch.ones(1))
    assert obs.top_probs.shape == (1, 10) and (obs.top_probs[:, :-1] >= obs.top_probs[:, 1:]).all()


def test_gpt2_positions_run_out_clearly():
    cfg = get_preset("tiny-softmax")
    cfg.n_positions = 8
    model = LM(cfg)
    with pytest.raises(ValueError, match="position"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_shape_only_presets_refuse_to_build():
    with pytest.raises(ValueError, match="shape-only"):
        LM(get_preset("k3"))


def test_byte_tokenizer_round_trip():
    from lineage.tokenizer import ByteTokenizer
    tok = ByteTokenizer()
    text = "Kimi K3 — 93 layers"
    ids = tok.encode(text)
    assert max(ids) < 256 and tok.decode(ids) == text and tok.vocab_size == 256
    assert tok.token_str(ord("\n")) == "\\n" and tok.token_str(0xE2) == "<E2>"


def _rotary_softmax():
    """Softmax attention as Qwen3-Next has it (rotary, grouped KV heads, gated), no learned positions."""
    import dataclasses
    cfg = get_preset("tiny-softmax")
    att = dataclasses.replace(cfg.attention, n_kv_heads=2, rope_dim=8, output_gate=True, qk_norm=True,
                              conv_size=None)
    return dataclasses.replace(cfg, attention=att, n_positions=0)


def _rotary_conv_softmax():
    """The same with the delta-rule tiny presets' short conv over q|k|v (its cache is updated in place)."""
    import dataclasses
    cfg = _rotary_softmax()
    return dataclasses.replace(cfg, attention=dataclasses.replace(cfg.attention, conv_size=4))


@pytest.mark.parametrize("name", ["k3-mini", "tiny-hybrid", "rotary-softmax", "rotary-conv-softmax"])
def test_static_cache_steps_equal_growing_cache(name):
    """The fixed-capacity MLA and KV caches used for CUDA-graph capture give the same logits,
    and the same attention over the written prefix, as the growing caches."""
    from lineage.graph_step import to_static
    from lineage.mixers.static_cache import StaticCache
    torch.manual_seed(0)
    made = {"rotary-softmax": _rotary_softmax, "rotary-conv-softmax": _rotary_conv_softmax}
    model = LM(made[name]() if name in made else get_preset(name)).double()
    ids = torch.randint(0, 256, (1, 16))
    _, st = model(ids[:, :9])
    static = to_static(st, capacity=32)
    assert any(isinstance(s, StaticCache) for s in static.layers)
    for t in range(9, 16):
        o1, o2 = StepObs(), StepObs()
        a, st = model.step(ids[:, t], st, o1)
        b, static = model.step(ids[:, t], static, o2)
        assert rel(b, a) < 1e-12
        for l1, l2, s2 in zip(o1.layers, o2.layers, static.layers):
            if isinstance(s2, StaticCache):
                n = l1.mixer.cache_len
                assert l2.mixer.cache_len == n == t + 1 and l2.mixer.cache_bytes == l1.mixer.cache_bytes
                assert rel(l2.mixer.weights[..., :n], l1.mixer.weights) < 1e-12
                assert float(l2.mixer.weights[..., n:].abs().max()) == 0.0   # the unwritten tail gets nothing
    with pytest.raises(ValueError, match="capacity"):
        to_static(model(ids)[1], capacity=8)
