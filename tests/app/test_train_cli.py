"""`lineage train` and `lineage eval` give one line and exit 2 for bad input (sizes bounded
before anything is drawn, non-finite numbers refused), end a Ctrl-C with one line saying what
was kept, never replace a file they did not make without --force, never pair weights with
another run's sidecar, and stop at the first NaN loss with the last good checkpoint kept."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from lineage.model import LM
from lineage.presets import get_preset
from lineage.training import checkpoint
from lineage.cli import evaluation, train as train_cli
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "lineage" / "scenarios" / "weights" / "tiny-deltanet-mqar.safetensors"
TINY = ["train", "tiny-deltanet", "--task", "mqar", "--pairs", "4", "--steps", "3", "--batch", "4",
        "--device", "cpu", "--eval-sequences", "4"]


def tiny(steps: int) -> list[str]:
    return TINY[:7] + [str(steps)] + TINY[8:]


def one_line(capsys, *needles) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def names(d: Path) -> list[str]:
    return sorted(os.listdir(d))            # hidden temporaries too


# -- 1. bad input: one located line, exit 2 ------------------------------------------------------

@pytest.mark.parametrize("extra,needle", [
    (["--seed", "-1"], "--seed"),
    (["--batch", "1000000000"], "1,048,576"),
    (["--eval-sequences", "1000000000"], "--eval-sequences"),
    (["--time-limit", "nan"], "--time-limit"),
    (["--time-limit", "inf"], "--time-limit"),
    (["--lr", "nan"], "--lr"),
    (["--lr", "inf"], "--lr"),
    (["--pairs-min", "8"], "--pairs-min"),                 # more than --pairs 4: no pair count to draw
    (["--steps", "100000000000", "--stop-after", "1"], "--steps"),     # (unbounded, it would stop at 1)
])
def test_train_refuses_bad_numbers_in_one_line(tmp_path, capsys, extra, needle):
    out = tmp_path / "m.safetensors"
    assert main(TINY + extra + ["-o", str(out)]) == 2
    one_line(capsys, needle)
    assert names(tmp_path) == []


def test_train_bounds_a_long_sequence_before_drawing_it(tmp_path, capsys):
    argv = ["train", "tiny-kda", "--task", "two_timescales", "--segments", "1000", "--steps", "1", "--batch", "1",
            "--eval-sequences", "1", "--device", "cpu", "-o", str(tmp_path / "m.safetensors")]
    assert main(argv) == 2
    one_line(capsys, "--segments")


def test_train_onto_a_directory_is_one_line(tmp_path, capsys):
    (tmp_path / "d.safetensors").mkdir()
    assert main(TINY + ["-o", str(tmp_path / "d.safetensors")]) == 2
    one_line(capsys, "is a directory")
    assert names(tmp_path) == ["d.safetensors"]           # no temporary left beside it


def test_eval_of_a_directory_says_so(tmp_path, capsys):
    assert main(["eval", str(tmp_path)]) == 2
    one_line(capsys, "is a directory")


@pytest.mark.parametrize("argv,needle", [
    (["eval", str(SHIPPED), "--sequences", "100000000"], "--sequences"),
    (["eval", str(SHIPPED), "--seed", "-1"], "--seed"),
    (["eval", str(SHIPPED), "--pairs", "125"], "1..124"),
    (["arena", "--sequences", "100000000"], "--sequences"),
    (["arena", "--seed", "-1"], "--seed"),
])
def test_eval_and_arena_bound_their_sizes(argv, needle, capsys):
    assert main(argv) == 2
    one_line(capsys, needle)


@pytest.mark.parametrize("params", [
    {"pairs": 4, "bogus": 1}, {"pairs": "16"}, {"pairs": 4.5}, {"pairs": True}, {"pairs": 1000000000},
    {"pairs": -3}, [4, 8], "pairs=4",
])
def test_a_sidecar_with_bad_task_params_is_one_line(tmp_path, capsys, params):
    model = LM(get_preset("tiny-deltanet"))
    meta = {"preset": "tiny-deltanet", "config_hash": checkpoint.config_hash(model.cfg), "task": "mqar",
            "task_params": params}
    checkpoint.save(model, tmp_path / "m.safetensors", meta)
    assert main(["eval", str(tmp_path / "m.safetensors"), "--sequences", "4"]) == 2
    one_line(capsys, "m.json", "task_params")


# -- 2. Ctrl-C: one line saying what was kept, exit 130 --------------------------------------------

def _interrupt_at(monkeypatch, at: int) -> None:
    update = train_cli._Progress.update

    def interrupted(self, step, loss, acc, tokens):
        if step + 1 == at:
            raise KeyboardInterrupt
        update(self, step, loss, acc, tokens)
    monkeypatch.setattr(train_cli._Progress, "update", interrupted)


def interrupted_main(argv) -> int:
    try:
        return main(argv)
    except KeyboardInterrupt:             # escaping, it would end the whole pytest session
        pytest.fail("KeyboardInterrupt escaped lineage train")


def test_ctrl_c_keeps_the_last_checkpoint_and_says_so(tmp_path, capsys, monkeypatch):
    _interrupt_at(monkeypatch, 6)
    out = tmp_path / "m.safetensors"
    argv = tiny(20) + ["--checkpoint-every", "3", "-o", str(out)]
    assert interrupted_main(argv) == 130
    one_line(capsys, "interrupted at step 6", "checkpoint of step 3", f"lineage eval {out}")
    _, meta = checkpoint.load(out)
    assert meta["steps_done"] == 3 and "--stop-after 3" in meta["command"]
    assert names(tmp_path) == ["m.json", "m.safetensors"]


def test_ctrl_c_before_a_checkpoint_says_nothing_was_written(tmp_path, capsys, monkeypatch):
    _interrupt_at(monkeypatch, 2)
    assert interrupted_main(TINY + ["-o", str(tmp_path / "m.safetensors")]) == 130
    one_line(capsys, "interrupted at step 2", "nothing was written")
    assert names(tmp_path) == []


def test_sigint_during_training_is_one_line_and_exit_130(tmp_path):
    out = tmp_path / "m.safetensors"
    argv = [sys.executable, "-m", "lineage.cli.main"] + tiny(1000000) + ["--checkpoint-every", "2",
                                                                                  "-o", str(out)]
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "m.json").exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert err.count("\n") == 1 and "Traceback" not in err and "interrupted at step" in err, err
    _, meta = checkpoint.load(out)                          # a whole pair, whichever step it was
    assert meta["steps_done"] >= 2 and f"checkpoint of step {meta['steps_done']}" in err


# -- 3. never replace a file the run did not make -------------------------------------------------

@pytest.mark.parametrize("existing", ["m.safetensors", "m.json"])
def test_an_existing_output_needs_force(tmp_path, capsys, existing):
    (tmp_path / existing).write_text("keep me")
    out = tmp_path / "m.safetensors"
    assert main(TINY + ["-o", str(out)]) == 2
    one_line(capsys, existing, "exists (--force replaces it)")
    assert (tmp_path / existing).read_text() == "keep me" and names(tmp_path) == [existing]
    assert main(TINY + ["--force", "-o", str(out)]) == 0
    _, meta = checkpoint.load(out)
    assert meta["steps_done"] == 3 and names(tmp_path) == ["m.json", "m.safetensors"]


@pytest.mark.parametrize("link", ["m.safetensors", "m.json"])
def test_a_symlink_at_either_name_is_refused_even_with_force(tmp_path, capsys, link):
    target = tmp_path / "elsewhere"
    target.write_text("keep me")
    (tmp_path / link).symlink_to(target)
    assert main(TINY + ["--force", "-o", str(tmp_path / "m.safetensors")]) == 2
    one_line(capsys, link, "symbolic link")
    assert target.read_text() == "keep me" and (tmp_path / link).is_symlink()


def test_a_run_rewrites_its_own_checkpoints_without_force(tmp_path):
    out = tmp_path / "m.safetensors"
    assert main(tiny(5) + ["--checkpoint-every", "1", "-o", str(out)]) == 0
    _, meta = checkpoint.load(out)
    assert meta["steps_done"] == 5 and "metrics" in meta and names(tmp_path) == ["m.json", "m.safetensors"]


# -- 4. weights and sidecar cannot disagree --------------------------------------------------------

def test_weights_beside_another_runs_sidecar_are_refused_by_eval(tmp_path, capsys):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    assert main(TINY + ["-o", str(a)]) == 0
    assert main(tiny(4) + ["-o", str(b)]) == 0
    a.write_bytes(b.read_bytes())                 # a kill between the renames: new weights, old sidecar
    capsys.readouterr()
    assert main(["eval", str(a), "--sequences", "4"]) == 2
    one_line(capsys, f"{tmp_path / 'a.json'} does not belong to {a}", "steps")


def test_the_shipped_checkpoints_still_evaluate(capsys):
    assert main(["eval", str(SHIPPED), "--pairs", "4", "--sequences", "8", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["accuracy_by_pairs"]) == {"4"}


# -- 5. a NaN loss stops the run; the last good checkpoint stays ------------------------------------

@pytest.mark.parametrize("extra", [["--lr", "1000"], ["--lr", "1e30", "--fp32"]])
def test_a_diverging_run_stops_at_the_first_bad_step(tmp_path, capsys, extra):
    out = tmp_path / "m.safetensors"
    assert main(tiny(30) + extra + ["--checkpoint-every", "1", "-o", str(out)]) == 2
    err = one_line(capsys, "step ", "--lr")
    if out.exists():                               # what is kept is whole and finite (load refuses NaN)
        _, meta = checkpoint.load(out)
        assert f"checkpoint of step {meta['steps_done']}" in err and "metrics" not in meta
    else:
        assert "nothing was written" in err
    assert names(tmp_path) in ([], ["m.json", "m.safetensors"])


def test_a_nan_loss_names_the_step_and_keeps_the_checkpoint_before_it(tmp_path, capsys):
    out = tmp_path / "m.safetensors"
    assert main(tiny(30) + ["--lr", "1e30", "--fp32", "--checkpoint-every", "1",
                                                "-o", str(out)]) == 2
    err = one_line(capsys)
    _, meta = checkpoint.load(out)
    assert f"step {meta['steps_done'] + 1}: the " in err and (" is nan" in err or " is inf" in err)
    assert all(torch.isfinite(t).all() for t in checkpoint.load(out)[0].state_dict().values())


def test_the_bar_shows_no_loss_before_the_first_step(monkeypatch):
    """A terminal showed 'loss nan' until the first step came back: a dash says 'not yet'."""
    monkeypatch.setattr(train_cli.sys.stdout, "isatty", lambda: True)
    with train_cli._Progress(10) as p:
        said = lambda: " ".join(str(c.render(p.bar.tasks[0])) for c in p.bar.columns)  # noqa: E731
        assert "nan" not in said() and "loss –" in said()
        p.update(0, 2.5, 0.25, 100)
        assert "loss 2.500" in said() and "acc 25.0%" in said()


def test_eval_and_arena_say_what_they_score(monkeypatch):
    """eval took 27-130 s and arena 60-70 s with nothing on screen: evaluate names each part it
    scores, and on a terminal a spinner on stderr shows it (off one, nothing is added)."""
    from lineage.training import checkpoint
    from lineage.training.evaluate import evaluate
    from lineage.training.tasks import TaskSpec
    model, _ = checkpoint.load(train_cli.WEIGHTS_DIR / "tiny-deltanet-mqar.safetensors")
    heard = []
    evaluate(model, TaskSpec("mqar"), pairs=[4, 8], sequences=4, progress=heard.append)
    assert heard == ["mqar, 4 pairs", "mqar, 8 pairs"]
    updates = []

    class Status:
        def __init__(self, what):
            updates.append(what)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, what):
            updates.append(what)

    import rich.console
    monkeypatch.setattr(rich.console.Console, "status", lambda self, what: Status(what))
    monkeypatch.setattr(train_cli.sys.stderr, "isatty", lambda: True)
    with train_cli._saying("arena 1/7: tiny-kda") as said:
        said("mqar, 16 pairs")
    assert updates == ["arena 1/7: tiny-kda", "arena 1/7: tiny-kda: mqar, 16 pairs"]


def test_eval_says_when_its_held_out_text_is_not_the_sidecars():
    """The text corpus is the local standard library: on another Python the shipped k3-mini-text
    scored 1.551 bits per byte against its sidecar's 1.382 with no word why. eval now says so."""
    import numpy as np

    class Here:
        def __init__(self, python, held):
            self.held_out_python, self.splits = python, {"held_out": np.zeros(held, np.uint8)}
    recorded = {"source": "Python standard library", "python": "3.12", "train_bytes": 100, "held_out_bytes": 50}
    assert evaluation._corpus_differs(recorded, Here("3.12", 50)) is None
    said = evaluation._corpus_differs(recorded, Here("3.11", 70))
    assert "Python 3.11" in said and "Python 3.12" in said and "not comparable" in said
    assert evaluation._corpus_differs(None, Here("3.11", 70)) is None      # nothing recorded: nothing to compare


def test_eval_scores_the_held_out_text_the_sidecar_scored_where_it_is_shipped(tmp_path, monkeypatch):
    """A sidecar's held-out split, shipped as that Python's bytes, replaces this machine's."""
    import gzip

    from lineage.training import corpus as corpus_mod
    here = corpus_mod.corpus()
    theirs = b"def f():\n    return 1\n" * 40
    monkeypatch.setattr(corpus_mod, "SHIPPED", tmp_path)
    (tmp_path / "stdlib-3.9-held-out.py.gz").write_bytes(gzip.compress(theirs))
    recorded = {"source": "Python standard library", "python": "3.9", "train_bytes": 1, "held_out_bytes": len(theirs)}
    scored = here.scored_as(recorded)
    assert bytes(scored.splits["held_out"]) == theirs and scored.splits["train"] is here.splits["train"]
    assert evaluation._corpus_differs(recorded, scored) is None
    assert bytes(here.splits["held_out"]) != theirs                      # the cached corpus is untouched
    assert here.scored_as({**recorded, "held_out_bytes": len(theirs) + 1}) is None      # not the recorded split
    assert here.scored_as({**recorded, "python": "3.8"}) is None                        # none shipped


# -- 6. eval says whether its numbers are the sidecar's, and what it held out --------------------

def test_eval_says_its_numbers_match_the_sidecar_and_what_it_held_out(tmp_path, capsys):
    """A checkpoint trained and scored here, evaluated on the same draws: eval names the sidecar
    and says its numbers match it, and says the held-out sequences are generated (no file)."""
    out = tmp_path / "d.safetensors"
    assert main(TINY[:-2] + ["--eval-sequences", "8", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--sequences", "8"]) == 0
    text = capsys.readouterr().out
    assert "held out: mqar sequences generated from seed 1234 (no file)" in text
    assert "against d.json (scored on cpu" in text and ": matches its numbers (each within 1 point)" in text
    rows = re.findall(r"^    (\d+) pairs +[\d.]+% there, +[\d.]+% here \(\+0\.0 points\)$", text, re.M)
    assert rows == ["4", "8", "16", "32", "64"]                  # the sidecar's pair counts, by default
    assert main(["eval", str(out), "--sequences", "8", "--seed", "7", "--json"]) == 0
    side = json.loads(capsys.readouterr().out)["sidecar"]
    assert side["matches"] is None and "seed 7 here, 1234 in the sidecar" in side["not_comparable"]


def test_against_sidecar_says_which_number_differs():
    from lineage.training.evaluate import against_sidecar
    meta = {"metrics": {"task": "text", "seed": 1234, "sequences": 256, "bits_per_byte": 1.3816,
                        "accuracy_by_pairs": {"16": 0.0125}}}
    res = {"task": "text", "seed": 1234, "sequences": 256, "bits_per_byte": 1.40, "accuracy_by_pairs": {"16": 0.0125}}
    side = against_sidecar(res, meta)
    assert side["matches"] is False and [r["matches"] for r in side["compared"]] == [True, False]
    lines = evaluation._sidecar_lines({"file": "k.json", "device": "cuda", "device_name": "H200", **side})
    assert "does NOT match: bits per byte" in lines[0] and lines[-1].endswith("<- differs")
    assert against_sidecar({**res, "bits_per_byte": 1.385}, meta)["matches"] is True
    assert "pair counts 4 here, 16" in against_sidecar({**res, "accuracy_by_pairs": {"4": 1.0}}, meta)["not_comparable"]
    assert against_sidecar(res, {**meta, "metrics": {}})["not_comparable"] == "the sidecar records no held-out metrics"


def test_eval_names_the_shipped_held_out_file_it_reads():
    """k3-mini-text's sidecar scored Python 3.12's held-out split, shipped in lineage/scenarios/data/:
    eval reads that file on any Python and names it."""
    from lineage.training import corpus as corpus_mod
    meta = checkpoint.read_sidecar(ROOT / "lineage" / "scenarios" / "weights" / "k3-mini-text.safetensors")
    scored = corpus_mod.corpus().scored_as(meta["corpus"])
    assert scored.held_out_source() == ("lineage/scenarios/data/stdlib-3.12-held-out.py.gz "
                                        "(Python 3.12's standard library, 655,068 bytes)")
    assert "this machine's standard library" in corpus_mod.corpus().held_out_source()
