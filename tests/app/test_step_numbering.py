"""One step numbering: a caption written `step: N` is the note the counter shows at "step N",
`--step N` prints it, the older `at:`/`until:` (counted from 0) still mean what they meant, and a
slide shows a caption's last step (or the one it names)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from lineage.playback.session import Session
from lineage.scenario import ScenarioError, loads
from lineage.cli.main import main
from lineage.app.snapshot import caption_steps, slide_steps

SC = Path(__file__).resolve().parents[2] / "lineage" / "scenarios"

HEAD = """version: 1
title: numbering
model: {preset: tiny-deltanet}
input: {text: "abcdefghij"}
steps: 10
"""


def _notes(text: str) -> list:
    s = Session(loads(HEAD + text, "n.yaml"))
    try:
        return [s.frame(i).caption() for i in range(s.total)]
    finally:
        s.close()


def test_a_caption_at_step_n_is_shown_where_the_counter_says_n():
    notes = _notes("captions:\n  - {step: 3, last: 4, text: three}\n  - {step: 7, text: seven}\n")
    # the counter reads "step i + 1" at frame i
    shown = {i + 1: n for i, n in enumerate(notes) if n}
    assert shown == {3: "three", 4: "three", 7: "seven", 8: "seven", 9: "seven", 10: "seven"}


def test_older_files_counted_from_zero_mean_what_they_meant():
    new = _notes("captions:\n  - {step: 3, last: 4, text: a}\n  - {step: 7, text: b}\n")
    old = _notes("captions:\n  - {at: 2, until: 3, text: a}\n  - {at: 6, text: b}\n")
    assert old == new


@pytest.mark.parametrize("caption, says", [
    ("{step: 0, text: a}", "captions[0].step: must be >= 1, got 0"),
    ("{step: 11, text: a}", "step 11 is past the end (the scenario has 10 steps: 1-10)"),
    ("{at: 10, text: a}", "at 10 (step 11) is past the end"),
    ("{step: 2, at: 1, text: a}", "not both"),
    ("{step: 5, last: 4, text: a}", "last (4) is before step (5)"),
    ("{step: 5, last: 6, slide: 7, text: a}", "slide (7) is not among the steps"),
    ("{at: -1, text: a}", "at: -1 is not a step"),
])
def test_a_wrong_step_is_one_located_line(caption, says):
    with pytest.raises(ScenarioError) as e:
        loads(HEAD + f"captions:\n  - {caption}\n", "n.yaml")
    problems = [str(p) for p in e.value.problems]
    assert len(problems) == 1 and problems[0].startswith("n.yaml:7:") and says in problems[0], problems


def test_slides_show_each_captions_last_step_or_the_one_it_names():
    info = {"captions": [{"at": 0, "until": 7, "text": "a"}, {"at": 8, "until": 8, "text": "b"},
                         {"at": 10, "text": "c"}, {"at": 14, "shot": 15, "text": "d"}, {"at": 18, "text": "e"}]}
    assert caption_steps(info, 25) == [0, 8, 10, 14, 18]           # `{ }` go where captions start
    assert slide_steps(info, 25) == [7, 8, 13, 15, 24]
    assert slide_steps({"captions": []}, 25) == [24]
    # a caption about a panel is on that panel's slides and the captions', not on another's
    info["captions"][1]["panel"] = "state"
    assert slide_steps(info, 25, "decay") == [7, 13, 15, 24]
    assert slide_steps(info, 25, "state") == slide_steps(info, 25, "captions") == [7, 8, 13, 15, 24]


def test_bundled_scenarios_count_steps_as_the_counter_does():
    for path in sorted(SC.glob("*.yaml")):
        text = path.read_text()
        assert not re.search(r"^\s*- at:|^\s*until:", text, re.M), f"{path.name} still counts captions from 0"


def test_snapshot_step_n_prints_the_caption_written_step_n(capsys):
    # fig5_gating: `step: 17, last: 17` is the "Topic B in" caption, about the recall panel
    assert main(["snapshot", "fig5_gating", "--step", "17", "--panel", "recall", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "step 17 / 25" in out and "note: Topic B in." in out
