"""The panel registry (every kind a scenario may name has a panel with a text form), and checks
of single panels: the cache and tokens panels' words, the gate panel in the app."""
import asyncio
import re

import numpy as np

from lineage.scenario.schema import PANEL_KINDS
from tui.panels import PANELS
from tui.widgets.heatmap import Heatmap
from tui.widgets.text_box import TextBox


def test_registry_covers_the_scenario_kinds():
    assert set(PANELS) == set(PANEL_KINDS)
    for kind, panel in PANELS.items():
        assert panel.kind == kind and callable(panel.text_form)


def test_cache_panel_names_what_the_fixed_bytes_are():
    """Attention with a short conv holds constant conv inputs, not a recurrent state, and has no
    crossover with its cache; a model with no fixed part (GPT-2) still reads 'recurrent state'."""
    from lineage.playback.observe import CacheView
    from tui.panels.cache import CachePanel, CachePanelView, lines
    conv = CacheView(tokens=32, kv=32768, latent=0, state=4608, kv_per_tok=1024.0, latent_per_tok=0.0,
                     kv_equiv_per_tok=0, conv=4608)
    gpt2 = CacheView(tokens=5, kv=100, latent=0, state=0, kv_per_tok=20.0, latent_per_tok=0.0, kv_equiv_per_tok=0)
    kda = CacheView(tokens=5, kv=0, latent=100, state=20992, kv_per_tok=0.0, latent_per_tok=20.0,
                    kv_equiv_per_tok=90.0, conv=4608)
    text = lines(CachePanelView(["soft", "gpt2", "k3"], [conv, gpt2, kda], 0, 1 << 20, None), 120)
    assert "short-conv inputs 4.5 KiB" in text[1] and not any("crossover" in t for t in text[1:3])
    assert any("gpt2:" in t and "recurrent state 0 B" in t for t in text)
    assert any("k3:" in t and "recurrent state" in t for t in text)
    assert CachePanel._names(conv)[2] == "short-conv inputs (constant)"
    assert CachePanel._names(kda)[2] == "recurrent state (constant)"


def test_guesses_show_a_newline_as_a_sign_not_an_escape():
    """Candidates read '\\\\n' (repr of the byte tokenizer's name); they take the attention
    panel's labels: '⏎' for a newline, '␣' for a space, from byte ids and checkpoint texts alike."""
    from types import SimpleNamespace

    from tui.panels.tokens import _answer, _guess_label
    by_id = SimpleNamespace(texts=None, ids=[10, 32, 65])
    by_text = SimpleNamespace(texts=["\n", " the", "A"], ids=[0, 1, 2])
    assert [_guess_label(by_id, j) for j in range(3)] == ["'⏎'", "'␣'", "'A'"]
    assert [_guess_label(by_text, j) for j in range(3)] == ["'⏎'", "'␣the'", "'A'"]
    assert _answer(10) == "'⏎'"


# ------------------------------------------------------------------ the gate panel in the app

GATE_LEGEND = re.compile(r"mean (\d\.\d{3}) \((\d\.\d{3})-(\d\.\d{3})\)")
GATE_TITLE = re.compile(r"gate · L(\d+) head (\d+) ")


def _gate_shown(panel):
    """(layer, head) from the panel's title, and (mean, min, max) from its legend, as drawn."""
    layer, head = map(int, GATE_TITLE.search(str(panel.border_title)).groups())
    legend = panel.query_one("#legend", TextBox).shown
    numbers = tuple(map(float, GATE_LEGEND.search(getattr(legend, "plain", str(legend))).groups()))
    return layer, head, numbers


def _gate_against_frame(app, panel, i: int) -> tuple[int, int]:
    """The panel's title, legend and map hold the frame's gate of the layer and head it names."""
    layer, head, (mean, lo, hi) = _gate_shown(panel)
    g = app.cursor.frame(i).gate(0, layer)[head].astype(np.float64)            # (value channels,)
    assert (mean, lo, hi) == tuple(round(float(x), 3) for x in (g.mean(), g.min(), g.max())), (layer, head)
    data = panel.query_one(Heatmap).data                                        # (channels, columns)
    assert data.shape[0] == g.shape[0] == 16                                    # one row per channel
    assert any(np.allclose(data[:, c], g, atol=1e-3) for c in range(data.shape[1]))   # now is a column
    return layer, head


def test_the_gate_panel_draws_the_frames_gate_and_its_pickers_walk_layers_and_heads():
    """Gated MLA's sigmoid(g_proj(x)) per value channel of one head: the title, legend and map
    against the frames, and the layer and head pickers over every gated MLA layer and head."""
    from tests.tui.test_app import SC, settle
    from tui.app import LineageApp
    from tui.panels.gate import GatePanel

    async def go():
        app = LineageApp(str(SC / "gated_mla.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            app.request(19)
            await settle(pilot, app, 19)
            first, second = app.query(GatePanel)
            assert _gate_against_frame(app, first, 19) == (3, 0) and _gate_against_frame(app, second, 19) == (7, 0)
            # the caption at step 20 quotes layer 3's gate: the panel shows the same numbers
            assert _gate_shown(first)[2] == (0.414, 0.270, 0.638)
            first.focus()
            await pilot.pause(0.1)
            seen = []
            for key in ("right_square_bracket", "full_stop", "right_square_bracket", "right_square_bracket"):
                await pilot.press(key)
                await settle(pilot, app, 19)
                await pilot.pause(0.1)
                seen.append(_gate_against_frame(app, first, 19))
            assert seen == [(7, 0), (7, 1), (8, 1), (3, 1)]       # every gated MLA layer, then round again
            await pilot.press("p")                                 # a step back: the map's now is step 19
            await settle(pilot, app, 18)
            await pilot.pause(0.1)
            assert _gate_against_frame(app, first, 18) == (3, 1)
            assert _gate_against_frame(app, second, 18) == (7, 0)       # the other panel kept its own layer
    asyncio.run(go())
