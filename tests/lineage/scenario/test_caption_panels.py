"""A caption names one panel (`panel: state`) or several (`panel: [state, decay]`); an unknown
name is one located line from `lineage validate`, exit 2."""
import textwrap

from lineage.scenario import load
from lineage.cli.main import main

SCENARIO = """\
version: 1
title: two panels
models:
  - memory: {{rule: kda, key_dim: 2, value_dim: 1, channel_decay: [0.0, -0.7]}}
input:
  task: {{kind: topic_shift, pairs: 2, separator_gate: 0.0, vocab: 8, seed: 1}}
panels:
  - {{kind: decay}}
  - {{kind: state}}
  - {{kind: captions}}
captions:
  - step: 1
    panel: {panel}
    text: "Rows fade as their channel's alpha says."
"""


def _file(tmp_path, panel: str):
    p = tmp_path / "s.yaml"
    p.write_text(SCENARIO.format(panel=panel))
    return p


def test_one_name_or_several(tmp_path):
    assert load(_file(tmp_path, "state")).captions[0].panels == ("state",)
    c = load(_file(tmp_path, "[state, decay]")).captions[0]
    assert c.panels == ("state", "decay") and c.panel == "state"     # the first one named


def test_an_unknown_name_in_a_list_is_one_located_line(tmp_path, capsys):
    p = _file(tmp_path, "[state, decya]")
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{p}:13:") and "decya" in err[0], err


def test_a_name_twice_is_refused(tmp_path, capsys):
    assert main(["validate", str(_file(tmp_path, "[state, state]"))]) == 2
    assert "twice" in capsys.readouterr().err


def test_every_name_must_be_a_panel_the_scenario_shows(tmp_path, capsys):
    """Only the first name was checked against the scenario's panels: `[state, recall]` validated
    and the recall half was silently skipped."""
    p = _file(tmp_path, "[state, recall]")
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "captions[0].panel[1]: the scenario has no recall panel" in err[0]
    assert err[0].startswith(f"{p}:13:20:")        # at the second entry of the list
