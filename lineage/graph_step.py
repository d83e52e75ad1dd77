"""A model's one-token step captured in a CUDA graph: one host call per token instead of
hundreds of small launches (a k3-mini step is about 600 kernels; eager, the host is the limit).

Capture needs the same tensors every step, so MLA caches become StaticLatentCache (fixed
capacity, written in place) and the recurrent states are copied back into fixed buffers at
the end of the captured step. Observations come out as the graph's own output tensors:
read (copy) them before the next replay.

    stepper = GraphStep(model, state, capacity=4096)     # state: after a prefill
    logits, obs = stepper.step(token_id)                  # replay; obs as model.step fills it
"""
from __future__ import annotations

import torch

from .mechanisms.deltanet import DeltaState
from .mechanisms.linear_attention import LinearState
from .mechanisms.mla import LatentCache, StaticLatentCache
from .model import LM, ModelState


def to_static(state: ModelState, capacity: int) -> ModelState:
    """A copy of the state with every MLA cache moved into a fixed-capacity buffer (the copy:
    a captured step updates its buffers in place, and the caller's state must not change).
    Its delta states are marked in_place: the Triton step then writes S where it is."""
    layers = []
    for st in state.layers:
        if isinstance(st, LatentCache):
            st = StaticLatentCache.from_cache(st, capacity)
        elif isinstance(st, DeltaState):
            st = DeltaState(st.S.clone(), None if st.conv is None else st.conv.clone(), in_place=True)
        elif isinstance(st, LinearState):
            st = LinearState(st.S.clone(), st.z.clone())
        elif st is not None:
            raise ValueError(f"{type(st).__name__} has no static form (softmax KV caches are not supported yet)")
        layers.append(st)
    return ModelState(state.pos, layers)


def _buffers(state: ModelState) -> list[torch.Tensor]:
    out = []
    for st in state.layers:
        if isinstance(st, DeltaState):
            out += [st.S] + ([st.conv] if st.conv is not None else [])
        elif isinstance(st, LinearState):
            out += [st.S, st.z]
        elif isinstance(st, StaticLatentCache):
            out += [st.c, st.k_pe, st.pos]
    return out


class GraphStep:
    def __init__(self, model: LM, state: ModelState, capacity: int, observe: bool = True,
                 compile: bool = False):
        """compile=True first runs the step through torch.compile (inductor fuses the many small
        elementwise kernels), then captures the compiled step. On the Triton backend the
        delta-rule layers call kda_step through its custom op, which the compiler keeps.
        The captured step updates its own copy of the state in place (to_static)."""
        if model.wpe is not None:
            raise ValueError("learned positions index by a host integer; graph capture supports RoPE/NoPE models")
        if any(st is None for st in state.layers):
            raise ValueError("prefill at least one token before capturing (every layer needs a state)")
        self.model, self.observe = model, observe
        self._step_fn = torch.compile(self._run, dynamic=False) if compile else self._run
        self.state = to_static(state, capacity)
        self.caches = [st for st in self.state.layers if isinstance(st, StaticLatentCache)]
        self.capacity = capacity
        device = next(model.parameters()).device
        self.token = torch.zeros(1, dtype=torch.long, device=device)
        saved = [b.clone() for b in _buffers(self.state)]
        lengths = [st.length for st in self.caches]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(3):                      # warm-up (and compile), as torch requires before capture
                self._step_fn()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(self.graph):
            self.logits, self.obs = self._step_fn()
        # warm-up and capture advanced the state: put it back as it was
        for b, s in zip(_buffers(self.state), saved):
            b.copy_(s)
        for st, n in zip(self.caches, lengths):
            st.length = n
        self.steps = 0

    def _run(self):
        obs = {} if self.observe else None
        logits, new = self.model.step(self.token, self.state, obs)
        for old, nw in zip(self.state.layers, new.layers):
            if isinstance(old, DeltaState):
                if nw.S is not old.S:                 # the Triton step updates S in place
                    old.S.copy_(nw.S)
                if old.conv is not None and nw.conv is not old.conv:
                    old.conv.copy_(nw.conv)
            elif isinstance(old, LinearState):
                old.S.copy_(nw.S)
                old.z.copy_(nw.z)
        return logits, obs

    def step(self, token: int):
        caches = self.caches
        if caches and caches[0].length >= self.capacity:
            raise IndexError(f"the static cache is full ({self.capacity} tokens)")
        self.token.fill_(int(token))
        self.graph.replay()
        for st in caches:
            st.length += 1
        self.steps += 1
        if self.obs is not None:                    # host-side counts the graph could not update
            self.obs["pos"] = self.state.pos + self.steps - 1
            for layer, st in zip(self.obs["layers"], self.state.layers):
                if isinstance(st, StaticLatentCache):
                    layer["mixer"]["cache_len"], layer["mixer"]["cache_bytes"] = st.length, st.nbytes
        return self.logits, self.obs
