"""Cache growth: bytes against tokens for the softmax KV cache, the MLA latent cache and the
constant recurrent state, measured from the running model and projected to long context."""
from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from .panel import Panel


def _fmt(n: float) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{int(n)} B"


def model_bytes(frame, info: dict, m: int) -> dict:
    """Measured cache / state of model m at this frame, and per-token rates to project with."""
    model = info["models"][m]
    cfg = model["config"]
    layers = frame.model_meta(m)["layers"]
    n_tok = max((l.get("cache_len", 0) for l in layers), default=0)
    latent = sum(l.get("cache_bytes", 0) for l, k in zip(layers, cfg["mixers"]) if k == "mla")
    kv = sum(l.get("cache_bytes", 0) for l, k in zip(layers, cfg["mixers"]) if k == "softmax")
    state = sum(l.get("state_bytes", 0) for l in layers)
    # what the MLA layers would cache as plain multi-head K and V (same heads and dims)
    mla = cfg.get("mla")
    n_mla = cfg["mixers"].count("mla")
    elem = (latent / n_tok / n_mla / (mla["kv_lora_rank"] + mla["qk_rope_head_dim"])) if (n_tok and n_mla) else 4
    kv_equiv = n_mla * mla["n_heads"] * (mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"] + mla["v_head_dim"]) * elem if mla else 0
    return {"tokens": n_tok, "latent": latent, "kv": kv, "state": state,
            "latent_per_tok": latent / n_tok if n_tok else 0.0, "kv_per_tok": kv / n_tok if n_tok else 0.0,
            "kv_equiv_per_tok": kv_equiv, "params": model.get("params", 0)}


class CachePanel(Panel):
    kind = "cache"
    MIN_INTERVAL = 0.2          # plotting costs milliseconds: during playback redraw at most 5 times a second

    def compose(self):
        yield Static(id="plot")
        yield Static(id="legend")

    def on_mount(self) -> None:
        self._drawn_at = 0.0
        self._pending = None

    def show(self, cursor, i: int) -> None:
        now = time.monotonic()
        if now - self._drawn_at < self.MIN_INTERVAL and getattr(self.app, "playing", False):
            if self._pending is None:
                self._pending = self.set_timer(self.MIN_INTERVAL, lambda: self._flush(cursor))
            return
        self._draw(cursor, i)

    def _flush(self, cursor) -> None:
        self._pending = None
        self._draw(cursor, self.app.index)

    def _draw(self, cursor, i: int) -> None:
        self._drawn_at = time.monotonic()
        info, f = cursor.info, cursor.frame(i)
        m = self.options.get("model", 0)
        if info["models"][m]["kind"] != "lm":
            self.query_one("#legend", Static).update("cache: this is a toy memory (no cache)")
            return
        b = model_bytes(f, info, m)
        ctx = int(self.options.get("context") or 1 << 20)
        per_tok = b["latent_per_tok"] + b["kv_per_tok"]
        cross = b["state"] / per_tok if per_tok else None
        width = max(30, (self.size.width or 80) - 4)
        height = 12 if width >= 50 else 8
        self.query_one("#plot", Static).update(self._plot(b, ctx, cross, width, height))
        from lineage.memory import batch_per_card
        weights = int(b["params"] * 2)
        batch = batch_per_card(ctx, int(per_tok), weights, state_bytes=b["state"]) if per_tok else None
        t = Text()
        t.append(f"now {b['tokens']:,} tokens: cache {_fmt(b['latent'] + b['kv'])} ({per_tok:,.0f} B/token), "
                 f"state {_fmt(b['state'])} (constant)")
        if cross:
            t.append(f"\ncrossover at {cross:,.0f} tokens: state larger before, cache after")
        t.append(f"\nat {ctx:,} tokens: cache {_fmt(per_tok * ctx)}, as plain MHA {_fmt(b['kv_equiv_per_tok'] * ctx)}")
        if batch is not None:
            t.append(f"; {batch:,} sequences per 141 GB card (fp32 cache)")
        self.query_one("#legend", Static).update(t)

    def _plot(self, b: dict, ctx: int, cross, width: int, height: int):
        import plotext as plt
        xs = [max(1, int(ctx ** (k / 40))) for k in range(41)]
        plt.clf()
        plt.plotsize(width, height)
        plt.theme("clear" if self.app.no_color else "pro")
        plt.xscale("log")
        plt.yscale("log")
        per_tok = b["latent_per_tok"] + b["kv_per_tok"]
        if per_tok:
            plt.plot(xs, [max(per_tok * x, 1) for x in xs], label="latent/KV cache", marker="braille")
        if b["kv_equiv_per_tok"]:
            plt.plot(xs, [max(b["kv_equiv_per_tok"] * x, 1) for x in xs], label="as MHA KV", marker="braille")
        if b["state"]:
            plt.plot(xs, [b["state"]] * len(xs), label="recurrent state", marker="braille")
        if b["tokens"]:
            plt.vline(b["tokens"])
        if cross:
            plt.vline(cross)
        ys = [4 ** k for k in range(4, 21, 2)]
        plt.yticks(ys, [_fmt(y).replace(".0 ", " ") for y in ys])
        xt = [10 ** k for k in range(0, 8) if 10 ** k <= ctx]
        plt.xticks(xt, [f"{x:,}" if x < 1000 else f"{x // 1000:,}K" for x in xt])
        plt.xlabel("tokens (log)")
        return Text.from_ansi(plt.build(), no_wrap=True, overflow="crop")
