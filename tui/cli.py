"""The `lineage` command line. Subcommands that only do arithmetic never import torch."""
from __future__ import annotations

import argparse
import json
import sys

from lineage import __version__

APP_PENDING = ("The terminal app is not built yet (see the issue 'The terminal app'); "
               "until then `lineage` shows the K3 parameter arithmetic:\n")


def _params(args) -> int:
    from lineage.params import count, human
    from lineage.presets import get_preset
    try:
        cfg = get_preset(args.preset)
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
    from lineage.memory import H200_BYTES, batch_per_card, model_memory
    from lineage.params import count
    from lineage.presets import get_preset
    try:
        cfg = get_preset(args.preset)
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
    print(f"  cache {rows[0]['bytes_per_token']:,} B per token (all layers, bf16), "
          f"recurrent state {rows[0]['state_bytes']:,} B per sequence (fp32)")
    print(f"  {'context':>10} {'cache/seq':>12} {'state/seq':>12} {'batch/card':>11}")
    for r in rows:
        print(f"  {r['context']:>10,} {r['cache_bytes'] / 2**20:>10.1f}Mi {r['state_bytes'] / 2**20:>10.1f}Mi "
              f"{r['batch_per_card']:>11,}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="lineage", description="Watch language-model memory work, token by token.")
    p.add_argument("--version", action="version", version=f"lineage {__version__}")
    sub = p.add_subparsers(dest="cmd")
    pp = sub.add_parser("params", help="total and active parameter counts of a preset (no weights allocated)")
    pp.add_argument("preset")
    pp.add_argument("--json", action="store_true", help="print the full breakdown as JSON")
    pm = sub.add_parser("memory", help="cache and state bytes of a preset, and the batch a card holds")
    pm.add_argument("preset")
    pm.add_argument("--context", type=int, default=131072, help="context length in tokens (default 131072)")
    pm.add_argument("--card-gb", type=float, default=141.0, help="accelerator memory in GB (default: H200, 141)")
    pm.add_argument("--weight-bytes", type=float, default=2.0, help="bytes per parameter (default 2, bf16)")
    pm.add_argument("--json", action="store_true")
    sub.add_parser("presets", help="list the model presets")
    args = p.parse_args(argv)
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
    print(APP_PENDING, file=sys.stderr)
    return _params(argparse.Namespace(preset="k3", json=False))


if __name__ == "__main__":
    sys.exit(main())
