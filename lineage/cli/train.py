"""`lineage train`, and the arguments of `lineage eval` and `lineage arena` (lineage/cli/evaluation.py
runs those two): the command-line side of lineage.training (arguments, the progress bar). Bad
input: one line on stderr, exit 2."""
from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

from lineage.scenarios import DIR as SCENARIO_DIR

WEIGHTS_DIR = Path(SCENARIO_DIR) / "weights"
ARENA_PAIRS = (4, 8, 16, 32, 64)


def add_commands(sub) -> None:
    pt = sub.add_parser("train", help="train a preset on a memory task; writes OUT.safetensors and OUT.json")
    pt.add_argument("preset")
    pt.add_argument("--task", required=True, help="mqar, segmented, two_timescales or text")
    pt.add_argument("--steps", type=int, default=2000)
    pt.add_argument("--batch", type=int, default=128)
    pt.add_argument("--lr", type=float, default=3e-3)
    pt.add_argument("--warmup", type=int, default=100)
    pt.add_argument("--pairs", type=int, default=None, help="pairs (mqar), per segment (segmented), per block")
    pt.add_argument("--pairs-min", type=int, default=None, help="mqar: also train on pairs_min, 2 pairs_min, ...")
    pt.add_argument("--segments", type=int, default=None, help="segments (segmented) or blocks (two_timescales)")
    pt.add_argument("--mix", type=float, default=None, help="text: share of batches that are MQAR")
    pt.add_argument("--key-pool", type=int, default=None, help="two_timescales: local keys come from this many")
    pt.add_argument("--gone", type=int, default=None, help="segmented: keys of the segment before the last also queried (answer '.')")
    pt.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    pt.add_argument("--seed", type=int, default=0)
    pt.add_argument("--fp32", action="store_true", help="keep float32 weights (default: float16)")
    pt.add_argument("--checkpoint-every", type=int, default=250)
    pt.add_argument("--eval-sequences", type=int, default=256, help="held-out sequences for the final metrics")
    pt.add_argument("--stop-after", type=int, default=None, help="stop after this step of the --steps schedule")
    pt.add_argument("--time-limit", type=float, default=None,
                    help="stop after this many seconds; the sidecar's command then says --stop-after")
    pt.add_argument("-o", "--output", required=True, help="OUT.safetensors (the recipe goes to OUT.json)")
    pt.add_argument("--force", action="store_true", help="replace OUT.safetensors and OUT.json if they exist")
    pe = sub.add_parser("eval", help="held-out scores and mechanism statistics of a trained checkpoint")
    pe.add_argument("checkpoint")
    pe.add_argument("--task", default=None, help="default: the task it was trained on")
    pe.add_argument("--pairs", default=None, help="mqar pair counts, e.g. 4,8,16,32,64")
    pe.add_argument("--seed", type=int, default=1234)
    pe.add_argument("--sequences", type=int, default=256)
    pe.add_argument("--json", action="store_true")
    pa = sub.add_parser("arena", help="MQAR accuracy against pairs for the shipped models of each mechanism")
    pa.add_argument("--seed", type=int, default=1234)
    pa.add_argument("--sequences", type=int, default=128)
    pa.add_argument("--json", action="store_true")


MAX_SEED = 2**32 - 1
MAX_STEPS = 10_000_000


def _fail(cmd: str, msg: str) -> int:
    print(f"lineage {cmd}: {msg}", file=sys.stderr)
    return 2


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _task_spec(name: str, given: dict, base: dict | None = None):
    """The task with the sidecar's parameters (`base`, already checked) and the given flags over
    its defaults; ValueError naming the flag for a value out of range."""
    from lineage.training.tasks import make_spec
    return make_spec(name, {**(base or {}), **{k: v for k, v in given.items() if v is not None}}, _flag)


def _check_seed(seed: int) -> None:
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seed must be in 0..{MAX_SEED:,}, got {seed}")


def _check_sizes(spec, checks) -> None:
    """Each (flag, count, pairs) asks for count sequences at once: ValueError before any is drawn."""
    from lineage.training.tasks import batch_problem
    for flag, n, pairs in checks:
        problem = batch_problem(spec, n, flag, pairs)
        if problem is not None:
            raise ValueError(problem)


def _check_train_args(args) -> None:
    import math
    for flag, value, least, most in (("--steps", args.steps, 1, MAX_STEPS), ("--warmup", args.warmup, 0, MAX_STEPS),
                                     ("--checkpoint-every", args.checkpoint_every, 1, MAX_STEPS)):
        if not least <= value <= most:
            raise ValueError(f"{flag} must be at least {least} and at most {most:,}, got {value}")
    if args.stop_after is not None and args.stop_after < 1:
        raise ValueError(f"--stop-after must be at least 1, got {args.stop_after}")
    for flag, value in (("--lr", args.lr), ("--time-limit", args.time_limit)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{flag} must be a finite number above 0, got {value}")
    _check_seed(args.seed)


def _device(name: str):
    import torch
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device here (try --device cpu)")
    return torch.device(name)


def train(args) -> int:
    """Bad input: one line, exit 2. Ctrl-C: one line saying what was kept, exit 130. A NaN or inf
    loss: one line with the step and a hint, exit 2, the last good checkpoint kept."""
    run = _Run(Path(args.output))
    try:
        return _train(args, run)
    except KeyboardInterrupt:
        where = f"at step {run.step}" if run.phase == "training" else run.phase
        print(f"lineage train: {run.out}: interrupted {where}: {run.kept()}", file=sys.stderr)
        return 130


class _Run:
    """What a training run has done so far, for the line that ends it early."""

    def __init__(self, out: Path):
        self.out, self.phase, self.step, self.written = out, "before training", 0, None

    def kept(self) -> str:
        if self.written is None:
            return "nothing was written"
        return (f"{self.out} and {self.out.with_suffix('.json').name} hold the checkpoint of step {self.written} "
                f"(lineage eval {self.out})")


def _train(args, run: _Run) -> int:
    from lineage.files import output_problem
    from lineage.presets import get_preset
    out = run.out
    try:
        cfg = get_preset(args.preset)                     # an unknown name raises with the known ones
        if cfg.shape_only:
            raise ValueError(f"preset {args.preset!r} is shape-only (arithmetic); train a runnable one, e.g. tiny-kda")
        spec = _task_spec(args.task, {k: getattr(args, k) for k in ("pairs", "pairs_min", "segments", "key_pool", "mix", "gone")})
        _check_train_args(args)
        _check_sizes(spec, [("--batch", args.batch, None),
                            ("--eval-sequences", args.eval_sequences, list(ARENA_PAIRS) if spec.name == "mqar" else None)])
        if out.suffix != ".safetensors":
            raise ValueError(f"{out}: the output must end in .safetensors")
        for target in (out, out.with_suffix(".json")):    # before the model is built: fail in milliseconds
            problem = output_problem(target, (), args.force)
            if problem is not None:
                raise ValueError(f"{target}: {problem}")
        if spec.name != "text":              # one sequence now: sizes the task cannot draw fail here, in one line
            import numpy as np
            from lineage.training.tasks import batch as draw_one
            draw_one(spec, np.random.default_rng(0), 1)
        device = _device(args.device)
    except ValueError as e:
        return _fail("train", str(e))
    import platform
    import torch
    from lineage import __version__
    from lineage.model import LM
    from lineage.training import checkpoint
    from lineage.training.loop import Diverged, TrainSettings
    from lineage.training.loop import train as train_loop
    corpus = None
    if spec.name == "text":
        from lineage.training.corpus import corpus as load_corpus
        try:
            corpus = load_corpus()
        except ValueError as e:
            return _fail("train", str(e))
    torch.manual_seed(args.seed)
    model = LM(cfg).to(device)
    st = TrainSettings(steps=args.steps, batch=args.batch, lr=args.lr, warmup=min(args.warmup, args.steps),
                       seed=args.seed, stop_after=args.stop_after)
    task_flags = "".join(f" --{k.replace('_', '-')} {v}" for k, v in spec.params().items() if k != "length" and
                         not (k in ("pairs_min", "mix", "gone") and not v))
    command = (f"lineage train {args.preset} --task {spec.name}{task_flags} --steps {st.steps} --batch {st.batch} "
               f"--lr {st.lr:g} --warmup {st.warmup} --seed {st.seed}{' --fp32' if args.fp32 else ''} "
               f"--device {device.type}{{stop}} -o {out.name}")
    meta = {"preset": cfg.name, "config_hash": checkpoint.config_hash(cfg), "task": spec.name,
            "task_params": spec.params(), "steps": st.steps, "batch": st.batch, "lr": st.lr, "warmup": st.warmup,
            "seed": st.seed, "device": device.type,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
            "dtype": "float32" if args.fp32 else "float16", "lineage": __version__, "torch": torch.__version__,
            "python": platform.python_version(), "command": command}
    if corpus is not None:
        meta["corpus"] = corpus.describe()
    t0 = time.perf_counter()

    def save(step: int, final: dict | None = None) -> None:
        """The first write of this run replaces a file only with --force; later ones replace its own."""
        stop = "" if step == st.steps else f" --stop-after {step}"
        checkpoint.save(model, out, {**meta, "command": command.replace("{stop}", stop), "steps_done": step,
                                     "wall_s": round(time.perf_counter() - t0, 1),
                                     **({"metrics": final} if final else {})},
                        fp16=not args.fp32, force=args.force or run.written is not None,
                        published=lambda: setattr(run, "written", step))

    def stopped(step: int, why: str) -> int:
        return _fail("train", f"{out}: step {step}: {why}; {run.kept()}")

    with _Progress(st.steps if st.stop_after is None else min(st.steps, st.stop_after)) as bar:
        def on_step(step: int, loss: float, acc: float, tokens: int) -> None:
            run.step = step + 1
            bar.update(step, loss, acc, tokens)

        def on_checkpoint(step: int) -> None:
            try:
                save(step)
            except (OSError, ValueError) as e:
                raise _SaveFailed(step, e) from None

        run.phase = "training"
        try:
            train_metrics = train_loop(model, spec, st, device, corpus, on_step=on_step, on_checkpoint=on_checkpoint,
                                       checkpoint_every=args.checkpoint_every, time_limit=args.time_limit)
        except Diverged as e:
            return stopped(e.step + 1, f"the {e.what} is {e.value} (try a lower --lr than {st.lr:g})")
        except _SaveFailed as e:
            return stopped(e.step, _save_problem(e.error))
    done = train_metrics["steps_done"]
    run.phase = "while scoring the trained model"
    from lineage.training.evaluate import evaluate
    wall = time.perf_counter() - t0
    model_eval = model
    try:
        save(done)                              # the weights now: a Ctrl-C while scoring keeps them
        if not args.fp32:                       # score what is shipped: the float16 weights, read back
            model_eval, _ = checkpoint.load(out, device)
    except (OSError, ValueError) as e:
        return stopped(done, _save_problem(e))
    pairs = list(ARENA_PAIRS) if spec.name == "mqar" else None
    with _saying("scoring held out") as said:
        scores = evaluate(model_eval, spec, seed=1234, pairs=pairs, sequences=args.eval_sequences,
                          device=device, corpus=corpus, progress=said)
    metrics = {**train_metrics, **scores}
    meta["wall_s"] = round(wall, 1)
    meta["tokens_per_s"] = round(bar.tokens / wall)
    run.phase = "while writing the metrics"
    try:
        save(done, metrics)
    except (OSError, ValueError) as e:
        return stopped(done, _save_problem(e))
    print(f"{out}: {_headline(metrics)}  ({wall:.0f} s, {meta['tokens_per_s']:,} tokens/s on {meta['device_name']})")
    return 0


class _SaveFailed(Exception):
    """A checkpoint the loop asked for could not be written: carried out of the loop to one line."""

    def __init__(self, step: int, error: Exception):
        super().__init__(step, error)
        self.step, self.error = step, error


def _save_problem(e: Exception) -> str:
    if isinstance(e, OSError):
        name = f"{e.filename}: " if e.filename else ""
        return f"cannot write the checkpoint: {name}{e.strerror or e}"
    hint = " (train with --fp32 or a lower --lr)" if "float16" in str(e) else " (try a lower --lr)"
    return f"not saved: {e}{hint}"


@contextlib.contextmanager
def _saying(what: str):
    """A spinner on a terminal's stderr naming what is scored now (eval and arena take a minute
    or two); a callback for evaluate(progress=...). Off a terminal it says nothing."""
    if not sys.stderr.isatty():
        yield lambda now: None
        return
    from rich.console import Console
    with Console(stderr=True).status(what) as status:
        yield lambda now: status.update(f"{what}: {now}")


class _Progress:
    """A rich progress bar with loss, accuracy, tokens/s and ETA; plain lines when not a terminal."""

    def __init__(self, steps: int):
        self.steps, self.tokens, self.t0 = steps, 0, time.perf_counter()
        self.tty = sys.stdout.isatty()

    def __enter__(self):
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
            self.bar = Progress(TextColumn("train"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[said]}"), TimeRemainingColumn())
            self.bar.__enter__()
            # before the first step there is no loss to show: a dash, not 'loss nan'
            self.task = self.bar.add_task("train", total=self.steps, said="loss –  acc –  – tok/s")
        return self

    def update(self, step: int, loss: float, acc: float, tokens: int) -> None:
        self.tokens += tokens
        tps = self.tokens / max(1e-9, time.perf_counter() - self.t0)
        if self.tty:
            self.bar.update(self.task, completed=step + 1, said=f"loss {loss:.3f}  acc {acc:.1%}  {tps:,.0f} tok/s")
        elif (step + 1) % max(1, min(self.steps // 10, 100)) == 0:
            print(f"step {step + 1}/{self.steps}  loss {loss:.3f}  acc {acc:.1%}  {tps:,.0f} tok/s", flush=True)

    def __exit__(self, *exc):
        if self.tty:
            self.bar.__exit__(*exc)


def _headline(m: dict) -> str:
    if "accuracy_by_pairs" in m and "bits_per_byte" not in m:
        return "accuracy " + ", ".join(f"{k} pairs {v:.1%}" for k, v in m["accuracy_by_pairs"].items())
    parts = []
    if "bits_per_byte" in m:
        parts.append(f"{m['bits_per_byte']:.3f} bits/byte held out")
    for k in ("accuracy", "accuracy_local", "accuracy_fact", "accuracy_no_forget_at_sep"):
        if k in m:
            parts.append(f"{k.replace('_', ' ')} {m[k]:.1%}")
    if "accuracy_by_pairs" in m:
        parts.append("mqar " + ", ".join(f"{k}: {v:.1%}" for k, v in m["accuracy_by_pairs"].items()))
    return "; ".join(parts)
