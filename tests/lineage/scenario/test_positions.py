"""A model with learned positions (GPT-2's 1,024, tiny-softmax's 4,096) is refused at validate
time when the scenario would feed it past its table, instead of failing at that step."""
import pytest

from lineage.cli.main import main

EDGE = """version: 1
title: edge
model: {{preset: tiny-softmax, overrides: {{n_positions: 16}}}}
input: {{text: "{text}"}}
decoding: {{mode: {mode}, prefill: 3}}
{steps}panels:
  - {{kind: tokens}}
"""


def _write(tmp_path, text="hello world", mode="greedy", steps=None):
    f = tmp_path / "edge.yaml"
    f.write_text(EDGE.format(text=text, mode=mode, steps=f"steps: {steps}\n" if steps else ""))
    return f


def test_the_last_position_fits_and_one_more_is_refused(tmp_path, capsys):
    assert main(["validate", str(_write(tmp_path, steps=13))]) == 0        # prefill 3 + 13 = 16 positions
    assert main(["record", str(_write(tmp_path, steps=13)), "-o", str(tmp_path / "a.trace")]) == 0
    capsys.readouterr()
    assert main(["validate", str(_write(tmp_path, steps=14))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{tmp_path / 'edge.yaml'}:6:8: steps: tiny-softmax has learned positions for 16 tokens; the "
                   "scenario feeds 17 (prefill 3 + 14 steps): give at most 13 steps"]


def test_a_long_text_is_refused_at_the_input(tmp_path, capsys):
    assert main(["validate", str(_write(tmp_path, text="x" * 20, mode="teacher"))]) == 2
    err = capsys.readouterr().err
    assert ":4:" in err and "input: tiny-softmax has learned positions for 16" in err and "shorter input" in err


@pytest.mark.parametrize("preset, steps", [("gpt2-small", 1025), ("tiny-softmax", 4097)])
def test_shipped_presets(tmp_path, capsys, preset, steps):
    f = tmp_path / "long.yaml"
    f.write_text(f"version: 1\ntitle: long\nmodel: {{preset: {preset}}}\ninput: {{text: hi}}\n"
                 f"decoding: {{mode: greedy}}\nsteps: {steps}\npanels: [{{kind: tokens}}]\n")
    assert main(["validate", str(f)]) == 2 and "learned positions" in capsys.readouterr().err
    f.write_text(f.read_text().replace(f"steps: {steps}", f"steps: {steps - 1}"))
    assert main(["validate", str(f)]) == 0
