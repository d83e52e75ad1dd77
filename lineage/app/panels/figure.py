"""One row of a seed figure (parameters, KV cache, chunk size, two facts, layer map, MoE sparsity,
memory per sequence, active parameters, decode traffic) at this step.

The panel spans the whole width of the grid. Tables are laid out to the width they are given and
cropped, never wrapped (a wrapped row breaks the columns below it); fig4 is a plotext curve with
the current chunk marked; the layer map is a coloured strip with its AttnRes blocks under it.
"""
from __future__ import annotations

import math

from rich.text import Text

from lineage.arithmetic import fmt_bytes
from lineage.configs import FFNS, MIXERS
from lineage.figures import SPARSE_BELOW

from .base import TextPanel

# each mixer's glyph and colour come from its descriptor; d and e are the ffn row's
STRIP_COLOURS = {m.glyph: m.colour for m in (*MIXERS.values(), *FFNS.values()) if m.colour}


def _n(x: float) -> str:
    """A count the way the captions write it: 2.78T, 105.4B, 124.4M."""
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.2f}{unit}" if unit == "T" else f"{x / div:.1f}{unit}"
    return f"{x:,.0f}"


def _crop(lines: list[str], width: int) -> list[str]:
    return [line if len(line) <= width else line[: width - 1] + "~" for line in lines]


def prepare(cur, i: int, p: dict, width: int) -> dict | None:
    """The view is the step's figure row (None: none)."""
    return cur.frame(i).figure()


def lines(row: dict | None, width: int) -> list[str]:
    if row is None:
        return ["figure: none"]
    return _crop(FORMS[row["kind"]](row, width), width)


# ------------------------------------------------------------------------------ the forms

def _param_ratio(row, width):
    return [f"parameters: {row['big']} {row['big_params']:,} ({_n(row['big_params'])}) vs {row['small']} "
            f"{row['small_params']:,}",
            f"  published {row['published_big']:.3g} / {row['published_small']:.3g} = "
            f"{row['ratio_published']:,} {row['small']}s fit in {row['big']}",
            f"  from our configs: {row['ratio_from_configs']:,.0f}"]


def _kv_cache(row, width):
    cmp = row.get("compare")
    lines = [f"KV cache at {row['context']:,} tokens: {fmt_bytes(row['cache_bytes_per_seq'])} per sequence",
             f"  all-GQA: {row['layers']} layers x {row['kv_heads']} KV heads x {row['head_dim']} x 2 (K, V) x "
             f"{row['dtype_bytes']} B = {row['bytes_per_token']:,} B/token",
             f"  weights {row['weight_bytes'] / 1e9:,.0f} GB stay put on {row['node_bytes'] / 1e9:,.0f} GB of cards; "
             f"batch {row['batch']:,}"
             + (f" (from {row['previous_batch']:,} at half the context)" if row["previous_batch"] is not None else "")]
    if cmp:
        lines.append(f"  {cmp['preset']} as published: {cmp['bytes_per_token']:,} B/token "
                     f"({cmp['less_per_token']:.1f}x less) + {fmt_bytes(cmp['state_bytes'])} fixed state")
        lines.append(f"    (counted as {cmp['dtypes']})")
    bar_w = max(8, (width - 24) // (2 if cmp else 1) - 8)
    top = max(row["batches"] + (cmp["batches"] if cmp else []) + [1])
    head = f"  {'context':>10}  {'all-GQA batch':<{bar_w + 7}}" + (f"  {cmp['preset']} batch" if cmp else "")
    lines.append(head)
    for j, (c, b) in enumerate(zip(row["contexts"], row["batches"])):
        mark = ">" if c == row["context"] else " "
        cell = f"{'#' * max(1 if b else 0, b * bar_w // top):<{bar_w}} {b:>6,}"
        if cmp:
            b2 = cmp["batches"][j]
            cell += f"  {'=' * max(1 if b2 else 0, b2 * bar_w // top):<{bar_w}} {b2:>6,}"
        lines.append(f" {mark}{c:>10,}  {cell}")
    return lines


def _chunk_dial(row, width):
    m = row["measured"]
    lines = [f"chunk size {row['chunk']}: {row['vs64']:.2f}x the arithmetic of chunk 64 (L = {row['length']}, "
             f"d = {row['dim']})",
             f"  {row['flops']:,} FLOPs per head",
             f"  = state {row['state_flops']:,} + in-chunk {row['intra_flops']:,}"]
    if m:
        j = row["step"]
        lines.append(f"  measured: {m['ms'][j]:,.1f} ms, {m['vs64'][j]:.2f}x the time of chunk 64")
        lines.append(f"  ({m['machine']}, {m['date']}, {m['software']};")
        lines.append(f"  lineage.ops.delta_rule, fp32, {m['heads']} heads)")
        lines.append(f"  token recurrence {m['recurrence_ms']:,.0f} ms; Triton kernel at chunk 64 {m['triton_64_ms']} ms")
    else:
        lines.append("  measured: no measurement at this length and width (BENCHMARKS.md has L = 8192, d = 128)")
    lines.append(f"  {'chunk':>6} {'FLOPs vs 64':>12} {'time vs 64':>11} {'ms':>9}")
    for j, c in enumerate(row["chunks"]):
        t = f"{m['vs64'][j]:>10.2f}x {m['ms'][j]:>9,.1f}" if m and m["ms"][j] is not None else f"{'-':>11} {'-':>9}"
        lines.append(f" {'>' if j == row['step'] else ' '}{c:>6} {row['flops_vs64'][j]:>11.2f}x {t}")
    return lines


def _two_facts(row, width):
    v1, v2 = row["values"]
    lines = [f"two facts, overlap c = {row['cosine']:.2f}, beta = {row['beta']:.2f}, values {v1:g} then {v2:g}",
             f"  {'memory':<36} {'old fact':>8} {'new fact':>8}",
             f"  {'additive S, read k S (no normaliser)':<36} {row['additive_old']:>8.2f} {row['additive_new']:>8.2f}",
             f"  {'linear attention, k S / k z':<36} {row['normalised_old']:>8.2f} {row['normalised_new']:>8.2f}",
             f"  {'delta rule':<36} {row['delta_old']:>8.2f} {row['delta_new']:>8.2f}",
             f"  delta rule's errors: old {row['delta_old_error']:.2f}, new {row['delta_new_error']:.2f}"]
    if row["beta"] == 1:
        # signed, as the formula evaluates: values 1 then 0 read back low (-0.49), not high
        lines.append(f"  at beta = 1 the old fact reads v1 + c (v2 - c v1); c (v2 - c v1) = {row['old_offset_formula']:+.2f}")
    lines.append(f"  {'':1}{'c':>5} {'beta':>5} {'old err':>8} {'new err':>8}")
    for j, r in enumerate(row["curve"]):
        lines.append(f" {'>' if j == row['step'] else ' '}{r['cosine']:>5.2f} {r['beta']:>5.2f} "
                     f"{r['delta_old_error']:>8.2f} {r['delta_new_error']:>8.2f}")
    return lines


def _strip_rows(row, width) -> list[tuple[str, str]]:
    """(label, cells) rows of the layer strip, cut at the same layers so the rows stay aligned."""
    mixers = "".join(MIXERS[k].glyph if k in MIXERS else "?" for k in row["mixers"])
    ffns = "".join(FFNS[k].glyph if k in FFNS else "?" for k in row["ffns"])
    b = row["attnres_block"]
    blocks = ""
    for j, (s, e) in enumerate(row["attnres_blocks"]):
        n = e - s + 1
        blocks += ("[" + f"b{j + 1}".center(n - 2, "-") + "]") if n >= 4 else str((j + 1) % 10) * n
    per_line = max(8, width - 10)
    if b and per_line > b:
        per_line -= per_line % b                     # cut between blocks, not inside one
    out = []
    for s in range(0, len(mixers), per_line):
        out.append((f"{s + 1:>3}-{min(s + per_line, len(mixers)):<3}", mixers[s:s + per_line]))
        out.append(("ffn    ", ffns[s:s + per_line]))
        if blocks:
            out.append(("attnres", blocks[s:s + per_line]))
    return out


def _layer_map_head(row) -> list[str]:
    b = row["attnres_block"]
    return [f"layer map of {row['preset']} ({row['layers']} layers): "
            + ", ".join(f"{n} {k}" for k, n in row["counts"].items()),
            (f"  AttnRes in blocks of {b}: {len(row['attnres_blocks'])} blocks + the embedding"
             if b else "  no AttnRes (a plain residual stream)"),
            "  K KDA (state), M MLA (latent cache), A softmax", "  ffn: d dense, e experts"]


def _layer_map(row, width):
    return _layer_map_head(row) + [f"  {label} {cells}" for label, cells in _strip_rows(row, width - 3)]


def _moe(row, width):
    if not row["experts"]:
        return [f"{row['preset']}: no mixture of experts"]
    verdict = (f"sparse: under {SPARSE_BELOW:.0%} of the weights fire for any one token" if row["sparse"]
               else f"not sparse: over {SPARSE_BELOW:.0%} of the weights fire for every token")
    return [f"{row['preset']}: {row['experts']} routed experts, {row['top_k']} active per token "
            f"({row['sparsity']:.0f}:1) + {row['shared']} shared that see every token",
            f"  {row['active']:,} of {row['total']:,} parameters active",
            f"  ({_n(row['active'])} of {_n(row['total'])}, {100 * row['active_fraction']:.1f}%): {verdict}",
            f"  routed experts work in a latent of {row['latent_dim'] or row['d_model']} (width {row['d_model']} "
            f"down-projected), {_n(row['routed_expert_params'])} each"
            if row["latent_dim"] else f"  routed experts work at the full width {row['d_model']}, "
            f"{_n(row['routed_expert_params'])} each",
            f"  shared experts work at the full width {row['d_model']} (hidden {row['shared_dim']}), "
            f"{_n(row['shared_expert_params'])} each",
            f"  experts hold {_n(row['moe_total'])}, of which {_n(row['moe_active'])} fire per token"]


def _fit(x: float) -> str:
    """How many small models fit, rounded down (as figure 1's 22,580): to whole models from 10,
    to hundredths below (0.037 is 0.03: a rounded 0.04 would be more than fits)."""
    return f"{math.floor(x):,}" if x >= 10 else f"{math.floor(x * 100) / 100:.2f}"


def _active(row, width):
    lines = ["parameters in total and active per token (from the configs; published below each)",
             f"  {'model':<16} {'total':>8} {'active':>8} {'active':>7} {'x gpt2-small':>16} {'x gpt2-xl':>12}"]
    for r in row["rows"]:
        mark = ">" if r["preset"] == row["preset"] else " "
        pairs = [(r["total"], r["active"], "total", "active")]
        if r["published_total"]:
            pairs.append((r["published_total"], r["published_active"], "published_total", "published_active"))
        for j, (tot, act, kt, ka) in enumerate(pairs):
            name = r["preset"] if j == 0 else "  published"
            vs, vx = r["vs"]["gpt2-small"], r["vs"]["gpt2-xl"]
            lines.append(f" {mark if j == 0 else ' '}{name:<16} {_n(tot):>8} {_n(act):>8} {100 * act / tot:>6.1f}% "
                         f"{_fit(vs[kt]):>8}/{_fit(vs[ka]):<7} {_fit(vx[kt]):>6}/{_fit(vx[ka]):<5}")
    lines.append(f"  (x columns: total / active over gpt2-small {row['smalls']['gpt2-small']:,} "
                 f"and gpt2-xl {row['smalls']['gpt2-xl']:,},")
    lines.append("   published over 124M and 1.5B; rounded down, to whole models from 10, to hundredths below)")
    return lines


def _decode(row, width):
    lines = [f"one decoding step at {row['context']:,} tokens of context, bytes moved per sequence",
             f"  {'model':<16} {'cache read':>11} {'state r+w':>11} {'total':>11} {'us @4.14TB/s':>13} {'equal at':>10}"]
    for r in row["rows"]:
        eq = f"{r['equal_at']:,.0f}" if r["equal_at"] else "-"
        lines.append(f"  {r['preset']:<16} {fmt_bytes(r['cache_read']):>11} {fmt_bytes(r['state_read_write']):>11} "
                     f"{fmt_bytes(r['per_sequence']):>11} {r['us_per_sequence']:>13,.1f} {eq:>10}")
    lines.append("  'equal at': the context where reading the cache costs what the state's read and write do")
    lines.append("  weights read once per step for the whole batch (active parameters, bf16):")
    lines += [f"    {r['preset']:<16} {fmt_bytes(r['weights_per_step']):>11}" for r in row["rows"]]
    lines.append(f"  counted as {row['rows'][-1]['dtypes']}")
    return lines


def _memory(row, width):
    lines = [f"memory per sequence at {row['context']:,} tokens (cache bf16; state fp32, and bf16 beside it)",
             f"  {'model':<16} {'cache':>10} {'state':>10} {'(bf16)':>10} {'crossover':>10} {'(bf16)':>8}"]
    for r in row["rows"]:
        x32 = f"{r['crossover']:,.0f}" if r["crossover"] else "-"
        x16 = f"{r['crossover_bf16']:,.0f}" if r["crossover_bf16"] else "-"
        lines.append(f"  {r['preset']:<16} {fmt_bytes(r['cache_bytes']):>10} {fmt_bytes(r['state_bytes']):>10} "
                     f"{fmt_bytes(r['state_bytes_bf16']):>10} {x32:>10} {x16:>8}")
    for r in row["rows"]:
        if r["cache_saving"]:
            lines.append(f"  {r['preset']}: {r['bytes_per_token']:,} B/token against {r['all_mla_per_token']:,} "
                         f"with MLA on every layer: {100 * r['cache_saving']:.0f}% less cache")
    lines.append("  Kimi Linear reports (three different measures, not one gain):")
    lines += [f"    - {c}" for c in row["claims"]]
    return lines


FORMS = {"param_ratio": _param_ratio, "kv_cache": _kv_cache, "chunk_dial": _chunk_dial, "two_facts": _two_facts,
         "layer_map": _layer_map, "moe_sparsity": _moe, "active_ratio": _active, "decode_bytes": _decode,
         "memory_table": _memory}


# --------------------------------------------------------------------------- the pictures

def chunk_plot(row, width: int, height: int, no_color: bool) -> str:
    """FLOPs and measured time against chunk size, both relative to chunk 64, on log axes (drawn
    as log10 values on linear axes, ticks labelled), the current chunk a vertical line."""
    import plotext as plt
    xs = [math.log2(c) for c in row["chunks"]]
    plt.clf()
    plt.plotsize(width, height)
    plt.theme("clear" if no_color else "pro")
    plt.plot(xs, [math.log10(v) for v in row["flops_vs64"]], marker="f" if no_color else "hd",
             color="orange", label="FLOPs vs chunk 64")
    m = row["measured"]
    if m:
        pts = [(x, math.log10(t)) for x, t in zip(xs, m["vs64"]) if t == t]
        plt.plot([p[0] for p in pts], [p[1] for p in pts], marker="t" if no_color else "hd", color="green",
                 label=f"time vs chunk 64 ({m['machine']}, {m['date']})")
    plt.vline(xs[row["step"]])
    plt.xticks(xs, [str(c) for c in row["chunks"]])
    ys = [math.log10(v) for v in row["flops_vs64"]] + ([math.log10(t) for t in m["vs64"] if t == t] if m else [])
    yt = list(range(math.floor(min(ys)), math.ceil(max(ys)) + 1))
    plt.yticks(yt, [f"{10 ** y:g}x" for y in yt])
    plt.xlabel(f"chunk size (log); | = chunk {row['chunk']}")
    return plt.build()


class FigurePanel(TextPanel):
    kind = "figure"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    DEFAULT_CSS = """
    FigurePanel { column-span: 3; }
    FigurePanel #body { text-wrap: nowrap; text-overflow: clip; }
    TextPanel.-figure { max-height: 60; }
    """

    def rich(self, row: dict | None) -> Text | None:
        if row is None:
            return None
        width = max(40, (self.content_region.width or 100) - 3)    # room for a scrollbar: never wrap
        if row["kind"] == "layer_map":
            out = Text("\n".join(_crop(_layer_map_head(row), width)) + "\n", no_wrap=True, overflow="crop")
            for label, cells in _strip_rows(row, width - 3):
                out.append(f"  {label} ")
                for ch in cells:
                    out.append(ch, style=STRIP_COLOURS.get(ch, "bold" if ch in "[]-" else None))
                out.append("\n")
            return out
        lines = self.lines(row, width)
        if row["kind"] == "chunk_dial":
            table = next(j for j, line in enumerate(lines) if line.split()[:2] == ["chunk", "FLOPs"])
            plot = Text.from_ansi(chunk_plot(row, width, self._plot_height(table), False), no_wrap=True, overflow="crop")
            out = Text("\n".join(lines[:table]) + "\n", no_wrap=True, overflow="crop")
            out.append_text(plot)
            return out
        out = Text("\n".join(lines), no_wrap=True, overflow="crop")
        out.highlight_regex(r"(?m)^ >.*$", "bold reverse")        # the slider's current row
        if row["kind"] == "kv_cache":         # the two batches' bars in the two series' colours
            out.highlight_regex(r"#+", "#ff8700")
            out.highlight_regex(r"(?<=  )=+(?= )", "#87d700")
        return out

    def _plot_height(self, text_rows: int) -> int:
        """14 rows in the grid; maximised, the plot takes the screen's rows that the text above
        it, the timeline, the caption bar and the footer leave (up to 48)."""
        screen = self.screen
        if getattr(screen, "maximized", None) is not self:
            return 14
        bars = sum(w.outer_size.height for w in screen.query("#captionbar, #slidehead, Timeline, KeysFooter")
                   if w.display)
        return max(14, min(48, screen.size.height - bars - text_rows - 4))

    def draw(self, row: dict | None) -> None:
        super().draw(row)
        body = self.query_one("#body")
        if self.has_class("-maximized"):
            return                               # maximised: the CSS's 1fr, the whole height
        rows = len(str(body.shown.plain if hasattr(body.shown, "plain") else body.shown).split("\n"))
        if self.styles.height is None or self.styles.height.value != rows + 2:
            self.styles.height = rows + 2        # grid rows keep their first height: say the new one
