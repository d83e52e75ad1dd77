"""The tokens panel: its guesses' labels and the toy memory's one-line readouts."""
from tests.app.helpers import opened, panel, run


def test_guesses_show_a_newline_as_a_sign_not_an_escape():
    """Candidates read '\\\\n' (repr of the byte tokenizer's name); they take the attention
    panel's labels: '⏎' for a newline, '␣' for a space, from byte ids and checkpoint texts alike."""
    from types import SimpleNamespace

    from lineage.app.panels.tokens import _answer, _guess_label
    by_id = SimpleNamespace(texts=None, ids=[10, 32, 65])
    by_text = SimpleNamespace(texts=["\n", " the", "A"], ids=[0, 1, 2])
    assert [_guess_label(by_id, j) for j in range(3)] == ["'⏎'", "'␣'", "'A'"]
    assert [_guess_label(by_text, j) for j in range(3)] == ["'⏎'", "'␣the'", "'A'"]
    assert _answer(10) == "'⏎'"


def test_toy_memory_readouts_are_one_line_each():
    async def go():
        async with opened("recall", (160, 50), 23) as (pilot, app):
            body = panel(app, "tokens").query_one("#body").render().plain.splitlines()
            cells = [ln for ln in body if "strongest" in ln]
            assert len(cells) == 2 and all(ln.count("█") == 16 for ln in cells)
            assert "strongest v6 1.00" in cells[0]            # the additive memory's blurred answer
    run(go())
