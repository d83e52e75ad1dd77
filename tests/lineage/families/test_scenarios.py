"""Checkpoints in scenarios and on the command line: `model: {pretrained: DIR}`, `lineage run /
record / snapshot DIR --text/--ids`, tokens shown as the checkpoint's tokenizer spells them."""
import json

import pytest

pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from lineage.scenario import loads  # noqa: E402
from lineage.scenario.problems import ScenarioError  # noqa: E402
from lineage.playback.session import Replay, Session  # noqa: E402
from lineage.cli.main import main  # noqa: E402

from .test_hybrids import kimi  # noqa: E402


def tokenizer(path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["the cat sat on the mat", "a fact is a fact"] * 20,
                            trainers.BpeTrainer(vocab_size=280, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(path / "tokenizer.json"))
    return tok


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "kimi-tiny"
    kimi(path, vocab_size=300)
    tokenizer(path)
    return path


def scenario(ckpt, extra=""):
    return f"""version: 1
title: a real checkpoint
model: {{pretrained: {ckpt}}}
input: {{text: "the cat sat on the mat"}}
decoding: {{mode: greedy}}
steps: 8
panels: [{{kind: tokens}}, {{kind: state, layer: 0}}, {{kind: routing}}]
{extra}"""


def test_scenario_steps_a_checkpoint_with_its_tokenizer(ckpt):
    sc = loads(scenario(ckpt))
    s = Session(sc, device="cpu")
    f = s.frame(0)
    assert f.token().text == "the"                       # a BPE token, not the byte 't'
    g = f.guesses(0)
    assert g.texts is not None and len(g.texts) == len(g.ids)
    assert s.info["models"][0]["pretrained"] == str(ckpt) and s.info["models"][0]["dtype"] == "float32"
    assert f.state(0, 0).S.shape == (3, 16, 16)
    s.close()


def test_pretrained_problems_are_located(ckpt, tmp_path):
    with pytest.raises(ScenarioError) as e:
        loads(scenario(tmp_path / "nowhere"))
    assert "model.pretrained" in str(e.value.problems[0]) and "not a directory" in str(e.value.problems[0])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "bloom"}))
    with pytest.raises(ScenarioError, match="model_type 'bloom' is not supported"):
        loads(scenario(bad))
    with pytest.raises(ScenarioError, match="dtype and device per model are for pretrained"):
        loads("version: 1\ntitle: t\nmodel: {preset: tiny-kda, dtype: bfloat16}\ninput: {text: hi}\n")


def test_text_without_a_tokenizer_is_refused(tmp_path):
    kimi(tmp_path / "m")
    with pytest.raises(ScenarioError, match="no tokenizer files"):
        loads(scenario(tmp_path / "m"))


def test_record_and_replay_keep_token_texts(ckpt, tmp_path, capsys):
    out = tmp_path / "run.trace"
    assert main(["record", str(ckpt), "--text", "a fact is", "-o", str(out), "--steps", "4"]) == 0
    r = Replay(out)
    assert r.frame(0).token().text == "a" and r.frame(3).guesses(0).texts is not None
    r.close()
    assert main(["snapshot", str(ckpt), "--ids", "5,6,7", "--step", "2", "--panel", "tokens", "-o", "-"]) == 0
    assert "kimi-tiny next:" in capsys.readouterr().out


def test_command_line_problems_are_one_line(ckpt, tmp_path, capsys):
    assert main(["snapshot", str(ckpt), "--ids", "1,x", "--step", "1", "-o", "-"]) == 2
    assert main(["record", str(tmp_path), "-o", str(tmp_path / "t.trace")]) == 2        # no config.json
    assert main(["snapshot", "scenarios/tour.yaml", "--dtype", "float16", "--step", "1", "-o", "-"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "--ids" in err[0] and "no config.json" in err[1] and "checkpoint directory" in err[2]


def test_big_states_keep_only_the_watched_layers(ckpt, monkeypatch):
    """Past WATCH_ALL_BYTES a frame keeps state and decay only for the layers its panels show."""
    from lineage.playback import runners
    small = Session(loads(scenario(ckpt)), device="cpu")
    assert small.info["models"][0]["watch"] is None and small.frame(0).state(0, 4) is not None
    monkeypatch.setattr(runners, "WATCH_ALL_BYTES", 0)
    sc = loads(scenario(ckpt).replace("{kind: state, layer: 0}", "{kind: state, layer: 2}, {kind: decay, layer: 4}"))
    s = Session(sc, device="cpu")
    f = s.frame(1)
    assert s.info["models"][0]["watch"] == [2, 4]
    assert f.state(0, 2) is not None and f.state(0, 0) is None and f.decay(0, 4) is not None
    assert f.nbytes < small.frame(1).nbytes
    from lineage.app.panels.state import StatePanel
    assert tuple(StatePanel.prepare(s, 1, {"kind": "state"}, 100).layers) == (2, 4)
    small.close(), s.close()


def test_svg_snapshot_of_a_checkpoint(ckpt, tmp_path):
    out = tmp_path / "k.svg"
    assert main(["snapshot", str(ckpt), "--text", "the cat sat", "--step", "2", "--size", "120", "40",
                 "-o", str(out)]) == 0
    svg = out.read_text()
    assert "routing" in svg and "kimi-tiny" in svg


def test_a_broken_shard_found_when_loading_is_one_located_line(ckpt, tmp_path, capsys):
    """A truncated shard is found from its safetensors header: validate and record say so in one
    line placed at the scenario's pretrained field, exit 2."""
    import os
    import shutil
    bad = tmp_path / "broken"
    shutil.copytree(ckpt, bad)
    f = bad / "model.safetensors"
    os.truncate(f, f.stat().st_size // 2)
    sc = tmp_path / "s.yaml"
    sc.write_text(scenario("broken"))
    assert main(["validate", str(sc)]) == 2
    said = capsys.readouterr().err
    assert main(["record", str(sc), "-o", str(tmp_path / "t.trace")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.pretrained" in err[0] and "not a usable safetensors file" in err[0]
    assert said.strip() == err[0]


def test_a_checkpoint_scenario_on_your_long_text_prefills_by_its_own_tokens(ckpt, tmp_path):
    """--text on a scenario of a checkpoint: the long input's prefill counts the checkpoint's
    tokens, not bytes (which would read past the input's end), and the made scenario loads."""
    import yaml
    from lineage.scenario.own_input import TAIL, with_input
    from lineage.families.tokenizer import tokenizer_for
    (tmp_path / "s.yaml").write_text(scenario(ckpt), encoding="utf-8")
    text = "the cat sat on the mat. " * 40                   # 960 bytes, far fewer tokens
    made, _ = with_input(str(tmp_path / "s.yaml"), "s.yaml", text=text)
    n = len(tokenizer_for(ckpt).encode(text))
    assert n < len(text) and yaml.safe_load(made)["decoding"]["prefill"] == n - TAIL
    assert loads(made, "made.yaml", None).decoding.prefill == n - TAIL
