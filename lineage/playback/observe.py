"""The frame contract: every field a frame holds is named here, written here from a model's
observations, and read back here as a small typed record. Nothing else spells a field key.

Every array a frame holds is declared once, in the tables below: each observed quantity's
field, as the model's record (lineage.observed) names it, with its frame key and how it is
stored. `lm_fields` writes by them and `Views` reads by them; a key
renamed since traces were recorded is read through `RENAMED`, the one alias table.

Write side (torch in, numpy out; torch itself is never imported): `lm_fields` and
`memory_fields` turn one model's step into (meta, arrays), `side_by_side` files several models'
arrays under "m{model}/", `token_meta` and `step_meta` give the step's own fields.

Read side (`Views`, which Frame inherits): `frame.state(m, layer)`, `decay`, `attention`,
`routing`, `depth`, `cache`, `gate`, `token`, `guesses`, `recall`, `event`, `readout`, `caption`, `figure`. A
panel reads these records' fields and never recomputes mechanism arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..arithmetic import measured_memory
from ..observed import AttentionObs, RoutingObs, StateObs, StepObs
from .effective import Window


# -- the fields ---------------------------------------------------------------------------------
class Stored(NamedTuple):
    """How one observed quantity sits in a frame: its key, under "m{model}/l{layer}/" (a layer's)
    or "m{model}/" (the step's), and how it crosses to the host (host_copy.to_host): "compact"
    (float16 where the values fit it), "f32" or "i32"; a toy memory's are kept as made ("f64",
    its state's too: its frames are exact)."""
    key: str
    how: str


# field -> how it is stored, one table per record. A field is named as the model's record
# (lineage.observed) names it, and as the frame's record below does where that takes a table whole
STATE = {"S": Stored("S", "compact"),               # StateObs -> StateView          (H, K, V)
         "dS": Stored("dS", "compact"),             #                                (H, K, V)
         "k": Stored("k", "f32"),                   #                                (H, K)
         "v": Stored("v", "f32"),                   #                                (H, V)
         "read": Stored("read", "f32"),             #                                (H, V)
         "beta": Stored("beta", "f32")}             #                                (H,)
DECAY = {"alpha": Stored("alpha", "f32")}           # StateObs -> DecayView          (H,) or (H, K)
ROWS = {"weights": Stored("attn", "compact"),       # AttentionObs, effective.Window -> AttentionRows (H, L)
        "shares": Stored("attn_share", "f32"),      # effective.Window only          (H, L)
        "before": Stored("attn_before", "f32")}     #                                (H,)
GATE = {"gate": Stored("gate", "f32")}              # AttentionObs (gated MLA) -> Views.gate  (H, dv)
ROUTING = {"scores": Stored("scores", "f32"),       # RoutingObs -> RoutingView      (E,)
           "experts": Stored("experts", "i32"),     #                                (k,)
           "weights": Stored("weights", "f32"),     #                                (k,)
           "shared_share": Stored("shared_share", "f32"),   # (1,), kept in the layer's meta
           "load": Stored("load", "i32")}           # counted here from experts      (E,)
DEPTH = {"mixer": Stored("attnres0", "f32"),        # LayerObs.attnres -> DepthRead, by part  (N,)
         "ffn": Stored("attnres1", "f32")}
STEP = {"attnres_final": Stored("attnres_final", "f32"),   # StepObs -> DepthView.final   (N,)
        "top_ids": Stored("top_ids", "i32"),        # StepObs -> GuessView           (top,)
        "top_probs": Stored("top_probs", "f32")}    #                                (top,)
RECALL = {"keys": Stored("recall_keys", "i32"),     # a toy memory's -> RecallView   (n,)
          "recall": Stored("recall", "f64"),        #                                (n, V)
          "target": Stored("target", "f64")}        #                                (n, V)
READOUT = {"out": Stored("out", "f64")}             # a toy memory's -> Views.readout (V,)
TABLES = (STATE, DECAY, ROWS, GATE, ROUTING, DEPTH, STEP, RECALL, READOUT)

# a trace's key recorded before it was renamed -> its key now (read where the new one is missing)
RENAMED = {"decay": "alpha"}        # it always held alpha = e^g, never the decay rate
_WAS = {new: old for old, new in RENAMED.items()}


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

    def _array(self, m: int, field: Stored, layer: int | None = None):
        at = f"m{m}/" if layer is None else f"m{m}/l{layer}/"
        a = self.arrays.get(at + field.key)
        if a is None and field.key in _WAS:        # a trace recorded before the key was renamed
            a = self.arrays.get(at + _WAS[field.key])
        return a

    def _fields(self, table: dict, m: int, layer: int | None = None) -> dict:
        """field -> its array in this frame (None where the frame has none), for a table's fields."""
        return {name: self._array(m, field, layer) for name, field in table.items()}

    def _layer(self, m: int, layer: int) -> dict:
        return self.meta["models"][m]["layers"][layer]

    def state(self, m: int, layer: int) -> StateView | None:
        f = self._fields(STATE, m, layer)
        if f["S"] is None:
            return None
        mixer = self._layer(m, layer)["mixer"]
        if f["dS"] is None:     # a trace recorded before frames kept the write: rebuild it
            f["dS"] = _write(mixer, f["k"], f["v"], f["read"], f["beta"])
        return StateView(mixer, **f)

    def decay(self, m: int, layer: int) -> DecayView | None:
        f = self._fields(DECAY, m, layer)
        return None if f["alpha"] is None else DecayView(**f)

    def attention(self, m: int, layer: int) -> AttentionRows | None:
        """None where the layer does not attend, or a large checkpoint's frames keep another's."""
        f = self._fields(ROWS, m, layer)
        return None if f["weights"] is None else AttentionRows(**f)

    def routing(self, m: int, layer: int) -> RoutingView | None:
        f = self._fields(ROUTING, m, layer)
        if f["experts"] is None:
            return None
        f["shared_share"] = self._layer(m, layer).get(ROUTING["shared_share"].key)   # a float in the meta
        return RoutingView(**f)

    def depth(self, m: int) -> DepthView:
        reads = tuple(DepthRead(layer, part, w) for layer in range(len(self.meta["models"][m]["layers"]))
                      for part, field in DEPTH.items()
                      if (w := self._array(m, field, layer)) is not None)
        return DepthView(reads, self._array(m, STEP["attnres_final"]))

    def cache(self, m: int, cfg) -> CacheView:
        """cfg: the model's ModelConfig (`cursor.model_config(m)`)."""
        return CacheView(**measured_memory(self.meta["models"][m]["layers"], cfg))

    def gate(self, m: int, layer: int) -> np.ndarray | None:
        """(H, dv) gated MLA's output gate, sigmoid(g_proj(x)): how much of each channel's
        retrieval the layer keeps (None where the layer has no gate)."""
        return self._array(m, GATE["gate"], layer)

    def token(self) -> TokenView | None:
        """The step's token (None in a toy memory's frames, which have events)."""
        if "pos" not in self.meta:
            return None
        mt = self.meta
        return TokenView(mt["pos"], mt["token"], mt["text"], mt["source"], mt.get("answer"))

    def guesses(self, m: int) -> GuessView:
        return GuessView(self._array(m, STEP["top_ids"]), self._array(m, STEP["top_probs"]),
                         self.meta["models"][m].get("top_text"))

    def recall(self, m: int) -> RecallView | None:
        f = self._fields(RECALL, m)
        return None if f["keys"] is None else RecallView(**f)

    def event(self) -> str | None:
        """A toy memory's event at this step (write, read, ...), as shown."""
        return self.meta.get("event")

    def readout(self, m: int) -> np.ndarray | None:
        """(V,) what a toy memory read back at a read event."""
        return self._array(m, READOUT["out"])

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


def guess_ids(arrays: dict, m: int) -> np.ndarray:
    """Model m's next-token guesses (top,) in a step's arrays, before they are a frame."""
    return arrays[f"m{m}/{STEP['top_ids'].key}"]


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
    # o names its fields as the tables do (playback/toy.py); kept in float64, as the memory made them
    arrays = {"l0/" + f.key: np.asarray(o[name])[None] for name, f in (STATE | DECAY).items()}
    arrays.update((f.key, np.asarray(o[name], dtype=np.int32 if f.how == "i32" else None))
                  for name, f in RECALL.items())
    if o["out"] is not None:
        arrays[READOUT["out"].key] = o["out"].numpy()
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
                _put(want, p, STATE, _first(mx, STATE))
                _put(want, p, DECAY, _first(mx, DECAY))
                if follow is not None and mx.q is not None:
                    # the last n positions' row, their shares and the share before them
                    row, shares, before = follow.setdefault(i, Window()).step(mx)
                    _put(want, p, ROWS, dict(weights=row, shares=shares, before=before))
        if isinstance(mx, AttentionObs):
            meta["cache_len"], meta["cache_bytes"] = int(mx.cache_len), int(mx.cache_bytes)
            if shown:
                # (H, L): this token's weights over positions 0 .. pos; a static (graph) cache attends
                # over its whole buffer, whose unwritten tail gets 0: keep the written part
                _put(want, p, ROWS, dict(weights=mx.weights[0][:, :int(mx.length)]))
            if mx.gate is not None:                                      # gated MLA's output gate
                _put(want, p, GATE, dict(gate=mx.gate[0].reshape(cfg.mla.n_heads, -1)))   # (H, dv)
        if isinstance(ff, RoutingObs):
            # the shared experts' share crosses with the rest and is read into the meta below
            share = None if ff.shared_share is None else ff.shared_share[:1]
            _put(want, p, ROUTING, dict(_first(ff, ("scores", "experts", "weights")), shared_share=share))
            routed.append((i, meta))
        _put(want, p, DEPTH, {part: w[:, 0] for part, w in zip(DEPTH, lo.attnres or ())})   # sources so far
        layers.append(meta)
    final = None if obs.attnres_final is None else obs.attnres_final[:, 0]
    _put(want, "", STEP, dict(attnres_final=final, top_ids=obs.top_ids[0], top_probs=obs.top_probs[0]))
    arrays = to_host(want, ahead)
    share_key, experts_key, load_key = (ROUTING[n].key for n in ("shared_share", "experts", "load"))
    for i, meta in routed:
        p = f"l{i}/"
        share = arrays.pop(p + share_key, None)
        if share is not None:
            meta[share_key] = float(share[0])
        counts = load.setdefault(i, np.zeros(cfg.moe.n_experts, dtype=np.int32))
        counts[arrays[p + experts_key]] += 1
        arrays[p + load_key] = counts.copy()                             # (E,)
    return {"layers": layers}, _in_order(arrays, want)


def _first(record, fields) -> dict:
    """Batch element 0 of a record's fields (None stays None)."""
    return {name: None if (t := getattr(record, name)) is None else t[0] for name in fields}


def _put(want: dict, prefix: str, table: dict, values: dict) -> None:
    """want[frame key] = (tensor, how it is stored) for each of the table's fields in `values`
    that is not None, in the table's order (a frame's order, and so a trace's bytes)."""
    for name, field in table.items():
        if values.get(name) is not None:
            want[prefix + field.key] = (values[name], field.how)


def _in_order(arrays: dict, want: dict) -> dict:
    """The arrays in the order a frame has always listed them: each layer's own, its load after
    its routing, then the step's (a trace's bytes do not depend on how they crossed)."""
    weights, load = ROUTING["weights"].key, ROUTING["load"].key
    out = {}
    for k in want:
        if k in arrays:
            out[k] = arrays[k]
            layer, _, name = k.rpartition("/")
            if name == weights and f"{layer}/{load}" in arrays:
                out[f"{layer}/{load}"] = arrays[f"{layer}/{load}"]
    return out
