"""One row of a seed figure (parameters, KV cache, chunk size, layer map, MoE sparsity,
memory per sequence) at this step."""
from __future__ import annotations

from .base import TextPanel
from .common import fmt_bytes


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    row = cur.frame(i).figure()
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


class FigurePanel(TextPanel):
    kind = "figure"
    text_form = staticmethod(text_form)
