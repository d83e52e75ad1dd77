"""One small flat config dataclass per mechanism, plus the model's.

They live together, apart from the nn.Modules, for one reason: parameter and memory
arithmetic, presets and scenario validation must work without importing torch (the
`lineage params` and `lineage validate` commands answer in milliseconds, and a trace can be
read on a machine with no torch at all). Each mechanism file imports its own config from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MIXERS = ("softmax", "linear", "deltanet", "gdn", "kda", "mla")
STATE_MIXERS = ("linear", "deltanet", "gdn", "kda")      # the mixers with a state matrix S
DECAY_MIXERS = ("gdn", "kda")                            # the mixers with a learned decay
FFNS = ("dense", "moe")


@dataclass
class AttentionConfig:
    """GPT-2 style causal softmax attention with a KV cache; grouped KV heads when n_kv_heads < n_heads."""
    d_model: int = 768
    n_heads: int = 12
    n_kv_heads: int | None = None      # None: one KV head per query head (MHA)
    head_dim: int | None = None        # None: d_model // n_heads
    bias: bool = True                  # GPT-2 has biases on every projection

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def dim(self) -> int:
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim


@dataclass
class LinearAttentionConfig:
    """Additive linear attention with the elu + 1 feature map and a normaliser."""
    d_model: int = 64
    n_heads: int = 2
    head_dim: int = 32


@dataclass
class DeltaNetConfig:
    """DeltaNet: SiLU then L2-normalised q and k, sigmoid beta, optional short causal conv."""
    d_model: int = 64
    n_heads: int = 2
    head_dim: int = 32                 # K = V = head_dim
    conv_size: int = 4                 # 0 turns the short causal conv off
    chunk_size: int | None = 64        # forward() uses the chunked form; None: token recurrence
    norm_eps: float = 1e-6


@dataclass
class GatedDeltaNetConfig(DeltaNetConfig):
    """Gated DeltaNet: DeltaNet plus one decay per head, g = -exp(A_log) softplus(a(x) + dt_bias)."""


@dataclass
class KDAConfig(DeltaNetConfig):
    """Kimi Delta Attention: one decay per key channel from a low-rank projection.

    gate_form 'kimi' (Kimi Linear):   g = -exp(A_log[h]) * softplus(f + dt_bias)
    gate_form 'bounded' (K3):          g = lower_bound * sigmoid(exp(A_log[h]) * (f + dt_bias))
    """
    gate_rank: int | None = None       # low-rank width of the decay projection; None: head_dim
    gate_form: str = "bounded"         # 'kimi' or 'bounded'
    lower_bound: float = -5.0
    output_gate_rank: int | None = None  # None: full-rank sigmoid output gate (K3); int: low rank (Kimi Linear)


@dataclass
class MLAConfig:
    """Multi-head latent attention: one cached latent of kv_lora_rank + qk_rope_head_dim per token."""
    d_model: int = 64
    n_heads: int = 2
    q_lora_rank: int | None = None     # None: a direct query projection
    kv_lora_rank: int = 32
    qk_nope_head_dim: int = 16
    qk_rope_head_dim: int = 8
    v_head_dim: int = 16
    rope: bool = False                 # Kimi uses NoPE: the shared key part is not rotated
    rope_theta: float = 10000.0
    output_gate: bool = False          # K3: sigmoid(g(x)) per channel before o_proj
    norm_eps: float = 1e-6


@dataclass
class DenseFFNConfig:
    """Dense feed-forward: 'gelu' is GPT-2's two-matrix MLP; 'silu' and 'situ' are gated units."""
    d_model: int = 64
    d_ff: int = 256
    act: str = "situ"                  # 'gelu', 'silu' or 'situ'
    bias: bool = False
    situ_beta: float = 4.0
    linear_beta: float | None = None


@dataclass
class MoEConfig:
    """Sigmoid-routed top-k mixture of experts; routed experts in a latent width, shared ones full width."""
    d_model: int = 64
    n_experts: int = 8
    top_k: int = 2
    n_shared: int = 1
    expert_dim: int = 64               # hidden width of one routed expert
    shared_dim: int | None = None      # hidden width of one shared expert; None: expert_dim
    latent_dim: int | None = None      # None: routed experts work at d_model (no down/up projection)
    act: str = "situ"                  # 'silu' or 'situ'
    situ_beta: float = 4.0
    linear_beta: float | None = None
    routed_scale: float = 1.0          # multiplies the normalised top-k weights
    norm_eps: float = 1e-6


@dataclass
class AttnResConfig:
    """Block Attention Residuals: sources are the embedding, each completed block's sum and the
    running partial sum; every layer has two aggregation points and the output one more."""
    block_size: int = 4
    init_std: float | None = None      # pseudo-query init; None: d_model ** -0.5 (scores of order 1)
    eps: float = 1e-6


@dataclass
class ModelConfig:
    """A language model from a layer pattern. `mixers[i]` and `ffns[i]` name layer i's parts."""
    name: str = "custom"
    vocab_size: int = 256
    d_model: int = 64
    mixers: tuple[str, ...] = ("kda", "mla")
    ffns: tuple[str, ...] = ("dense", "moe")
    attention: AttentionConfig | None = None
    linear: LinearAttentionConfig | None = None
    deltanet: DeltaNetConfig | None = None
    gdn: GatedDeltaNetConfig | None = None
    kda: KDAConfig | None = None
    mla: MLAConfig | None = None
    dense: DenseFFNConfig | None = None
    moe: MoEConfig | None = None
    attnres: AttnResConfig | None = None
    norm: str = "rms"                  # 'rms' or 'layer' (GPT-2)
    norm_eps: float = 1e-6
    n_positions: int = 0               # > 0: a learned position table of this length (GPT-2)
    tie_embeddings: bool = False
    shape_only: bool = False           # published shapes for arithmetic; never instantiated
    notes: str = ""

    @property
    def n_layers(self) -> int:
        return len(self.mixers)

    def mixer_config(self, kind: str):
        return {"softmax": self.attention, "linear": self.linear, "deltanet": self.deltanet,
                "gdn": self.gdn, "kda": self.kda, "mla": self.mla}[kind]

    def ffn_config(self, kind: str):
        return {"dense": self.dense, "moe": self.moe}[kind]

    def check(self) -> "ModelConfig":
        """Raise ValueError naming the first inconsistency; return self so calls chain."""
        if len(self.mixers) != len(self.ffns):
            raise ValueError(f"{self.name}: {len(self.mixers)} mixers but {len(self.ffns)} ffns")
        if self.norm not in ("rms", "layer"):
            raise ValueError(f"{self.name}: norm must be 'rms' or 'layer', got {self.norm!r}")
        for i, (m, f) in enumerate(zip(self.mixers, self.ffns)):
            if m not in MIXERS:
                raise ValueError(f"{self.name}: layer {i}: unknown mixer {m!r} (one of {', '.join(MIXERS)})")
            if f not in FFNS:
                raise ValueError(f"{self.name}: layer {i}: unknown ffn {f!r} (one of {', '.join(FFNS)})")
            for kind, sub in ((m, self.mixer_config(m)), (f, self.ffn_config(f))):
                if sub is None:
                    raise ValueError(f"{self.name}: layer {i} uses {kind!r} but its config is not set")
                if sub.d_model != self.d_model:
                    raise ValueError(f"{self.name}: {kind} d_model {sub.d_model} != model d_model {self.d_model}")
        if self.kda is not None and self.kda.gate_form not in ("kimi", "bounded"):
            raise ValueError(f"{self.name}: kda.gate_form must be 'kimi' or 'bounded'")
        for sub in (self.dense, self.moe):
            if sub is not None and sub.act not in ("gelu", "silu", "situ"):
                raise ValueError(f"{self.name}: unknown activation {sub.act!r}")
        if self.moe is not None and not 1 <= self.moe.top_k <= self.moe.n_experts:
            raise ValueError(f"{self.name}: moe.top_k must be in 1..n_experts")
        return self
