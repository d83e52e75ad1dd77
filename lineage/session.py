"""Sessions: a scenario's models stepped one token at a time, each step turned into a Frame.

`Session` runs a scenario (torch); `Replay` reads a trace (no torch). Both are `Cursor`s:
next, previous, jump, reset over frames. Going back, or forward to a step already made, reads
the recorded frame and never recomputes; going forward past the last made frame steps the
models. A session is deterministic for a given scenario: the same file gives the same frames.
"""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np

from .files import open_regular
from .frame import Frame
from .scenario import Scenario, ScenarioError, build_config, total_steps
from .scenario_yaml import Located
from .trace import MAGIC, TraceReader, TraceWriter


class Cursor:
    """Stepping over frames 0..total-1. Subclasses provide `_make(i)` for frames not yet held."""

    total: int = 0
    info: dict

    def __init__(self):
        self.index = 0

    def frame(self, i: int) -> Frame:
        raise NotImplementedError

    def current(self) -> Frame:
        return self.frame(self.index)

    def jump(self, i: int) -> Frame:
        self.index = max(0, min(int(i), self.total - 1))
        return self.current()

    def next(self) -> Frame:
        return self.jump(self.index + 1)

    def prev(self) -> Frame:
        return self.jump(self.index - 1)

    def reset(self) -> Frame:
        return self.jump(0)

    def end(self) -> Frame:
        return self.jump(self.total - 1)

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------ helpers

def _compact(a) -> np.ndarray:
    """Large float matrices are stored in float16 (3 significant digits is what a heatmap and
    its cursor readout show) unless their range needs float32."""
    a = a.detach().float().cpu().numpy()
    if a.size and np.isfinite(a).all() and np.abs(a).max() < 6e4:
        return a.astype(np.float16)
    return a


def _f32(a) -> np.ndarray:
    return a.detach().float().cpu().numpy()


def _caption(sc: Scenario, i: int) -> str | None:
    text = None
    for c in sorted(sc.captions, key=lambda c: c.at):
        if c.at <= i and (c.until is None or i <= c.until):
            text = c.text
    return text


# ------------------------------------------------------------------------------ runners

class _LMRunner:
    """One language model: prefill with the parallel / chunked forward, then observed steps."""

    def __init__(self, cfg, sc: Scenario, device, dtype, base_dir: Path | None):
        import torch
        from .model import LM
        self.torch = torch
        self.cfg = cfg
        torch.manual_seed(sc.weights.seed)           # same seed, same preset: same weights side by side
        model = LM(cfg)
        if sc.weights.checkpoint is not None:
            _load_checkpoint(model, sc, base_dir)
        self.model = model.to(device=device, dtype=dtype).eval()
        from .backend import resolve, set_backend
        self.backend, self.backend_note = resolve(device)
        set_backend(self.model, self.backend)
        self.device = device
        self.state = None
        self.logits = None
        self.load: dict[int, np.ndarray] = {}
        # on CUDA the observed step is launch bound: after the first token, capture it in a CUDA
        # graph (LINEAGE_GRAPH=0 turns this off; =compile also runs torch.compile first). Models
        # with learned positions index by a host integer and step eagerly.
        import os
        mode = os.environ.get("LINEAGE_GRAPH", "auto").lower()
        off = mode in ("0", "off", "no") or device.type != "cuda" or self.model.wpe is not None
        self.graph_mode = None if off else mode
        self.capacity = (total_steps(sc) or 0) + sc.decoding.prefill + 2
        self.stepper = None

    def prefill(self, ids: list[int]) -> None:
        if not ids:
            return
        with self.torch.inference_mode():
            x = self.torch.tensor([ids], device=self.device)
            logits, self.state = self.model(x, self.state)
        self.logits = logits[0, -1].float()

    def step(self, token: int) -> tuple[dict, dict]:
        torch = self.torch
        if self.stepper is not None:
            logits, obs = self.stepper.step(token)
        else:
            obs = {}
            with torch.inference_mode():
                logits, self.state = self.model.step(torch.tensor([token], device=self.device), self.state, obs)
            if self.graph_mode is not None:
                from .graph_step import GraphStep
                self.stepper = GraphStep(self.model, self.state, self.capacity,
                                         compile=self.graph_mode == "compile")
        self.logits = logits[0].float()
        meta, arrays = _lm_observations(obs, self.cfg)
        for i, kind in enumerate(self.cfg.ffns):      # routing load so far, so no panel re-reads history
            if kind == "moe":
                load = self.load.setdefault(i, np.zeros(self.cfg.moe.n_experts, dtype=np.int32))
                load[arrays[f"l{i}/experts"]] += 1
                arrays[f"l{i}/load"] = load.copy()
        return meta, arrays


def _lm_observations(obs: dict, cfg) -> tuple[dict, dict]:
    """Batch element 0 of a model's observations -> (meta, arrays) for a Frame."""
    arrays: dict = {}
    layers = []
    for i, lo in enumerate(obs["layers"]):
        mx, ff = lo["mixer"], lo["ffn"]
        meta = {"mixer": cfg.mixers[i], "ffn": cfg.ffns[i]}
        p = f"l{i}/"
        if "S" in mx:
            arrays[p + "S"] = _compact(mx["S"][0])                       # (H, K, V)
            for name in ("k", "v", "read"):
                if name in mx:
                    arrays[p + name] = _f32(mx[name][0])                 # (H, K) / (H, V)
            if mx.get("beta") is not None:
                arrays[p + "beta"] = _f32(mx["beta"][0])                 # (H,)
            if mx.get("decay") is not None:
                arrays[p + "decay"] = _f32(mx["decay"][0])               # (H,) or (H, K)
            meta["state_bytes"] = int(mx["state_bytes"])
        if "attn" in mx:   # a static (graph) cache attends over its whole buffer: keep the written part
            arrays[p + "attn"] = _compact(mx["attn"][0][:, :int(mx["cache_len"])])   # (H, L)
            meta["cache_len"], meta["cache_bytes"] = int(mx["cache_len"]), int(mx["cache_bytes"])
        if ff.get("kind") == "moe":
            arrays[p + "scores"] = _f32(ff["scores"][0])                 # (E,)
            arrays[p + "experts"] = ff["experts"][0].cpu().numpy().astype(np.int32)   # (k,)
            arrays[p + "weights"] = _f32(ff["weights"][0])               # (k,)
            if ff.get("shared_share") is not None:
                meta["shared_share"] = float(ff["shared_share"][0])
        for j, w in enumerate(lo.get("attnres") or []):
            arrays[p + f"attnres{j}"] = _f32(w[:, 0])                    # (N,) sources of this point
        layers.append(meta)
    if "attnres_final" in obs:
        arrays["attnres_final"] = _f32(obs["attnres_final"][:, 0])
    arrays["top_ids"] = obs["top_ids"][0].cpu().numpy().astype(np.int32)
    arrays["top_probs"] = _f32(obs["top_probs"][0])
    return {"layers": layers}, arrays


def _load_checkpoint(model, sc: Scenario, base_dir: Path | None) -> None:
    from safetensors.torch import load_file
    path = Path(sc.weights.checkpoint)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        tensors = load_file(str(path))
    except Exception as e:  # safetensors raises several kinds; all mean "not a usable file"
        raise _weights_error(sc, f"cannot read {path}: {e}") from None
    try:
        result = model.load_state_dict(tensors, strict=False)
    except RuntimeError as e:   # shape mismatches: keep torch's first line, it names the tensor
        detail = next((line.strip() for line in str(e).splitlines()[1:] if line.strip()), str(e))
        raise _weights_error(sc, f"{path} does not fit the model: {detail}") from None
    bad = []
    if result.missing_keys:
        bad.append(f"missing {len(result.missing_keys)} tensors (first: {result.missing_keys[0]})")
    if result.unexpected_keys:
        bad.append(f"{len(result.unexpected_keys)} unknown tensors (first: {result.unexpected_keys[0]})")
    if bad:
        raise _weights_error(sc, f"{path} does not fit the model: " + "; ".join(bad))


def _weights_error(sc: Scenario, msg: str) -> ScenarioError:
    from .scenario_yaml import Problem
    return ScenarioError([Problem(sc.source or "<scenario>", 1, 1, "weights.checkpoint", msg)])


class _MemoryRunner:
    def __init__(self, spec, sc: Scenario, seq):
        from .toy import Memory
        self.mem = Memory(spec.memory, seq, sc.input.task, sc.weights.seed, sc.weights.set)

    def step(self, ev) -> tuple[dict, dict]:
        o = self.mem.step(ev)
        arrays = {"l0/S": o["S"].numpy()[None], "l0/k": o["k"].numpy()[None], "l0/v": o["v"].numpy()[None],
                  "l0/read": o["read"].numpy()[None], "l0/decay": o["decay"].numpy()[None],
                  "l0/beta": np.array([o["beta"]]), "recall": o["recall"].numpy(), "target": o["target"].numpy(),
                  "recall_keys": np.array(o["recall_keys"], dtype=np.int32)}
        if o["out"] is not None:
            arrays["out"] = o["out"].numpy()
        return {"layers": [{"mixer": self.mem.spec.rule, "ffn": "none"}], "event": ev.label()}, arrays


# ------------------------------------------------------------------------------ session

class Session(Cursor):
    def __init__(self, sc: Scenario, device: str | None = None, writer: TraceWriter | None = None):
        super().__init__()
        self.sc = sc
        self._lock = threading.Lock()
        self.frames: list[Frame] = []
        self.writer = writer
        self.total = total_steps(sc) or 0
        self.notes: list[str] = []
        self.runners: list = []
        self.events = self.tokens = None
        self.answers: dict = {}
        specs = sc.model_specs
        info_models = []
        if specs:
            import torch
            self.torch = torch
            self.device = self._device(device or sc.device)
            cfgs = []
            if specs[0].memory is None:
                problems: list = []
                cfgs = [build_config(s, ("models", i), Located(sc.source or "<scenario>", None), problems)
                        for i, s in enumerate(specs)]
                if problems:
                    raise ScenarioError(problems)
            from .params import count
            totals = [count(cfg)["total"] for cfg in cfgs]
            if self.device.type == "cpu" and torch.get_num_threads() > 1 and sum(totals) < 20_000_000:
                # a step of a small model is dozens of tiny ops: extra intra-op threads only
                # spin, and steal the core the UI draws on (7.2 ms a step on one thread,
                # 12.5 ms on two while the app draws, measured on the 2-core dev box)
                torch.set_num_threads(1)
            dtype = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}[sc.dtype]
            seq = None
            if sc.input.task is not None:
                from .tasks import generate
                seq = generate(sc.input.task)
                self.answers = seq.answers
            if specs[0].memory is not None:
                self.events = seq.events
                for s in specs:
                    self.runners.append(_MemoryRunner(s, sc, seq))
                    info_models.append({"name": s.label, "kind": "memory", **s.memory.model_dump()})
            else:
                if sc.input.text is not None:
                    from .tokenizer import ByteTokenizer
                    self.tokens = ByteTokenizer().encode(sc.input.text)
                else:
                    self.tokens = list(sc.input.ids) if sc.input.ids is not None else list(seq.tokens)
                for s, cfg, total in zip(specs, cfgs, totals):
                    self.runners.append(_LMRunner(cfg, sc, self.device, dtype, sc.base_dir))
                    info_models.append({"name": s.label, "kind": "lm", "config": dataclasses.asdict(cfg),
                                        "params": total})
                self.notes += sorted({r.backend_note for r in self.runners if r.backend_note})
                P = sc.decoding.prefill
                for r in self.runners:
                    r.prefill(self.tokens[:P])
                self.gen = torch.Generator().manual_seed(sc.decoding.seed)
        self.info = {"title": sc.title, "description": sc.description, "steps": self.total,
                     "models": info_models, "panels": [p.model_dump() for p in sc.panels],
                     "captions": [c.model_dump() for c in sc.captions],
                     "figure": sc.figure.model_dump() if sc.figure is not None else None,
                     "device": str(self.device) if specs else "none", "dtype": sc.dtype,
                     "backend": self._backend_label(),
                     "decoding": sc.decoding.model_dump(), "notes": self.notes}

    def _backend_label(self) -> str:
        lm = [r for r in self.runners if isinstance(r, _LMRunner)]
        if not lm:
            return "reference (toy memory)" if self.runners else "none (arithmetic)"
        return lm[0].backend

    def _device(self, want: str):
        torch = self.torch
        if want == "cuda" and not torch.cuda.is_available():
            self.notes.append("cuda asked for but not available: running on the CPU")
            return torch.device("cpu")
        if want == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(want)

    def frame(self, i: int) -> Frame:
        if not 0 <= i < self.total:
            raise IndexError(f"step {i} out of range (0-{self.total - 1})")
        if i < len(self.frames):
            return self.frames[i]
        # one stepping thread at a time: a second caller waits, then reads what the first made
        # (two threads stepping at once would feed the model the same token twice)
        with self._lock:
            while len(self.frames) <= i:
                f = self._make(len(self.frames))
                self.frames.append(f)
                if self.writer is not None:
                    self.writer.write(f)
        return self.frames[i]

    # -- one step -------------------------------------------------------------------
    def _make(self, i: int) -> Frame:
        sc = self.sc
        meta = {"caption": _caption(sc, i)}
        arrays: dict = {}
        if sc.figure is not None:   # a figure's slider follows the steps (held at its last setting)
            from .figure_frames import figure_row, figure_steps
            meta["figure"] = figure_row(sc.figure, min(i, figure_steps(sc.figure) - 1))
        if not self.runners:
            return Frame(i, meta, arrays)
        if self.events is not None:
            ev = self.events[i]
            meta["event"] = ev.label()
            models = []
            for m, r in enumerate(self.runners):
                mm, ar = r.step(ev)
                models.append(mm)
                arrays.update({f"m{m}/{k}": v for k, v in ar.items()})
            meta["models"] = models
            return Frame(i, meta, arrays)
        P = sc.decoding.prefill
        pos = P + i
        if pos < len(self.tokens):
            token, source = self.tokens[pos], "input"
        else:
            token, source = self._decode(self.runners[0].logits), sc.decoding.mode
        from .tokenizer import ByteTokenizer
        tok = ByteTokenizer()
        meta.update(pos=pos, token=int(token), text=tok.token_str(token) if token < 256 else str(token),
                    source=source, answer=self.answers.get(pos))
        if pos + 1 < len(self.tokens):
            meta["next_input"] = int(self.tokens[pos + 1])
        models = []
        for m, r in enumerate(self.runners):
            mm, ar = r.step(int(token))
            models.append(mm)
            arrays.update({f"m{m}/{k}": v for k, v in ar.items()})
        meta["models"] = models
        return Frame(i, meta, arrays)

    def _decode(self, logits) -> int:
        torch = self.torch
        d = self.sc.decoding
        if logits is None:
            return 0
        if d.mode in ("greedy", "teacher"):
            return int(logits.argmax())
        z = logits / d.temperature
        if d.top_k:
            v, _ = z.topk(min(d.top_k, z.numel()))
            z = z.masked_fill(z < v[-1], float("-inf"))
        return int(torch.multinomial(z.softmax(-1).cpu(), 1, generator=self.gen))

    def record_to(self, path: str | Path, overwrite: bool = False) -> TraceWriter:
        """Write every frame made from now on (and those already made) to a trace file."""
        self.writer = TraceWriter(path, self.sc.text or "", self.info, overwrite=overwrite)
        for f in self.frames:
            self.writer.write(f)
        return self.writer

    def record_all(self, steps: int | None = None) -> None:
        n = self.total if steps is None else min(steps, self.total)
        for i in range(n):
            self.frame(i)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class Replay(Cursor):
    """Frames from a trace file; needs neither torch nor a GPU."""

    def __init__(self, path: str | Path, salvage: bool = False):
        super().__init__()
        self.reader = TraceReader(path, salvage=salvage)
        self.info = self.reader.info
        self.total = len(self.reader)
        self.scenario_text = self.reader.scenario_text
        self._cache: dict[int, Frame] = {}
        self._lock = threading.Lock()

    def frame(self, i: int) -> Frame:
        f = self._cache.get(i)
        if f is None:
            with self._lock:                    # one file handle: seek and read must not interleave
                if len(self._cache) > 256:      # keep memory flat on long traces
                    self._cache.clear()
                f = self._cache[i] = self.reader.frame(i)
        return f

    def close(self) -> None:
        self.reader.close()


def is_trace(path: str | Path) -> bool:
    try:
        with open_regular(path) as f:     # a FIFO or device is no trace (and must not block us)
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def open_path(path: str | Path, device: str | None = None, salvage: bool = False) -> Cursor:
    """A Session for a scenario file or a Replay for a trace (by its magic bytes)."""
    if is_trace(path):
        return Replay(path, salvage=salvage)
    from .scenario import load
    return Session(load(path), device=device)
