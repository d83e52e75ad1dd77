"""One language model for the whole lineage, assembled from a layer pattern.

GPT-2 is `mixers = softmax * 12, ffns = dense (gelu) * 12, norm = layer, learned positions,
tied head`; K3 is `(kda, kda, kda, mla) * 23 + mla, dense then moe, rms, AttnRes`. Every layer
is (norm -> mixer -> residual, norm -> ffn -> residual); with AttnRes the residual stream is
replaced by attention over block sums at each of the two inputs (`attnres.DepthResidual`).
"""
from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .configs import FFNS, MIXERS, ModelConfig
from .attnres import AttnRes
from .observed import LayerObs, StepObs

def _named(where: str) -> type[nn.Module]:
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


def mixer_class(kind: str) -> type[nn.Module]:
    """The nn.Module of a mixer kind, as its descriptor names it ("lineage.mixers.kda.module:KDA"):
    the registry (lineage/mixers/__init__.py) stays torch-free, and a new mixer adds no line here."""
    return _named(MIXERS[kind].module)


def ffn_class(kind: str) -> type[nn.Module]:
    """The nn.Module of an FFN kind ("lineage.ffns.moe:MoE"), as mixer_class is a mixer's."""
    return _named(FFNS[kind].module)


@dataclass
class ModelState:
    pos: int = 0                                     # tokens consumed so far
    layers: list = field(default_factory=list)       # one mixer state per layer (KVCache, DeltaState, ...)


class Residual:
    """The plain residual stream: each read sees the running sum, each sublayer adds to it."""

    def __init__(self, x: Tensor):
        self.x = x
        self.dtype = x.dtype            # the stream's: kept when it crosses to a block of another dtype

    def read(self) -> tuple[Tensor, None]:
        return self.x, None                          # no depth weights: every earlier output counts once

    def add(self, y: Tensor) -> None:
        self.x = self.x + y

    def to(self, device) -> None:
        """Carry the stream to the device of the block about to read it (a model spread by a
        device map): only the (B, T, d) hidden state crosses, at a layer boundary. Its dtype
        stays its own: a block on the CPU in float32 beside bf16 GPU blocks adds its output in
        float32, which would otherwise promote the stream for every later layer."""
        self.x = self.x.to(device, self.dtype)

    def out(self) -> tuple[Tensor, None]:
        return self.x, None


class Block(nn.Module):
    """norm -> mixer -> residual, norm -> ffn -> residual. `res` is the residual stream: the
    plain running sum, or with AttnRes a learned mixture of earlier depths (same two calls).
    A post-norm block (its mixer kind in cfg.post_norm) norms each sublayer's output instead
    of its input: mixer -> norm -> residual, ffn -> norm -> residual (OLMo-2/3). A sandwich
    block (cfg.sandwich_norm) norms both, each with its own norm (Gemma 2/3)."""

    def __init__(self, cfg: ModelConfig, i: int):
        super().__init__()
        self.mixer_kind, self.ffn_kind = cfg.mixers[i], cfg.ffns[i]
        self.post = self.mixer_kind in (cfg.post_norm or ())
        self.sandwich = cfg.sandwich_norm
        self.norm1 = _norm(cfg)
        self.mixer = mixer_class(self.mixer_kind)(cfg.layer_mixer_config(i))
        if self.sandwich:
            self.norm1_out = _norm(cfg)
        if self.ffn_kind != "none":         # "none": norm -> mixer -> residual alone (Mamba-2's blocks)
            self.norm2 = _norm(cfg)
            self.ffn = ffn_class(self.ffn_kind)(cfg.ffn_config(self.ffn_kind))
            if self.sandwich:
                self.norm2_out = _norm(cfg)

    def forward(self, res, state=None):
        """Whole sequence: res reads (B, T, d). Returns the mixer's new state."""
        a, state = self.mixer(self._in(self.norm1, res.read()[0]), state)
        res.add(self._out(1, a))
        if self.ffn_kind != "none":
            f, _ = self.ffn(self._in(self.norm2, res.read()[0]))
            res.add(self._out(2, f))
        return state

    def _in(self, norm: nn.Module, h: Tensor) -> Tensor:
        h = h.to(norm.weight.dtype)                 # a float32 stream (residual_fp32) read in the weights' dtype
        return h if self.post else norm(h)          # pre-norm: the sublayer reads a normed stream

    def _out(self, i: int, y: Tensor) -> Tensor:
        """Sublayer i's output as the stream gets it: as it is (pre-norm), normed by its input's
        norm (post-norm, which normed no input) or by its own output norm (sandwich)."""
        if self.sandwich:
            return (self.norm1_out if i == 1 else self.norm2_out)(y)
        return (self.norm1 if i == 1 else self.norm2)(y) if self.post else y

    def step(self, res, state, obs: LayerObs | None = None):
        """One token: res reads (B, d). With `obs`, the mixer fills obs.mixer, the FFN obs.ffn,
        and obs.attnres gets the depth weights of the two reads."""
        h, w_mixer = res.read()
        a, state = self.mixer.step(self._in(self.norm1, h), state, obs)
        res.add(self._out(1, a))
        if self.ffn_kind == "none":          # ModelConfig.check refuses AttnRes with such blocks
            return state
        h, w_ffn = res.read()
        f, _ = self.ffn.step(self._in(self.norm2, h), None, obs)
        res.add(self._out(2, f))
        if obs is not None and w_mixer is not None:
            obs.attnres = (w_mixer.detach(), w_ffn.detach())             # (N, B) each
        return state


def _norm(cfg: ModelConfig) -> nn.Module:
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps) if cfg.norm == "layer" else nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)


class LM(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.check()
        if cfg.shape_only:
            raise ValueError(f"preset {cfg.name!r} is shape-only (parameter and memory arithmetic); "
                             "it is never instantiated")
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.embed_std is not None:      # N(0, 1) rows through a tied head start near loss 44, not ln 256
            nn.init.normal_(self.wte.weight, std=cfg.embed_std)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.d_model) if cfg.n_positions else None
        if self.wpe is not None and cfg.embed_std is not None:    # else N(0, 1) positions drown 0.02 tokens
            nn.init.normal_(self.wpe.weight, std=cfg.embed_std / 2)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm_f = _norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self.attnres = AttnRes(cfg.attnres, cfg.d_model, cfg.n_layers) if cfg.attnres else None
        self.places = None          # each block's device where a device map spreads them (`placed`)

    def placed(self) -> None:
        """Note where each block's weights live, once they are in place: where they are not all on
        the embedding's device (a device map, lineage.families.placement), the stream moves to
        each block's device before the block reads it, and to the head's at the end. Each layer's
        state and cache are made by its mixer from its input, so they live beside its weights."""
        here = self.wte.weight.device
        devices = [next(b.parameters()).device for b in self.blocks]
        ends = (self.norm_f.weight.device, self.lm_head.weight.device)
        if all(d == here for d in devices + list(ends)):
            self.places = None
            return
        if self.attnres is not None:       # its block sums are read by every later layer: one device
            raise ValueError(f"{self.cfg.name}: a model with attention residuals runs on one device")
        self.places = devices

    def forward(self, ids: Tensor, state: ModelState | None = None, last: bool = False) -> tuple[Tensor, ModelState]:
        """ids (B, T) -> logits (B, T, vocab), or with `last` only the last position's (B, 1,
        vocab): a prefill needs no more, and a long one could not hold T x vocab floats.
        Mixers use their parallel or chunked form."""
        pos, old = self._begin(state)
        res = self._residual(self._embed(ids, pos))                          # (B, T, d)
        new = []
        for i, st in enumerate(old):
            with self._on_device(res, i):
                new.append(self.blocks[i](res, st))
        x, _ = res.out()
        if last:
            x = x[:, -1:]
        return self._head(x), ModelState(pos + ids.shape[1], new)

    def step(self, ids_t: Tensor, state: ModelState | None, obs: StepObs | None = None) -> tuple[Tensor, ModelState]:
        """ids_t (B,) -> logits (B, vocab). With `obs` (a `StepObs()`), every layer reports what it
        holds in obs.layers[i] (a LayerObs), with the likeliest next tokens and the final depth read."""
        pos, old = self._begin(state)
        res = self._residual(self._embed(ids_t[:, None], pos)[:, 0])         # (B, d)
        layer_obs = [None] * len(self.blocks) if obs is None else [LayerObs() for _ in self.blocks]
        new = []
        for i, (st, lo) in enumerate(zip(old, layer_obs)):
            with self._on_device(res, i):
                new.append(self.blocks[i].step(res, st, lo))
        x, w = res.out()
        logits = self._head(x)                                               # (B, vocab)
        if obs is not None:
            if w is not None:
                obs.attnres_final = w.detach()
            probs, top = logits.float().softmax(-1).topk(min(10, logits.shape[-1]), dim=-1)
            obs.layers, obs.top_ids, obs.top_probs, obs.pos = layer_obs, top.detach(), probs.detach(), pos
        return logits, ModelState(pos + 1, new)

    def _begin(self, state: ModelState | None) -> tuple[int, list]:
        return (0, [None] * len(self.blocks)) if state is None else (state.pos, state.layers)

    def _on_device(self, res, i: int):
        """Where the blocks are spread: the stream carried to block i's device, and that device
        made the current one while the block runs (Triton launches its kernels on the current
        device, not on its tensors'). A no-op context on one device."""
        if self.places is None:
            return contextlib.nullcontext()
        device = self.places[i]
        res.to(device)
        return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()

    def _head(self, x: Tensor) -> Tensor:
        if self.places is not None:
            x = x.to(self.norm_f.weight.device)
            return self._capped(self.lm_head(self._final(x).to(self.lm_head.weight.device)))
        return self._capped(self.lm_head(self._final(x)))

    def _capped(self, logits: Tensor) -> Tensor:
        """Gemma's soft cap: logits squashed smoothly into (-c, c)."""
        c = self.cfg.logit_softcap
        return logits if c is None else torch.tanh(logits / c) * c

    def _embed(self, ids: Tensor, pos: int) -> Tensor:
        B, T = ids.shape
        if self.places is not None:
            ids = ids.to(self.wte.weight.device)
        x = self.wte(ids)                                                     # (B, T, d)
        if self.cfg.embed_scale is not None:
            # the scale rounded to the table's dtype first, as Gemma's reference multiplies (sqrt(2304)
            # is 48 in bf16); a Python number, so a captured step holds no host-to-device copy
            x = x * torch.tensor(self.cfg.embed_scale, dtype=x.dtype).item()
        if self.wpe is not None:
            if pos + T > self.cfg.n_positions:
                raise ValueError(f"{self.cfg.name}: position {pos + T} past the learned table of {self.cfg.n_positions}")
            x = x + self.wpe(torch.arange(pos, pos + T, device=self.wpe.weight.device)).to(x.device)
        return x

    def _residual(self, x: Tensor):
        if self.cfg.residual_fp32:
            x = x.to(torch.promote_types(x.dtype, torch.float32))
        return Residual(x) if self.attnres is None else self.attnres.stream(x)

    def _final(self, x: Tensor) -> Tensor:
        """The stream's last norm, in the stream's precision, handed to the head in its dtype."""
        w = self.norm_f.weight
        if x.dtype == w.dtype:
            return self.norm_f(x)
        return F.rms_norm(x, w.shape, w.to(x.dtype), self.norm_f.eps).to(w.dtype) \
            if isinstance(self.norm_f, nn.RMSNorm) else self.norm_f(x.to(w.dtype))
