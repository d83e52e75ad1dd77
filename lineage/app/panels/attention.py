"""Per head, the weights this token puts on every earlier position, under their tokens: a KV
cache's softmax weights (each row sums to 1), or a recurrent layer's effective attention (signed:
the exact weights its state's read-out gives each value written). What a KV cache (GPT-2's, MLA's
latent one) is read for, beside the fixed states that replace it.

Rows are heads, columns positions 0 .. pos, newest right (the last column is this token itself).
When the positions outnumber the columns, the newest ones are shown and the rest are folded into
one number per head at the left: their summed weight, so every row on screen still adds up to 1.

A recurrent layer (linear attention, the delta family, Mamba-2) has no cache to read, but its
read-out is still a weighted sum of the values written: its rows are the attention its state
implements (lineage.playback.effective), signed on the state panel's colour scale (the delta
rule's corrections are negative weight), over a window of the last positions. The number at the
left is then the share of the read-out that comes from what the state held before the positions
drawn, so the drawn positions' shares and it add up to the whole read-out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

from lineage.escapes import visible

from .. import palette
from .base import Absent, TextPanel
from .common import layers_of, model_name
from .common import token_label as label

TOP = 3                  # the largest weights each head lists
MAX_HEADS = 16           # head rows at once; more heads: a window that follows the picked head
LABEL_LINES = 6          # a label is read downwards, a character a line; a longer one is cut with …
FOLD = 5                 # the fold's number and mark, "0.12◂"
RAMP = " .:-=+*#%@"      # without colour: 0 .. the largest weight shown
PREFILLED = "░"          # a position the prefill made: no frame names its token
WIDE = "▪"               # a character two cells wide, in a one-cell column


@dataclass(frozen=True, eq=False)
class AttentionPanelView:
    name: str                  # the model's
    model: int
    layer: int
    layers: tuple              # the layers the picker steps through
    mixer: str
    head: int                  # the picked head (, .): marked; the head window follows it
    heads: int
    step: int
    pos: int                   # this token's position: the rows cover positions 0 .. pos
    token: str                 # this token, labelled
    first_head: int            # the first head row shown
    weights: np.ndarray        # (shown heads, shown positions) float64: positions first .. pos
    first: int                 # the first position shown; the `first` positions before it are folded
    labels: tuple              # the token label of each shown position
    hidden: np.ndarray         # (shown heads,) the summed weight on the folded positions
    tops: tuple                # per shown head: ((position, label, weight, share), ...), its TOP largest
                               # anywhere; share: (signed) that position's share of the read-out, else None
    cw: int                    # columns a position takes on screen
    width: int                 # the characters a line has (the top weights go beside the rows if they fit)
    prefilled: int             # positions 0 .. prefilled - 1 came from the prefill (labels "?")
    signed: bool = False       # a state's effective attention: hidden is a share of the read-out

    @property
    def vmax(self) -> float:
        """The top of the colour (glyph) scale: the largest weight shown (in size, when signed)."""
        return float(np.abs(self.weights).max()) if self.weights.size else 0.0

    @property
    def fold(self) -> bool:
        """A number at the left of each row: the folded weight, or (signed) the share before."""
        return bool(self.first) or self.signed


def prepare(cur, i: int, p: dict, width: int):
    m = p.get("model", 0)
    name = model_name(cur.info, m)
    layers, layer = layers_of(cur, p, "attention")
    if layer is None:
        return Absent(f"attention: {name} has no sequence-mixing layer to show",
                      "no layer here mixes positions (softmax, MLA or a recurrent state)")
    f = cur.frame(i)
    rows, tok = f.attention(m, layer), f.token()
    if rows is None or tok is None:
        return Absent(f"attention: layer {layer} of {name} recorded no attention rows at step {i + 1}",
                      f"layer {layer} recorded no attention rows at this step (a checkpoint's recurrent "
                      "layers have them only where the scenario has an attention panel on the model, and "
                      "only for the layers its panels watch)")
    W = rows.weights.astype(np.float64)                                  # (H, L), L = pos + 1 (signed: up to)
    H, L = W.shape
    signed = rows.before is not None
    start = tok.pos + 1 - L if signed else 0                             # the position of column 0
    if (L != tok.pos + 1 and not signed) or start < 0:
        raise ValueError(f"layer {layer}'s attention covers {L} positions; position {tok.pos} needs {tok.pos + 1}")
    h = min(max(int(p.get("head", 0)), 0), H - 1)
    lo = 0 if H <= MAX_HEADS else min(max(0, h - MAX_HEADS // 2), H - MAX_HEADS)
    W = W[lo:lo + MAX_HEADS]                                             # (shown heads, L)
    byte_names = "pretrained" not in cur.info["models"][m]
    prefilled = tok.pos - i                                              # frame j holds position prefilled + j

    def named(q: int) -> str:
        j = q - prefilled
        return PREFILLED if j < 0 else label(cur.frame(j).token().text, byte_names)

    shares = rows.shares[lo:lo + MAX_HEADS].astype(np.float64) if signed else None   # (shown heads, L)
    tops = tuple(tuple((start + int(q), named(start + int(q)), float(row[q]),
                        None if shares is None else float(shares[n, q]))
                       for q in np.argsort(-np.abs(row), kind="stable")[:TOP]) for n, row in enumerate(W))
    # columns: two a position if all fit so with the top weights beside the rows, else one; then
    # two without them, one; too many positions for one each: the newest, the rest folded
    room = max(20, width - 4) - (2 + len(str(H - 1)) + 1)             # less the row's "▸h0 "
    side = 2 + max(len(_top(t[:2])) for t in tops)
    if signed:
        room -= FOLD                                                     # the share before: always drawn
    cw, first = next(((c, 0) for need, c in ((2 * L + side, 2), (L + side, 1), (2 * L, 2), (L, 1)) if need <= room),
                     (1, L - max(1, room - FOLD)))
    if signed:      # the share of the read-out from before the first position drawn
        hidden = rows.before[lo:lo + MAX_HEADS].astype(np.float64) + shares[:, :first].sum(axis=1)
    else:
        hidden = W[:, :first].sum(axis=1)
    return AttentionPanelView(name, m, layer, tuple(layers), cur.model_config(m).mixers[layer], h, H, i,
                              tok.pos, label(tok.text, byte_names), lo, W[:, first:], start + first,
                              tuple(named(start + q) for q in range(first, L)), hidden, tops, cw,
                              max(20, width - 4), max(0, prefilled), signed)


# -- the text both forms share --------------------------------------------------------------
def _gutter(view: AttentionPanelView, hh: int) -> str:
    return f"{'▸' if hh == view.head else ' '}h{hh:<{len(str(view.heads - 1))}} "


def _pad(view: AttentionPanelView) -> str:
    return " " * (len(_gutter(view, 0)) + (FOLD if view.fold else 0))


def _vertical(lab: str) -> list[str]:
    """A label as the characters of one column, top down (a wide character as WIDE)."""
    if len(lab) > LABEL_LINES:
        lab = lab[:LABEL_LINES - 1] + "…"
    return [c if cell_len(c) == 1 else WIDE for c in lab]


def head_lines(view: AttentionPanelView) -> list[str]:
    if view.signed:
        return [f"attention: {view.name} layer {view.layer} {view.mixer}, step {view.step + 1}: "
                f"'{view.token}' at position {view.pos}",
                f"  the attention its state implements: each value's weight in the read-out, signed "
                f"({view.first}-{view.pos})",
                f"  ◂ the read-out's share held before position {view.first}; with the drawn shares it adds up to 1"]
    if not view.first:
        shown = f"all {view.pos + 1} shown"
    else:
        shown = f"{view.first}-{view.pos} shown; the {view.first} before them hold the weight before ◂"
    return [f"attention: {view.name} layer {view.layer} {view.mixer}, step {view.step + 1}: "
            f"'{view.token}' at position {view.pos}",
            f"  a row per head over positions 0-{view.pos}, each summing to 1; {shown}"]


def _top(entries) -> str:
    """'token'@position weight; a state's weights (no scale of 1 to read them on) in two significant
    digits, with the share of the read-out that position gives: "'r'@12 +0.0070 (69%)"."""
    def one(q, lab, w, share) -> str:
        if share is None:
            return f"'{lab}'@{q} {w:+.2f}" if w <= -0.005 else f"'{lab}'@{q} {abs(w):.2f}"
        return f"'{lab}'@{q} {_signed(w)} ({100 * share:.0f}%)".replace("(-0%)", "(0%)")
    return ", ".join(one(*e) for e in entries)


def _signed(x: float) -> str:
    """A state's weight in two significant digits, at most four decimals: +0.0070, -0.045, +1.2."""
    if x == 0 or not np.isfinite(x):
        return f"{x:+.2f}"
    digits = min(4, max(2, 1 - int(np.floor(np.log10(abs(x))))))
    text = f"{x:+.{digits}f}"
    return "0.0000" if float(text) == 0 else text


def beside(view: AttentionPanelView) -> int:
    """How many top weights go at the right of every head row (at least 2, else 0: below the map)."""
    row = len(_gutter(view, 0)) + (FOLD if view.fold else 0) + view.cw * len(view.labels) + 2
    fits = [k for k in range(TOP, 1, -1) if all(row + len(_top(t[:k])) <= view.width for t in view.tops)]
    return fits[0] if fits else 0


def label_lines(view: AttentionPanelView) -> list[str]:
    cols = [_vertical(lab) for lab in view.labels]
    n = max((len(c) for c in cols), default=0)
    pad = _pad(view)
    return [pad + "".join((c[k] if k < len(c) else " ").ljust(view.cw) for c in cols) for k in range(n)]


def tick_line(view: AttentionPanelView) -> str:
    """Position numbers under their columns: every 10th (5th with two columns a position)."""
    every = 5 if view.cw == 2 else 10
    line = ""
    for q in range(view.first, view.pos + 1):
        x = (q - view.first) * view.cw
        if q % every == 0 and len(line) <= x - (1 if line else 0):
            line = line.ljust(x) + str(q)
    return _pad(view) + line


SIGN_NAMES = (("⏎", "newline"), ("⇥", "tab"), ("⇤", "CR"), ("␣", "space"))


def key_line(view: AttentionPanelView) -> str:
    drawn = "".join("".join(_vertical(lab)) for lab in view.labels)
    signs = [f"{s} {what}" for s, what in SIGN_NAMES if s in drawn]
    if any(re.fullmatch("<[0-9A-F]{2}>", lab) for lab in view.labels):
        signs.append("<XX> a byte")
    if view.first < view.prefilled:
        signs.append(f"{PREFILLED} prefilled")
    if WIDE in drawn:
        signs.append(f"{WIDE} a wide character")
    if any(len(lab) > LABEL_LINES for lab in view.labels):
        signs.append("… cut")
    down = ["read down"] if any(len(lab) > 1 for lab in view.labels) else []
    notes = ", ".join(down + signs)
    return f"{_pad(view)}↑ position, under its token" + (f" ({notes})" if notes else "")


def top_lines(view: AttentionPanelView) -> list[str]:
    out = []
    if not beside(view):
        out.append(f"  top weights, {_as(view)}:")
        out += [f"  h{view.first_head + n}: " + _top(top) for n, top in enumerate(view.tops)]
    if len(view.tops) < view.heads:
        last = view.first_head + len(view.tops) - 1
        out.append(f"  heads {view.first_head}-{last} of {view.heads} shown (, . picks a head; the rows follow it)")
    if view.prefilled:
        out.append(f"  positions 0-{view.prefilled - 1} were prefilled before step 1: no frame names their tokens "
                   f"({PREFILLED})")
    return out


def _as(view: AttentionPanelView) -> str:
    return "'token'@position weight" + (" (its share of the read-out)" if view.signed else "")


def beside_line(view: AttentionPanelView) -> list[str]:
    k = beside(view)
    return [f"  beside each row: its top {k} weights, as {_as(view)}"] if k else []


def lines(view, width: int) -> list[str]:
    """The text form. `width` is the caller's; the view was laid out for its own (view.width)."""
    if isinstance(view, Absent):
        return [view.text]
    vmax, k = view.vmax, beside(view)
    out = head_lines(view)
    for n, row in enumerate(view.weights):
        fold = _fold(view.hidden[n]) if view.fold else ""
        cells = "".join(g * view.cw for g in _glyphs(row, vmax, view.signed))
        out.append(_gutter(view, view.first_head + n) + fold + cells + (f"  {_top(view.tops[n][:k])}" if k else ""))
    out += label_lines(view)
    out += [tick_line(view), key_line(view)]
    if view.signed:
        out.append(f"  scale '{palette.NEG[-1]}' {_signed(-vmax)} .. '{palette.POS[0]}' 0 .. '{palette.POS[-1]}' "
                   f"{_signed(vmax)} (largest shown)")
    else:
        out.append(f"  scale '{RAMP[0]}' 0 .. '{RAMP[-1]}' {vmax:.2f} (largest shown)")
    return out + beside_line(view) + top_lines(view)


def _fold(x: float) -> str:
    """The number left of a row, in FOLD - 1 characters and its mark: '0.12◂', '-.31◂'."""
    x = 0.0 if abs(x) < 0.005 else x                     # no "-.00" for a share that rounds to zero
    text = f"{x:.2f}" if -0.995 < x < 9.995 else f"{x:.1f}" if -9.95 < x < 99.95 else f"{x:.0f}"
    text = text.replace("-0.", "-.")                     # -0.31 in four characters
    return f"{text[:FOLD - 1]:>{FOLD - 1}}◂"


def _glyphs(row: np.ndarray, vmax: float, signed: bool) -> list[str]:
    """Without colour: a weight's glyph, on the ramp or (signed) the state panel's two ramps."""
    if not signed:
        return [RAMP[int(g)] for g in _steps(row, vmax, len(RAMP) - 1)]
    steps = _steps(np.abs(row), vmax, len(palette.POS) - 1)
    return [(palette.NEG if x < 0 else palette.POS)[int(g)] for x, g in zip(row, steps)]


def _steps(row: np.ndarray, vmax: float, n: int) -> np.ndarray:
    """Each weight's step on a scale of n + 1 from 0 to vmax (the glyph ramp)."""
    return np.clip(np.rint(row / max(vmax, 1e-12) * n), 0, n).astype(np.int64)


class AttentionPanel(TextPanel):
    kind = "attention"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    pickable = True            # [ ] layer, , . head, as on the state and decay panels
    RICH_PACE = 0.1
    THEMED = True
    DEFAULT_CSS = "TextPanel.-attention { max-height: 40; }"

    def draw(self, view) -> None:
        if not isinstance(view, Absent):
            self.set_title(f"attention · {view.name} · L{view.layer} {view.mixer} · {view.heads} heads · "
                           f"'{view.token}' at position {view.pos}")
            self.key_hints("[ ] layer  , . head")
        super().draw(view)

    def rich(self, view) -> Text:
        """The text form with the glyph rows drawn as coloured cells, the glyph scale as a colour bar."""
        if isinstance(view, Absent):
            return Text(view.legend)
        vmax, k, dark = view.vmax, beside(view), self.dark
        t = Text("\n".join(head_lines(view)))
        for n, row in enumerate(view.weights):
            hh = view.first_head + n
            t.append("\n")
            t.append(_gutter(view, hh), Style(bold=True, reverse=True) if hh == view.head else Style(bold=True))
            if view.fold:
                t.append(_fold(view.hidden[n]), Style(dim=True))
            if view.signed:
                for g in palette.diverging_index(row, vmax):
                    t.append(" " * view.cw, Style(bgcolor=palette.colour(int(g), "diverging", dark)))
            else:
                for g in _steps(row, vmax, len(palette.SEQUENTIAL) - 1):
                    t.append(" " * view.cw, Style(bgcolor=palette.colour(int(g), "sequential", dark)))
            if k:
                t.append(f"  {_top(view.tops[n][:k])}")
        for line in label_lines(view) + [tick_line(view), key_line(view)]:
            t.append("\n" + line)
        scale = "diverging" if view.signed else "sequential"
        t.append(f"\n  scale {_signed(-vmax) if view.signed else '0'} ")
        for c in palette.colours(scale, dark):
            t.append("██", Style(color=c))
        t.append(f" {_signed(vmax) if view.signed else f'{vmax:.2f}'} (largest shown)")
        for line in beside_line(view) + top_lines(view):
            t.append("\n" + line)
        return t
