"""One small flat config dataclass per mechanism, plus the model's.

They live together, apart from the nn.Modules, for one reason: parameter and memory
arithmetic, presets and scenario validation must work without importing torch (the
`lineage params` and `lineage validate` commands answer in milliseconds, and a trace can be
read on a machine with no torch at all). Each mechanism file imports its own config from here.

Each mechanism config answers for itself what its module holds: `params()` (and
`active_params()`, what one token touches), `cache_bytes_per_token()` and `state_bytes()`;
each count mirrors the module that owns the weights (tests check every runnable preset against
the real modules' numel). `lineage.arithmetic` sums them over a model.

`MIXERS` and `FFNS` are the registries of mixer and FFN kinds: a descriptor per kind
(lineage/kinds.py) with its config, its module, what it has (a state, a decay, attention rows,
a router) and how the layer map draws it. Shared number checks are lineage/config_checks.py,
RoPE scaling lineage/rope_scaling.py.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .arithmetic import kv_bytes_per_token, mla_bytes_per_token, recurrent_state_bytes
from .config_checks import ConfigError, check_numbers
from .kinds import Ffn, Mixer
from .rope_scaling import RopeScalingConfig, check_rope_scaling


class MechanismConfig:
    """What a mechanism config answers without torch. Bytes: cache per token at `dtype_bytes`
    (bf16 by default), state per sequence at `dtype_bytes` (fp32) plus any cache-dtype buffers.
    What a mixer kind has (a state, a decay) is its descriptor's to say (`MIXERS` below)."""

    def params(self) -> int:
        raise NotImplementedError

    def active_params(self) -> int:
        return self.params()

    def cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 0

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        return 0


@dataclass
class AttentionConfig(MechanismConfig):
    """GPT-2 style causal softmax attention with a KV cache; grouped KV heads when n_kv_heads < n_heads."""
    d_model: int = 768
    n_heads: int = 12
    n_kv_heads: int | None = None      # None: one KV head per query head (MHA)
    head_dim: int | None = None        # None: d_model // n_heads
    bias: bool = True                  # GPT-2 has biases on every projection
    # Qwen3-Next's gated attention (real checkpoints); the defaults are GPT-2's plain attention
    qk_norm: bool = False              # RMSNorm over each head's q and k before attending
    # OLMo-2/3's form of qk_norm: one RMSNorm over the whole q (H*D) and the whole k (Hkv*D) of a
    # token, its weight per channel of every head; the heads' scales are then not independent
    qk_norm_all_heads: bool = False
    rope_dim: int = 0                  # rotary embedding on the first rope_dim channels of a head (0: none)
    rope_theta: float = 10000.0
    rope_scaling: RopeScalingConfig | None = None   # None: plain RoPE at rope_theta
    sliding_window: int | None = None  # each query sees itself and the W - 1 tokens before; the cache keeps W
    output_gate: bool = False          # sigmoid(g(x)) per channel before the output projection
    norm_eps: float = 1e-6
    # short causal conv over q|k|v, as the delta-rule presets have; None (not 0) is "none", so a
    # trace of a model without one carries no field that an older lineage would refuse
    conv_size: int | None = None

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def dim(self) -> int:
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    def params(self) -> int:
        H, Hkv, D, d = self.n_heads, self.kv_heads, self.dim, self.d_model
        qkv = d * (H + 2 * Hkv) * D + (H + 2 * Hkv) * D * self.bias
        norms = (H + Hkv) * D if self.qk_norm_all_heads else 2 * D
        extra = norms * self.qk_norm + (d * H * D + H * D * self.bias) * self.output_gate
        conv = (H + 2 * Hkv) * D * (self.conv_size or 0)
        return qkv + H * D * d + d * self.bias + extra + conv

    def cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return kv_bytes_per_token(self.kv_heads, self.dim, dtype_bytes)

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        """No state matrix; with a short conv, its last conv_size - 1 inputs of q|k|v."""
        return (self.n_heads + 2 * self.kv_heads) * self.dim * max((self.conv_size or 0) - 1, 0) * cache_dtype_bytes


@dataclass
class LinearAttentionConfig(MechanismConfig):
    """Additive linear attention with the elu + 1 feature map and a normaliser."""
    d_model: int = 64
    n_heads: int = 2
    head_dim: int = 32

    def params(self) -> int:
        return 4 * self.d_model * self.n_heads * self.head_dim

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        return recurrent_state_bytes(self.n_heads, self.head_dim, self.head_dim, dtype_bytes, normaliser=True)


@dataclass
class DeltaNetConfig(MechanismConfig):
    """DeltaNet: SiLU then L2-normalised q and k, sigmoid beta, optional short causal conv."""
    d_model: int = 64
    n_heads: int = 2
    head_dim: int = 32                 # K (and V unless value_dim is set)
    conv_size: int = 4                 # 0 turns the short causal conv off
    chunk_size: int | None = 64        # forward() uses the chunked form; None: token recurrence
    norm_eps: float = 1e-6
    # Qwen3-Next's shape (real checkpoints): fewer q/k heads than value heads, each q/k head serving
    # n_heads // n_key_heads consecutive value heads, and values of their own width
    n_key_heads: int | None = None     # None: n_heads
    value_dim: int | None = None       # None: head_dim

    @property
    def key_heads(self) -> int:
        return self.n_heads if self.n_key_heads is None else self.n_key_heads

    @property
    def v_dim(self) -> int:
        return self.head_dim if self.value_dim is None else self.value_dim

    @property
    def conv_channels(self) -> int:
        return 2 * self.key_heads * self.head_dim + self.n_heads * self.v_dim      # q | k | v

    def params(self) -> int:
        d, H, K, V = self.d_model, self.n_heads, self.head_dim, self.v_dim
        n = 2 * d * self.key_heads * K + d * H * V + d * H + V + H * V * d   # q, k, v, beta, o_norm, o_proj
        return n + self.conv_channels * self.conv_size                   # depthwise short conv

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        conv = self.conv_channels * max(self.conv_size - 1, 0) * cache_dtype_bytes
        return recurrent_state_bytes(self.n_heads, self.head_dim, self.v_dim, dtype_bytes) + conv


@dataclass
class GatedDeltaNetConfig(DeltaNetConfig):
    """Gated DeltaNet: DeltaNet plus one decay per head, g = -exp(A_log) softplus(a(x) + dt_bias)."""
    # beta = 2 sigmoid(b(x)) in (0, 2) instead of sigmoid(b(x)) in (0, 1) (OLMo-Hybrid): the write's
    # transition I - beta k^T k then has eigenvalue 1 - beta down to -1 along k, so a step can flip
    # what k recalls instead of only erasing it (negative eigenvalues, Grazzi et al. 2024)
    allow_neg_eigval: bool = False

    def params(self) -> int:
        d, H, V = self.d_model, self.n_heads, self.v_dim
        return super().params() + d * H + 2 * H + d * H * V          # a_proj, A_log, dt_bias, g_proj


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

    def params(self) -> int:
        d, H, K = self.d_model, self.n_heads, self.head_dim
        r = self.gate_rank or K
        n = super().params() + d * r + r * H * K + H + H * K         # decay f_a, f_b, A_log, dt_bias
        V = self.v_dim
        return n + (d * H * V if self.output_gate_rank is None else self.output_gate_rank * (d + H * V))


@dataclass
class Mamba2Config(MechanismConfig):
    """Mamba-2 (Dao and Gu): the decayed sum. Per head a (state_dim x head_dim) state fades by one
    retention alpha = exp(dt A) a step and adds B^T (dt x); B and C come in n_groups groups shared
    by the heads; a short causal conv over x | B | C; y = C S + D x, then RMSNorm(y * silu(z)) per group."""
    d_model: int = 64
    n_heads: int = 2
    head_dim: int = 32                 # P, x's channels per head: the state's V
    state_dim: int = 32                # N, the width of B and C: the state's K
    n_groups: int = 1                  # B and C heads; each serves n_heads // n_groups consecutive heads
    conv_size: int = 4                 # 0 turns the short causal conv off
    chunk_size: int | None = 64        # forward() uses the chunked form; None: token recurrence
    norm_eps: float = 1e-5             # as published for the gated RMSNorm

    @property
    def inner(self) -> int:
        return self.n_heads * self.head_dim                              # x and z channels

    @property
    def conv_channels(self) -> int:
        return self.inner + 2 * self.n_groups * self.state_dim           # x | B | C

    def params(self) -> int:
        d, H, I = self.d_model, self.n_heads, self.inner
        proj = d * (I + self.conv_channels) + d * H                      # in_proj (z | x | B | C), dt_proj
        conv = self.conv_channels * (self.conv_size + 1) if self.conv_size else 0   # weights and a bias
        return proj + conv + 3 * H + I + I * d                           # A_log, dt_bias, D; norm; out_proj

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        conv = self.conv_channels * max(self.conv_size - 1, 0) * cache_dtype_bytes
        return recurrent_state_bytes(self.n_heads, self.state_dim, self.head_dim, dtype_bytes) + conv


@dataclass
class MLAConfig(MechanismConfig):
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
    rope_scaling: RopeScalingConfig | None = None   # None: plain RoPE at rope_theta (DeepSeek-V3: YaRN)
    rope_interleave: bool = False      # DeepSeek's rotated channels come as pairs (0, 1), (2, 3), ...
    softmax_scale: float | None = None  # None: (qk_nope + qk_rope)^-0.5 (DeepSeek-V3's YaRN sharpens it)
    output_gate: bool = False          # K3: sigmoid(g(x)) per channel before o_proj
    norm_eps: float = 1e-6

    def params(self) -> int:
        d, H = self.d_model, self.n_heads
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        r = self.q_lora_rank
        q = d * H * qk if r is None else d * r + r + r * H * qk
        kv = (d * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
              + self.kv_lora_rank * H * (self.qk_nope_head_dim + self.v_head_dim))
        o = H * self.v_head_dim * d + (d * H * self.v_head_dim if self.output_gate else 0)
        return q + kv + o

    def cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return mla_bytes_per_token(self.kv_lora_rank, self.qk_rope_head_dim, dtype_bytes)


@dataclass
class DenseFFNConfig(MechanismConfig):
    """Dense feed-forward: 'gelu' is GPT-2's two-matrix MLP; 'silu' and 'situ' are gated units."""
    d_model: int = 64
    d_ff: int = 256
    act: str = "situ"                  # 'gelu', 'silu' or 'situ'
    gelu_form: str = "tanh"            # gelu: 'tanh' (GPT-2's gelu_new) or 'erf' (exact, transformers' 'gelu')
    bias: bool = False
    situ_beta: float = 4.0
    linear_beta: float | None = None

    def params(self) -> int:
        width = self.d_ff if self.act == "gelu" else 2 * self.d_ff
        return self.d_model * width + self.d_ff * self.d_model + (width + self.d_model) * self.bias


@dataclass
class MoEConfig(MechanismConfig):
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
    # real checkpoints' routers; the defaults are K3's
    router: str = "sigmoid"            # 'sigmoid' (Kimi, K3) or 'softmax' (Qwen3-Next) scores
    score_bias: bool = False           # Kimi: a learned bias added to the scores when choosing, not weighting
    n_group: int = 1                   # grouped top-k: experts in n_group groups, only topk_group groups chosen
    topk_group: int = 1
    norm_topk: bool = True             # renormalise the chosen weights to sum to 1 (before routed_scale)
    router_fp32: bool = False          # score in float32 whatever the model dtype (as Kimi and Qwen do)
    shared_gate: bool = False          # Qwen3-Next: sigmoid(g(x)) scales the shared expert per token
    selection_bias: bool = False       # a per-expert bias added for choosing experts only (DeepSeek-V3's
                                       # balancing without an auxiliary loss); training moves it, not gradients

    def _split(self) -> tuple[int, int]:
        """(weights every token uses, weights of one routed expert)."""
        d, L = self.d_model, self.latent_dim or self.d_model
        Fs = (self.shared_dim or self.expert_dim) * self.n_shared
        always = d * self.n_experts + 3 * d * Fs                     # router, shared experts
        always += self.n_experts * self.score_bias + d * self.shared_gate
        if self.latent_dim is not None:
            always += 2 * d * L + L                                  # down, up, latent norm
        return always, 3 * L * self.expert_dim                       # gate | up in, down out

    def params(self) -> int:
        always, one_expert = self._split()
        return always + self.n_experts * one_expert

    def active_params(self) -> int:
        always, one_expert = self._split()
        return always + self.top_k * one_expert


@dataclass
class AttnResConfig:
    """Block Attention Residuals: sources are the embedding, each completed block's sum and the
    running partial sum; every layer has two aggregation points and the output one more."""
    block_size: int = 4
    init_std: float | None = None      # pseudo-query init; None: d_model ** -0.5 (scores of order 1)
    eps: float = 1e-6


# Every mixer kind, in the order listings and the arena show them. A new mixer adds its config
# class and ModelConfig field here, and one line below; its nn.Module and op are in their files.
MIXERS = {m.name: m for m in (
    Mixer("softmax", "softmax attention", "attention", AttentionConfig,
          "lineage.mixers.attention:SoftmaxAttention", "A", "black on #5fafff",
          attends=True, tiny="tiny-softmax", aliases=("SoftmaxAttention",)),
    Mixer("linear", "linear attention", "linear", LinearAttentionConfig,
          "lineage.mixers.linear_attention:LinearAttention", "L", "black on #d7d75f",
          holds_state=True, tiny="tiny-linear", aliases=("LinearAttention", "linear_attention")),
    Mixer("deltanet", "DeltaNet", "deltanet", DeltaNetConfig,
          "lineage.mixers.deltanet:DeltaNet", "D", "black on #af87ff",
          holds_state=True, kernel=True, tiny="tiny-deltanet", aliases=("DeltaNet", "delta_rule", "delta")),
    Mixer("gdn", "Gated DeltaNet", "gdn", GatedDeltaNetConfig,
          "lineage.mixers.gated_deltanet:GatedDeltaNet", "G", "black on #5fd7af",
          holds_state=True, has_decay=True, kernel=True, tiny="tiny-gated-deltanet",
          aliases=("GatedDeltaNet", "gated_delta_rule", "gated-deltanet", "gated_delta")),
    Mixer("kda", "Kimi Delta Attention", "kda", KDAConfig,
          "lineage.mixers.kda:KDA", "K", "black on #87d700",
          holds_state=True, has_decay=True, kernel=True, tiny="tiny-kda", aliases=("KDA",)),
    Mixer("mamba2", "Mamba-2", "mamba2", Mamba2Config,
          "lineage.mixers.mamba2:Mamba2", "S", "black on #d787d7",
          holds_state=True, has_decay=True, tiny="tiny-mamba2", aliases=("Mamba2", "ssd")),
    Mixer("mla", "multi-head latent attention", "mla", MLAConfig,
          "lineage.mixers.mla:MLA", "M", "black on #ff8700",
          attends=True, gate=True, aliases=("MLA",)),
)}


# Every FFN kind. A new one adds its config class and ModelConfig field here, one line below,
# and its nn.Module in lineage/ffns/.
FFNS = {f.name: f for f in (
    Ffn("dense", "dense", DenseFFNConfig, "lineage.ffns.dense:DenseFFN", "d", "black on #bcbcbc"),
    Ffn("moe", "moe", MoEConfig, "lineage.ffns.moe:MoE", "e", "white on #5f5f87", routes=True),
    Ffn("none", None, None, None, " ", None),      # a block of a norm and its mixer alone (Mamba-2)
)}


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
    mamba2: Mamba2Config | None = None
    mla: MLAConfig | None = None
    dense: DenseFFNConfig | None = None
    moe: MoEConfig | None = None
    attnres: AttnResConfig | None = None
    norm: str = "rms"                  # 'rms' or 'layer' (GPT-2)
    norm_eps: float = 1e-6
    # mixer kinds whose layers are post-norm (OLMo-2/3: x + norm(mixer(x)), x + norm(ffn(x)), the
    # norm on the sublayer's output); every other layer is pre-norm, x + mixer(norm(x)). None: none
    post_norm: tuple[str, ...] | None = None
    # per layer, 'sliding' or 'full': which softmax layers keep attention.sliding_window (Qwen3's
    # layer_types). None: every softmax layer as attention says
    windows: tuple[str, ...] | None = None
    n_positions: int = 0               # > 0: a learned position table of this length (GPT-2)
    # the residual stream in at least float32 whatever the weights' dtype, each sublayer reading
    # it cast to theirs (Mamba-2's residual_in_fp32: a bf16 stream 64 layers deep loses the sum)
    residual_fp32: bool = False
    tie_embeddings: bool = False
    embed_std: float | None = None     # token embedding init; None: torch's N(0, 1). GPT-2 and trained presets: 0.02
    shape_only: bool = False           # published shapes for arithmetic; never instantiated
    notes: str = ""

    @property
    def n_layers(self) -> int:
        return len(self.mixers)

    def mixer_config(self, kind: str):
        return getattr(self, MIXERS[kind].field)

    def layer_mixer_config(self, i: int):
        """Layer i's mixer config: its kind's, without the sliding window where `windows` says 'full'."""
        c = self.mixer_config(self.mixers[i])
        if self.windows is not None and self.windows[i] == "full" and isinstance(c, AttentionConfig):
            return dataclasses.replace(c, sliding_window=None)
        return c

    def ffn_routes(self, kind: str) -> bool:
        """Whether an FFN kind routes tokens to experts (its descriptor's flag), for the torch-free
        arithmetic, which cannot import this module's registry."""
        return FFNS[kind].routes

    def ffn_config(self, kind: str):
        field = FFNS[kind].field
        return None if field is None else getattr(self, field)

    def check(self) -> "ModelConfig":
        """Raise ValueError (ConfigError, with the field, for a value) naming the first
        inconsistency; return self so calls chain. `lineage validate` runs this, so whatever a
        model would refuse at build time is refused here, at the field."""
        if not self.mixers:
            raise ConfigError(f"{self.name}: a model needs at least one layer", ("mixers",))
        try:
            check_numbers(self)
        except ConfigError as e:
            raise ConfigError(f"{self.name}: {e}", e.field) from None
        a = self.attention
        if a is not None and a.dim < 1:
            raise ConfigError(f"{self.name}: attention.n_heads {a.n_heads} leaves heads of d_model // n_heads = 0 "
                              "channels (set attention.head_dim)", ("attention", "n_heads"))
        if a is not None and a.n_kv_heads is not None and a.n_heads % a.n_kv_heads:
            raise ConfigError(f"{self.name}: attention.n_heads {a.n_heads} must be a multiple of n_kv_heads "
                              f"{a.n_kv_heads}", ("attention", "n_kv_heads"))
        if len(self.mixers) != len(self.ffns):
            raise ValueError(f"{self.name}: {len(self.mixers)} mixers but {len(self.ffns)} ffns")
        if self.norm not in ("rms", "layer"):
            raise ValueError(f"{self.name}: norm must be 'rms' or 'layer', got {self.norm!r}")
        for kind in self.post_norm or ():
            if kind not in MIXERS:
                raise ConfigError(f"{self.name}: post_norm names {kind!r}, not a mixer kind (one of "
                                  f"{', '.join(MIXERS)})", ("post_norm",))
        for i, (m, f) in enumerate(zip(self.mixers, self.ffns)):
            if m not in MIXERS:
                raise ValueError(f"{self.name}: layer {i}: unknown mixer {m!r} (one of {', '.join(MIXERS)})")
            if f not in FFNS:
                raise ValueError(f"{self.name}: layer {i}: unknown ffn {f!r} (one of {', '.join(FFNS)})")
            for kind, sub in ((m, self.mixer_config(m)), *(() if f == "none" else ((f, self.ffn_config(f)),))):
                if sub is None:
                    raise ValueError(f"{self.name}: layer {i} uses {kind!r} but its config is not set")
                if sub.d_model != self.d_model:
                    raise ValueError(f"{self.name}: {kind} d_model {sub.d_model} != model d_model {self.d_model}")
        if self.attnres and "none" in self.ffns:
            # AttnRes counts two reads a block in its depth sources; a block without an ffn has one
            raise ConfigError(f"{self.name}: attnres needs an ffn in every block (ffns has 'none')", ("attnres",))
        if self.mamba2 is not None and self.mamba2.n_heads % self.mamba2.n_groups:
            raise ConfigError(f"{self.name}: mamba2.n_heads {self.mamba2.n_heads} must be a multiple of n_groups "
                              f"{self.mamba2.n_groups}", ("mamba2", "n_groups"))
        if self.kda is not None and self.kda.gate_form not in ("kimi", "bounded"):
            raise ValueError(f"{self.name}: kda.gate_form must be 'kimi' or 'bounded'")
        for sub in (self.dense, self.moe):
            if sub is not None and sub.act not in ("gelu", "silu", "situ"):
                raise ValueError(f"{self.name}: unknown activation {sub.act!r}")
        if self.dense is not None and self.dense.gelu_form not in ("tanh", "erf"):
            raise ValueError(f"{self.name}: dense.gelu_form must be 'tanh' or 'erf'")
        if self.moe is not None and not 1 <= self.moe.top_k <= self.moe.n_experts:
            raise ConfigError(f"{self.name}: moe.top_k must be in 1..n_experts", ("moe", "top_k"))
        if self.windows is not None and (len(self.windows) != self.n_layers or set(self.windows) - {"sliding", "full"}
                                         or self.attention is None or not self.attention.sliding_window):
            raise ConfigError(f"{self.name}: windows must name 'sliding' or 'full' for each of the {self.n_layers} "
                              "layers, with attention.sliding_window set", ("windows",))
        self._check_real_shapes()
        return self

    def _check_real_shapes(self) -> None:
        """The options real checkpoints use (gated attention, GQA-shaped delta heads, grouped routing)."""
        a, m = self.attention, self.moe
        if a is not None and (a.rope_dim % 2 or a.rope_dim > a.dim):
            raise ConfigError(f"{self.name}: attention.rope_dim must be even and at most head_dim", ("attention", "rope_dim"))
        if a is not None and a.rope_scaling is not None:
            check_rope_scaling(self.name, a.rope_scaling)
        if self.mla is not None and self.mla.rope and self.mla.qk_rope_head_dim % 2:
            raise ConfigError(f"{self.name}: mla.qk_rope_head_dim must be even to be rotated", ("mla", "qk_rope_head_dim"))
        if self.mla is not None and self.mla.rope_scaling is not None:
            check_rope_scaling(self.name, self.mla.rope_scaling, "mla")
        for kind in (m.field for m in MIXERS.values() if issubclass(m.config, DeltaNetConfig)):
            sub = getattr(self, kind)
            if sub is not None and sub.n_heads % sub.key_heads:
                raise ConfigError(f"{self.name}: {kind}.n_heads {sub.n_heads} must be a multiple of n_key_heads "
                                  f"{sub.key_heads}", (kind, "n_key_heads"))
        if m is not None:
            if m.router not in ("sigmoid", "softmax"):
                raise ConfigError(f"{self.name}: moe.router must be 'sigmoid' or 'softmax'", ("moe", "router"))
            if m.n_experts % m.n_group or not 1 <= m.topk_group <= m.n_group:
                raise ConfigError(f"{self.name}: moe.n_group must divide n_experts and topk_group be in 1..n_group",
                                  ("moe", "n_group"))
            if m.top_k > m.topk_group * (m.n_experts // m.n_group):
                raise ConfigError(f"{self.name}: moe.top_k exceeds the experts of topk_group groups", ("moe", "top_k"))
