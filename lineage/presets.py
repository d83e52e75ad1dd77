"""Named model configurations: the published shapes and runnable miniatures of each lineage row.

Tiny presets share one size (d_model 64, byte vocabulary) so the same input can go through
each mechanism side by side. `kimi-linear-48b` and `k3` are shape-only: they exist for
parameter and memory arithmetic and are never instantiated.
"""
from __future__ import annotations

from .configs import (AttentionConfig, AttnResConfig, DeltaNetConfig, DenseFFNConfig, GatedConvConfig,
                      GatedDeltaNetConfig, KDAConfig, LinearAttentionConfig, Mamba2Config, MIXERS, MLAConfig, ModelConfig, MoEConfig)
from .did_you_mean import did_you_mean


def gpt2_small() -> ModelConfig:
    d = 768
    return ModelConfig(
        name="gpt2-small", vocab_size=50257, d_model=d,
        mixers=("softmax",) * 12, ffns=("dense",) * 12,
        attention=AttentionConfig(d_model=d, n_heads=12, bias=True),
        dense=DenseFFNConfig(d_model=d, d_ff=4 * d, act="gelu", bias=True),
        norm="layer", norm_eps=1e-5, n_positions=1024, tie_embeddings=True,
        notes="OpenAI GPT-2 small (2019): 12 layers of MHA with a KV cache, learned positions, tied head.")


def _tiny(name: str, mixer: str, notes: str, **kw) -> ModelConfig:
    d, H, K = 64, 2, 32
    base = dict(name=name, vocab_size=256, d_model=d, mixers=(mixer,) * 2, ffns=("dense",) * 2,
                dense=DenseFFNConfig(d_model=d, d_ff=128, act="silu"), notes=notes)
    base[MIXERS[mixer].field] = {
        "softmax": AttentionConfig(d_model=d, n_heads=4, bias=True),
        "linear": LinearAttentionConfig(d_model=d, n_heads=H, head_dim=K),
        "deltanet": DeltaNetConfig(d_model=d, n_heads=H, head_dim=K),
        "gdn": GatedDeltaNetConfig(d_model=d, n_heads=H, head_dim=K),
        "kda": KDAConfig(d_model=d, n_heads=H, head_dim=K, gate_form="kimi", output_gate_rank=K),
        "mamba2": Mamba2Config(d_model=d, n_heads=H, head_dim=K, state_dim=K)}[mixer]
    base.update(kw)
    return ModelConfig(**base)


def tiny_softmax() -> ModelConfig:
    # the short conv over q|k|v that the delta-rule tiny presets have: the arena then compares
    # their memories with attention's, not input features (without it, 2 layers of attention sat on the MQAR plateau)
    return _tiny("tiny-softmax", "softmax", "GPT-2 in miniature: softmax attention, a KV cache that grows per token.",
                 attention=AttentionConfig(d_model=64, n_heads=4, bias=True, conv_size=4),
                 dense=DenseFFNConfig(d_model=64, d_ff=256, act="gelu", bias=True),
                 norm="layer", norm_eps=1e-5, n_positions=4096, tie_embeddings=True, embed_std=0.02)


def tiny_linear() -> ModelConfig:
    return _tiny("tiny-linear", "linear", "Linear attention: a fixed K x V sum of k^T v per head; interferes as it fills.")


def tiny_deltanet() -> ModelConfig:
    return _tiny("tiny-deltanet", "deltanet", "DeltaNet: writes only the error of what a key recalls.")


def tiny_gated_deltanet() -> ModelConfig:
    return _tiny("tiny-gated-deltanet", "gdn", "Gated DeltaNet: the delta rule plus one decay per head.")


def tiny_kda() -> ModelConfig:
    return _tiny("tiny-kda", "kda", "Kimi Delta Attention: the delta rule plus one decay per key channel.")


def tiny_mamba2() -> ModelConfig:
    return _tiny("tiny-mamba2", "mamba2", "Mamba-2: the decayed sum; one retention per head, no correction.")


def tiny_hybrid() -> ModelConfig:
    """Kimi Linear in miniature: three KDA to one MLA, dense first FFN, MoE after."""
    d = 64
    return ModelConfig(
        name="tiny-hybrid", vocab_size=256, d_model=d,
        mixers=("kda", "kda", "kda", "mla"), ffns=("dense", "moe", "moe", "moe"),
        kda=KDAConfig(d_model=d, n_heads=2, head_dim=32, gate_form="kimi", output_gate_rank=32),
        mla=MLAConfig(d_model=d, n_heads=2, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16),
        dense=DenseFFNConfig(d_model=d, d_ff=192, act="silu"),
        moe=MoEConfig(d_model=d, n_experts=8, top_k=2, n_shared=1, expert_dim=48, act="silu"),
        notes="Kimi Linear in miniature: 3 KDA : 1 MLA, MoE with a shared expert.")


def tiny_lfm2() -> ModelConfig:
    """LFM2 in miniature: two gated short convs to one GQA softmax layer (q/k norm, RoPE), twice."""
    d = 64
    return ModelConfig(
        name="tiny-lfm2", vocab_size=256, d_model=d, mixers=("gated_conv", "gated_conv", "softmax") * 2,
        ffns=("dense",) * 6, gated_conv=GatedConvConfig(d_model=d, conv_size=3),
        attention=AttentionConfig(d_model=d, n_heads=4, n_kv_heads=2, bias=False, qk_norm=True, rope_dim=16,
                                  rope_theta=1e6),
        dense=DenseFFNConfig(d_model=d, d_ff=192, act="silu"), tie_embeddings=True, embed_std=0.02,
        notes="LFM2 in miniature: 2 gated short convs (a 3-token window, no state) : 1 GQA softmax, twice.")


def k3_mini() -> ModelConfig:
    """A runnable miniature of the K3 layout: two (KDA, KDA, KDA, gated MLA) macrocycles and a
    final MLA, dense first FFN, latent SiTU MoE elsewhere, block AttnRes. The default for scenarios."""
    d, n_cycles = 128, 2
    mixers = ("kda", "kda", "kda", "mla") * n_cycles + ("mla",)
    return ModelConfig(
        name="k3-mini", vocab_size=256, d_model=d,
        mixers=mixers, ffns=("dense",) + ("moe",) * (len(mixers) - 1),
        kda=KDAConfig(d_model=d, n_heads=4, head_dim=32, gate_form="bounded", lower_bound=-5.0),
        mla=MLAConfig(d_model=d, n_heads=4, q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=16,
                      qk_rope_head_dim=8, v_head_dim=16, output_gate=True),
        dense=DenseFFNConfig(d_model=d, d_ff=384, act="situ", linear_beta=25.0),
        moe=MoEConfig(d_model=d, n_experts=32, top_k=4, n_shared=2, expert_dim=64, latent_dim=64,
                      act="situ", situ_beta=4.0, linear_beta=25.0, selection_bias=True),
        attnres=AttnResConfig(block_size=3, init_std=0.0),     # zero pseudo-queries, as published: uniform depth
        embed_std=0.02,
        notes="K3 in miniature: 9 layers (3 KDA + 1 gated MLA, twice, + final MLA), 32 experts top-4 + 2 shared "
              "in a latent width, SiTU, AttnRes blocks of 3.")


def kimi_linear_48b() -> ModelConfig:
    d = 2304
    mla_at = {4, 8, 12, 16, 20, 24, 27}                          # 1-based, as published
    mixers = tuple("mla" if i in mla_at else "kda" for i in range(1, 28))
    return ModelConfig(
        name="kimi-linear-48b", vocab_size=163840, d_model=d,
        mixers=mixers, ffns=("dense",) + ("moe",) * 26,
        kda=KDAConfig(d_model=d, n_heads=32, head_dim=128, gate_form="kimi", output_gate_rank=128),
        mla=MLAConfig(d_model=d, n_heads=32, q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=128,
                      qk_rope_head_dim=64, v_head_dim=128),
        dense=DenseFFNConfig(d_model=d, d_ff=9216, act="silu"),
        moe=MoEConfig(d_model=d, n_experts=256, top_k=8, n_shared=1, expert_dim=1024, act="silu"),
        shape_only=True,
        notes="Kimi Linear 48B-A3B: 20 KDA + 7 MLA, 256 experts top-8 + 1 shared. Shape only.")


def k3() -> ModelConfig:
    d = 7168
    mixers = ("kda", "kda", "kda", "mla") * 23 + ("mla",)       # 93 layers: 69 KDA + 24 MLA
    return ModelConfig(
        name="k3", vocab_size=163840, d_model=d,
        mixers=mixers, ffns=("dense",) + ("moe",) * 92,
        kda=KDAConfig(d_model=d, n_heads=96, head_dim=128, gate_form="bounded", lower_bound=-5.0),
        mla=MLAConfig(d_model=d, n_heads=96, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                      qk_rope_head_dim=64, v_head_dim=128, output_gate=True),
        dense=DenseFFNConfig(d_model=d, d_ff=33792, act="situ", linear_beta=25.0),
        moe=MoEConfig(d_model=d, n_experts=896, top_k=16, n_shared=2, expert_dim=3072, latent_dim=3584,
                      act="situ", situ_beta=4.0, linear_beta=25.0),
        attnres=AttnResConfig(block_size=12),
        shape_only=True,
        notes="Kimi K3: 93 layers (69 KDA + 24 gated MLA), 896 latent experts top-16 + 2 shared, SiTU, "
              "AttnRes blocks of 12. Shape only.")


PRESETS = {
    "gpt2-small": gpt2_small,
    "tiny-softmax": tiny_softmax,
    "tiny-linear": tiny_linear,
    "tiny-deltanet": tiny_deltanet,
    "tiny-gated-deltanet": tiny_gated_deltanet,
    "tiny-kda": tiny_kda,
    "tiny-mamba2": tiny_mamba2,
    "tiny-hybrid": tiny_hybrid,
    "tiny-lfm2": tiny_lfm2,
    "k3-mini": k3_mini,
    "kimi-linear-48b": kimi_linear_48b,
    "k3": k3,
}


def get_preset(name: str) -> ModelConfig:
    """A fresh config for a preset name; ValueError lists the names when it is unknown."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; known: {', '.join(PRESETS)}")
    return PRESETS[name]().check()
