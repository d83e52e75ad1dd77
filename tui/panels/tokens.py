"""The token stream with the current token marked, and each model's next-token guesses."""
from __future__ import annotations

from rich.style import Style
from rich.text import Text

from .. import palette
from .base import TextPanel
from .common import model_name, token_name


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    f = cur.frame(i)
    info = cur.info
    event = f.event()
    if event is not None:
        lines = [f"step {i + 1} / {cur.total}: {event}"]
        for m in range(len(info["models"])):
            out = f.readout(m)
            if out is not None:
                lines.append(f"  {model_name(info, m)} reads back: " + " ".join(f"{x:.2f}" for x in out))
        return lines
    # the stream: frames already made are the tokens seen so far
    lo = max(0, i - (width - 20) // 2)
    now = f.token()
    shown = [cur.frame(j).token() for j in range(lo, i + 1)]
    text = "".join(("[" + t.text + "]") if t.pos == now.pos else t.text for t in shown)
    lines = [f"tokens (pos {now.pos}, {now.source}): ..." + text[-(width - 30):]]
    if now.answer is not None:
        lines.append(f"  query: the right answer next is {token_name(now.answer)!r}")
    for m in range(len(info["models"])):
        g = f.guesses(m)
        probs = g.probs
        top = "  ".join(f"{_guess_name(g, j)!r} {float(q):.3f}" for j, q in enumerate(probs[:5]))
        lines.append(f"  {model_name(info, m)} next: {top}")
    return lines


def _guess_name(g, j: int) -> str:
    """Guess j as its tokenizer spelled it (a checkpoint's), or by its byte id."""
    return g.texts[j] if g.texts is not None else token_name(int(g.ids[j]))


class TokensPanel(TextPanel):
    kind = "tokens"
    text_form = staticmethod(text_form)
    RICH_PACE = 0.1

    def rich(self, cursor, i: int) -> Text:
        f = cursor.frame(i)
        if f.event() is not None:
            return self._event(cursor, i)
        t = Text()
        width = max(20, self.size.width - 4)
        lo = max(0, i - width + 8)
        for j in range(lo, i + 1):
            tok = cursor.frame(j).token()
            if j == i:
                t.append(tok.text, Style(reverse=True, bold=True))
            else:
                t.append(tok.text, Style(dim=tok.source != "input"))
        now = f.token()
        t.append(f"\npos {now.pos} ({now.source})")
        if now.answer is not None:
            t.append(f"  want next: {token_name(now.answer)!r}", Style(color="#ffaf00"))
        for m, model in enumerate(cursor.info["models"]):
            g = f.guesses(m)
            probs = g.probs
            t.append(f"\n{model['name']}: ")
            for j, q in enumerate(probs[:5]):
                bar = "█" * max(1, int(float(q) * 40))
                t.append(f"{_guess_name(g, j)!r} ", Style(bold=True))
                t.append(bar, Style(color=palette.SEQUENTIAL[min(7, 2 + int(float(q) * 12))]))
                t.append(f" {float(q):.3f}  ")
        return t

    def _event(self, cursor, i: int) -> Text:
        """A toy memory's step: the event, and what each memory read back as one line of
        coloured cells on a scale shared by the memories (long number rows wrapped into a block)."""
        import numpy as np
        f, info = cursor.frame(i), cursor.info
        t = Text(f"step {i + 1} / {cursor.total}: {f.event()}")
        outs = [(model_name(info, m), f.readout(m)) for m in range(len(info["models"]))]
        outs = [(name, np.asarray(out, dtype=np.float64)) for name, out in outs if out is not None]
        if not outs:
            return t
        top = max(float(np.abs(out).max()) for _, out in outs) or 1.0
        for name, out in outs:
            t.append(f"\n{name} reads:\n  ")
            for v in palette.diverging_index(out, top):
                t.append("█", Style(color=palette.DIVERGING[int(v)] if v >= 0 else "#ff00ff"))
            j = int(np.argmax(out))
            t.append(f"  strongest v{j} {out[j]:.2f}")
        t.append(f"\n(one cell per value channel, ±{top:.2f}: blue negative, red positive)", Style(dim=True))
        return t
