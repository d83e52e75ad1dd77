"""The token stream with the current token marked, and each model's next-token guesses."""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np
from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

from .. import palette
from .base import TextPanel
from .common import finite, model_name, token_label, token_name


@dataclass(frozen=True, eq=False)
class TokensPanelView:
    step: int
    total: int
    event: str | None          # a toy memory's step: what happened (then `readouts`, no tokens)
    readouts: list             # [(memory name, what it read back)]
    first: int                 # the step of tokens[0]
    tokens: tuple              # the token records of recent steps, the last one this step's
    guesses: list              # [(model name, its next-token guesses)]
    rows: int = 1              # lines of the stream: 1 in the app, a block on a slide (more context)


def prepare(cur, i: int, p: dict, width: int) -> TokensPanelView:
    f, info = cur.frame(i), cur.info
    names = [model_name(info, m) for m in range(len(info["models"]))]
    event = f.event()
    if event is not None:
        outs = [(name, f.readout(m)) for m, name in enumerate(names)]
        return TokensPanelView(i, cur.total, event, [(n, o) for n, o in outs if o is not None], i, (), [])
    rows = max(1, int(p.get("stream_lines", 1)))
    first = max(0, i - max(width, 20) * rows)   # as many as either form shows at this width
    tokens = _tokens(cur, first, i + 1, rows > 1)
    return TokensPanelView(i, cur.total, None, [], first, tokens,
                           [(name, f.guesses(m)) for m, name in enumerate(names)], rows)


# cursor -> {step: its token}: a slide's block reads up to six times the frames a line does,
# at every width its picture tries, from a trace's file; kept while the cursor lives
_SLIDE_TOKENS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _tokens(cur, lo: int, hi: int, keep: bool) -> tuple:
    if not keep:
        return tuple(cur.frame(j).token() for j in range(lo, hi))
    seen = _SLIDE_TOKENS.setdefault(cur, {})
    for j in range(lo, hi):
        if j not in seen:
            seen[j] = cur.frame(j).token()
    return tuple(seen[j] for j in range(lo, hi))


def lines(view: TokensPanelView, width: int) -> list[str]:
    i = view.step
    if view.event is not None:
        out = [f"step {i + 1} / {view.total}: {view.event}"]
        out += [f"  {name} reads back: " + " ".join(f"{x:.2f}" for x in o) for name, o in view.readouts]
        return out
    # the stream: frames already made are the tokens seen so far
    lo = max(view.first, i - (width - 20) // 2)
    now = view.tokens[-1]
    shown = view.tokens[lo - view.first:]
    text = "".join(("[" + t.text + "]") if t.pos == now.pos else t.text for t in shown)
    out = [f"tokens (pos {now.pos}, {now.source}): ..." + text[-(width - 30):]]
    if now.answer is not None:
        out.append(f"  query: the right answer next is {_answer(now.answer)}")
    for name, g in view.guesses:
        top = "  ".join(f"{_guess_label(g, j)} {float(q):.3f}" for j, q in enumerate(g.probs[:5]))
        out.append(f"  {name} next: {top}")
    return out


def block(view: TokensPanelView, width: int) -> list[tuple[int, object]]:
    """The stream as a block of up to view.rows lines of `width` cells, the last token last:
    [(step, token)], a (step, None) between lines. Lines break between tokens, so a word a
    checkpoint spells as one token is never cut in two; a stream shorter than the block starts
    at its first line's start."""
    def wrap(lo: int) -> list[list]:
        lines, line, room = [], [], width
        for j in range(lo, view.step + 1):
            tok = view.tokens[j - view.first]
            n = cell_len(tok.text)
            if n > room and line:
                # a byte-level stream breaks at a space; a token starting with one breaks before it
                cut = len(line) if len(tok.text) > 1 and tok.text.startswith(" ") else _word_end(line)
                lines.append(line[:cut])
                line = line[cut:]
                room = width - sum(cell_len(t.text) for _, t in line)
                if n > room and line:                 # the word carried over and this token overflow the line
                    lines.append(line)
                    line, room = [], width
            line.append((j, tok))
            room -= n
        return lines + [line]
    lo, cells = view.step, cell_len(view.tokens[-1].text)     # the oldest step the block can hold, newest first
    while lo > view.first and cells + cell_len(view.tokens[lo - 1 - view.first].text) <= width * view.rows:
        lo -= 1
        cells += cell_len(view.tokens[lo - view.first].text)
    lines = wrap(lo)[-view.rows:]              # wrapping loses room at line ends: the oldest go
    out = []
    for k, line in enumerate(lines):
        if k:
            out.append((line[0][0], None))
        out.extend(line)
    return out


WORD = 16                        # the longest word carried whole to the next line, in cells


def _word_end(line: list) -> int:
    """Where a full line breaks: at its last space (after a byte-level ' ', before a checkpoint's
    ' word') if that carries at most WORD cells to the next line, else at its end."""
    carried = 0
    for k in range(len(line) - 1, 0, -1):
        text = line[k][1].text
        if text.endswith(" "):
            return k + 1
        carried += cell_len(text)
        if carried > WORD:
            break
        if text.startswith(" "):
            return k
    return len(line)


def _guess_label(g, j: int) -> str:
    """Guess j quoted, as its tokenizer spelled it (a checkpoint's) or by its byte id, with the
    attention panel's visible signs: a newline is '⏎', not '\\n' (repr of an escape's name)."""
    if g.texts is not None:
        return f"'{token_label(g.texts[j], byte_names=False)}'"
    return f"'{token_label(token_name(int(g.ids[j])))}'"


def _answer(i: int) -> str:
    return f"'{token_label(token_name(i))}'"


# a guess's bar colour spans probabilities 1/64 .. 1 by ratio: a model's top guesses mostly lie
# between 0.05 and 0.3, which an even split of 0..1 would draw in one colour on a light theme
BAR_OCTAVES = 6


def bar_step(q: float, dark: bool = True) -> int:
    """The sequential step of a guess's bar at probability q, among the steps that read on the
    theme's page (six on a dark one, three on a light one): each step a like factor in q, 2 on
    a dark theme and 4 on a light one, so 1/64 .. 1 spans all of them on either."""
    steps = palette.inked("sequential", dark)
    if q <= 0:
        return steps[0]
    below = int(-math.log2(min(q, 1.0)) * len(steps) / BAR_OCTAVES)    # steps below the last
    return steps[max(0, len(steps) - 1 - below)]


class TokensPanel(TextPanel):
    kind = "tokens"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    RICH_PACE = 0.1
    THEMED = True
    REFLOWS = True

    def rich(self, view: TokensPanelView) -> Text:
        if view.event is not None:
            return self._event(view)
        i, dark = view.step, self.dark
        bars = palette.colours("sequential", dark)
        t = Text()
        width = max(20, self.size.width - 4)
        lo = max(view.first, i - width + 8)
        for j, tok in block(view, width) if view.rows > 1 else enumerate(view.tokens[lo - view.first:], start=lo):
            if tok is None:
                t.append("\n")
            elif j == i:
                t.append(tok.text, Style(reverse=True, bold=True))
            else:
                t.append(tok.text, Style(dim=tok.source != "input"))
        now = view.tokens[-1]
        t.append(f"\npos {now.pos} ({now.source})")
        if now.answer is not None:
            t.append(f"  want next: {_answer(now.answer)}", Style(color=palette.MARK[dark]))
        for name, g in view.guesses:
            t.append(f"\n{name}: ")
            for j, q in enumerate(g.probs[:5]):
                q = finite(q, f"{name}'s guess probability")            # a bar's length
                bar = "█" * max(1, int(q * 40))
                t.append(f"{_guess_label(g, j)} ", Style(bold=True))
                t.append(bar, Style(color=bars[bar_step(q, dark)]))
                t.append(f" {q:.3f}  ")
        return t

    def _event(self, view: TokensPanelView) -> Text:
        """A toy memory's step: the event, and what each memory read back as one line of
        coloured cells on a scale shared by the memories (long number rows wrapped into a block)."""
        t = Text(f"step {view.step + 1} / {view.total}: {view.event}")
        outs = [(name, np.asarray(out, dtype=np.float64)) for name, out in view.readouts]
        if not outs:
            return t
        top = max(float(np.abs(out).max()) for _, out in outs) or 1.0
        dark = self.dark                  # the maps' scale: near zero is near the page
        for name, out in outs:
            t.append(f"\n{name} reads:\n  ")
            for v in palette.diverging_index(out, top):
                t.append("█", Style(color=palette.colour(int(v), "diverging", dark)))
            j = int(np.argmax(out))
            t.append(f"  strongest v{j} {out[j]:.2f}")
        t.append(f"\n(one cell per value channel, ±{top:.2f}: blue negative, red positive)", Style(dim=True))
        return t
