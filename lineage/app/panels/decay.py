"""Retention over time: alpha = exp(g) (g <= 0 the log-decay) per key channel (KDA) or per head
(Gated DeltaNet), channels down, recent steps across. Bright rows hold memory; dark rows clear
it; what "hold" and "clear" mean is lineage.retention's, as captions and `lineage eval` count."""
from __future__ import annotations

import numpy as np
from rich.text import Text

from lineage.playback.frame import FrameProblem
from lineage.retention import CLEARS, HOLDING, HOLDS, tally

from .. import palette

from ..widgets.heatmap import Heatmap
from ..widgets.legend import colour_bar
from ..widgets.text_box import TextBox
from .base import Absent, SweepPanel, steps
from .common import HeadSweep, history, layers_of, model_name, ramp_rows, step_token, step_tokens


def _alpha(cur, j: int, m: int, layer: int, heads: int) -> np.ndarray | None:
    """Step j's alpha of the layer, (H,) or (H, K), or None where the frame has none."""
    d = cur.frame(j).decay(m, layer)          # alpha = e^g, not g
    if d is None:
        return None
    alpha = d.alpha
    if alpha.ndim not in (1, 2) or alpha.shape[0] != heads:
        raise FrameProblem(f"step {j + 1}'s alpha has shape {alpha.shape}; layer {layer} has {heads} heads")
    return alpha


def prepare(cur, i: int, p: dict, width: int):
    m = p.get("model", 0)
    layers, layer = layers_of(cur, p, "decay")
    if layer is None:
        return Absent(f"decay: {model_name(cur.info, m)} has no gated layer", "no gated layer in this model")
    cfg = cur.model_config(m)
    H = cfg.mixer_config(cfg.mixers[layer]).n_heads if cfg is not None else 1
    h = min(p.get("head", 0), H - 1)

    def column(j):
        alpha = _alpha(cur, j, m, layer, H)
        return None if alpha is None else np.atleast_1d(alpha[h]).astype(np.float64)

    now = _alpha(cur, i, m, layer, H)
    return HeadSweep(model_name(cur.info, m), m, layer, tuple(layers), h, H, i, history(i, column),
                     None if now is None else tally(now), step_tokens(cur, i, m))


def counts(view) -> str:
    """This step's holding and clearing counts: the head shown, then every head of the layer
    (what a caption counts over "both heads" is on screen)."""
    t, h = view.tally, view.head
    if t is None:
        return "nothing recorded at this step"
    one = f"head {h}: {t.holding[h]}/{t.per_head} hold ({HOLDS}), {t.clearing[h]} clear ({CLEARS})"
    if t.heads == 1:
        return one
    return f"{one}; all {t.heads} heads: {sum(t.holding)}/{t.channels} hold, {sum(t.clearing)} clear"


def flat(A: np.ndarray, view) -> str | None:
    """Why the map of alphas A (rows, steps shown) is one flat block, where it is: every value
    in one colour step of the 0..1 scale. The scale stays 0..1: alpha is the fraction of memory
    kept, and 0.999 against 1.000 stretched over every colour would paint rounding as forgetting."""
    a = A[np.isfinite(A)]
    if not a.size or np.unique(palette.sequential_index(a)).size > 1:
        return None
    lo, hi = float(a.min()), float(a.max())
    rows, n = A.shape
    what = f"head {view.head} " + (f"holds all {rows} channels" if rows > 1 else "holds")
    if lo > HOLDING:
        return f"one colour: {what}, alpha {lo:.4f}-{hi:.4f}, over {steps(n)}: forgets nothing"
    return f"one colour: every {'channel' if rows > 1 else 'step'} at alpha {lo:.4f}-{hi:.4f} over {steps(n)}"


def others(view) -> str:
    """Every head's counts, and which other heads forget some at this step (`, .` picks a head)."""
    t = view.tally
    if t is None or t.heads == 1:
        return ""
    out = f"all heads: {sum(t.holding)}/{t.channels} hold, {sum(t.clearing)} clear"
    fading = [str(h) for h in range(t.heads) if h != view.head and t.holding[h] < t.per_head]
    if fading:
        out += f"; head{'s' if len(fading) > 1 else ''} {', '.join(fading)} forget{'' if len(fading) > 1 else 's'}"
    return out


def lines(view, width: int) -> list[str]:
    if isinstance(view, Absent):
        return [view.text]
    cols = view.columns.last(max(1, min(width - 12, 48)))
    if not cols:
        return ["decay: no decay recorded"]
    A = np.stack(cols, axis=1)                                           # (channels, recent steps)
    out = [f"decay: {view.name} layer {view.layer} head {view.head}: alpha = exp(g) per "
           f"{'channel' if A.shape[0] > 1 else 'head'}, last {A.shape[1]} steps (@ holds, blank clears)"]
    # one alpha per head (Gated DeltaNet): the one row is the head shown, labelled as the map labels it
    out += ramp_rows(A, str if A.shape[0] > 1 else (lambda r, h=view.head: str(h)))
    out.append(f"  now: {counts(view)}")
    note = flat(A, view)
    return out + ([f"  {note}"] if note else [])


class DecayPanel(SweepPanel):
    kind = "decay"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    _cursor_moved = False      # h j k l used: the legend names the value under the cursor

    def draw(self, view) -> None:
        if self.absent(view):
            return
        i, layer = view.step, view.layer
        per = "channel" if view.columns.column(i).shape[0] > 1 else "head"
        # one alpha per head (Gated DeltaNet): one row, the head's; per channel (KDA): a row a key channel
        # folded, a row is the min of its channels: one that clears is never hidden by one that holds
        A = self.show_sweep((view.model, layer, view.head), i, view.columns, "key channel" if per == "channel"
                            else "head", str if per == "channel" else (lambda r, h=view.head: str(h)), fold="min")
        # the steps the map holds (not the gap after now), short enough for a third of 160 columns
        # the model named, as the state and attention panels do: two models' decay panels told apart
        self.set_title(f"decay · {view.name} · L{layer} head {view.head} · {steps(self._sweep.shown(i))}")
        self._legend()

    def _legend(self) -> None:
        """The scale and the drawn step's counts, and (once h j k l moved it) the value under
        the map's cursor."""
        view, hm = self.view, self.query_one(Heatmap)
        if not isinstance(view, HeadSweep):
            return                              # nothing drawn yet, or this model has no gated layer
        per = "channel" if hm.data.shape[0] > 1 else "head"
        legend = Text(f"alpha per {per} ") + colour_bar("sequential", 1.0, no_color=self.app.no_color)
        shown = [c for c in range(hm.data.shape[1]) if c not in hm.blank]       # the steps drawn, not the gap
        note = flat(hm.data[:, shown], view) if shown else None
        if note:        # the head's counts are in the note; every head's say where else to look
            legend.append(f"\n{note}" + (f"\n{others(view)}" if others(view) else ""))
        else:
            legend.append(f"   {counts(view)}   mean {view.columns.column(view.step).mean():.3f}")
        got = self.reading(hm)
        if got is not None and (self._cursor_moved or got.by == "mouse"):
            # the ▲ / ▼ of h j k l, or the mouse's cell: the channel its cell is drawn with (the
            # darkest, as the map folds: "channel 5 of 4-7"); one row of one alpha: the head shown
            one = hm.data.shape[0] == 1
            where = f"{got.by} head {view.head}" if one else f"{got.by} channel {got.row}{got.of_rows()}"
            step = self._sweep.step_at(got.col)
            legend.append(f"\n{where}, step {step + 1}: alpha = {got.value:.3f}{step_token(view.tokens, step)}"
                          if step is not None
                          else f"\n{where}: no step in this column (the gap after now)")
        self.put(self.query_one("#legend", TextBox), legend, pace=0.1)

    def on_heatmap_cursor_moved(self, event: Heatmap.CursorMoved) -> None:
        self._cursor_moved = True
        self._legend()

    def on_heatmap_hovered(self, event: Heatmap.Hovered) -> None:
        self._legend()
