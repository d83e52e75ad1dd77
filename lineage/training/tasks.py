"""Memory tasks generated on the fly from a seed, as batches for training and evaluation.

Every task is byte-level (vocabulary 256) and teacher-forced: a batch is the token ids, the
next-token targets, and a mask of the positions that are scored (the query keys, whose next
token is the value to recall). Keys are ids below 128, values 128 and up, so no answer is ever
a key. numpy only, so scenarios can draw the same sequences without torch.

- mqar: N pairs with distinct keys and distinct values, then the N keys again in a new order.
- segmented: segments of fresh pairs, closed by a separator, then the keys of the last segment
  are queried. The fresh keys of all segments together exceed what one head's K = 32 state
  holds. With `gone` > 0, that many keys of the segment before the last are queried too, and
  their answer is '.': a memory that cannot forget at the separator still recalls their values.
- two_timescales: a document fact ('#' then its value) at the start, read back at the very end,
  with blocks of local pairs (keys reused from block to block with new values) in between:
  local memory must clear at each separator while the fact must survive all of them.
- text: byte-level language modelling (corpus.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

SEP = ord("|")          # closes a segment (segmented) or a block (two_timescales)
QUERY = ord("?")        # opens the queries of segmented
FACT = ord("#")         # marks the document fact of two_timescales
GONE = ord(".")         # segmented: the answer for a key of an earlier segment
KEY_IDS = np.array([i for i in range(128) if i not in (SEP, QUERY, FACT, GONE)])   # 124 keys, no marker
VALUE_BASE, N_VALUES = 128, 128


@dataclass
class Batch:
    ids: np.ndarray                   # (B, T) int64: the input
    targets: np.ndarray               # (B, T) int64: the next token at each position
    mask: np.ndarray                  # (B, T) bool: the scored positions
    sep: np.ndarray | None = None     # (B, T) bool: separator positions (gate statistics)
    groups: dict = field(default_factory=dict)   # name -> (B, T) bool: scored positions reported apart


@dataclass(frozen=True)
class TaskSpec:
    """A task and its parameters, as the sidecar records them."""
    name: str
    pairs: int = 16             # mqar: pairs; segmented: pairs per segment; two_timescales: pairs per block
    pairs_min: int = 0          # mqar: > 0 trains on pair counts pairs_min, 2 pairs_min, ... pairs (one per batch)
    segments: int = 8           # segmented: segments; two_timescales: blocks
    key_pool: int = 16          # two_timescales: local keys are drawn from this many
    length: int = 256           # text: window length
    mix: float = 0.0            # text: the share of each batch that is mqar at `pairs` (0: text only)
    gone: int = 0               # segmented: keys of the segment before the last also queried (answer '.')

    def params(self) -> dict:
        keep = {"mqar": ("pairs", "pairs_min"), "segmented": ("pairs", "segments", "gone"),
                "two_timescales": ("pairs", "segments", "key_pool"), "text": ("length", "mix", "pairs")}[self.name]
        return {k: getattr(self, k) for k in keep}


TASKS = ("mqar", "segmented", "two_timescales", "text")
DEFAULTS = {"mqar": TaskSpec("mqar", pairs=16), "segmented": TaskSpec("segmented", pairs=12, segments=8),
            "two_timescales": TaskSpec("two_timescales", pairs=6, segments=8, key_pool=16),
            "text": TaskSpec("text", length=256)}

# Bounds, checked before anything is drawn. A batch's logits alone are tokens x 256 floats, so
# MAX_TOKENS (1 GiB of float32 logits) keeps any one forward within what a laptop or a GPU
# holds, at 32 times the shipped runs' 128 x 256; MAX_LENGTH is one sequence of any task.
MAX_LENGTH = 2048
MAX_TOKENS = 1 << 20
_COUNTS = {"pairs": 1, "pairs_min": 0, "segments": 1, "key_pool": 1, "length": 1, "gone": 0}   # name -> least


def sequence_length(spec: TaskSpec, pairs: list[int] | None = None) -> int:
    """Tokens in the longest sequence the task draws (mqar and text with MQAR mixed in: at the
    largest of `pairs`, default spec.pairs), by arithmetic: nothing is drawn."""
    n = max(pairs) if pairs else spec.pairs
    if spec.name == "segmented":
        return spec.segments * (2 * spec.pairs + 1) + 2 * (spec.pairs + spec.gone)   # pairs, separators, '?'
    if spec.name == "two_timescales":
        return 5 + spec.segments * (4 * spec.pairs + 1)        # '#' fact, blocks (| pairs queries), | '#' fact
    if spec.name == "text":
        return max(spec.length, 4 * n if spec.mix > 0 else 0)
    return 4 * n


def make_spec(name, params: dict, flag=str) -> TaskSpec:
    """The task `name` with `params` over its defaults, every value checked for type and range
    (ValueError naming it as flag(key), e.g. '--pairs-min' or 'pairs_min'), so a sidecar or a
    command line cannot ask for a task that fails, or draws without end, once training has begun."""
    if not isinstance(name, str) or name not in TASKS:
        raise ValueError(f"unknown task {name!r} (one of {', '.join(TASKS)})")
    if not isinstance(params, dict):
        raise ValueError(f"task parameters must be a mapping, got {type(params).__name__}")
    known = [f for f in TaskSpec.__dataclass_fields__ if f != "name"]
    for k, v in params.items():
        if k not in known:
            raise ValueError(f"unknown task parameter {k!r} (known: {', '.join(known)})")
        if k == "mix":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"{flag(k)} must be a number in [0, 1], got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{flag(k)} must be a whole number, got {v!r}")
    spec = replace(DEFAULTS[name], **params)
    for k, least in _COUNTS.items():
        most = MAX_LENGTH if k == "length" else len(KEY_IDS)
        if not least <= getattr(spec, k) <= most:
            raise ValueError(f"{flag(k)} must be in {least}..{most}, got {getattr(spec, k)}")
    if spec.pairs_min > spec.pairs:
        raise ValueError(f"{flag('pairs_min')} {spec.pairs_min} is more than {flag('pairs')} {spec.pairs}")
    if name == "segmented" and spec.pairs * spec.segments > len(KEY_IDS):
        raise ValueError(f"segmented needs pairs x segments <= {len(KEY_IDS)} fresh keys, "
                         f"got {spec.pairs} x {spec.segments}")
    if name == "segmented" and spec.gone and (spec.segments < 2 or spec.gone > spec.pairs):
        raise ValueError(f"segmented: {spec.gone} gone keys need that many pairs in the segment before the last, "
                         f"which has {spec.pairs if spec.segments > 1 else 0}")
    if name == "two_timescales" and spec.pairs > spec.key_pool:
        raise ValueError(f"two_timescales needs pairs <= key_pool, got {spec.pairs}, {spec.key_pool}")
    if sequence_length(spec) > MAX_LENGTH:
        raise ValueError(f"a {name} sequence of these sizes is {sequence_length(spec):,} tokens; "
                         f"the limit is {MAX_LENGTH:,}")
    return spec


def batch_problem(spec: TaskSpec, n: int, flag: str, pairs: list[int] | None = None) -> str | None:
    """Why `n` sequences of `spec` at once are too many (or too few), or None."""
    if n < 1:
        return f"{flag} must be at least 1, got {n}"
    T = sequence_length(spec, pairs)
    if n * T > MAX_TOKENS:
        return (f"{flag} {n:,} is {n * T:,} tokens at once (sequences of {T:,}); the limit is {MAX_TOKENS:,} "
                f"tokens, so {flag} {MAX_TOKENS // T:,} at most here")
    return None


def _distinct(rng: np.random.Generator, B: int, pool: int, n: int) -> np.ndarray:
    """(B, n) indices into range(pool), distinct within each row."""
    return np.argsort(rng.random((B, pool)), axis=1)[:, :n]


def _pairs(keys: np.ndarray, vals: np.ndarray) -> np.ndarray:
    return np.stack([keys, vals], axis=-1).reshape(keys.shape[0], -1)       # (B, 2n): k v k v ...


def _finish(ids: np.ndarray, scored: np.ndarray, sep=None, groups=None) -> Batch:
    """Targets are the next token; a scored position's target is the value that follows it."""
    targets = np.concatenate([ids[:, 1:], np.zeros_like(ids[:, :1])], axis=1)
    return Batch(ids.astype(np.int64), targets.astype(np.int64), scored, sep, groups or {})


def mqar(rng: np.random.Generator, B: int, pairs: int) -> Batch:
    if not 1 <= pairs <= min(len(KEY_IDS), N_VALUES):
        raise ValueError(f"mqar pairs must be in 1..{min(len(KEY_IDS), N_VALUES)}, got {pairs}")
    keys = KEY_IDS[_distinct(rng, B, len(KEY_IDS), pairs)]                  # (B, n)
    vals = VALUE_BASE + _distinct(rng, B, N_VALUES, pairs)                   # (B, n)
    order = _distinct(rng, B, pairs, pairs)                                  # (B, n): query order
    query = _pairs(np.take_along_axis(keys, order, 1), np.take_along_axis(vals, order, 1))
    ids = np.concatenate([_pairs(keys, vals), query], axis=1)                # (B, 4n)
    scored = np.zeros(ids.shape, bool)
    scored[:, 2 * pairs::2] = True                                           # each query key
    return _finish(ids, scored)


def segmented(rng: np.random.Generator, B: int, pairs: int, segments: int, gone: int = 0) -> Batch:
    n = pairs * segments
    if n > len(KEY_IDS) or pairs > N_VALUES:
        raise ValueError(f"segmented needs pairs x segments <= {len(KEY_IDS)} fresh keys, got {pairs} x {segments}")
    keys = KEY_IDS[_distinct(rng, B, len(KEY_IDS), n)].reshape(B, segments, pairs)     # fresh in every segment
    vals = VALUE_BASE + np.stack([_distinct(rng, B, N_VALUES, pairs) for _ in range(segments)], 1)  # (B, S, P)
    sep = np.full((B, 1), SEP)
    parts = []
    for s in range(segments):
        parts += [_pairs(keys[:, s], vals[:, s])] + ([sep] if s < segments - 1 else [])
    if gone and (segments < 2 or gone > pairs):
        raise ValueError(f"segmented: {gone} gone keys need that many pairs in the segment before the last, which has {pairs}")
    # gone keys come from the segment just before the last: the freshest pairs behind a separator,
    # which a memory that only overwrites still holds intact (older ones it has mostly overwritten).
    # The draw keeps the size it had when they came from any earlier segment, so sequences
    # without gone keys stay those the shipped checkpoints and scenarios were made from.
    r = rng.random((B, max(1, (segments - 1) * pairs)))
    old = np.argsort(r[:, :pairs], axis=1)[:, :gone]                         # (B, G)
    before = keys[:, -2] if segments > 1 else keys[:, :0, 0]                  # (B, P) or (B, 0)
    q_keys = np.concatenate([keys[:, -1], np.take_along_axis(before, old, 1)], 1)  # (B, P+G)
    q_vals = np.concatenate([vals[:, -1], np.full((B, gone), GONE)], 1)
    order = _distinct(rng, B, pairs + gone, pairs + gone)
    parts += [np.full((B, 1), QUERY), _pairs(np.take_along_axis(q_keys, order, 1), np.take_along_axis(q_vals, order, 1))]
    ids = np.concatenate(parts, axis=1)                                      # (B, S(2P+1) + 1 + 2(P+G))
    scored = np.zeros(ids.shape, bool)
    scored[:, ids.shape[1] - 2 * (pairs + gone)::2] = True
    if not gone:
        return _finish(ids, scored, sep=ids == SEP)
    was_gone = scored & (np.concatenate([ids[:, 1:], np.zeros((B, 1), ids.dtype)], 1) == GONE)
    return _finish(ids, scored, sep=ids == SEP, groups={"last": scored & ~was_gone, "gone": was_gone})


def two_timescales(rng: np.random.Generator, B: int, pairs: int, blocks: int, key_pool: int) -> Batch:
    if not pairs <= key_pool <= len(KEY_IDS):
        raise ValueError(f"two_timescales needs pairs <= key_pool <= {len(KEY_IDS)}, got {pairs}, {key_pool}")
    # make_spec bounds a sidecar's or a flag's blocks; this bounds a TaskSpec made directly (the
    # draw is a Python loop per block: 2,000 blocks took 128 s and 3.2 GB before any bound)
    if not 1 <= blocks <= len(KEY_IDS) or 5 + blocks * (4 * pairs + 1) > MAX_LENGTH:
        raise ValueError(f"two_timescales blocks must be in 1..{len(KEY_IDS)} and make at most {MAX_LENGTH:,} "
                         f"tokens, got {blocks} blocks of {pairs} pairs")
    pool = KEY_IDS[_distinct(rng, B, len(KEY_IDS), key_pool)]                # (B, pool): this document's keys
    fact = VALUE_BASE + rng.integers(0, N_VALUES, (B, 1))
    parts, local = [np.full((B, 1), FACT), fact], []
    for _ in range(blocks):
        keys = np.take_along_axis(pool, _distinct(rng, B, key_pool, pairs), 1)        # (B, P): reused keys
        vals = VALUE_BASE + _distinct(rng, B, N_VALUES, pairs)
        order = _distinct(rng, B, pairs, pairs)
        start = sum(p.shape[1] for p in parts) + 1 + 2 * pairs
        local += list(range(start, start + 2 * pairs, 2))
        parts += [np.full((B, 1), SEP), _pairs(keys, vals),
                  _pairs(np.take_along_axis(keys, order, 1), np.take_along_axis(vals, order, 1))]
    parts += [np.full((B, 1), SEP), np.full((B, 1), FACT), fact]
    ids = np.concatenate(parts, axis=1)                                      # (B, 2 + blocks(4P + 1) + 3)
    g_local = np.zeros(ids.shape, bool)
    g_local[:, local] = True
    g_fact = np.zeros(ids.shape, bool)
    g_fact[:, -2] = True
    return _finish(ids, g_local | g_fact, sep=ids == SEP, groups={"local": g_local, "fact": g_fact})


def batch(spec: TaskSpec, rng: np.random.Generator, B: int, corpus=None, split: str = "train") -> Batch:
    """One batch of a task. `corpus` (corpus.Corpus) is needed for text."""
    if spec.name == "mqar" and spec.pairs_min and split == "train":
        counts = [n for n in (spec.pairs_min << i for i in range(8)) if n <= spec.pairs]
        return mqar(rng, B, int(rng.choice(counts)))
    if spec.name == "mqar":
        return mqar(rng, B, spec.pairs)
    if spec.name == "segmented":
        return segmented(rng, B, spec.pairs, spec.segments, spec.gone)
    if spec.name == "two_timescales":
        return two_timescales(rng, B, spec.pairs, spec.segments, spec.key_pool)
    if spec.name == "text":
        return corpus.batch(rng, B, spec.length, split)
    raise ValueError(f"unknown task {spec.name!r} (one of {', '.join(TASKS)})")
