"""The reader's own text: `lineage record|snapshot SCENARIO --text`, a trained weights file as a
scenario, refusals in one line with exit 2, and in the app `i` (type, enter: the scenario's models
on that text) and `b` (back to the run before, at its step)."""
import asyncio

import pytest

from lineage.cli.main import main
from lineage.playback.session import open_path

from tests.app.helpers import opened, settle, until

TEXT = "Alice met Bob."


def test_record_a_scenario_on_your_text(tmp_path, capsys):
    out = tmp_path / "t.trace"
    assert main(["record", "tour", "--text", TEXT, "-o", str(out), "--steps", "5"]) == 0
    cur = open_path(str(out))
    try:
        assert cur.info["title"].endswith("(your text)")
        assert "".join(cur.frame(i).token().text for i in range(5)) == TEXT[:5]
    finally:
        cur.close()


def test_a_trained_weights_file_opens_on_your_text(capsys):
    assert main(["snapshot", "scenarios/weights/k3-mini-text.safetensors", "--text", "def f(x):",
                 "--step", "4", "--panel", "tokens", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "k3-mini-text.safetensors: k3-mini, trained on text - step 4 /" in out and "...def[ ]" in out


@pytest.mark.parametrize("argv, line", [
    (["recall", "--text", "x"], "recall: --text: its toy memory reads no text or token ids"),
    (["lineage_compare", "--text", "x"], "lineage_compare: --text: its models read token ids"),
    (["scenarios/weights/tiny-kda-mqar.safetensors", "--text", "x"],
     "scenarios/weights/tiny-kda-mqar.safetensors: --text: tiny-kda was trained on mqar (token ids), not text"),
    (["tour", "--text", "x", "--dtype", "float16"], "tour: --dtype applies to a checkpoint directory"),
    (["tour", "--text", "x", "--ids", "1"], "give one of --text, --text-file or --ids"),
])
def test_what_cannot_take_the_input_is_one_line(capsys, argv, line):
    assert main(["snapshot", *argv, "--step", "1", "-o", "-"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(line) and "\n" not in err and "Traceback" not in err


def test_i_runs_the_scenario_on_typed_text_and_b_goes_back():
    async def go():
        async with opened("tour", (100, 30), 3) as (pilot, app):
            own = app.main.path
            await pilot.press("i")
            await until(pilot, lambda: app.screen is not app.main, "the text box")
            for ch in TEXT:
                await pilot.press("space" if ch == " " else "full_stop" if ch == "." else ch)
            await pilot.press("enter")
            await until(pilot, lambda: app.main.path != own and app.cursor is not None
                        and app.cursor.info["title"].endswith("(your text)"), "the run on the typed text")
            await settle(pilot, app, 0)
            assert "".join(app.cursor.frame(i).token().text for i in range(4)) == TEXT[:4]
            await pilot.press("b")
            await until(pilot, lambda: app.main.path == own, "the run before")
            await settle(pilot, app, 3)               # where it was left
            assert not app.cursor.info["title"].endswith("(your text)")
    asyncio.run(go())
