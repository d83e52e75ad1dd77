"""The frame contract: every field a frame holds is named here, written here from a model's
observations, and read back here as a small typed record. Nothing else spells a field key.

Write side (torch in, numpy out; torch itself is never imported): `lm_fields` and
`memory_fields` turn one model's step into (meta, arrays), `side_by_side` files several models'
arrays under "m{model}/", `token_meta` and `step_meta` give the step's own fields.

Read side (`Views`, which Frame inherits): `frame.state(m, layer)`, `decay`, `attention`,
`routing`, `depth`, `cache`, `gate`, `token`, `guesses`, `recall`, `event`, `readout`, `caption`, `figure`. A
panel reads these records' fields and never recomputes mechanism arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..arithmetic import measured_memory
from ..observed import AttentionObs, RoutingObs, StateObs, StepObs
from .effective import Window


# -- the records (eq=False where they hold arrays: equal frames are Frame.__eq__'s business) -----
@dataclass(frozen=True, eq=False)
class StateView:
    """One recurrent layer's K x V state per head, and the write that made this step's S."""
    mixer: str                 # linear, deltanet, gdn, kda (or a toy memory's rule)
    S: np.ndarray              # (H, K, V) after this step's write
    dS: np.ndarray             # (H, K, V) the write itself, k^T u
    k: np.ndarray              # (H, K)
    v: np.ndarray              # (H, V)
    read: np.ndarray           # (H, V) what k recalled before the write
    beta: np.ndarray | None    # (H,) write strength; None where the rule has none

    @property
    def heads(self) -> int:
        return self.S.shape[0]

    def quantity(self, h: int, q: str) -> np.ndarray:
        """Head h's S (K, V), its last write dS (K, V), or the error v - read-back (V,), in float64."""
        if q == "S":
            return self.S[h].astype(np.float64)
        if q == "dS":
            return self.dS[h].astype(np.float64)
        return self.v[h].astype(np.float64) - self.read[h].astype(np.float64)


@dataclass(frozen=True, eq=False)
class DecayView:
    """alpha = exp(g): (H,) one per head (Gated DeltaNet) or (H, K) one per key channel (KDA)."""
    alpha: np.ndarray

    def head(self, h: int) -> np.ndarray:
        """Head h's alpha as a column: (1,) or (K,), float64."""
        return np.atleast_1d(self.alpha[h]).astype(np.float64)


@dataclass(frozen=True, eq=False)
class AttentionRows:
    """One attention layer's softmax weights at this step (softmax attention or MLA): row h is
    what query head h of this token puts on each cached position 0 .. pos, this token included
    (the cache after its write), so each row sums to 1. What GPT-2's KV cache is read for."""
    weights: np.ndarray        # (H, L), L = pos + 1; float16 in frames (host_copy.compact), within 1e-3 of 1 a row
    # a recurrent layer's rows are the attention its state implements (playback.effective): signed,
    # over the last L positions only, with each position's share of the read-out and the share
    # the state held before them (the shares add up to 1); None for softmax and MLA
    shares: np.ndarray | None = None   # (H, L)
    before: np.ndarray | None = None   # (H,)

    @property
    def heads(self) -> int:
        return self.weights.shape[0]


@dataclass(frozen=True, eq=False)
class RoutingView:
    scores: np.ndarray           # (E,) the router's scores
    experts: np.ndarray          # (k,) int: the experts this token went to
    weights: np.ndarray          # (k,) their weights
    load: np.ndarray | None      # (E,) int: tokens each expert took so far
    shared_share: float | None   # the share of the output from the shared experts

    def per_expert(self, n_experts: int) -> np.ndarray:
        """(E,) this token's weight on every expert, 0 where it was not routed."""
        col = np.zeros(n_experts)
        col[self.experts] = self.weights
        return col


@dataclass(frozen=True, eq=False)
class DepthRead:
    """One attention-residual read: before a layer's mixer or its FFN, softmax weights over the
    sources so far (the embedding, each completed block, the block so far)."""
    layer: int
    part: str                    # "mixer" or "ffn"
    weights: np.ndarray          # (N,)


@dataclass(frozen=True, eq=False)
class DepthView:
    """A model's attention-residual reads in layer order; `final` the read before the output head."""
    reads: tuple                 # DepthRead, ...
    final: np.ndarray | None     # (N,)


@dataclass(frozen=True)
class CacheView:
    """What a model held at this step (bytes), and per-token rates to project with."""
    tokens: int
    kv: int
    latent: int
    state: int
    kv_per_tok: float
    latent_per_tok: float
    kv_equiv_per_tok: float      # what the MLA layers would cache as plain multi-head K and V
    conv: int = 0                # short-convolution caches (in `state`), by lineage.arithmetic.model_memory
    dtypes: str = ""             # the element sizes counted, for the screen
    kv_window: int | None = None  # every softmax layer's sliding window: its KV stops growing at this many tokens
    kv_windows: tuple = ()        # ((W, bytes per token of the layers windowed at W), ...), some layers or all

    @property
    def cache(self) -> int:
        """The MLA latent and softmax KV caches together."""
        return self.latent + self.kv

    @property
    def per_tok(self) -> float:
        return self.latent_per_tok + self.kv_per_tok

    def cache_at(self, n: float) -> float:
        """The caches projected to n tokens: each windowed layer's KV stops growing at its window.
        Past the windows the measured per-token rate is not a rate; below them it is."""
        if not self.kv_windows:
            return self.per_tok * n
        tokens = max(self.tokens, 1)
        windowed_now = sum(r * min(tokens, W) for W, r in self.kv_windows)
        full_rate = max(self.kv - windowed_now, 0) / tokens           # the layers without a window
        return (self.latent_per_tok + full_rate) * n + sum(r * min(n, W) for W, r in self.kv_windows)

    @property
    def windowed(self) -> bool:
        """Some softmax layers' caches stop growing."""
        return bool(self.kv_windows)


@dataclass(frozen=True)
class TokenView:
    pos: int
    token: int
    text: str                    # the token as shown
    source: str                  # input, or the decoding mode that chose it
    answer: int | None           # the right next token where the task asks


@dataclass(frozen=True, eq=False)
class GuessView:
    ids: np.ndarray              # (top,) the model's likeliest next tokens
    probs: np.ndarray            # (top,)
    texts: list | None = None    # (top,) as the checkpoint's tokenizer spells them; None: byte ids


@dataclass(frozen=True, eq=False)
class RecallView:
    """A toy memory's facts so far, each read back with its own key."""
    keys: np.ndarray             # (n,) key ids, in write order
    recall: np.ndarray           # (n, V) what each key reads
    target: np.ndarray           # (n, V) what it should


# -- the read side ----------------------------------------------------------------------------
class Views:
    """The records of a frame; Frame inherits these (its `meta` and `arrays` are the storage)."""

    def _array(self, m: int, name: str, layer: int | None = None):
        return self.arrays.get(f"m{m}/{name}" if layer is None else f"m{m}/l{layer}/{name}")

    def _layer(self, m: int, layer: int) -> dict:
        return self.meta["models"][m]["layers"][layer]

    def state(self, m: int, layer: int) -> StateView | None:
        S = self._array(m, "S", layer)
        if S is None:
            return None
        mixer = self._layer(m, layer)["mixer"]
        k, v, read, beta = (self._array(m, n, layer) for n in ("k", "v", "read", "beta"))
        dS = self._array(m, "dS", layer)
        if dS is None:          # a trace recorded before frames kept the write: rebuild it
            dS = _write(mixer, k, v, read, beta)
        return StateView(mixer, S, dS, k, v, read, beta)

    def decay(self, m: int, layer: int) -> DecayView | None:
        d = self._array(m, "decay", layer)
        return None if d is None else DecayView(d)

    def attention(self, m: int, layer: int) -> AttentionRows | None:
        """None where the layer does not attend, or a large checkpoint's frames keep another's."""
        w = self._array(m, "attn", layer)
        return None if w is None else AttentionRows(w, self._array(m, "attn_share", layer),
                                                     self._array(m, "attn_before", layer))

    def routing(self, m: int, layer: int) -> RoutingView | None:
        experts = self._array(m, "experts", layer)
        if experts is None:
            return None
        return RoutingView(self._array(m, "scores", layer), experts, self._array(m, "weights", layer),
                           self._array(m, "load", layer), self._layer(m, layer).get("shared_share"))

    def depth(self, m: int) -> DepthView:
        reads = tuple(DepthRead(layer, part, w) for layer in range(len(self.meta["models"][m]["layers"]))
                      for j, part in enumerate(("mixer", "ffn"))
                      if (w := self._array(m, f"attnres{j}", layer)) is not None)
        return DepthView(reads, self._array(m, "attnres_final"))

    def cache(self, m: int, cfg) -> CacheView:
        """cfg: the model's ModelConfig (`cursor.model_config(m)`)."""
        return CacheView(**measured_memory(self.meta["models"][m]["layers"], cfg))

    def gate(self, m: int, layer: int) -> np.ndarray | None:
        """(H, dv) gated MLA's output gate, sigmoid(g_proj(x)): how much of each channel's
        retrieval the layer keeps (None where the layer has no gate)."""
        return self._array(m, "gate", layer)

    def token(self) -> TokenView | None:
        """The step's token (None in a toy memory's frames, which have events)."""
        if "pos" not in self.meta:
            return None
        mt = self.meta
        return TokenView(mt["pos"], mt["token"], mt["text"], mt["source"], mt.get("answer"))

    def guesses(self, m: int) -> GuessView:
        return GuessView(self._array(m, "top_ids"), self._array(m, "top_probs"), self.meta["models"][m].get("top_text"))

    def recall(self, m: int) -> RecallView | None:
        keys = self._array(m, "recall_keys")
        return None if keys is None else RecallView(keys, self._array(m, "recall"), self._array(m, "target"))

    def event(self) -> str | None:
        """A toy memory's event at this step (write, read, ...), as shown."""
        return self.meta.get("event")

    def readout(self, m: int) -> np.ndarray | None:
        """(V,) what a toy memory read back at a read event."""
        return self._array(m, "out")

    def caption(self) -> str | None:
        return self.meta.get("caption")

    def figure(self) -> dict | None:
        """The seed figure's row at this step (a dict keyed by what the figure measures)."""
        return self.meta.get("figure")


def _write(mixer: str, k, v, read, beta) -> np.ndarray:
    """(H, K, V) the write k^T u in float64: u = v for linear attention (it adds), beta (v -
    read-back) for the delta rule (it corrects what k recalled)."""
    k, v, read = (a.astype(np.float64) for a in (k, v, read))
    u = v if mixer == "linear" else (1.0 if beta is None else beta.astype(np.float64)[:, None]) * (v - read)
    return k[:, :, None] * u[:, None, :]                                          # (H, K, V)


# -- the write side ---------------------------------------------------------------------------
def step_meta(caption: str | None, figure_row: dict | None) -> dict:
    meta = {"caption": caption}
    if figure_row is not None:
        meta["figure"] = figure_row
    return meta


def token_meta(pos: int, token: int, text: str, source: str, answer, next_input: int | None) -> dict:
    meta = dict(pos=pos, token=token, text=text, source=source, answer=answer)
    if next_input is not None:
        meta["next_input"] = next_input
    return meta


def guess_texts(model_meta: dict, texts: list[str]) -> None:
    """A model's next-token guesses spelled by its tokenizer (read back by `guesses`)."""
    model_meta["top_text"] = texts


def side_by_side(steps) -> tuple[list, dict]:
    """Each model's (meta, arrays) -> the list of metas and the arrays keyed "m{model}/..."."""
    models, arrays = [], {}
    for m, (mm, ar) in enumerate(steps):
        models.append(mm)
        arrays.update({f"m{m}/{k}": v for k, v in ar.items()})
    return models, arrays


def lm_step_fields(token_fields: dict, model_steps) -> tuple[dict, dict]:
    meta = dict(token_fields)
    meta["models"], arrays = side_by_side(model_steps)
    return meta, arrays


def memory_step_fields(label: str, model_steps) -> tuple[dict, dict]:
    models, arrays = side_by_side(model_steps)
    return {"event": label, "models": models}, arrays


def memory_fields(o: dict, rule: str, label: str) -> tuple[dict, dict]:
    """A toy memory's step (float64 tensors, one head) -> (meta, arrays) with a head axis of 1."""
    arrays = {"l0/S": o["S"].numpy()[None], "l0/dS": o["dS"].numpy()[None], "l0/k": o["k"].numpy()[None],
              "l0/v": o["v"].numpy()[None], "l0/read": o["read"].numpy()[None],
              "l0/decay": o["decay"].numpy()[None], "l0/beta": np.array([o["beta"]]),
              "recall": o["recall"].numpy(), "target": o["target"].numpy(),
              "recall_keys": np.array(o["recall_keys"], dtype=np.int32)}
    if o["out"] is not None:
        arrays["out"] = o["out"].numpy()
    return {"layers": [{"mixer": rule, "ffn": "none"}], "event": label}, arrays


def lm_fields(obs: StepObs, cfg, load: dict, watch: frozenset | None = None, ahead=None,
              follow: dict | None = None) -> tuple[dict, dict]:
    """Batch element 0 of a language model's observed step (lineage.observed) ->
    (meta, arrays) for a Frame.
    load: layer -> (E,) int32 tokens per expert so far, updated here, so no panel re-reads history.
    watch: None keeps every layer's state; a set (a real checkpoint's, whose states are megabytes
    a layer) keeps state, decay and attention rows only for those layers (the ones its panels
    show: runners._watched), so only what the open panels show is copied to the host. What is
    kept crosses to the host together (host_copy.to_host: a few copies on a GPU, not one a tensor);
    ahead() is called once it is copied out on the device (to_host).
    follow: layer -> effective.Window, kept by the caller: a recurrent layer's attention rows (the
    attention its state implements, with the share held before the window); None: not made."""
    from .host_copy import to_host
    want: dict = {}          # frame key -> (tensor, how it is stored)
    layers, routed = [], []
    for i, lo in enumerate(obs.layers):
        mx, ff = lo.mixer, lo.ffn
        meta = {"mixer": cfg.mixers[i], "ffn": cfg.ffns[i]}
        p = f"l{i}/"
        shown = watch is None or i in watch
        if isinstance(mx, StateObs):
            meta["state_bytes"] = int(mx.state_bytes)
            if shown:
                want[p + "S"] = (mx.S[0], "compact")                      # (H, K, V)
                want[p + "dS"] = (mx.dS[0], "compact")                    # (H, K, V)
                for name in ("k", "v", "read"):
                    want[p + name] = (getattr(mx, name)[0], "f32")        # (H, K) / (H, V)
                if mx.beta is not None:
                    want[p + "beta"] = (mx.beta[0], "f32")                # (H,)
                if mx.alpha is not None:    # the frame key is "decay" (traces keep it); it holds alpha
                    want[p + "decay"] = (mx.alpha[0], "f32")              # (H,) or (H, K)
                if follow is not None and mx.q is not None:
                    row, shares, before = follow.setdefault(i, Window()).step(mx)
                    want[p + "attn"] = (row, "compact")                   # (H, n): the last n positions
                    want[p + "attn_share"] = (shares, "f32")              # (H, n)
                    want[p + "attn_before"] = (before, "f32")             # (H,)
        if isinstance(mx, AttentionObs):
            meta["cache_len"], meta["cache_bytes"] = int(mx.cache_len), int(mx.cache_bytes)
            if shown:
                # (H, L): this token's weights over positions 0 .. pos; a static (graph) cache attends
                # over its whole buffer, whose unwritten tail gets 0: keep the written part
                want[p + "attn"] = (mx.weights[0][:, :int(mx.length)], "compact")
            if mx.gate is not None:                                      # gated MLA's output gate
                want[p + "gate"] = (mx.gate[0].reshape(cfg.mla.n_heads, -1), "f32")   # (H, dv)
        if isinstance(ff, RoutingObs):
            want[p + "scores"] = (ff.scores[0], "f32")                   # (E,)
            want[p + "experts"] = (ff.experts[0], "i32")                 # (k,)
            want[p + "weights"] = (ff.weights[0], "f32")                 # (k,)
            if ff.shared_share is not None:
                want[p + "shared_share"] = (ff.shared_share[:1], "f32")  # read into meta below
            routed.append((i, meta))
        for j, w in enumerate(lo.attnres or ()):
            want[p + f"attnres{j}"] = (w[:, 0], "f32")                   # (N,) sources of this point
        layers.append(meta)
    if obs.attnres_final is not None:
        want["attnres_final"] = (obs.attnres_final[:, 0], "f32")
    want["top_ids"] = (obs.top_ids[0], "i32")
    want["top_probs"] = (obs.top_probs[0], "f32")
    arrays = to_host(want, ahead)
    for i, meta in routed:
        p = f"l{i}/"
        share = arrays.pop(p + "shared_share", None)
        if share is not None:
            meta["shared_share"] = float(share[0])
        counts = load.setdefault(i, np.zeros(cfg.moe.n_experts, dtype=np.int32))
        counts[arrays[p + "experts"]] += 1
        arrays[p + "load"] = counts.copy()                               # (E,)
    return {"layers": layers}, _in_order(arrays, want)


def _in_order(arrays: dict, want: dict) -> dict:
    """The arrays in the order a frame has always listed them: each layer's own, its load after
    its routing, then the step's (a trace's bytes do not depend on how they crossed)."""
    out = {}
    for k in want:
        if k in arrays:
            out[k] = arrays[k]
            if k.endswith("/weights") and k[:-len("weights")] + "load" in arrays:
                out[k[:-len("weights")] + "load"] = arrays[k[:-len("weights")] + "load"]
    return out
