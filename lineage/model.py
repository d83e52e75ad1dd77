"""One language model for the whole lineage, assembled from a layer pattern.

GPT-2 is `mixers = softmax * 12, ffns = dense (gelu) * 12, norm = layer, learned positions,
tied head`; K3 is `(kda, kda, kda, mla) * 23 + mla, dense then moe, rms, AttnRes`. Every layer
is (norm -> mixer -> residual, norm -> ffn -> residual); with AttnRes the residual stream is
replaced by attention over block sums at each of the two inputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .mechanisms.attention import SoftmaxAttention
from .mechanisms.attnres import AttnRes
from .configs import ModelConfig
from .mechanisms.deltanet import DeltaNet
from .mechanisms.ffn import DenseFFN
from .mechanisms.gated_deltanet import GatedDeltaNet
from .mechanisms.kda import KDA
from .mechanisms.linear_attention import LinearAttention
from .mechanisms.mla import MLA
from .mechanisms.moe import MoE

MIXER_CLASSES = {"softmax": SoftmaxAttention, "linear": LinearAttention, "deltanet": DeltaNet,
                 "gdn": GatedDeltaNet, "kda": KDA, "mla": MLA}
FFN_CLASSES = {"dense": DenseFFN, "moe": MoE}


@dataclass
class ModelState:
    pos: int = 0                                     # tokens consumed so far
    layers: list = field(default_factory=list)       # one mixer state per layer (KVCache, DeltaState, ...)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, i: int):
        super().__init__()
        self.mixer_kind, self.ffn_kind = cfg.mixers[i], cfg.ffns[i]
        self.norm1 = _norm(cfg)
        self.mixer = MIXER_CLASSES[self.mixer_kind](cfg.mixer_config(self.mixer_kind))
        self.norm2 = _norm(cfg)
        self.ffn = FFN_CLASSES[self.ffn_kind](cfg.ffn_config(self.ffn_kind))


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
        self.wpe = nn.Embedding(cfg.n_positions, cfg.d_model) if cfg.n_positions else None
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm_f = _norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self.attnres = AttnRes(cfg.attnres, cfg.d_model, cfg.n_layers) if cfg.attnres else None

    def forward(self, ids: Tensor, state: ModelState | None = None) -> tuple[Tensor, ModelState]:
        """ids (B, T) -> logits (B, T, vocab). Mixers use their parallel or chunked form."""
        return self._run(ids, state, single=False, obs=None)

    def step(self, ids_t: Tensor, state: ModelState | None, obs: dict | None = None) -> tuple[Tensor, ModelState]:
        """ids_t (B,) -> logits (B, vocab). With `obs` a dict, every layer reports what it holds:
        obs['layers'][i] = {'mixer': {...}, 'ffn': {...}, 'attnres': [w_mixer, w_ffn]},
        obs['attnres_final'], obs['top_ids'], obs['top_probs']."""
        logits, state = self._run(ids_t[:, None], state, single=True, obs=obs)
        logits = logits[:, 0]
        if obs is not None:
            probs, top = logits.float().softmax(-1).topk(min(10, logits.shape[-1]), dim=-1)
            obs.update(top_ids=top.detach(), top_probs=probs.detach(), pos=state.pos - 1)
        return logits, state

    def _run(self, ids: Tensor, state: ModelState | None, single: bool, obs: dict | None):
        B, T = ids.shape
        pos = 0 if state is None else state.pos
        old = [None] * len(self.blocks) if state is None else state.layers
        x = self.wte(ids)                                                     # (B, T, d)
        if self.wpe is not None:
            if pos + T > self.cfg.n_positions:
                raise ValueError(f"{self.cfg.name}: position {pos + T} past the learned table of {self.cfg.n_positions}")
            x = x + self.wpe(torch.arange(pos, pos + T, device=ids.device))
        if single:
            x = x[:, 0]                                                       # (B, d)
            call = lambda mod, inp, st, o: mod.step(inp, st, o)               # noqa: E731
        else:
            call = lambda mod, inp, st, o: mod(inp, st)                       # noqa: E731
        layer_obs = [] if obs is not None else None
        new = []
        ar = self.attnres
        blocks, partial = [x], None                                           # AttnRes sources: embedding is block 0
        for i, blk in enumerate(self.blocks):
            lo = {"mixer": {}, "ffn": {}, "attnres": []} if obs is not None else None
            if ar is None:
                a, st = call(blk.mixer, blk.norm1(x), old[i], lo and lo["mixer"])
                x = x + a
                f, _ = call(blk.ffn, blk.norm2(x), None, lo and lo["ffn"])
                x = x + f
            else:
                if ar.starts_block(i):
                    blocks, partial = [*blocks, partial], None
                h, w = ar.aggregate(2 * i, blocks, partial)
                a, st = call(blk.mixer, blk.norm1(h), old[i], lo and lo["mixer"])
                partial = a if partial is None else partial + a
                h, w2 = ar.aggregate(2 * i + 1, blocks, partial)
                f, _ = call(blk.ffn, blk.norm2(h), None, lo and lo["ffn"])
                partial = partial + f
                if lo is not None:
                    lo["attnres"] = [w.detach(), w2.detach()]                 # (N, B) each
            new.append(st)
            if layer_obs is not None:
                layer_obs.append(lo)
        if ar is not None:
            x, w = ar.aggregate(2 * len(self.blocks), blocks, partial)
            if obs is not None:
                obs["attnres_final"] = w.detach()
        if obs is not None:
            obs["layers"] = layer_obs
        logits = self.lm_head(self.norm_f(x))
        if not single:
            return logits, ModelState(pos + T, new)
        return logits[:, None], ModelState(pos + T, new)
