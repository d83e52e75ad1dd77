"""`lineage eval` and `lineage arena`: held-out scores of a trained checkpoint (said against its
sidecar's, with the held-out file it read) and the MQAR table of the shipped models of each
mechanism. Their arguments are defined with train's (lineage/cli/train.py). Bad input: one line
on stderr, exit 2."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from lineage.configs import MIXERS
from lineage.retention import CLEARS, HOLDS
from lineage.scenarios import resolve

from .train import ARENA_PAIRS, WEIGHTS_DIR, _check_seed, _check_sizes, _fail, _saying, _task_spec

# each mixer's one-mechanism preset, in the registry's order; a row appears once its
# {preset}-mqar.safetensors ships in WEIGHTS_DIR
ARENA = tuple(m.tiny for m in MIXERS.values() if m.tiny)


def _pairs(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        vals = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"--pairs takes whole numbers separated by commas, got {text!r}") from None
    from lineage.training.tasks import KEY_IDS
    if not vals or any(not 1 <= v <= len(KEY_IDS) for v in vals):
        raise ValueError(f"--pairs: each count must be in 1..{len(KEY_IDS)}, got {text!r}")
    return vals


def evaluate(args) -> int:
    try:
        return _evaluate(args)
    except KeyboardInterrupt:
        print(f"lineage eval: {args.checkpoint}: interrupted; nothing was written", file=sys.stderr)
        return 130


def _evaluate(args) -> int:
    args.checkpoint = resolve(args.checkpoint)      # scenarios/weights/X as a checkout had it
    try:
        _check_seed(args.seed)
        pairs = _pairs(args.pairs)
        from lineage.files import kind_of
        from lineage.training import checkpoint
        try:
            mode = os.stat(args.checkpoint).st_mode
        except OSError:
            raise ValueError(f"{args.checkpoint}: no such file") from None
        if not Path(args.checkpoint).is_file():
            raise ValueError(f"{args.checkpoint}: is {kind_of(mode)}, not a checkpoint file (eval takes OUT.safetensors)")
        meta = checkpoint.read_sidecar(args.checkpoint)
        trained = meta.get("task")
        name = args.task or trained
        spec = _task_spec(name, {}, meta.get("task_params") if name == trained else None)
        recorded = (meta.get("metrics") or {}).get("accuracy_by_pairs")
        if pairs is None and name == trained and isinstance(recorded, dict) and recorded:
            # the sidecar's pair counts, in its order: the same draws, so its numbers compare
            pairs = _pairs(",".join(str(k) for k in recorded))
        _check_sizes(spec, [("--sequences", args.sequences, pairs)])
        model, meta = checkpoint.load(args.checkpoint)
        corpus = None
        if spec.name == "text":
            from lineage.training.corpus import corpus as load_corpus
            corpus = load_corpus()
            # the held-out split the sidecar's number was scored on, where it is shipped
            corpus = corpus.scored_as(meta.get("corpus")) or corpus
    except ValueError as e:
        return _fail("eval", str(e))
    from lineage.training.evaluate import evaluate as run
    t0 = time.perf_counter()
    with _saying(f"eval {Path(args.checkpoint).name}") as said:
        res = run(model, spec, seed=args.seed, pairs=pairs, sequences=args.sequences, corpus=corpus, progress=said)
    res["eval_s"] = round(time.perf_counter() - t0, 2)
    differs = _corpus_differs(meta.get("corpus"), corpus)
    if differs:
        res["corpus_differs"] = differs
    from lineage.training.evaluate import against_sidecar
    res["held_out"] = corpus.held_out_source() if corpus is not None else \
        f"{spec.name} sequences generated from seed {args.seed} (no file)"
    res["sidecar"] = {"file": str(checkpoint.sidecar_path(args.checkpoint)), "device": meta.get("device"),
                      "device_name": meta.get("device_name"), **against_sidecar(res, meta, differs)}
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{args.checkpoint} ({meta['preset']}, trained on {trained}): {spec.name}, seed {args.seed}")
    print(f"  held out: {res['held_out']}")
    if differs:
        print(f"  note: {differs}")
    for k, v in res.get("accuracy_by_pairs", {}).items():
        print(f"  {k:>3} pairs  accuracy {v:6.1%}")
    for k in ("accuracy", "accuracy_local", "accuracy_fact", "accuracy_last", "accuracy_gone",
              "accuracy_no_forget_at_sep", "accuracy_local_no_forget", "accuracy_fact_no_forget",
              "accuracy_last_no_forget", "accuracy_gone_no_forget"):
        if k in res:
            print(f"  {k.replace('_', ' '):<38} {res[k]:6.1%}")
    for k, label in (("gone_read_stale", "gone keys read as their old value"),
                     ("last_read_gone", "last keys read as '.'"),
                     ("gone_read_stale_no_forget", "gone read as old value, no forget"),
                     ("last_read_gone_no_forget", "last read as '.', no forget")):
        if k in res:
            print(f"  {label:<38} {res[k]:6.1%}")
    if "bits_per_byte" in res:
        print(f"  bits per byte (held out)               {res['bits_per_byte']:.3f}")
    g = res.get("gates")
    if g and "clear_sep" in g:
        print(f"  {CLEARS:<13} at separators {g['clear_sep']:6.1%}   elsewhere {g['clear_else']:6.1%}")
        print(f"  {HOLDS:<13} at separators {g['hold_sep']:6.1%}   elsewhere {g['hold_else']:6.1%}")
        print(f"  mean alpha    at separators {g['mean_alpha_sep']:.3f}    elsewhere {g['mean_alpha_else']:.3f}")
    elif g:
        print(f"  {CLEARS} {g['clear']:.1%}, {HOLDS} {g['hold']:.1%}, mean alpha {g['mean_alpha']:.3f}")
    r = res.get("routing")
    if r:
        print(f"  expert load max/mean {r['load_max_over_mean']:.2f} (worst layer {r['load_worst_layer']:.2f})")
        print("  share of a byte class's choices on its top-k experts (uniform "
              f"{r['uniform_top_k_share']:.1%}): " + ", ".join(f"{c} {v:.0%}" for c, v in r["class_top_k_share"].items()))
    d = res.get("depth")
    if d:
        print(f"  AttnRes weight entropy {d['attnres_entropy']:.3f} nats ({d['attnres_entropy_rel']:.0%} of uniform)")
    print("\n".join(_sidecar_lines(res["sidecar"])))
    print(f"  ({res['eval_s']:.1f} s)")
    return 0


def _sidecar_lines(side: dict) -> list[str]:
    """Whether the numbers above are the sidecar's: each compared, or why none can be."""
    name = Path(side["file"]).name
    if side["not_comparable"]:
        return [f"  against {name}: not compared: {side['not_comparable']}"]
    dev, dev_name = side.get("device") or "?", side.get("device_name")
    where = f"scored on {dev}" + (f", {dev_name}" if dev_name and dev_name != dev else "")
    rows, labels = side["compared"], []
    for r in rows:
        m = r["metric"]
        labels.append("bits per byte" if m == "bits_per_byte" else "accuracy" if m == "accuracy"
                      else m.split(".")[1] + " pairs")
    bad = [lab for lab, r in zip(labels, rows) if not r["matches"]]
    tol = ", ".join(sorted({f"{r['within']:g} bits per byte" if r["metric"] == "bits_per_byte"
                            else f"{100 * r['within']:g} point" for r in rows}))
    head = (f"matches its numbers (each within {tol})" if not bad
            else f"does NOT match: {', '.join(bad)} more than {tol} apart")
    out = [f"  against {name} ({where}; here cpu): {head}"]
    for lab, r in zip(labels, rows):
        if abs(r["diff"]) < 5e-4:
            r = {**r, "diff": 0.0}                     # no -0.000: a difference under the last digit is none
        if r["metric"] == "bits_per_byte":
            nums = f"{r['sidecar']:.3f} there, {r['here']:.3f} here ({r['diff']:+.3f})"
        else:
            nums = f"{r['sidecar']:6.1%} there, {r['here']:6.1%} here ({100 * r['diff']:+.1f} points)"
        out.append(f"    {lab:<14} {nums}" + ("" if r["matches"] else "  <- differs"))
    return out


def _corpus_differs(recorded: dict | None, corpus) -> str | None:
    """Why held-out bits per byte here cannot be compared with the sidecar's (None: they can).
    The text corpus is this machine's standard library: another Python version holds other
    files, so the same weights score differently (1.55 here on 3.11 against 1.38 on 3.12)."""
    if corpus is None or not recorded:
        return None
    here = {"python": corpus.held_out_python, "held_out_bytes": int(corpus.splits["held_out"].size)}
    if all(recorded.get(k) == here[k] for k in here):
        return None
    return (f"the held-out text here (Python {here['python']}'s standard library, {here['held_out_bytes']:,} bytes) "
            f"is not the one the sidecar scored (Python {recorded.get('python')}, "
            f"{recorded.get('held_out_bytes', 0):,} bytes): bits per byte are not comparable with its numbers")


def arena_rows(seed: int = 1234, sequences: int = 128) -> list[dict]:
    """MQAR accuracy at each pair count for each shipped tiny-*-mqar model."""
    from lineage.training import checkpoint
    from lineage.training.evaluate import evaluate as run
    from lineage.training.tasks import TaskSpec
    rows = []
    shipped = [p for p in ARENA if (WEIGHTS_DIR / f"{p}-mqar.safetensors").is_file()]
    for k, preset in enumerate(shipped):
        path = WEIGHTS_DIR / f"{preset}-mqar.safetensors"
        model, meta = checkpoint.load(path)
        with _saying(f"arena {k + 1}/{len(shipped)}: {preset}") as said:
            res = run(model, TaskSpec("mqar"), seed=seed, pairs=list(ARENA_PAIRS), sequences=sequences, progress=said)
        rows.append({"preset": preset, "state_bytes": _state(preset), "accuracy": res["accuracy_by_pairs"]})
    return rows


def _state(preset: str) -> str:
    from lineage.arithmetic import model_memory
    from lineage.presets import get_preset
    cfg = get_preset(preset)
    mem = model_memory(cfg, 0)
    return "cache grows" if mem["bytes_per_token"] else f"{mem['state_bytes']:,} B"


def arena(args) -> int:
    from lineage.training.tasks import TaskSpec
    try:
        _check_seed(args.seed)
        _check_sizes(TaskSpec("mqar"), [("--sequences", args.sequences, list(ARENA_PAIRS))])
    except ValueError as e:
        return _fail("arena", str(e))
    try:
        rows = arena_rows(args.seed, args.sequences)
    except ValueError as e:
        return _fail("arena", str(e))
    if not rows:
        return _fail("arena", f"no shipped MQAR models in {WEIGHTS_DIR}")
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(arena_table(rows))
    return 0


def arena_table(rows: list[dict]) -> str:
    head = "| model | state | " + " | ".join(f"{n} pairs" for n in ARENA_PAIRS) + " |"
    lines = [head, "|" + "---|" * (2 + len(ARENA_PAIRS))]
    for r in rows:
        lines.append(f"| {r['preset']} | {r['state_bytes']} | " +
                     " | ".join(f"{r['accuracy'][str(n)]:.1%}" for n in ARENA_PAIRS) + " |")
    return "\n".join(lines)
