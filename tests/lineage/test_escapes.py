"""Terminal escapes in files never reach the terminal raw: scenarios refuse control characters
at the place they occur, traces show them as visible escapes, error lines never carry them."""
from pathlib import Path

import numpy as np
import pytest

from lineage.escapes import visible, visible_tree
from lineage.playback.frame import Frame
from lineage.playback.trace import TraceReader, TraceWriter
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
OSC52 = "\x1b]52;c;aGVsbG8=\x07"        # sets the clipboard
OSC2 = "\x1b]2;pwned\x07"               # sets the window title
GOOD = "version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: hello}\n"


def _yaml_str(s: str) -> str:
    return '"' + s.replace("\x1b", "\\e").replace("\x07", "\\a").replace("\x9b", "\\x9b") + '"'


@pytest.mark.parametrize("where", ["title: {}\n", "description: {}\n", "captions: [{{step: 1, text: {}}}]\n",
                                   "panels: [{{kind: state, title: {}}}]\n", "{}: 1\n"])
@pytest.mark.parametrize("evil", [OSC52, OSC2, "\x9b31m", "a\u202etxt.exe"])
def test_scenario_text_with_control_characters_is_refused(tmp_path, capsys, where, evil):
    body = GOOD.replace("title: t\n", "") if where.startswith("title") else GOOD
    path = tmp_path / "e.yaml"
    path.write_text(body + where.format(_yaml_str(evil)), encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:") and "control character" in err
    assert not any(c in err for c in "\x1b\x07\x9b\u202e"), repr(err)


def test_trace_text_is_shown_escaped(tmp_path, capsys):
    scenario = (ROOT / "lineage" / "scenarios" / "recall.yaml").read_text()
    path = tmp_path / "e.trace"
    from lineage.playback.session import Session
    from lineage.scenario import load
    s = Session(load(ROOT / "lineage" / "scenarios" / "recall.yaml"), device="cpu")
    good = s.frame(0)
    meta = dict(good.meta, caption=OSC52 + "caption", event=OSC2)
    with TraceWriter(path, scenario, dict(s.info, title=OSC2 + "title")) as w:
        w.write(Frame(0, meta, dict(good.arrays)))
    r = TraceReader(path)
    shown = repr(r.info) + repr(r.frame(0).meta)
    assert "\\x1b]52" in shown and "\x1b" not in shown
    assert main(["snapshot", str(path), "--step", "1", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out


def test_visible():
    assert visible("a\x1bb\tc\nd") == "a\\x1bb\tc\nd"
    assert visible("a\nb", keep_newlines=False) == "a\\nb"
    assert visible_tree({"k\x1b": ["\x07", 1, None]}) == {"k\\x1b": ["\\x07", 1, None]}
    assert visible("plain text, ünïcödé ≋") == "plain text, ünïcödé ≋"
