"""Panels as plain text: the `lineage snapshot -o OUT.txt` output, and the reference the
coloured panels are checked against. Shapes and numbers carry the meaning (no colour needed).

Every function takes the frames cursor (for history: decay and routing show recent steps),
the step, the panel's options and a width, and returns lines.
"""
from __future__ import annotations

import numpy as np

from lineage.arithmetic import measured_memory
from lineage.configs import DECAY_MIXERS, STATE_MIXERS

POS = " .+*#@"        # |v| / max in five steps, positive
NEG = " .-=%&"        # the same for negative values
LEGEND = "legend: @ # * + strong..weak positive, & % = - strong..weak negative, . near zero"


def _glyph(x: float, scale: float) -> str:
    if scale <= 0:
        return "."
    r = min(abs(x) / scale, 1.0)
    level = 1 + int(r * 4.999) if r >= 0.05 else 1
    return (POS if x >= 0 else NEG)[level]


def heat_rows(m: np.ndarray, scale: float | None = None, max_cols: int = 64) -> list[str]:
    """A signed glyph map of a 2-D array, one character per cell (columns sub-sampled if wide)."""
    m = np.asarray(m, dtype=np.float64)
    scale = float(np.abs(m).max()) if scale is None else scale
    step = max(1, -(-m.shape[1] // max_cols))
    return ["".join(_glyph(v, scale) for v in row[::step]) for row in m]


def fmt_bytes(n: float) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{int(n)} B"


def _token(i: int) -> str:
    from lineage.tokenizer import ByteTokenizer
    return ByteTokenizer().token_str(i) if 0 <= i < 256 else f"#{i}"


def _model_name(info: dict, m: int) -> str:
    return info["models"][m]["name"] if m < len(info.get("models", [])) else f"model {m}"


def _pick_layer(info: dict, m: int, layer, kinds) -> int | None:
    model = info["models"][m]
    if model["kind"] == "memory":
        return 0
    mixers = model["config"]["mixers"]
    if layer is not None:
        return layer
    return next((i for i, k in enumerate(mixers) if k in kinds), None)


# ------------------------------------------------------------------------------- panels

def tokens(cur, i: int, p: dict, width: int) -> list[str]:
    f = cur.frame(i)
    info = cur.info
    if "event" in f.meta:
        lines = [f"step {i + 1} / {cur.total}: {f.meta['event']}"]
        for m in range(len(info["models"])):
            out = f.get(m, "out")
            if out is not None:
                lines.append(f"  {_model_name(info, m)} reads back: " + " ".join(f"{x:.2f}" for x in out))
        return lines
    # the stream: frames already made are the tokens seen so far
    lo = max(0, i - (width - 20) // 2)
    shown = [cur.frame(j).meta for j in range(lo, i + 1)]
    text = "".join(("[" + m["text"] + "]") if m["pos"] == f.meta["pos"] else m["text"] for m in shown)
    lines = [f"tokens (pos {f.meta['pos']}, {f.meta['source']}): ..." + text[-(width - 30):]]
    if f.meta.get("answer") is not None:
        lines.append(f"  query: the right answer next is {_token(f.meta['answer'])!r}")
    for m in range(len(info["models"])):
        ids, probs = f.get(m, "top_ids"), f.get(m, "top_probs")
        top = "  ".join(f"{_token(int(t))!r} {float(q):.3f}" for t, q in zip(ids[:5], probs[:5]))
        lines.append(f"  {_model_name(info, m)} next: {top}")
    return lines


def state_quantity(f, m: int, layer: int, h: int, q: str) -> np.ndarray:
    """One head's state matrix S (K, V), its last write delta S = k^T u (K, V; u = v for linear
    attention, beta (v - read-back) for the delta rule), or the error v - read-back (V,), in
    float64. Only the quantity asked for is computed."""
    if q == "S":
        return f.get(m, "S", layer)[h].astype(np.float64)
    if q == "dS":
        return f.last_write(m, layer, h)
    v, read = (f.get(m, n, layer)[h].astype(np.float64) for n in ("v", "read"))
    return v - read


def state(cur, i: int, p: dict, width: int) -> list[str]:
    f, info = cur.frame(i), cur.info
    m = p.get("model", 0)
    layer = _pick_layer(info, m, p.get("layer"), STATE_MIXERS)
    if layer is None:
        return [f"state: {_model_name(info, m)} has no recurrent state"]
    h = p.get("head", 0)
    S = f.get(m, "S", layer)
    if S is None:
        return [f"state: layer {layer} holds no state matrix"]
    kind = f.layer_meta(m, layer)["mixer"]
    q = p.get("quantity", "S")
    M = state_quantity(f, m, layer, h, q)
    title = {"S": "S, the state", "dS": "delta S, the last write", "error": "v - read-back, what the write corrects"}[q]
    lines = [f"state: {_model_name(info, m)} layer {layer} ({kind}) head {h}: {title}"]
    if q == "error":
        v = f.get(m, "v", layer)[h].astype(np.float64)
        lines.append("  " + " ".join(f"{x:+.2f}" for x in M[:16]) + (" ..." if M.size > 16 else ""))
        lines.append(f"  |v - read| = {np.linalg.norm(M):.4f}   |v| = {np.linalg.norm(v):.4f}")
        return lines
    lines.append(f"  {M.shape[0]} x {M.shape[1]}, max |value| {np.abs(M).max():.4f}, norm {np.linalg.norm(M):.4f}")
    if M.size <= 64:
        lines += ["  " + " ".join(f"{x:+.3f}" for x in row) for row in M]
    else:
        lines += ["  " + r for r in heat_rows(M, max_cols=width - 4)]
        lines.append("  " + LEGEND)
    return lines


def decay(cur, i: int, p: dict, width: int) -> list[str]:
    info = cur.info
    m = p.get("model", 0)
    layer = _pick_layer(info, m, p.get("layer"), DECAY_MIXERS)
    if layer is None:
        return [f"decay: {_model_name(info, m)} has no gated layer"]
    h = p.get("head", 0)
    span = max(1, min(width - 12, 48))
    cols = []
    for j in range(max(0, i - span + 1), i + 1):
        d = cur.frame(j).get(m, "decay", layer)
        cols.append(np.atleast_1d(d[h]).astype(np.float64) if d is not None else None)
    cols = [c for c in cols if c is not None]
    if not cols:
        return ["decay: no decay recorded"]
    A = np.stack(cols, axis=1)                                           # (channels, recent steps)
    ramp = " .:-=+*#%@"
    lines = [f"decay: {_model_name(info, m)} layer {layer} head {h}: alpha = exp(g) per "
             f"{'channel' if A.shape[0] > 1 else 'head'}, last {A.shape[1]} steps (@ holds, blank clears)"]
    for c, row in enumerate(A):
        lines.append(f"  {c:>3} " + "".join(ramp[min(9, int(a * 9.999))] for a in row) + f"  {row[-1]:.3f}")
    keep = A[:, -1]
    lines.append(f"  now: {int((keep > 0.9).sum())} of {keep.size} rows hold (alpha > 0.9), "
                 f"{int((keep < 0.1).sum())} clear (alpha < 0.1)")
    return lines


def routing(cur, i: int, p: dict, width: int) -> list[str]:
    f, info = cur.frame(i), cur.info
    m = p.get("model", 0)
    cfg = info["models"][m]["config"]
    layer = p.get("layer")
    if layer is None:
        layer = next((j for j, k in enumerate(cfg["ffns"]) if k == "moe"), None)
    if layer is None or cfg["ffns"][layer] != "moe":
        return [f"routing: layer {layer} has no MoE"]
    moe = cfg["moe"]
    E = moe["n_experts"]
    span = max(1, min(width - 12, 40))
    picks = np.zeros((E, 0), dtype=np.int8)
    for j in range(max(0, i - span + 1), i + 1):
        col = np.zeros((E, 1), dtype=np.int8)
        col[cur.frame(j).get(m, "experts", layer), 0] = 1
        picks = np.concatenate([picks, col], axis=1)
    load = f.get(m, "load", layer)
    experts, weights = f.get(m, "experts", layer), f.get(m, "weights", layer)
    lines = [f"routing: {_model_name(info, m)} layer {layer}: {moe['top_k']} of {E} experts per token "
             f"+ {moe['n_shared']} shared (# picked now, + earlier)"]
    for e in range(E):
        now = "#" if e in experts else " "
        row = "".join("+" if x else "." for x in picks[e, :-1]) + now
        lines.append(f"  e{e:<3}{row}  load {int(load[e]) if load is not None else 0}")
    lines.append("  now: " + ", ".join(f"e{int(e)} {float(w):.2f}" for e, w in zip(experts, weights))
                 + (f"; shared share {f.layer_meta(m, layer).get('shared_share', 0):.2f}" if moe["n_shared"] else ""))
    return lines


def depth_table(cur, i: int, p: dict):
    """The attention-residual weights at step i as (title line, column names, rows of (label,
    completed-block weights, partial-sum weight or None)); None for a model without them."""
    f, info = cur.frame(i), cur.info
    m = p.get("model", 0)
    cfg = info["models"][m]["config"]
    if not cfg.get("attnres"):
        return None
    n = len(cfg["mixers"])
    bs = cfg["attnres"]["block_size"]
    rows = []                      # (label, completed-block weights, partial-sum weight or None)
    for layer in range(n):
        for j, part in enumerate(("mixer", "ffn")):
            w = f.get(m, f"attnres{j}", layer)
            if w is None:
                continue
            # the first read of a block comes before anything was added to it: no partial sum yet
            fresh = j == 0 and layer % bs == 0
            rows.append((f"L{layer} {part}", w if fresh else w[:-1], None if fresh else w[-1]))
    final = f.get(m, "attnres_final")
    if final is not None:
        rows.append(("output", final[:-1], final[-1]))
    n_blocks = max(len(b) for _, b, _ in rows)
    names = ["emb"] + [f"b{k}" for k in range(1, n_blocks)] + ["part"]
    title = (f"depth: {_model_name(info, m)} attention residual weights over sources "
             f"(block size {bs}; emb = embedding, bN = completed block N, part = this block so far)")
    return title, names, rows


def depth_cells(blocks, partial, n_blocks: int) -> list[float | None]:
    """One row's cells under the column names: block weights, blanks (None), the partial sum."""
    return [float(x) for x in blocks] + [None] * (n_blocks - len(blocks)) + \
        [None if partial is None else float(partial)]


def depth(cur, i: int, p: dict, width: int) -> list[str]:
    table = depth_table(cur, i, p)
    if table is None:
        return ["depth: no attention residuals in this model"]
    title, names, rows = table
    lines = [title, "  " + " " * 10 + "".join(f"{nm:>6}" for nm in names)]
    for label, blocks, partial in rows:
        cells = depth_cells(blocks, partial, len(names) - 1)
        lines.append(f"  {label:<10}" + "".join(" " * 6 if w is None else f"{w:6.2f}" for w in cells))
    return lines


def cache(cur, i: int, p: dict, width: int) -> list[str]:
    f, info = cur.frame(i), cur.info
    lines = ["cache: memory per sequence, from the running model and projected"]
    for m, model in enumerate(info["models"]):
        if model["kind"] != "lm":
            continue
        b = measured_memory(f.model_meta(m)["layers"], model["config"])
        cache_b, n_tok, state_b = b["latent"] + b["kv"], b["tokens"], b["state"]
        per_tok = cache_b / n_tok if n_tok else 0.0
        lines.append(f"  {model['name']}: {n_tok} tokens cached, cache {fmt_bytes(cache_b)} "
                     f"({per_tok:,.0f} B/token), recurrent state {fmt_bytes(state_b)} (constant)")
        ctx = p.get("context") or 1 << 20
        if per_tok:
            cross = state_b / per_tok
            lines.append(f"  at {ctx:,} tokens: cache {fmt_bytes(per_tok * ctx)} vs state {fmt_bytes(state_b)}; "
                         f"crossover at {cross:,.0f} tokens (state is larger before it, cache after)")
        ladder = [n for n in (256, 4096, 65536, 1 << 20) if n <= max(ctx, 256)]
        for n in ladder:
            bar_c = int(min(40, 40 * per_tok * n / max(per_tok * ctx, state_b, 1)))
            bar_s = int(min(40, 40 * state_b / max(per_tok * ctx, state_b, 1)))
            lines.append(f"  {n:>9,} cache {'#' * bar_c:<40} state {'=' * bar_s}")
    return lines


def captions(cur, i: int, p: dict, width: int) -> list[str]:
    text = cur.frame(i).meta.get("caption")
    return [f"note: {text}"] if text else ["note: (none at this step)"]


LINEAGE_TABLE = [
    ("GPT-2 (2019)", "softmax attention", "KV cache, grows per token", "O(N) per sequence"),
    ("Linear attention", "k^T v added to S", "fixed K x V per head", "interferes as it fills"),
    ("DeltaNet", "corrects what k recalls", "fixed K x V per head", "targeted overwrite"),
    ("Gated DeltaNet", "+ one decay per head", "fixed K x V per head", "erase in bulk"),
    ("KDA (Kimi Linear)", "+ one decay per channel", "fixed K x V per head", "erase row by row"),
    ("MLA", "softmax over a latent", "512 + 64 per token", "compressed cache"),
    ("Kimi K3", "3 KDA : 1 gated MLA, MoE", "state + MLA cache", "hybrid; AttnRes over depth"),
]


def lineage_table(cur, i: int, p: dict, width: int) -> list[str]:
    lines = ["lineage: how memory changed, GPT-2 to K3"]
    for row in LINEAGE_TABLE:
        lines.append("  " + f"{row[0]:<18}{row[1]:<26}{row[2]:<26}{row[3]}"[: width - 2])
    return lines


def recall(cur, i: int, p: dict, width: int) -> list[str]:
    f, info = cur.frame(i), cur.info
    lines = ["recall: every fact written so far, read back with its own key"]
    for m in range(len(info["models"])):
        keys, rec, tgt = f.get(m, "recall_keys"), f.get(m, "recall"), f.get(m, "target")
        if keys is None:
            continue
        lines.append(f"  {_model_name(info, m)}:")
        for key, r, t in zip(keys, rec, tgt):
            err = float(np.linalg.norm(r - t))
            if r.size <= 4:
                shown = " ".join(f"{x:.2f}" for x in r)
            else:  # wide values: name the strongest component and the one it should be
                shown = f"strongest v{int(np.argmax(r))} {r.max():.2f} (want v{int(np.argmax(t))})"
            lines.append(f"    k{int(key):<4} reads {shown:<34} error {err:.2f}")
    return lines


def figure(cur, i: int, p: dict, width: int) -> list[str]:
    row = cur.frame(i).meta.get("figure")
    if row is None:
        return ["figure: none"]
    kind = row["kind"]
    if kind == "param_ratio":
        return [f"parameters: {row['big']} {row['big_params']:,} vs {row['small']} {row['small_params']:,}",
                f"  published {row['published_big']:.3g} / {row['published_small']:.3g} = "
                f"{row['ratio_published']:,} {row['small']}s fit in {row['big']}",
                f"  from our configs: {row['ratio_from_configs']:,.0f}"]
    if kind == "kv_cache":
        lines = [f"KV cache at {row['context']:,} tokens: {fmt_bytes(row['cache_bytes_per_seq'])} per sequence "
                 f"({row['bytes_per_token']:,} B/token); batch {row['batch']:,}"]
        if row["previous_batch"] is not None:
            lines.append(f"  doubling context from {row['context'] // 2:,}: batch {row['previous_batch']:,} -> {row['batch']:,}")
        for c, b in zip(row["contexts"], row["batches"]):
            mark = ">" if c == row["context"] else " "
            lines.append(f" {mark}{c:>10,} {'#' * min(50, max(1, b * 50 // max(row['batches'][0], 1)))} {b:,}")
        return lines
    if kind == "chunk_dial":
        return [f"chunk size {row['chunk']}: {row['flops']:,} FLOPs = state {row['state_flops']:,} "
                f"+ in-chunk {row['intra_flops']:,}", f"  {row['vs64']:.2f}x the arithmetic of chunk 64 "
                f"(L = {row['length']}, d = {row['dim']})"]
    if kind == "layer_map":
        glyph = {"kda": "K", "mla": "M", "softmax": "A", "linear": "L", "deltanet": "D", "gdn": "G"}
        return [f"layer map of {row['preset']} ({row['layers']} layers): "
                + ", ".join(f"{n} {k}" for k, n in row["counts"].items()),
                "  " + "".join(glyph.get(k, "?") for k in row["mixers"]),
                "  " + "".join("d" if k == "dense" else "e" for k in row["ffns"]) + "   (d dense FFN, e experts)"]
    if kind == "moe_sparsity":
        return [f"{row['preset']}: {row['experts']} routed experts, {row['top_k']} active per token "
                f"({row['sparsity']:.0f}:1) + {row['shared']} shared",
                f"  {row['active']:,} of {row['total']:,} parameters active ({100 * row['active_fraction']:.1f}%)"]
    lines = [f"memory per sequence at {row['context']:,} tokens"]
    for r in row["rows"]:
        lines.append(f"  {r['preset']:<18} cache {fmt_bytes(r['cache_bytes']):>12}  state {fmt_bytes(r['state_bytes']):>12}")
    return lines


PANELS = {"tokens": tokens, "state": state, "decay": decay, "routing": routing, "depth": depth, "cache": cache,
          "captions": captions, "lineage": lineage_table, "recall": recall, "figure": figure}


def default_panels(info: dict) -> list[dict]:
    """The scenario's panels, or the one a scenario without a panel list gets."""
    return info.get("panels") or [{"kind": "figure" if info.get("figure") else "tokens"}]


def render(cur, i: int, panel: str | None = None, width: int = 100) -> str:
    """All the scenario's panels at step i (or only those of kind `panel`) as text."""
    panels = default_panels(cur.info)
    if panel is not None:
        chosen = [p for p in panels if p["kind"] == panel] or [{"kind": panel}]
    else:
        chosen = panels
    out = [f"{cur.info['title']} - step {i + 1} / {cur.total}"]
    for p in chosen:
        out.append("")
        out += PANELS[p["kind"]](cur, i, p, width)
    return "\n".join(out) + "\n"
