"""Cache growth: bytes against tokens for the softmax KV cache, the MLA latent cache and the
constant recurrent state, measured from the running model and projected to long context."""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from lineage.arithmetic import H200_BYTES, batch_per_card, fmt_bytes

from ..widgets.log_chart import Series, chart
from ..widgets.text_box import TextBox
from .base import Panel


@dataclass(frozen=True, eq=False)
class CachePanelView:
    names: list                # every model's name
    bytes: list                # every model's cache and state bytes record (None: a toy memory)
    model: int                 # the model the picture shows
    context: int               # the context projected to
    batch: int | None          # the picture's model: sequences per H200 (141e9 B) at that context


def prepare(cur, i: int, p: dict, width: int) -> CachePanelView:
    f, info = cur.frame(i), cur.info
    names = [model["name"] for model in info["models"]]
    records = [f.cache(m, cur.model_config(m)) if model["kind"] == "lm" else None
               for m, model in enumerate(info["models"])]
    m = p.get("model", 0)
    ctx = int(p.get("context") or 1 << 20)
    b, batch = (records[m] if m < len(records) else None), None
    if b is not None and b.per_tok:
        weights = int(info["models"][m].get("params", 0) * 2)
        batch = batch_per_card(int(b.cache_at(ctx)), weights, state_bytes=b.state)
    return CachePanelView(names, records, m, ctx, batch)


def window_note(b) -> str:
    """Which KV caches stop growing, and where."""
    if b.kv_window:
        return f"sliding window: the KV cache stops growing at {b.kv_window:,} tokens"
    at = ", ".join(f"{W:,}" for W, _ in b.kv_windows)
    return f"sliding windows: the windowed layers' KV stops growing at {at} tokens; the other layers' grows"


def lines(view: CachePanelView, width: int) -> list[str]:
    out = ["cache: memory per sequence, from the running model and projected"]
    ctx = view.context
    for name, b in zip(view.names, view.bytes):
        if b is None:
            continue
        cache_b, n_tok, state_b = b.cache, b.tokens, b.state
        per_tok = cache_b / n_tok if n_tok else 0.0
        out.append(f"  {name}: {n_tok} tokens cached, cache {fmt_bytes(cache_b)} "
                   f"({per_tok:,.0f} B/token), {fixed_part(b)} {fmt_bytes(state_b)} (constant; {b.dtypes})")
        at = b.cache_at if b.windowed else (lambda n: per_tok * n)
        if b.windowed:
            out.append(f"  {window_note(b)}")
        if per_tok and not conv_only(b):
            cross = state_b / per_tok
            out.append(f"  at {ctx:,} tokens: cache {fmt_bytes(at(ctx))} vs state {fmt_bytes(state_b)}; "
                       f"crossover at {cross:,.0f} tokens (state is larger before it, cache after)")
        ladder = [n for n in (256, 4096, 65536, 1 << 20) if n <= max(ctx, 256)]
        for n in ladder:
            bar_c = int(min(40, 40 * at(n) / max(at(ctx), state_b, 1)))
            bar_s = int(min(40, 40 * state_b / max(at(ctx), state_b, 1)))
            out.append(f"  {n:>9,} cache {'#' * bar_c:<40} state {'=' * bar_s}")
    return out


MARKS = ["c", "m", "s"]                                # each series' glyph without colour
# each series' colour, one set for dark themes and one for light, drawn in the chart and its
# key alike: a bright orange or lime vanishes on a light background, a deep one on a dark
COLOURS = {True: ["#ff8700", "#af87ff", "#87d700"], False: ["#af5f00", "#5f00d7", "#008700"]}
NAMES = ["latent/KV cache", "as plain MHA KV", "recurrent state (constant)"]


def key_lines(names: list[str], width: int) -> list[list[int]]:
    """The chart's key, entries laid out in lines of `width`: which entries each line holds.
    An entry is never split over two lines (a key that wraps mid-entry reads as two)."""
    lines, used = [[]], 0
    for k, name in enumerate(names):
        need = len(name) + 5                               # " ██ " + name + a space
        if lines[-1] and used + need > width:
            lines.append([])
            used = 0
        lines[-1].append(k)
        used += need + 1
    return lines


def y_label(exponent: int) -> str:
    """2 ** exponent bytes in the app's one byte formatter's units (KiB, MiB: powers of 2^10),
    whole numbers: a tick is an exact power of two."""
    return fmt_bytes(2 ** exponent).replace(".0 ", " ")


def conv_only(b) -> bool:
    """The fixed part is only short-conv inputs (attention with a short conv): no state
    matrix, so no crossover with the cache to speak of."""
    return bool(b.conv) and b.state == b.conv


def fixed_part(b, short: bool = False) -> str:
    return "short-conv inputs" if conv_only(b) else "state" if short else "recurrent state"


class CachePanel(Panel):
    kind = "cache"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    MIN_INTERVAL = 0.5          # a chart costs 3-20 ms (46x16 to 150x45): during playback redraw at most twice a second
    THEMED = True               # the chart's and its key's colours

    _sized: int | None = None          # the height this panel set on itself (None: the CSS's)

    def compose(self):
        yield TextBox(id="plot")
        yield TextBox(id="legend")

    def draw(self, view: CachePanelView) -> None:
        b = view.bytes[view.model] if view.model < len(view.bytes) else None
        if b is None:
            self.put(self.query_one("#legend", TextBox), "cache: this is a toy memory (no cache)")
            return
        ctx, batch = view.context, view.batch
        per_tok = b.per_tok
        cross = b.state / per_tok if per_tok and not conv_only(b) else None
        width = max(30, (self.content_region.width or 80) - 2)
        t = Text()
        t.append(f"now {b.tokens:,} tokens: cache {fmt_bytes(b.cache)} ({per_tok:,.0f} B/token), "
                 f"{fixed_part(b, short=True)} {fmt_bytes(b.state)} (constant)\ncounted as {b.dtypes}")
        if cross:
            t.append(f"\ncrossover at {cross:,.0f} tokens: state larger before, cache after")
        if b.windowed:
            t.append(f"\n{window_note(b)}")
        t.append(f"\nat {ctx:,} tokens: cache {fmt_bytes(b.cache_at(ctx))}")
        if b.kv_equiv_per_tok:            # only MLA layers have a plain-MHA equivalent to compare
            t.append(f", as plain MHA {fmt_bytes(b.kv_equiv_per_tok * ctx)}")
        if batch is not None:
            # the card in the chart's units: an H200's 141e9 bytes are 131.3 GiB
            t.append(f"; {batch:,} sequences per H200 ({fmt_bytes(H200_BYTES)})")
        # rows as the TextBox wraps them (by words: more than len // width)
        legend_rows = len(t.wrap(self.app.console, width + 2))
        # a panel with a height of its own (rows sharing the screen, maximised): the plot takes
        # what the legend leaves; otherwise a fixed plot and the panel as tall as its content
        fixed = self.has_class("-maximized") or (self.parent is not None and self.parent.has_class("-fill"))
        if fixed:
            key_rows = len(key_lines([self._names(b)[k] for k in self._drawn(b)], width))   # the key under the plot
            # the plot's text is its height plus the newline that ends it before the key
            height = max(6, self.content_region.height - legend_rows - key_rows - 1)
        else:
            height = 16 if width >= 60 else 11
        plot = self._plot(b, ctx, cross, width, height)
        self.put(self.query_one("#plot", TextBox), plot)
        self.put(self.query_one("#legend", TextBox), t)
        if fixed:
            if self._sized is not None:                  # an inline height would beat the CSS's
                self.styles.height, self._sized = None, None
            return
        # grid rows keep the height they first measured; say how tall the content now is
        height = len(plot.plain.split("\n")) + legend_rows + 2
        if self._sized != height:                        # a height set is a relayout: only on a change
            self.styles.height = self._sized = height

    @staticmethod
    def _names(b) -> list[str]:
        return NAMES[:2] + [f"{fixed_part(b)} (constant)"]

    @staticmethod
    def _drawn(b) -> list[int]:
        """The series the chart draws, by index into NAMES: a cache that grows, the plain-MHA
        equivalent where the model has MLA layers, a fixed part that is not zero. The key
        names these only: a softmax model has no MHA line, GPT-2 no state line."""
        return [k for k, v in enumerate((b.per_tok, b.kv_equiv_per_tok, b.state)) if v]

    def _plot(self, b, ctx: int, cross, width: int, height: int):
        """Log-log lines, bytes against tokens: the caches grow as a rate times the tokens, the
        state stays constant; the key under it in the same colours."""
        nc = self.app.no_color
        colours = COLOURS[self.dark]
        names, drawn = self._names(b), self._drawn(b)
        grow = [b.cache_at, lambda x: b.kv_equiv_per_tok * x, lambda x: b.state]   # a sliding window's KV levels off
        series = [Series(names[k], colours[k], MARKS[k], grow[k]) for k in drawn]
        vlines = [x for x in (b.tokens, cross) if x and x >= 1]
        out, _ = chart(series, ctx, vlines, width, height, y_label,
                       ["tokens (log, 1K = 1,000); | = now and crossover", "tokens (log, 1K = 1,000); | now, crossover",
                        "tokens (log, 1K = 1,000)", "tokens (log)"], nc)
        out.append("\n")
        for n, line in enumerate(key_lines([names[k] for k in drawn], width)):
            if n:
                out.append("\n")
            for k in (drawn[j] for j in line):
                out.append(f" {MARKS[k] * 2} " if nc else " ██ ", style=None if nc else colours[k])
                out.append(names[k] + "  ")
        return out
