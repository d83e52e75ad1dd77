"""The `lineage` command line: the parser and the commands that inspect (params, memory, presets,
list, validate) or open the app (run, serve). Those that write files are in export.py, training in
train.py, eval and arena in evaluation.py. Subcommands that only do arithmetic never import torch."""
from __future__ import annotations

import argparse
import errno
import json
import math
import os
import sys
from pathlib import Path

from lineage import __version__
from lineage.scenarios import DIR as SCENARIO_DIR

from . import evaluation, export as export_cli, train as train_cli
from .opening import (check, checkpoint_dir, checkpoint_options, checkpoint_scenario, err, guarded, made_scenario,
                      missing, resolve, revision_option)



def _config_of(name: str, revision: str | None = None):
    """A preset's config, or a checkpoint directory's or cached hub id's (read from its
    config.json, no weights). ValueError (PretrainedError is one) when it is none of them."""
    root = checkpoint_dir(name, revision)
    if root is not None:
        from lineage.families import read_model_config
        return read_model_config(root)[0]
    from lineage.presets import get_preset
    return get_preset(name)


def _params(args) -> int:
    from lineage.arithmetic import count, human
    try:
        cfg = _config_of(args.preset, args.revision)
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
    from lineage.arithmetic import H200_BYTES, batch_per_card, count, fmt_bytes, model_memory
    try:
        cfg = _config_of(args.preset, args.revision)
    except ValueError as e:
        print(f"lineage memory: {e}", file=sys.stderr)
        return 2
    if not (args.cards >= 1 and math.isfinite(args.card_gb) and args.card_gb > 0):
        print(f"lineage memory: --cards must be at least 1 and --card-gb a positive number "
              f"(got {args.cards}, {args.card_gb:g})", file=sys.stderr)
        return 2
    if not (args.context >= 1 and math.isfinite(args.weight_bytes) and args.weight_bytes > 0):
        print(f"lineage memory: --context must be at least 1 and --weight-bytes a positive number "
              f"(got {args.context}, {args.weight_bytes:g})", file=sys.stderr)
        return 2
    if args.device_map is not None:
        return _memory_plan(cfg, args)
    weights = count(cfg)["total"] * args.weight_bytes
    # the weights shard over the cards and each sequence's cache with them: N cards hold
    # N times the memory less one copy of the weights
    per_card = int(args.card_gb * 10**9)
    card = per_card * args.cards
    rows = []
    ctx = args.context
    for n in [ctx // 4, ctx // 2, ctx, ctx * 2, ctx * 4]:
        if n < 1:
            continue
        mm = model_memory(cfg, n)
        mm["batch_per_card"] = batch_per_card(mm["cache_bytes"], weights, card, mm["state_bytes"])
        rows.append(mm)
    if args.json:
        print(json.dumps({"preset": cfg.name, "weight_bytes": weights, "card_bytes": per_card,
                          "cards": args.cards, "rows": rows}, indent=2))
        return 0
    cards = "a" if args.cards == 1 else f"{args.cards} x"
    needed = int(weights // per_card) + 1
    print(f"{cfg.name}: weights {weights / 1e9:.1f} GB at {args.weight_bytes} B/param on {cards} {args.card_gb:g} GB card"
          + ("s" if args.cards > 1 else "")
          + ("" if weights < card else f"  (the weights alone fill them: batch is 0; --cards {needed} holds them)"))
    r0 = rows[0]
    print(f"  cache {r0['bytes_per_token']:,} B per token (all layers), fixed state {r0['state_bytes']:,} B per "
          f"sequence (S {r0['matrix_bytes']:,} + conv cache {r0['conv_bytes']:,}); counted as {r0['dtypes']}")
    batch = "batch/card" if args.cards == 1 else f"batch/{args.cards} cards"
    bw = max(11, len(batch))
    print(f"  {'context':>10} {'cache/seq':>12} {'state/seq':>12} {batch:>{bw}}")
    for r in rows:
        print(f"  {r['context']:>10,} {fmt_bytes(r['cache_bytes']):>12} {fmt_bytes(r['state_bytes']):>12} "
              f"{int(r['batch_per_card']):>{bw},}")
    return 0


def _memory_plan(cfg, args) -> int:
    """`lineage memory DIR --device-map MAP`: where each layer would go and the bytes per device,
    from config.json and a meta build alone (no weight read); a map that cannot fit is one line."""
    from lineage.families import PretrainedError
    from lineage.families.placement import describe, gb, plan_map
    try:
        p = plan_map(cfg, args.device_map, args.context, args.weight_bytes, args.gpu_memory)
    except PretrainedError as e:          # PlacementError is one
        print(f"lineage memory: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"preset": cfg.name, "device_map": args.device_map, "context": p.context,
                          "placement": p.device_map,
                          "devices": [{"device": d.device, "capacity_bytes": d.capacity, "units": list(d.units),
                                       "weight_bytes": d.weight_bytes, "cache_state_bytes": d.cache_bytes}
                                      for d in p.devices]}, indent=2))
        return 0
    used = p.used()
    print(f"{cfg.name}: device map {args.device_map} over {len(used)} of {len(p.devices)} device"
          f"{'s' if len(p.devices) > 1 else ''}, weights at {args.weight_bytes:g} B/param, cache and state "
          f"for one sequence at {p.context:,} tokens (nothing loaded)")
    print(f"  {'device':<8} {'weights':>10} {'cache+state':>12} {'total':>10} {'of':>10} {'free':>10}  modules")
    for d in p.devices:
        print(f"  {d.device:<8} {gb(d.weight_bytes):>10} {gb(d.cache_bytes):>12} {gb(d.total):>10} "
              f"{gb(d.capacity):>10} {gb(d.capacity - d.total):>10}  {describe(d.units) or '(unused)'}")
    return 0


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
    paths = [_checked_path(f, args.revision) for f in args.files]
    bad = sum(path is None or not check(path, every_frame=True) for path in paths)
    return 2 if bad else 0


def _checked_path(f: str, revision: str | None = None) -> str | None:
    """What `validate` checks for a file name: the file, or for a checkpoint directory or cached
    hub id the scenario `lineage run` would open (None, its problem printed, when there is none)."""
    from lineage.families import PretrainedError
    from lineage.families.shards import resolve_dir
    from lineage.families.tokenizer import tokenizer_for
    try:       # no tokenizer: `run` needs --ids, any will do to check the rest
        root = checkpoint_dir(f, revision)
        if root is None:
            return resolve(f)
        return made_scenario(root, ids=None if tokenizer_for(resolve_dir(root)) else [0], given=f)
    except PretrainedError as e:
        err(str(e))
        return None


def _run(path: str | None, salvage: bool) -> int:
    if path is not None:
        path = resolve(path)
        if not Path(path).exists():
            return err(missing(path))
        if not check(path, salvage):     # located problems before any screen is drawn, exit 2
            return 2
    from lineage.app.app import run
    return run(path, salvage=salvage)


def _serve(args) -> int:
    refused = _address_refusal(args.host, args.port)       # before the slow import, and never a traceback
    if refused:
        return err(f"lineage serve: {refused}")
    try:
        from lineage.cli.serve import serve
    except ImportError:
        return err("lineage serve needs textual-serve: pip install textual-serve")
    from lineage.cli.served import refusal
    root = Path(args.root).resolve()
    argv = [sys.executable, "-m", "lineage.cli.main"]      # an argument list: no shell ever sees the file name
    if args.file:
        path = str(Path(resolve(args.file)).resolve())
        refused = refusal(path, root)             # the file must be one the served app may open
        if refused is not None:
            return err(refused + " (serve from its directory or pass --root)")
        if not _checked_as_served(path, root):
            return 2
        argv += ["run", path]
    if args.max_sessions < 1:
        return err(f"lineage serve: --max-sessions must be at least 1, got {args.max_sessions}")
    return serve(argv, args.host, args.port, str(root), tuple(args.allow_origin), max_sessions=args.max_sessions)


def _address_refusal(host: str, port: int) -> str | None:
    """Why `--host`/`--port` cannot be listened on, or None: a port outside 1..65535, an
    address like 256.1.1.1 (all digits and dots, yet no IPv4 address), or a name no resolver takes."""
    import ipaddress
    import re
    if not 1 <= port <= 65535:
        return f"--port must be in 1..65535, got {port}"
    if re.fullmatch(r"[0-9.]+", host) or ":" in host:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return f"--host {host!r} is not an IP address"
    elif not re.fullmatch(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?", host):
        return f"--host {host[:80]!r} is not a host name or IP address"
    return None


def _checked_as_served(path: str, root: Path) -> bool:
    """`check` as the served app will load the file: what it names confined to the root, so a
    scenario naming a checkpoint elsewhere is refused here, not by each browser's app."""
    from lineage.cli.served import ROOT_ENV
    before = os.environ.get(ROOT_ENV)
    os.environ[ROOT_ENV] = str(root)
    try:
        return check(path)
    finally:
        if before is None:
            os.environ.pop(ROOT_ENV, None)
        else:
            os.environ[ROOT_ENV] = before


def _presets(args) -> int:
    from lineage.presets import PRESETS
    for name, fn in PRESETS.items():
        cfg = fn()
        print(f"{name:<20} {'shape only' if cfg.shape_only else 'runnable':<11} {cfg.notes}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The `lineage` command. What no command should end in a traceback is decided here, once:
    a reader who left (`| head`: BrokenPipeError), a full disk under stdout (ENOSPC), Ctrl-C
    (one line, exit 130), and characters stdout's encoding lacks (PYTHONIOENCODING=ascii:
    replaced, as `?`). Python's docs on SIGPIPE: point stdout at devnull, so the flush at exit
    does not raise again."""
    if sys.stdout is not None and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")
    try:
        code = _main(argv)
        if sys.stdout is not None:
            sys.stdout.flush()            # what a pipe or a full disk refuses shows here, not at exit
        return code
    except BrokenPipeError:
        # `lineage memory k3 | head -1`: the reader left. Nothing more to say. 141 = 128 + SIGPIPE,
        # as a shell expects
        _stdout_to_devnull()
        return 141
    except KeyboardInterrupt:
        print("lineage: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        _stdout_to_devnull()
        print(f"lineage: cannot write the output: {e.strerror or e}", file=sys.stderr)
        return 2


def _stdout_to_devnull() -> None:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):     # no stdout with a descriptor: nothing to flush
        pass


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog="lineage", description="Watch language-model memory work, token by token.")
    p.add_argument("--version", action="version", version=f"lineage {__version__}")
    sub = p.add_subparsers(dest="cmd")
    pp = sub.add_parser("params", help="total and active parameter counts of a preset, checkpoint directory or "
                        "cached hub id (no weights read)")
    pp.add_argument("preset")
    pp.add_argument("--json", action="store_true", help="print the full breakdown as JSON")
    revision_option(pp)
    pp.set_defaults(func=_params)
    pm = sub.add_parser("memory", help="cache and state bytes of a preset, checkpoint directory or cached hub id, "
                        "and the batch a card holds")
    pm.add_argument("preset")
    pm.add_argument("--context", type=int, default=131072, help="context length in tokens (default 131072)")
    pm.add_argument("--card-gb", type=float, default=141.0, help="accelerator memory in GB (default: H200, 141)")
    pm.add_argument("--cards", type=int, default=1, help="cards the weights and caches are spread over (default 1)")
    pm.add_argument("--weight-bytes", type=float, default=2.0, help="bytes per parameter (default 2, bf16)")
    pm.add_argument("--json", action="store_true")
    revision_option(pm)
    pm.add_argument("--device-map", metavar="MAP", help="print where each layer would go instead: auto, balanced, "
                    "sequential, cuda:0,cuda:1 or FILE.json (module name -> device), as Hugging Face writes them")
    pm.add_argument("--gpu-memory", metavar="SIZES", help="with --device-map, the GPUs to plan for: 141GB (each GPU "
                    "the map uses), 2x141GB or 80GB,141GB (cuda:0 onward); default: the visible GPUs' free memory")
    pm.set_defaults(func=_memory)
    sub.add_parser("presets", help="list the model presets").set_defaults(func=_presets)
    sub.add_parser("list", help="the bundled scenarios, one line each").set_defaults(func=guarded(_list))
    prun = sub.add_parser("run", help="open the app on a scenario, a recorded trace, a checkpoint directory or a "
                          "hub id in the local Hugging Face cache (org/name; never downloaded)")
    prun.add_argument("file")
    prun.add_argument("--salvage", action="store_true", help="open the complete frames of a truncated trace")
    checkpoint_options(prun)
    prun.set_defaults(func=lambda args: _run(args.file, args.salvage), file_arg="file")
    pserve = sub.add_parser("serve", help="serve the app to a browser on localhost (textual-serve)")
    pserve.add_argument("file", nargs="?")
    pserve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; "
                        "anything else is reachable from other machines)")
    pserve.add_argument("--port", type=int, default=8000)
    pserve.add_argument("--root", default=".", help="the served app opens files only under this directory "
                        "(and the bundled scenarios); default: the current directory")
    pserve.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                        help="another origin allowed to connect, e.g. https://lab.example:8443 (repeatable)")
    from .served import MAX_SESSIONS     # not .serve: aiohttp costs half a second at every start
    pserve.add_argument("--max-sessions", type=int, default=MAX_SESSIONS, metavar="N",
                        help=f"at most N app processes at once (default {MAX_SESSIONS}, about 350 MB each when playing); "
                             "further browsers are told the server is busy")
    pserve.set_defaults(func=_serve)
    pv = sub.add_parser("validate", help="check scenario (or trace) files: exit 0, or 2 with FILE:LINE:COL: problem")
    pv.add_argument("files", nargs="+")
    revision_option(pv)
    pv.set_defaults(func=guarded(_validate))
    export_cli.add_commands(sub)                      # record, snapshot, slides
    train_cli.add_commands(sub)
    for name, command in (("train", train_cli.train), ("eval", evaluation.evaluate), ("arena", evaluation.arena)):
        sub.choices[name].set_defaults(func=command)
    args = p.parse_args(argv)
    if getattr(args, "file_arg", None):    # a checkpoint directory: run, record or snapshot the scenario made for it
        code = checkpoint_scenario(args, args.file_arg)
        if code is not None:
            return code
    if getattr(args, "func", None) is None:  # no command: the app on the default tour
        return _run(None, False)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
