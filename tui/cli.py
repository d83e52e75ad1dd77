"""The `lineage` command line. Subcommands that only do arithmetic never import torch."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lineage import __version__
from scenarios import DIR as SCENARIO_DIR



def _config_of(name: str):
    """A preset's config, or a checkpoint directory's (read from its config.json, no weights)."""
    if Path(name).expanduser().is_dir():
        from lineage.pretrained import read_model_config
        return read_model_config(name)[0]
    from lineage.presets import get_preset
    return get_preset(name)


def _params(args) -> int:
    from lineage.arithmetic import count, human
    try:
        cfg = _config_of(args.preset)
    except ValueError as e:
        print(f"lineage params: {e}", file=sys.stderr)
        return 2
    c = count(cfg)
    if args.json:
        print(json.dumps(c, indent=2))
        return 0
    print(f"{cfg.name}: {c['total']:,} parameters ({human(c['total'])}), {c['active']:,} active per token "
          f"({human(c['active'])})" + ("  [shape only]" if cfg.shape_only else ""))
    kinds = ", ".join(f"{n} {k}" for k, n in _kind_counts(cfg.mixers).items())
    print(f"  {c['layers']} layers: {kinds}")
    rows = [("embedding", c["embedding"]), ("lm head", c["lm_head"]), ("mixers", c["mixers"]),
            ("dense ffn", c["ffn_dense"]), ("moe (all experts)", c["moe_total"]),
            ("moe (one token)", c["moe_active"]), ("norms", c["norms"]), ("attnres", c["attnres"])]
    for name, n in rows:
        if n:
            print(f"  {name:<18} {n:>20,}  {human(n):>8}")
    if cfg.notes:
        print(f"  {cfg.notes}")
    return 0


def _kind_counts(kinds) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in kinds:
        out[k] = out.get(k, 0) + 1
    return out


def _memory(args) -> int:
    from lineage.arithmetic import H200_BYTES, batch_per_card, count, model_memory
    try:
        cfg = _config_of(args.preset)
    except ValueError as e:
        print(f"lineage memory: {e}", file=sys.stderr)
        return 2
    weights = count(cfg)["total"] * args.weight_bytes
    card = int(args.card_gb * 10**9)
    rows = []
    ctx = args.context
    for n in [ctx // 4, ctx // 2, ctx, ctx * 2, ctx * 4]:
        if n < 1:
            continue
        mm = model_memory(cfg, n)
        mm["batch_per_card"] = batch_per_card(n, mm["bytes_per_token"], weights, card, mm["state_bytes"])
        rows.append(mm)
    if args.json:
        print(json.dumps({"preset": cfg.name, "weight_bytes": weights, "card_bytes": card, "rows": rows}, indent=2))
        return 0
    print(f"{cfg.name}: weights {weights / 1e9:.1f} GB at {args.weight_bytes} B/param on a {args.card_gb:g} GB card"
          + ("" if weights < card else "  (weights alone exceed the card: batch is 0)"))
    r0 = rows[0]
    print(f"  cache {r0['bytes_per_token']:,} B per token (all layers), fixed state {r0['state_bytes']:,} B per "
          f"sequence (S {r0['matrix_bytes']:,} + conv cache {r0['conv_bytes']:,}); counted as {r0['dtypes']}")
    print(f"  {'context':>10} {'cache/seq':>12} {'state/seq':>12} {'batch/card':>11}")
    for r in rows:
        print(f"  {r['context']:>10,} {_binary(r['cache_bytes']):>12} {_binary(r['state_bytes']):>12} "
              f"{int(r['batch_per_card']):>11,}")
    return 0


def _binary(n: float) -> str:
    """Bytes in the largest binary unit that keeps a number of at least 1: '4.5 GiB', '110 KiB'."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n < 100 * size else f"{n / size:,.0f} {unit}"
    return f"{int(n)} B"


def _err(msg: str) -> int:
    print(msg, file=sys.stderr)
    return 2


def _first_line(e: Exception) -> str:
    """An error as one line: its message's first line, or its type when it has none."""
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _list(args) -> int:
    from lineage.scenario.problems import ScenarioError
    from lineage.scenario.reader import load_file
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        try:
            data = load_file(path).data
            title = data.get("title", "") if isinstance(data, dict) else ""
        except ScenarioError:
            title = "(does not parse: run lineage validate)"
        print(f"{path.stem:<24} {title}")
    return 0


def _validate(args) -> int:
    bad = sum(not _check(_resolve(f), every_frame=True) for f in args.files)
    return 2 if bad else 0


def _check(path: str, salvage: bool = False, every_frame: bool = False) -> bool:
    """Whether a scenario loads or a trace opens (and, with every_frame, reads to the end);
    if not, its located problems go to stderr. Torch is not imported."""
    from lineage.scenario import load
    from lineage.scenario.problems import ScenarioError
    from lineage.playback.session import is_trace
    from lineage.playback.trace import TraceError, TraceReader
    try:
        if is_trace(path):
            r = TraceReader(path, salvage=salvage)
            for i in range(len(r) if every_frame else 0):
                r.frame(i)
            r.close()
        else:
            load(path)
    except ScenarioError as e:
        for p in e.problems:
            print(str(p), file=sys.stderr)
        return False
    except TraceError as e:
        print(str(e), file=sys.stderr)
        return False
    return True


def _missing(path: str) -> str:
    """'no such file', with the closest bundled scenario when the name looks like one ('recal')."""
    from lineage.did_you_mean import did_you_mean
    hint = did_you_mean(Path(path).stem, [f.stem for f in SCENARIO_DIR.glob("*.yaml")]) \
        if not Path(path).suffix or Path(path).suffix in (".yaml", ".yml") else ""
    return f"{path}: no such file{hint}"


def _resolve(name: str) -> str:
    """A path, or the name of a bundled scenario ('tour' -> scenarios/tour.yaml)."""
    p = Path(name)
    if not p.exists() and not p.suffix and (SCENARIO_DIR / f"{name}.yaml").exists():
        return str(SCENARIO_DIR / f"{name}.yaml")
    return name


def _open(path: str, salvage: bool = False):
    """(cursor, None) or (None, exit code after printing the located problem)."""
    from lineage.scenario.problems import ScenarioError
    from lineage.playback.trace import TraceError
    path = _resolve(path)
    try:
        from lineage.playback.session import open_path
        return open_path(path, salvage=salvage), None
    except ScenarioError as e:
        for p in e.problems:
            print(str(p), file=sys.stderr)
        return None, 2
    except TraceError as e:
        return None, _err(str(e))
    except FileNotFoundError:
        return None, _err(_missing(path))
    except (ValueError, RuntimeError) as e:     # never a traceback: one line, exit 2
        return None, _err(f"{path}: {_first_line(e)}")


def _record(args) -> int:
    import time
    from lineage.playback.session import Session
    out = Path(args.output)
    problem = _output_problem(out, Path(_resolve(args.scenario)), args.force)
    if problem is not None:                  # before the model is built: fail in milliseconds
        return _err(f"{out}: {problem}")
    cur, code = _open(args.scenario)
    if cur is None:
        return code
    if not isinstance(cur, Session):
        return _err(f"{args.scenario}: is already a trace (record takes a scenario)")
    n = cur.total if args.steps is None else min(args.steps, cur.total)
    t0 = time.perf_counter()
    try:
        writer = cur.record_to(out, overwrite=args.force)
    except OSError as e:                     # exists meanwhile, another recording, read-only directory
        return _err(f"{out}: {e.strerror or e}")
    try:
        cur.record_all(n)
    except KeyboardInterrupt:
        _close_quietly(cur)
        print(f"{out}: interrupted: its first {writer.frames} frames are kept", file=sys.stderr)
        return 130
    except OSError as e:                     # a full disk, most likely
        _close_quietly(cur)
        return _err(f"{out}: {e.strerror or e} after {writer.frames} frames; those are kept "
                    f"(lineage run {out} --salvage)")
    except Exception as e:  # noqa: BLE001  the model failed at a step: one line, and no stale .partial left
        _close_quietly(cur)
        reason = _first_line(e)
        return _err(f"{args.scenario}: step {writer.frames + 1}: {reason}; the {writer.frames} frames before it "
                    f"are in {out}")
    try:
        cur.close()
    except OSError as e:
        return _err(f"{out}: {e.strerror or e}")
    dt = time.perf_counter() - t0
    size = out.stat().st_size
    print(f"{out}: {n} steps in {dt:.2f} s ({n / dt:.1f} steps/s), {size:,} bytes "
          f"({writer.bytes_frames / max(n, 1):,.0f} bytes per step)")
    if args.steps is not None and args.steps > cur.total:
        print(f"note: the scenario has {cur.total} steps; recorded all of them", file=sys.stderr)
    return 0


def _output_problem(out: Path, source: Path, force: bool) -> str | None:
    """Why `record -o out` must not start, or None."""
    if out.is_dir():
        return "is a directory (give a file name, e.g. -o run.trace)"
    if not out.parent.is_dir():
        return f"no such directory: {out.parent}"
    if out.exists() and source.exists() and out.resolve() == source.resolve():
        return "is the scenario being recorded; choose another -o"
    if out.exists() and not force:
        return "exists (--force replaces it)"
    return None


def _close_quietly(cur) -> None:
    try:
        cur.close()          # publishes what was written, even without its footer
    except OSError:
        pass


def _cached(args):
    """The scenario's frames up to --step from the trace cache (lineage/playback/cache.py), or
    None: a trace, --no-cache, a miss, or a file with problems (which _open then reports)."""
    from lineage.playback.session import is_trace
    from lineage.scenario.problems import ScenarioError
    path = _resolve(args.source)
    if args.no_cache or args.salvage or is_trace(path):
        return None
    try:
        from lineage.playback.cache import lookup
        from lineage.scenario import load
        return lookup(load(path), args.step)
    except (ScenarioError, OSError, ValueError):
        return None


def _progress(source: str):
    """Progress of the steps a snapshot makes, on one rewritten line of a terminal's stderr."""
    import time
    if not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(made: int, needed: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.2 or made == needed:
            last[0] = now
            end = "\n" if made == needed else ""
            print(f"\r{source}: computing step {made} / {needed}", end=end, file=sys.stderr, flush=True)
    return show


def _snapshot(args) -> int:
    from lineage.playback.session import Session
    problem = _export_problem(args)
    if problem is not None:
        return _err(problem)
    cur = _cached(args)
    if cur is None:
        cur, code = _open(args.source, salvage=args.salvage)
        if cur is None:
            return code
    publish = None
    try:
        if not 1 <= args.step <= cur.total:
            return _err(f"{args.source}: step {args.step} is out of range (1-{cur.total})")
        out = Path(args.output)
        if str(out) != "-" and out.suffix not in (".txt", ".svg", ".png"):
            return _err(f"{out}: the snapshot format comes from the suffix: .txt, .svg or .png")
        if isinstance(cur, Session) and not args.no_cache:
            from lineage.playback.cache import record_into_cache
            publish = record_into_cache(cur)
            if publish is not None and cur.made < args.step:
                print(f"{args.source}: computing steps {cur.made + 1} - {args.step} (kept in the trace cache "
                      "for next time; --no-cache skips it)", file=sys.stderr)
        return _snapshot_of(cur, args, out)
    finally:
        cur.close()                    # a session recording into the cache publishes its trace here
        if publish is not None:
            publish()


def _snapshot_of(cur, args, out: Path) -> int:
    from lineage.playback.trace import TraceError
    from tui.panels import render
    try:                         # a corrupt frame or a failing model: its one line here, not inside the headless app
        cur.frame(args.step - 1, progress=_progress(args.source))
    except TraceError:
        raise
    except Exception as e:  # noqa: BLE001
        return _err(f"{args.source}: step {args.step}: {_first_line(e)}")
    if out.suffix in (".svg", ".png"):
        from tui.snapshot import render_svg, svg_to_png
        try:
            svg = render_svg(_resolve(args.source), args.step - 1, args.panel,
                             tuple(args.size) if args.size else None, args.salvage, cursor=cur, theme=args.theme)
        except RuntimeError as e:            # the headless app could not open or show it: one line
            return _err(str(e).splitlines()[0])
        if out.suffix == ".svg":
            out.write_text(svg, encoding="utf-8")
        else:
            out.write_bytes(svg_to_png(svg, args.scale, args.theme))
        return 0
    text = render(cur, args.step - 1, args.panel)
    if str(out) == "-":
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
    return 0


def _export_options(parser) -> None:
    """What `snapshot` and `slides` share for pictures: scale and theme."""
    parser.add_argument("--scale", type=float, default=1.0, help="PNG zoom, e.g. 2 for a projector (default 1)")
    parser.add_argument("--theme", choices=("dark", "light"), default="dark", help="colours of the picture (default dark)")


def _export_problem(args) -> str | None:
    if not 0.25 <= args.scale <= 8:
        return f"--scale {args.scale:g}: give a zoom from 0.25 to 8"
    if args.size is not None and not (40 <= args.size[0] <= 400 and 12 <= args.size[1] <= 200):
        return f"--size {args.size[0]} {args.size[1]}: give 40-400 columns and 12-200 rows"
    from tui.panels import PANELS
    if args.panel is not None and args.panel not in PANELS:
        return f"--panel {args.panel!r}: unknown panel (one of {', '.join(PANELS)})"
    return None


def _slides(args) -> int:
    """lineage slides SCENARIO -o DIR/: one PNG and .txt per caption step."""
    problem = _export_problem(args)
    if problem is not None:
        return _err(problem)
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        return _err(f"{out}: is a file; slides go to a directory")
    cur, code = _open(args.source, salvage=args.salvage)
    if cur is None:
        return code
    from tui.snapshot import caption_steps, write_slides
    taken = [p for p in (out.glob("[0-9]*-step*.png") if out.is_dir() else [])]
    if taken:
        cur.close()
        return _err(f"{out}: holds slides already ({taken[0].name}, ...); choose an empty directory")
    try:                          # every step a slide shows, before the headless app starts
        for i in caption_steps(cur.info, cur.total):
            cur.frame(i)
    except Exception as e:  # noqa: BLE001  a failing model or a corrupt frame: one line
        cur.close()
        return _err(f"{args.source}: {_first_line(e)}")
    out.mkdir(parents=True, exist_ok=True)
    try:
        written = write_slides(_resolve(args.source), out, cur, args.panel, tuple(args.size) if args.size else None,
                               args.scale, args.theme, args.salvage)
    except RuntimeError as e:
        return _err(str(e).splitlines()[0])
    finally:
        cur.close()
    print(f"{out}: {len(written) // 2} slides ({written[0].name} ... {written[-2].name}) and their .txt")
    return 0


def _run(path: str | None, salvage: bool) -> int:
    if path is not None:
        path = _resolve(path)
        if not Path(path).exists():
            return _err(_missing(path))
        if not _check(path, salvage):     # located problems before any screen is drawn, exit 2
            return 2
    from tui.app import run
    return run(path, salvage=salvage)


def _serve(args) -> int:
    try:
        from tui.serve import serve
    except ImportError:
        return _err("lineage serve needs textual-serve: pip install textual-serve")
    from tui.served import refusal
    root = Path(args.root).resolve()
    argv = [sys.executable, "-m", "tui.cli"]      # an argument list: no shell ever sees the file name
    if args.file:
        path = str(Path(_resolve(args.file)).resolve())
        refused = refusal(path, root)             # the file must be one the served app may open
        if refused is not None:
            return _err(refused + " (serve from its directory or pass --root)")
        if not _check(path):
            return 2
        argv += ["run", path]
    return serve(argv, args.host, args.port, str(root), tuple(args.allow_origin))


def _checkpoint_options(parser) -> None:
    g = parser.add_argument_group("a checkpoint directory (Hugging Face layout) instead of a scenario")
    g.add_argument("--text", help="input text, through the checkpoint's tokenizer")
    g.add_argument("--ids", help="input token ids, e.g. 464,3139,286")
    g.add_argument("--dtype", choices=["float32", "bfloat16", "float16", "float64"],
                   help="weights' dtype (default: the checkpoint's own)")
    g.add_argument("--device", choices=["auto", "cpu", "cuda"], help="where the model runs (default: auto)")


def _checkpoint_scenario(args, attr: str) -> int | None:
    """When args.<attr> is a directory, replace it with a scenario made for that checkpoint
    (written to a private temporary folder, removed at exit); an exit code when that fails."""
    import atexit
    import shutil
    import tempfile
    target = getattr(args, attr)
    given = [f"--{k}" for k in ("text", "ids", "dtype", "device") if getattr(args, k, None) is not None]
    if not Path(target).expanduser().is_dir():
        return _err(f"{target}: {', '.join(given)} apply to a checkpoint directory") if given else None
    from lineage.pretrained import PretrainedError
    from lineage.pretrained.scenario import checkpoint_scenario
    ids = None
    if args.ids is not None:
        try:
            ids = [int(t) for t in args.ids.replace(",", " ").split()]
        except ValueError:
            return _err(f"--ids {args.ids!r}: expected token ids, e.g. 464,3139,286")
        if not ids or min(ids) < 0:
            return _err(f"--ids {args.ids!r}: expected one or more token ids >= 0")
    if ids is not None and args.text is not None:
        return _err("give --text or --ids, not both")
    try:
        text = checkpoint_scenario(target, args.text, ids, args.dtype, args.device)
    except PretrainedError as e:
        return _err(str(e))
    folder = Path(tempfile.mkdtemp(prefix="lineage-"))
    atexit.register(shutil.rmtree, folder, True)
    out = folder / f"{Path(target).expanduser().resolve().name or 'checkpoint'}.yaml"
    out.write_text(text, encoding="utf-8")
    setattr(args, attr, str(out))
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="lineage", description="Watch language-model memory work, token by token.")
    p.add_argument("--version", action="version", version=f"lineage {__version__}")
    sub = p.add_subparsers(dest="cmd")
    pp = sub.add_parser("params", help="total and active parameter counts of a preset or checkpoint directory "
                        "(no weights read)")
    pp.add_argument("preset")
    pp.add_argument("--json", action="store_true", help="print the full breakdown as JSON")
    pm = sub.add_parser("memory", help="cache and state bytes of a preset or checkpoint directory, and the "
                        "batch a card holds")
    pm.add_argument("preset")
    pm.add_argument("--context", type=int, default=131072, help="context length in tokens (default 131072)")
    pm.add_argument("--card-gb", type=float, default=141.0, help="accelerator memory in GB (default: H200, 141)")
    pm.add_argument("--weight-bytes", type=float, default=2.0, help="bytes per parameter (default 2, bf16)")
    pm.add_argument("--json", action="store_true")
    sub.add_parser("presets", help="list the model presets")
    sub.add_parser("list", help="the bundled scenarios, one line each")
    prun = sub.add_parser("run", help="open the app on a scenario, a recorded trace or a checkpoint directory")
    prun.add_argument("file")
    prun.add_argument("--salvage", action="store_true", help="open the complete frames of a truncated trace")
    _checkpoint_options(prun)
    pserve = sub.add_parser("serve", help="serve the app to a browser on localhost (textual-serve)")
    pserve.add_argument("file", nargs="?")
    pserve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; "
                        "anything else is reachable from other machines)")
    pserve.add_argument("--port", type=int, default=8000)
    pserve.add_argument("--root", default=".", help="the served app opens files only under this directory "
                        "(and the bundled scenarios); default: the current directory")
    pserve.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                        help="another origin allowed to connect, e.g. https://lab.example:8443 (repeatable)")
    pv = sub.add_parser("validate", help="check scenario (or trace) files: exit 0, or 2 with FILE:LINE:COL: problem")
    pv.add_argument("files", nargs="+")
    pr = sub.add_parser("record", help="run a scenario and write its frames to a trace file")
    pr.add_argument("scenario")
    pr.add_argument("-o", "--output", required=True)
    pr.add_argument("--steps", type=int, default=None, help="record only the first N steps")
    pr.add_argument("--force", action="store_true", help="replace OUT if it exists")
    _checkpoint_options(pr)
    ps = sub.add_parser("snapshot", help="render a step of a scenario or trace to a file")
    ps.add_argument("source")
    ps.add_argument("--step", type=int, required=True, help="1-based step, as the app's counter shows")
    ps.add_argument("--panel", default=None, help="only this panel kind")
    ps.add_argument("-o", "--output", required=True, help="OUT.txt (or - for stdout)")
    ps.add_argument("--salvage", action="store_true", help="read the complete frames of a truncated trace")
    ps.add_argument("--size", type=int, nargs=2, default=None, metavar=("W", "H"),
                    help="terminal size for .svg and .png snapshots (default 160 50; 100 30 with --panel)")
    _export_options(ps)
    _checkpoint_options(ps)
    ps.add_argument("--no-cache", action="store_true",
                    help="make the steps again instead of reading (and keeping) them in the trace cache")
    psl = sub.add_parser("slides", help="one PNG (and .txt) per caption step of a scenario or trace, numbered, for a deck")
    psl.add_argument("source")
    psl.add_argument("-o", "--output", required=True, help="a directory (made if missing)")
    psl.add_argument("--panel", default=None, help="slides of this panel kind only (title, step, token, caption)")
    psl.add_argument("--size", type=int, nargs=2, default=None, metavar=("W", "H"),
                     help="terminal size (default 160 50; 100 30 with --panel)")
    psl.add_argument("--salvage", action="store_true", help="read the complete frames of a truncated trace")
    _export_options(psl)
    from tui import train_cli
    train_cli.add_commands(sub)
    args = p.parse_args(argv)
    training = {"train": train_cli.train, "eval": train_cli.evaluate, "arena": train_cli.arena}
    if args.cmd in training:
        return training[args.cmd](args)
    where = {"run": "file", "record": "scenario", "snapshot": "source"}.get(args.cmd)
    if where is not None:            # a checkpoint directory: run, record or snapshot the scenario made for it
        code = _checkpoint_scenario(args, where)
        if code is not None:
            return code
    handlers = {"list": _list, "validate": _validate, "record": _record, "snapshot": _snapshot, "slides": _slides}
    if args.cmd in handlers:
        from lineage.playback.trace import TraceError
        try:
            return handlers[args.cmd](args)
        except BrokenPipeError:          # `lineage list | head`: the reader left, nothing is wrong
            sys.stderr.close()
            return 0
        except TraceError as e:          # a frame found corrupt when it is read: its one line, exit 2
            return _err(str(e))
    if args.cmd == "params":
        return _params(args)
    if args.cmd == "memory":
        return _memory(args)
    if args.cmd == "presets":
        from lineage.presets import PRESETS
        for name, fn in PRESETS.items():
            cfg = fn()
            print(f"{name:<20} {'shape only' if cfg.shape_only else 'runnable':<11} {cfg.notes}")
        return 0
    if args.cmd == "run":
        return _run(args.file, args.salvage)
    if args.cmd == "serve":
        return _serve(args)
    return _run(None, False)


if __name__ == "__main__":
    sys.exit(main())
