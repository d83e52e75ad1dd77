"""The panel registry: every kind a scenario may name has a panel with a text form."""
from lineage.scenario.schema import PANEL_KINDS
from tui.panels import PANELS


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
