"""Cache growth: bytes against tokens for the softmax KV cache, the MLA latent cache and the
constant recurrent state, measured from the running model and projected to long context."""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from lineage.arithmetic import batch_per_card, fmt_bytes

from ..widgets.text_box import TextBox
from .base import Panel


@dataclass(frozen=True, eq=False)
class CachePanelView:
    names: list                # every model's name
    bytes: list                # every model's cache and state bytes record (None: a toy memory)
    model: int                 # the model the picture shows
    context: int               # the context projected to
    batch: int | None          # the picture's model: sequences per 141 GB card at that context


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
        batch = batch_per_card(ctx, int(b.per_tok), weights, state_bytes=b.state)
    return CachePanelView(names, records, m, ctx, batch)


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
        if per_tok and not conv_only(b):
            cross = state_b / per_tok
            out.append(f"  at {ctx:,} tokens: cache {fmt_bytes(per_tok * ctx)} vs state {fmt_bytes(state_b)}; "
                       f"crossover at {cross:,.0f} tokens (state is larger before it, cache after)")
        ladder = [n for n in (256, 4096, 65536, 1 << 20) if n <= max(ctx, 256)]
        for n in ladder:
            bar_c = int(min(40, 40 * per_tok * n / max(per_tok * ctx, state_b, 1)))
            bar_s = int(min(40, 40 * state_b / max(per_tok * ctx, state_b, 1)))
            out.append(f"  {n:>9,} cache {'#' * bar_c:<40} state {'=' * bar_s}")
    return out


SERIES = [("orange", "c"), ("blue", "m"), ("green", "s")]       # plotext colour, no-colour marker
LEGEND_COLOURS = ["#ff8700", "#af87ff", "#87d700"]   # as the pro theme draws them
NAMES = ["latent/KV cache", "as plain MHA KV", "recurrent state (constant)"]


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
    MIN_INTERVAL = 0.5          # a plot costs ~13 ms: during playback redraw at most twice a second

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
        t.append(f"\nat {ctx:,} tokens: cache {fmt_bytes(per_tok * ctx)}, as plain MHA {fmt_bytes(b.kv_equiv_per_tok * ctx)}")
        if batch is not None:
            t.append(f"; {batch:,} sequences per 141 GB card")
        # rows as the TextBox wraps them (by words: more than len // width)
        legend_rows = len(t.wrap(self.app.console, width + 2))
        # a panel with a height of its own (rows sharing the screen, maximised): the plot takes
        # what the legend leaves; otherwise a fixed plot and the panel as tall as its content
        fixed = self.has_class("-maximized") or (self.parent is not None and self.parent.has_class("-fill"))
        if fixed:
            key = Text("  ".join(f" ██ {n}" for n in self._names(b)))                 # the key under the plot
            key_rows = len(key.wrap(self.app.console, width + 2))
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

    def _plot(self, b, ctx: int, cross, width: int, height: int):
        """Log-log lines, drawn on log10 values with linear axes (plotext's own log scale
        samples too coarsely for straight lines), ticks labelled in tokens and bytes."""
        import math

        import plotext as plt
        top = math.log10(max(ctx, 10))
        xs = [top * k / (2 * width) for k in range(2 * width + 1)]              # log10(tokens)
        plt.clf()
        plt.plotsize(width, height)
        plt.theme("clear" if self.app.no_color else "pro")
        per_tok = b.per_tok
        lines = [("latent/KV cache", per_tok), ("as plain MHA KV", b.kv_equiv_per_tok)]
        nc = self.app.no_color
        for (label, rate), (colour, mark) in zip(lines, SERIES):
            if rate:
                plt.plot(xs, [math.log10(rate) + x for x in xs], marker=mark if nc else "hd", color=colour)
        if b.state:
            colour, mark = SERIES[2]
            plt.plot(xs, [math.log10(b.state)] * len(xs), marker=mark if nc else "hd", color=colour)
        if b.tokens:
            plt.vline(math.log10(b.tokens))
        if cross and cross > 1:
            plt.vline(math.log10(cross))
        lo = min([math.log10(r) for _, r in lines if r] + [math.log10(b.state or 1)])
        hi = max([math.log10(r) + top for _, r in lines if r] + [math.log10(b.state or 1)])
        yt = [y for y in range(int(lo), int(hi) + 2, max(1, (int(hi) - int(lo)) // 5))]
        plt.yticks(yt, [fmt_bytes(10 ** y) for y in yt])
        xt = list(range(0, int(top) + 1))
        plt.xticks(xt, [f"{10 ** x:,}" if x < 3 else f"{10 ** (x - 3):,}K" for x in xt])
        plt.xlabel("tokens (log); | = now and crossover")
        out = Text.from_ansi(plt.build(), no_wrap=True, overflow="crop")
        out.append("\n")
        for name, (colour, mark), rich in zip(self._names(b), SERIES, LEGEND_COLOURS):
            out.append(f" {mark}{mark} " if nc else " ██ ", style=None if nc else rich)
            out.append(name + "  ")
        return out
