"""The attention panel: per head, the weights this token puts on every cached position. What it
draws is checked against the frames (rows sum to 1, the labels are the tokens, the numbers are
the weights), the fold is said on the panel, a trace replays it without torch, and the app
draws it at 80x24 and 160x50, with colour and without."""
import asyncio
import re
import subprocess
import sys

import numpy as np
import pytest
from rich.style import Style

from lineage.playback.session import Replay, Session, open_path
from lineage.scenario import load, loads
from lineage.app.panels import PANELS, render
from lineage.app.panels.attention import AttentionPanel, AttentionPanelView, label, lines, prepare
from lineage.app.panels.base import Absent
from lineage.app.widgets.text_box import TextBox

from tests.app.helpers import ROOT, SC, opened, settle

RECALL = SC / "attention_recall.yaml"
# one softmax and one MLA layer, with text whose tokens need signs (space, newline)
MIXED = """version: 1
title: softmax and MLA
model:
  config:
    mixers: [softmax, kda, mla]
    ffns: [dense, dense, dense]
    attention: {d_model: 64, n_heads: 2}
    kda: {}
    mla: {n_heads: 3}
    dense: {}
input: {text: "ab c\\nabc abc abc abc abc abc abc abc abc abc abc abc abc"}
panels: [{kind: tokens}, {kind: attention, layer: 2}]
"""
TOP = re.compile(r"'([^']*)'@(\d+) (\d\.\d\d)")


@pytest.fixture(scope="module")
def recall():
    cur = open_path(str(RECALL), device="cpu")
    yield cur
    cur.close()


@pytest.fixture(scope="module")
def mixed():
    s = Session(loads(MIXED), device="cpu")
    yield s
    s.close()


@pytest.mark.parametrize("layer, mixer", [(0, "softmax"), (2, "mla")])
def test_rows_sum_to_one_over_every_position_so_far(mixed, layer, mixer):
    """From the frames: each head's row covers positions 0 .. pos (this token included), is a
    distribution, and the view keeps all of it (what it shows plus what it folds)."""
    H = {"softmax": 2, "mla": 3}[mixer]
    for i in range(mixed.total):
        f = mixed.frame(i)
        w = f.attention(0, layer).weights.astype(np.float64)
        assert w.shape == (H, f.token().pos + 1)
        assert (w >= 0).all() and np.allclose(w.sum(axis=1), 1.0, atol=2e-3), (i, w.sum(axis=1))
        kda = f.attention(0, 1)                      # the KDA layer: the attention its state implements
        assert kda.before is not None and np.allclose(kda.shares.sum(axis=1) + kda.before, 1.0, atol=1e-3)
        view = prepare(mixed, i, {"kind": "attention", "layer": layer}, 40)
        assert view.mixer == mixer and view.heads == H
        assert np.allclose(view.weights.sum(axis=1) + view.hidden, w.sum(axis=1))


def test_labels_are_the_tokens(mixed):
    i = mixed.total - 1
    view = prepare(mixed, i, {"kind": "attention", "layer": 0}, 400)
    assert view.first == 0 and len(view.labels) == view.pos + 1
    text = "ab c\nabc"
    assert "".join(view.labels[:len(text)]) == "ab␣c⏎abc"               # shown as signs, not '\\n'
    for q in range(view.pos + 1):
        assert view.labels[q] == label(mixed.frame(q).token().text)
    drawn = lines(view, 400)
    assert drawn[4] == " " * 4 + "".join(c.ljust(view.cw) for c in view.labels)   # the label line under the map
    assert "␣ space" in drawn[6] and "⏎ newline" in drawn[6]


def test_labels_make_control_and_blank_text_visible():
    assert label("\\n") == "⏎" and label("\\t") == "⇥" and label("\\r") == "⇤"   # the byte tokenizer's names
    assert label("\n") == "⏎" and label(" Paris") == "␣Paris" and label("\x1b[2J") == "\\x1b[2J"
    assert label("\\n", byte_names=False) == "\\n" and label("") == "∅"


def test_more_positions_than_columns_fold_and_say_so(recall):
    i = 62                                                                # 63 positions
    view = prepare(recall, i, {"kind": "attention", "layer": 0}, 40)
    shown = view.weights.shape[1]
    assert view.first == 63 - shown > 0 and view.labels[-1] == view.token
    out = lines(view, 40)
    assert f"{view.first}-62 shown; the {view.first} before them hold the weight before ◂" in out[1]
    W = recall.frame(i).attention(0, 0).weights.astype(np.float64)
    for n, row in enumerate(out[2:6]):                                    # each row's folded weight, printed
        assert row.split("◂")[0].endswith(f"{W[n, :view.first].sum():.2f}")
    wide = prepare(recall, i, {"kind": "attention", "layer": 0}, 160)
    assert wide.first == 0 and "all 63 shown" in lines(wide, 160)[1]


def test_many_heads_show_a_window_that_follows_the_picked_head(monkeypatch):
    import lineage.app.panels.attention as attention
    monkeypatch.setattr(attention, "MAX_HEADS", 2)
    cur = open_path(str(RECALL), device="cpu")
    try:
        view = prepare(cur, 5, {"kind": "attention", "head": 3}, 100)
        assert (view.first_head, view.weights.shape[0], view.head) == (2, 2, 3)
        assert "heads 2-3 of 4 shown" in "\n".join(lines(view, 100))
    finally:
        cur.close()


def _drawn(app):
    panel = next(p for p in app.query(AttentionPanel))
    return panel, panel.view, panel.query_one("#body", TextBox).shown


def _check_against_frames(cur, i: int, view, plain: str) -> None:
    """What the panel put on screen, read back as text, against the frame itself."""
    f = cur.frame(i)
    W = f.attention(0, view.layer).weights.astype(np.float64)
    tops = [TOP.findall(line) for line in plain.split("\n") if re.match(r"^ *▸?h\d", line) or
            re.match(r"^  h\d+: ", line)]
    tops = [t for t in tops if t]
    assert len(tops) == W.shape[0]
    for h, entries in enumerate(tops):
        assert entries, h
        for lab, q, w in entries:
            q = int(q)
            assert f"{W[h, q]:.2f}" == w                                     # the weight the frame holds
            assert lab == label(cur.frame(q - (f.token().pos - i)).token().text)   # that position's token
        assert float(entries[0][2]) == pytest.approx(W[h].max(), abs=0.006)  # the largest first


def _cells(text, row_line: int):
    """The background colours of the map row on line `row_line` of a drawn Text, in order."""
    start = sum(len(line) + 1 for line in text.plain.split("\n")[:row_line])
    end = start + len(text.plain.split("\n")[row_line])
    out = []
    for span in text.spans:
        style = span.style if isinstance(span.style, Style) else Style.parse(str(span.style))
        if start <= span.start < end and style.bgcolor is not None:
            out += [style.bgcolor.name] * (span.end - span.start)
    return out


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
def test_the_drawn_panel_agrees_with_the_frames_and_the_text_form(size):
    """In colour: the drawn top weights are the frame's, each head row has one coloured cell per
    shown position, coloured by the frame's weight on the scale's top (the largest shown), and
    every line but the map rows and the scale is the text form's."""
    from lineage.app import palette

    async def go():
        async with opened(RECALL, size, 32) as (pilot, app):
            panel, view, text = _drawn(app)
            assert isinstance(view, AttentionPanelView) and view.step == 32
            plain = text.plain
            _check_against_frames(app.cursor, 32, view, plain)
            form = panel.text_form(app.cursor, 32, panel.room.options, panel.room.width)
            drawn_lines = plain.split("\n")
            assert len(drawn_lines) == len(form)
            heads = range(2, 2 + view.weights.shape[0])
            for n, (d, t) in enumerate(zip(drawn_lines, form)):
                if n not in heads and not t.lstrip().startswith("scale"):
                    assert d == t, n
            W = app.cursor.frame(32).attention(0, view.layer).weights.astype(np.float64)[:, view.first:]
            steps = len(palette.SEQUENTIAL) - 1
            for h, n in enumerate(heads):
                cells = _cells(text, n)
                assert len(cells) == view.cw * W.shape[1]                   # every shown position, no more
                want = [palette.SEQUENTIAL[int(np.rint(w / W.max() * steps))] for w in W[h] for _ in range(view.cw)]
                assert cells == want, h
            assert "attention" in str(panel.border_title) and "'r' at position 32" in str(panel.border_title)
    asyncio.run(go())


def test_the_drawn_panel_without_colour_is_the_text_form(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        async with opened(RECALL, (80, 24), 40) as (pilot, app):
            panel, view, text = _drawn(app)
            plain = text.plain
            assert plain.split("\n") == panel.text_form(app.cursor, 40, panel.room.options, panel.room.width)
            _check_against_frames(app.cursor, 40, view, plain)
            assert "@" in plain.split("\n")[2]                               # head 0's peak, as the ramp's top glyph
    asyncio.run(go())


def test_the_fold_notice_is_on_the_drawn_panel():
    """The tour's MLA layer at step 300 at 80 columns: too many positions; the panel says how many
    are off screen and what they hold."""
    async def go():
        async with opened("tour", (80, 24)) as (pilot, app):
            panel = AttentionPanel({"kind": "attention"})
            await app.screen.query_one("#panels").mount(panel)
            app.request(299)
            await settle(pilot, app, 299)
            app.screen.maximize(panel)
            await pilot.pause(0.2)
            panel.show(app.cursor, 299)
            await pilot.pause(0.1)
            view = panel.view
            plain = panel.query_one("#body", TextBox).shown.plain
            assert view.first > 200 and f"the {view.first} before them hold the weight before ◂" in plain
            assert plain.count("◂") >= view.weights.shape[0]
            _check_against_frames(app.cursor, 299, view, plain)
    asyncio.run(go())


def test_pickers_change_layer_and_head():
    async def go():
        async with opened(RECALL, (160, 50), 32) as (pilot, app):
            panel = next(p for p in app.query(AttentionPanel))
            panel.focus()
            await pilot.press("full_stop", "right_square_bracket")
            await settle(pilot, app, 32)
            await pilot.pause(0.2)
            assert (panel.view.layer, panel.view.head) == (1, 1)
            assert "▸h1" in panel.query_one("#body", TextBox).shown.plain
    asyncio.run(go())


def test_replay_of_a_trace_draws_the_same_panel_without_torch(tmp_path):
    s = Session(load(RECALL), device="cpu")
    writer = s.record_to(tmp_path / "r.trace")
    s.record_all(40)
    writer.close()                                                        # published: readable now
    s.writer = None
    r = Replay(tmp_path / "r.trace")
    try:
        for i in (0, 32, 39):
            for width in (40, 100):
                opts = {"kind": "attention", "layer": 0}
                assert PANELS["attention"].text_form(r, i, opts, width) == PANELS["attention"].text_form(s, i, opts, width)
    finally:
        r.close()
        s.close()
    code = ("import sys; from lineage.playback.session import Replay; from lineage.app.panels import render; "
            f"r = Replay({str(tmp_path / 'r.trace')!r}); out = render(r, 32, 'attention'); "
            "assert \"'⇤'@12 1.00\" in out, out; assert 'torch' not in sys.modules; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr

    async def go():
        async with opened(tmp_path / "r.trace", (100, 40), 32) as (pilot, app):
            _, view, text = _drawn(app)
            _check_against_frames(app.cursor, 32, view, text.plain)
            assert "'⇤'@12 1.00" in text.plain
    asyncio.run(go())


def test_a_model_without_attention_rows_gets_a_notice(mixed):
    kda = loads("version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: abc}\n")
    s = Session(kda, device="cpu")
    try:
        assert "the attention its state implements" in render(s, 1, "attention")
    finally:
        s.close()

    class Without:                       # a checkpoint's frames that keep another layer's rows
        info, total = mixed.info, mixed.total

        def model_config(self, m):
            return mixed.model_config(m)

        def frame(self, i):
            f = mixed.frame(i)
            return type(f)(f.step, f.meta, {k: v for k, v in f.arrays.items() if not k.endswith("/attn")})
    view = prepare(Without(), 2, {"kind": "attention"}, 100)
    assert isinstance(view, Absent) and "recorded no attention rows" in lines(view, 100)[0]


def test_validation_takes_attention_layers_only():
    from lineage.scenario.problems import ScenarioError
    loads(MIXED.replace("layer: 2", "layer: 0"))
    loads(MIXED.replace("layer: 2", "layer: 1"))       # a recurrent layer: its state's effective attention
    with pytest.raises(ScenarioError, match="layer 3"):
        loads(MIXED.replace("layer: 2", "layer: 3"))
    with pytest.raises(ScenarioError, match="head 3 does not exist"):
        loads(MIXED.replace("layer: 2}", "layer: 2, head: 3}"))


def test_a_large_checkpoint_keeps_the_rows_of_the_watched_layer_only():
    import torch
    from lineage.observed import AttentionObs, LayerObs, StepObs
    from lineage.playback.observe import lm_fields
    mx = AttentionObs(weights=torch.full((1, 2, 4), 0.25), length=4, cache_len=4, cache_bytes=64)
    obs = StepObs(layers=[LayerObs(mixer=mx), LayerObs(mixer=mx)],
                  top_ids=torch.zeros(1, 5, dtype=torch.int64), top_probs=torch.zeros(1, 5))

    class Cfg:
        mixers, ffns = ("softmax", "softmax"), ("dense", "dense")
    for watch, kept in ((None, {0, 1}), (frozenset({1}), {1}), (frozenset(), set())):
        _, arrays = lm_fields(obs, Cfg, {}, watch)
        assert {i for i in (0, 1) if f"l{i}/attn" in arrays} == kept
        assert all(arrays[f"l{i}/attn"].shape == (2, 4) for i in kept)
