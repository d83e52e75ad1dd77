"""The model's config (`ModelConfig`), the FFNs' and AttnRes's configs, and `FFNS`; every config
name lineage uses, importable from here.

Configs are torch-free for one reason: parameter and memory arithmetic, presets and scenario
validation must work without importing torch (the `lineage params` and `lineage validate`
commands answer in milliseconds, and a trace can be read on a machine with no torch at all).
A mixer's config lives in its own folder, `lineage/mixers/NAME/config.py`, beside its module;
`MIXERS`, their descriptors, is the list in lineage/mixers/__init__.py; both are exported here,
so the rest of lineage imports `from lineage.configs import KDAConfig, MIXERS` (a mixer's
module.py alone imports its config from beside it).

Each mechanism config answers for itself what its module holds: `params()` (and
`active_params()`, what one token touches), `cache_bytes_per_token()` and `state_bytes()`;
each count mirrors the module that owns the weights (tests check every runnable preset against
the real modules' numel). `lineage.arithmetic` sums them over a model. A mixer config's own
rules are its `check`, which `ModelConfig.check` calls.

`MIXERS` and `FFNS` are the registries of mixer and FFN kinds: a descriptor per kind
(lineage/kinds.py) with its config, its module, what it has (a state, a decay, attention rows,
a router) and how the layer map draws it. Shared number checks are lineage/config_checks.py,
RoPE scaling lineage/rope_scaling.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config_checks import ConfigError, check_numbers
from .kinds import Ffn, MechanismConfig
from .mixers import MIXERS
from .mixers.attention.config import AttentionConfig
from .mixers.deltanet.config import DeltaNetConfig
from .mixers.gated_conv.config import GatedConvConfig
from .mixers.gated_deltanet.config import GatedDeltaNetConfig
from .mixers.kda.config import KDAConfig
from .mixers.linear_attention.config import LinearAttentionConfig
from .mixers.mamba2.config import Mamba2Config
from .mixers.mla.config import MLAConfig
from .rope_scaling import RopeScalingConfig


@dataclass
class DenseFFNConfig(MechanismConfig):
    """Dense feed-forward: 'gelu' is GPT-2's two-matrix MLP; 'silu', 'situ' and 'geglu' are gated units."""
    d_model: int = 64
    d_ff: int = 256
    act: str = "situ"                  # 'gelu', 'silu', 'situ' or 'geglu' (GELU-tanh gate: Gemma)
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
    # one field per mixer kind, its descriptor's `field` (lineage/mixers/NAME/config.py)
    attention: AttentionConfig | None = None
    linear: LinearAttentionConfig | None = None
    deltanet: DeltaNetConfig | None = None
    gdn: GatedDeltaNetConfig | None = None
    kda: KDAConfig | None = None
    mamba2: Mamba2Config | None = None
    mla: MLAConfig | None = None
    gated_conv: GatedConvConfig | None = None
    dense: DenseFFNConfig | None = None
    moe: MoEConfig | None = None
    attnres: AttnResConfig | None = None
    norm: str = "rms"                  # 'rms' or 'layer' (GPT-2)
    norm_eps: float = 1e-6
    # mixer kinds whose layers are post-norm (OLMo-2/3: x + norm(mixer(x)), x + norm(ffn(x)), the
    # norm on the sublayer's output); every other layer is pre-norm, x + mixer(norm(x)). None: none
    post_norm: tuple[str, ...] | None = None
    # every block normed on both sides of each sublayer, each norm its own (Gemma 2/3's four norms a
    # block): x + norm1_out(mixer(norm1(x))), then x + norm2_out(ffn(norm2(x)))
    sandwich_norm: bool = False
    # per layer, 'sliding' or 'full': which softmax layers keep attention.sliding_window (Qwen3's
    # layer_types). None: every softmax layer as attention says
    windows: tuple[str, ...] | None = None
    n_positions: int = 0               # > 0: a learned position table of this length (GPT-2)
    # the residual stream in at least float32 whatever the weights' dtype, each sublayer reading
    # it cast to theirs (Mamba-2's residual_in_fp32: a bf16 stream 64 layers deep loses the sum)
    residual_fp32: bool = False
    tie_embeddings: bool = False
    # the token embedding times this, rounded to the embedding's dtype first (Gemma: sqrt(d_model));
    # a tied head reads the unscaled table. None: no scale
    embed_scale: float | None = None
    logit_softcap: float | None = None  # logits -> c tanh(logits / c) (Gemma's final_logit_softcapping); None: none
    embed_std: float | None = None     # token embedding init; None: torch's N(0, 1). GPT-2 and trained presets: 0.02
    shape_only: bool = False           # published shapes for arithmetic; never instantiated
    notes: str = ""

    @property
    def n_layers(self) -> int:
        return len(self.mixers)

    def mixer_config(self, kind: str):
        return getattr(self, MIXERS[kind].field)

    def layer_mixer_config(self, i: int):
        """Layer i's mixer config: its kind's, without the sliding window where `windows` says 'full'
        (and a windowed layer at attention.sliding_rope_theta where that is set)."""
        c = self.mixer_config(self.mixers[i])
        if isinstance(c, AttentionConfig):
            return c.layer(self.windows is None or self.windows[i] == "sliding")
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
        for m in MIXERS.values():                  # each mixer config's own rules, beside it
            sub = getattr(self, m.field)
            if sub is not None:
                sub.check(self.name, m.field)
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
        for key in ("embed_scale", "logit_softcap"):
            if getattr(self, key) is not None and not getattr(self, key) > 0:
                raise ConfigError(f"{self.name}: {key} must be > 0, got {getattr(self, key)}", (key,))
        if self.sandwich_norm and (self.post_norm or "none" in self.ffns):
            raise ConfigError(f"{self.name}: sandwich_norm norms both sides of every sublayer: no post_norm "
                              "kinds and an ffn in every block", ("sandwich_norm",))
        if self.attnres and "none" in self.ffns:
            # AttnRes counts two reads a block in its depth sources; a block without an ffn has one
            raise ConfigError(f"{self.name}: attnres needs an ffn in every block (ffns has 'none')", ("attnres",))
        for sub, acts in ((self.dense, ("gelu", "silu", "situ", "geglu")), (self.moe, ("gelu", "silu", "situ"))):
            if sub is not None and sub.act not in acts:
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
        """The MoE options real checkpoints use (routers, grouped routing); the mixers' options
        (gated attention, GQA-shaped delta heads) are checked by their configs' `check`."""
        m = self.moe
        if m is not None:
            if m.router not in ("sigmoid", "softmax"):
                raise ConfigError(f"{self.name}: moe.router must be 'sigmoid' or 'softmax'", ("moe", "router"))
            if m.n_experts % m.n_group or not 1 <= m.topk_group <= m.n_group:
                raise ConfigError(f"{self.name}: moe.n_group must divide n_experts and topk_group be in 1..n_group",
                                  ("moe", "n_group"))
            if m.top_k > m.topk_group * (m.n_experts // m.n_group):
                raise ConfigError(f"{self.name}: moe.top_k exceeds the experts of topk_group groups", ("moe", "top_k"))
