"""lineage.training: generated tasks, the training loop, checkpoints with their recipes,
evaluation, and per-model checkpoints in scenarios. The shipped checkpoints' own numbers are in
test_shipped.py."""
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lineage.model import LM
from lineage.presets import get_preset
from lineage.training import checkpoint
from lineage.training.corpus import Corpus
from lineage.training.evaluate import Probe, evaluate, gate_stats, segment_confusion
from lineage.training.loop import TrainSettings, train
from lineage.training.tasks import (FACT, GONE, KEY_IDS, QUERY, SEP, VALUE_BASE, TaskSpec, mqar, segmented,
                                    two_timescales)
from lineage.cli.main import main


@pytest.mark.parametrize("pairs", [1, 7, 64, 124])
def test_mqar_keys_and_values_are_distinct_and_queries_score_values(pairs):
    b = mqar(np.random.default_rng(pairs), 8, pairs)
    assert b.ids.shape == (8, 4 * pairs)
    for row, tgt, m in zip(b.ids, b.targets, b.mask):
        keys, vals = row[:2 * pairs:2], row[1:2 * pairs:2]
        assert len(set(keys)) == pairs and len(set(vals)) == pairs       # no key and no value twice
        assert set(keys) <= set(KEY_IDS) and (vals >= VALUE_BASE).all()
        truth = dict(zip(keys, vals))
        assert m.sum() == pairs and all(tgt[i] == truth[row[i]] for i in np.flatnonzero(m))
        assert sorted(row[np.flatnonzero(m)]) == sorted(keys)            # every key asked once


def test_mqar_refuses_more_pairs_than_keys():
    with pytest.raises(ValueError, match="pairs must be in"):
        mqar(np.random.default_rng(0), 1, len(KEY_IDS) + 1)


@pytest.mark.parametrize("gone", [0, 3])
def test_segmented_fresh_keys_separators_and_answers(gone):
    P, S = 4, 5
    b = segmented(np.random.default_rng(3), 6, P, S, gone)
    for row, tgt, m in zip(b.ids, b.targets, b.mask):
        q = list(row).index(QUERY)
        written = row[:q]
        assert (written == SEP).sum() == S - 1 and q == S * (2 * P + 1) - 1
        pairs = [p for p in np.split(written, np.flatnonzero(written == SEP)) if len(p)]
        segs = [dict(zip(p[p != SEP][::2], p[p != SEP][1::2])) for p in pairs]
        keys = [k for s in segs for k in s]
        assert len(keys) == len(set(keys)) == P * S                      # fresh in every segment
        asked = {row[i]: tgt[i] for i in np.flatnonzero(m)}
        assert len(asked) == P + gone
        for k, v in asked.items():
            assert v == (segs[-1][k] if k in segs[-1] else GONE)
            assert k in segs[-1] or k in segs[-2]                        # gone keys: the segment before the last
        assert sum(v == GONE for v in asked.values()) == gone
    assert (b.sep == (b.ids == SEP)).all()


def test_two_timescales_fact_and_local_queries():
    b = two_timescales(np.random.default_rng(1), 4, pairs=3, blocks=5, key_pool=6)
    for row, tgt, local, fact in zip(b.ids, b.targets, b.groups["local"], b.groups["fact"]):
        assert row[0] == FACT and row[-2] == FACT and row[-1] == row[1]   # the fact, read at the end
        assert fact.sum() == 1 and tgt[np.flatnonzero(fact)[0]] == row[1]
        assert local.sum() == 15 and (row == SEP).sum() == 6
        blocks = np.split(row[2:-2], np.flatnonzero(row[2:-2] == SEP))
        for blk in (x[1:] for x in blocks if len(x) > 1):
            truth = dict(zip(blk[:6:2], blk[1:6:2]))
            assert dict(zip(blk[6::2], blk[7::2])) == truth                # queried with the block's values
        assert len(set(row[3:-2][np.isin(row[3:-2], KEY_IDS)])) <= 6      # keys come from the pool of 6


def test_corpus_split_is_deterministic_and_disjoint():
    a, b = Corpus(max_bytes=1_000_000), Corpus(max_bytes=1_000_000)
    for split in ("train", "held_out"):
        assert np.array_equal(a.splits[split], b.splits[split])
    assert a.splits["train"].size > 0 and a.splits["held_out"].size > 0
    tr, ho = bytes(a.splits["train"][:4096]), bytes(a.splits["held_out"][:4096])
    assert ho not in bytes(a.splits["train"])                           # no held-out file in training
    w = a.batch(np.random.default_rng(0), 3, 32, "held_out")
    assert w.ids.shape == (3, 32) and (w.targets[:, :-1] == w.ids[:, 1:]).all() and w.mask.all()
    assert tr


def test_lr_warms_up_then_decays_to_a_tenth():
    st = TrainSettings(steps=100, warmup=10, lr=1.0)
    lrs = [st.lr_at(s) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:])) and lrs[-1] == pytest.approx(0.1, abs=1e-3)


def test_training_lowers_the_loss_within_50_cpu_steps():
    torch.manual_seed(0)
    model = LM(get_preset("tiny-linear"))
    losses = []
    train(model, TaskSpec("mqar", pairs=4), TrainSettings(steps=50, batch=16, warmup=5, seed=0), torch.device("cpu"),
          on_step=lambda s, loss, acc, n: losses.append(loss))
    assert len(losses) == 50 and all(math.isfinite(x) for x in losses)
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3


def test_selection_bias_moves_load_towards_even():
    torch.manual_seed(0)
    model = LM(get_preset("k3-mini"))
    moe = model.blocks[1].ffn
    with torch.no_grad():
        moe.router.weight[:4] += 1.0                                     # experts 0-3 favoured by the router
    counts = []
    x = torch.randn(256, model.cfg.d_model)
    from lineage.training.loop import _LoadCounter
    bal = _LoadCounter(model)
    try:
        for _ in range(300):
            _, idx, _ = moe.route(x)
            assert torch.equal(bal.load[moe], torch.bincount(idx.flatten(), minlength=moe.cfg.n_experts))
            counts.append(bal.load[moe].float())
            bal.rebalance(1e-2)
    finally:
        bal.remove()
    spread = [(c.max() / c.mean()).item() for c in counts]
    assert spread[-1] < spread[0] - 0.5                                  # load evens out without gradients
    assert "route" not in vars(moe)                                     # the wrapper is gone


def test_zero_pseudo_queries_average_the_sources_and_small_embeddings():
    torch.manual_seed(0)
    model = LM(get_preset("k3-mini"))
    assert model.attnres.queries.abs().max() == 0
    assert model.wte.weight.std().item() == pytest.approx(0.02, rel=0.1)
    logits, _ = model(torch.randint(0, 256, (2, 16)))
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.randint(0, 256, (32,)))
    assert abs(loss.item() - math.log(256)) < 1.0                       # starts near ln 256, not at 44


def test_probe_gate_stats_and_forced_gates():
    """The probe reads alpha from the layer's own _decay; forcing alpha = 1 at separators changes
    the output there and only from there on."""
    torch.manual_seed(0)
    model = LM(get_preset("tiny-kda")).double().eval()
    ids = torch.tensor([[5, 130, 7, SEP, 9, 140, 5]])
    sep = ids == SEP
    probe = Probe(model)
    with probe.active():
        base, _ = model(ids)
    assert len(probe.alpha) == 2 and probe.alpha[0].shape == (1, 7, 2, 32)
    probe.force_sep = sep
    with probe.active():
        forced, _ = model(ids)
    assert torch.equal(base[:, :3], forced[:, :3]) and not torch.allclose(base[:, 3:], forced[:, 3:])
    assert (probe.alpha[-1][0, 3] == 1).all()
    assert "_decay" not in vars(model.blocks[0].mixer)
    st = gate_stats([torch.tensor([[[0.05, 0.99], [0.5, 0.97]]])], torch.tensor([[True, False]]))
    assert (st["clear_sep"], st["hold_sep"], st["clear_else"], st["hold_else"]) == (0.5, 0.5, 0.0, 0.5)


def test_save_load_round_trip_and_stale_config(tmp_path):
    torch.manual_seed(0)
    model = LM(get_preset("tiny-softmax"))                               # tied head: saved as two copies
    meta = {"preset": "tiny-softmax", "config_hash": checkpoint.config_hash(model.cfg), "task": "mqar"}
    checkpoint.save(model, tmp_path / "m.safetensors", meta, fp16=False)
    loaded, side = checkpoint.load(tmp_path / "m.safetensors")
    assert side["task"] == "mqar" and not list(tmp_path.glob("*.partial"))
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
    checkpoint.save(model, tmp_path / "m.safetensors", {**meta, "config_hash": "0" * 16}, force=True)
    with pytest.raises(ValueError, match="another version of preset"):
        checkpoint.load(tmp_path / "m.safetensors")


def test_the_weights_carry_their_recipe_and_refuse_another_sidecar(tmp_path, monkeypatch):
    """Issue 26: a run killed between publishing the weights and the sidecar leaves new weights
    beside the old sidecar; the recipe inside the weights tells them apart."""
    torch.manual_seed(0)
    model = LM(get_preset("tiny-linear"))
    path = tmp_path / "m.safetensors"
    meta = {"preset": "tiny-linear", "config_hash": checkpoint.config_hash(model.cfg), "steps_done": 1}
    checkpoint.save(model, path, meta)
    assert checkpoint.embedded_recipe(path) == meta and checkpoint.read_sidecar(path) == meta
    with pytest.raises(FileExistsError):                          # no replacing without force
        checkpoint.save(model, path, {**meta, "steps_done": 2})
    assert checkpoint.read_sidecar(path)["steps_done"] == 1
    real = checkpoint.write_new

    def killed_before_the_sidecar(target, data, force=False):
        if Path(target).suffix == ".json":
            raise SystemExit("killed")
        real(target, data, force)
    monkeypatch.setattr(checkpoint, "write_new", killed_before_the_sidecar)
    with pytest.raises(SystemExit):
        checkpoint.save(model, path, {**meta, "steps_done": 2}, force=True)
    monkeypatch.undo()
    assert checkpoint.embedded_recipe(path)["steps_done"] == 2     # the new weights, the old sidecar
    with pytest.raises(ValueError, match=r"m\.json does not belong to .*m\.safetensors.*steps_done 2.*says 1"):
        checkpoint.load(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.safetensors"]   # no temporaries


def test_a_ctrl_c_while_publishing_waits_until_the_pair_is_whole(tmp_path, monkeypatch):
    import os
    import signal
    model = LM(get_preset("tiny-linear"))
    path, meta = tmp_path / "m.safetensors", {"preset": "tiny-linear", "steps_done": 1}
    real = checkpoint.write_new

    def interrupted(target, data, force=False):
        os.kill(os.getpid(), signal.SIGINT)         # Ctrl-C while the first file is being published
        real(target, data, force)
    monkeypatch.setattr(checkpoint, "write_new", interrupted)
    published = []
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(model, path, meta, published=lambda: published.append(True))
    assert published == [True] and checkpoint.read_sidecar(path) == checkpoint.embedded_recipe(path) == meta


def test_shipped_checkpoints_have_no_embedded_recipe_and_still_load():
    """Saved before the weights carried their recipe: the sidecar is trusted as it is."""
    shipped = Path(__file__).resolve().parents[3] / "lineage" / "scenarios" / "weights" / "tiny-deltanet-mqar.safetensors"
    assert checkpoint.embedded_recipe(shipped) is None
    _, meta = checkpoint.load(shipped)
    assert meta["preset"] == "tiny-deltanet"


def test_save_refuses_non_finite_weights_and_writes_nothing(tmp_path):
    model = LM(get_preset("tiny-linear"))
    with torch.no_grad():
        model.wte.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="wte.weight holds NaN"):
        checkpoint.save(model, tmp_path / "m.safetensors", {"preset": "tiny-linear"})
    with torch.no_grad():
        model.wte.weight[0, 0] = 1e6                            # finite, but not in float16
    with pytest.raises(ValueError, match="float16"):
        checkpoint.save(model, tmp_path / "m.safetensors", {"preset": "tiny-linear"})
    checkpoint.save(model, tmp_path / "m.safetensors", {"preset": "tiny-linear"}, fp16=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.safetensors"]


def test_the_loop_stops_before_a_non_finite_update():
    from lineage.training.loop import Diverged
    torch.manual_seed(0)
    model = LM(get_preset("tiny-linear"))
    saved = []
    with pytest.raises(Diverged) as e:
        train(model, TaskSpec("mqar", pairs=4), TrainSettings(steps=30, batch=4, lr=1e30, warmup=1),
              torch.device("cpu"), on_checkpoint=saved.append, checkpoint_every=1)
    assert e.value.what in ("loss", "gradient norm") and not math.isfinite(e.value.value)
    assert saved == list(range(1, e.value.step + 1)) and e.value.step >= 1
    assert all(torch.isfinite(t).all() for t in model.state_dict().values())    # the bad step never applied


@pytest.mark.parametrize("spec", [TaskSpec("mqar", pairs=7), TaskSpec("segmented", pairs=3, segments=5, gone=2),
                                  TaskSpec("segmented", pairs=12, segments=8),
                                  TaskSpec("two_timescales", pairs=6, segments=8, key_pool=16)])
def test_sequence_length_is_what_the_task_draws(spec):
    from lineage.training.tasks import batch, sequence_length
    assert batch(spec, np.random.default_rng(0), 2).ids.shape[1] == sequence_length(spec)


@pytest.mark.parametrize("params,needle", [
    ({"pairs": "4"}, "whole number"), ({"pairs": True}, "whole number"), ({"nope": 1}, "unknown task parameter"),
    ({"pairs": 0}, "1..124"), ({"pairs_min": 8, "pairs": 4}, "more than"), ({"mix": float("nan")}, "[0, 1]"),
    ({"segments": 100, "pairs": 6}, "limit is 2,048"),
])
def test_make_spec_checks_types_and_ranges(params, needle):
    from lineage.training.tasks import make_spec
    name = "two_timescales" if "segments" in params else "text" if "mix" in params else "mqar"
    with pytest.raises(ValueError) as e:
        make_spec(name, params)
    assert needle in str(e.value)


def test_train_then_eval_on_the_cli(tmp_path, capsys):
    out = tmp_path / "d.safetensors"
    assert main(["train", "tiny-deltanet", "--task", "mqar", "--pairs", "4", "--steps", "3", "--batch", "4",
                 "--device", "cpu", "--eval-sequences", "4", "-o", str(out)]) == 0
    side = json.loads((tmp_path / "d.json").read_text())
    assert side["command"].startswith("lineage train tiny-deltanet --task mqar --pairs 4 --steps 3 --batch 4")
    assert side["steps_done"] == 3 and "accuracy_by_pairs" in side["metrics"] and side["dtype"] == "float16"
    capsys.readouterr()
    assert main(["eval", str(out), "--pairs", "2,4", "--sequences", "8", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert set(res["accuracy_by_pairs"]) == {"2", "4"}


@pytest.mark.parametrize("argv,needle", [
    (["train", "tiny-kdaa", "--task", "mqar", "-o", "x.safetensors"], "unknown preset"),
    (["train", "k3", "--task", "mqar", "-o", "x.safetensors"], "shape-only"),
    (["train", "tiny-kda", "--task", "mqr", "-o", "x.safetensors"], "unknown task"),
    (["train", "tiny-kda", "--task", "mqar", "-o", "x.pt"], "must end in .safetensors"),
    (["train", "tiny-kda", "--task", "mqar", "--steps", "0", "-o", "x.safetensors"], "at least 1"),
    (["train", "tiny-kda", "--task", "segmented", "--pairs", "40", "-o", "x.safetensors"], "fresh keys"),
    (["train", "tiny-kda", "--task", "mqar", "-o", "no/such/dir/x.safetensors"], "no such directory"),
    (["eval", "missing.safetensors"], "no such file"),
    (["eval", "scenarios/weights/tiny-kda-mqar.safetensors", "--pairs", "4,x"], "whole numbers"),
    (["eval", "scenarios/weights/tiny-kda-mqar.safetensors", "--task", "nope"], "unknown task"),
])
def test_bad_input_is_one_line_and_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_eval_without_a_sidecar_is_refused(tmp_path, capsys):
    (tmp_path / "w.safetensors").write_bytes(b"\0" * 16)
    assert main(["eval", str(tmp_path / "w.safetensors")]) == 2
    assert "cannot read the recipe" in capsys.readouterr().err


def test_per_model_checkpoints_load_and_their_problems_are_placed(tmp_path, monkeypatch):
    from lineage.playback.session import Session
    from lineage.scenario import load
    from lineage.scenario.problems import ScenarioError
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    torch.manual_seed(5)
    a = LM(get_preset("tiny-kda"))
    checkpoint.save(a, tmp_path / "a.safetensors", {"preset": "tiny-kda"}, fp16=False)
    text = ("version: 1\ntitle: t\nmodels:\n  - {preset: tiny-kda, checkpoint: a.safetensors}\n"
            "  - {preset: tiny-kda}\ninput: {text: abc}\nweights: {seed: 7}\n")
    (tmp_path / "s.yaml").write_text(text)
    s = Session(load(tmp_path / "s.yaml"))
    first, second = (r.model for r in s.runner.models)
    assert all(torch.equal(x, y) for x, y in zip(first.state_dict().values(), a.state_dict().values()))
    assert not torch.equal(second.wte.weight, a.wte.weight)              # the other model: seeded
    (tmp_path / "m.yaml").write_text(text.replace("{preset: tiny-kda}\ninput", "{preset: tiny-kda, checkpoint: "
                                                  "gone.safetensors}\ninput"))
    with pytest.raises(ScenarioError) as e:
        load(tmp_path / "m.yaml")
    (p,) = e.value.problems
    assert p.path == "models[1].checkpoint" and p.line == 5 and "no such file" in p.message
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 64)
    (tmp_path / "j.yaml").write_text(text.replace("a.safetensors", "junk.safetensors"))
    with pytest.raises(ScenarioError) as e:
        Session(load(tmp_path / "j.yaml"))
    (p,) = e.value.problems
    assert p.path == "models[0].checkpoint" and p.line == 4 and "cannot read" in p.message


def test_evaluate_reports_what_the_task_needs():
    torch.manual_seed(0)
    model = LM(get_preset("tiny-gated-deltanet")).eval()
    res = evaluate(model, TaskSpec("segmented", pairs=3, segments=3, gone=2), sequences=4)
    assert {"accuracy", "accuracy_last", "accuracy_gone", "accuracy_no_forget_at_sep", "gates"} <= set(res)
    assert 0 <= res["gates"]["clear_sep"] <= 1
    res = evaluate(model, TaskSpec("mqar"), pairs=[2, 3], sequences=4)
    assert set(res["accuracy_by_pairs"]) == {"2", "3"}


def test_segment_confusion_against_a_plain_loop():
    """How a memory mixes up segments, counted again query by query from the sequence's text:
    a gone key answered with the value it was written with, a last-segment key answered '.'.
    The predictions are made to hit each case: the truth, the stale value, '.', a random byte."""
    b = segmented(np.random.default_rng(7), 40, 5, 4, 3)
    rng = np.random.default_rng(8)
    pred = rng.integers(0, 256, b.ids.shape)
    for r, t in zip(*np.nonzero(b.mask)):
        row = list(b.ids[r, :t])
        old = row[row.index(b.ids[r, t]) + 1]                                # its value when written
        pred[r, t] = [b.targets[r, t], old, GONE, pred[r, t]][rng.integers(4)]
    stale = last_gone = 0
    for r, t in zip(*np.nonzero(b.mask)):
        row = list(b.ids[r, :t])
        if b.targets[r, t] == GONE:
            stale += pred[r, t] == row[row.index(b.ids[r, t]) + 1]
        else:
            last_gone += pred[r, t] == GONE
    got = segment_confusion(torch.from_numpy(b.ids), torch.from_numpy(pred),
                            {k: torch.from_numpy(v) for k, v in b.groups.items()})
    assert got["gone_read_stale"] == pytest.approx(stale / b.groups["gone"].sum())
    assert got["last_read_gone"] == pytest.approx(last_gone / b.groups["last"].sum())
    assert 0.15 < got["gone_read_stale"] < 0.5 and 0.15 < got["last_read_gone"] < 0.5


def test_segmented_seed_0_is_the_forgetting_scenarios_input():
    """The scenario says its input is segmented's seed 0: a change to how the task draws (gone
    keys moved to the segment before the last) must not change sequences without gone keys."""
    from lineage.scenario import load
    ids = load(Path(__file__).resolve().parents[3] / "lineage" / "scenarios" / "forgetting.yaml").input.ids
    b = segmented(np.random.default_rng(0), 1, 12, 8)
    assert list(b.ids[0][:len(ids)]) == list(ids)
