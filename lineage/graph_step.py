"""A model's one-token step captured in a CUDA graph: one host call per token instead of
hundreds of small launches (a k3-mini step is about 600 kernels; eager, the host is the limit).

Capture needs the same tensors every step, so MLA and softmax caches become static ones
(mixers/static_cache.py: fixed capacity, written in place) and the recurrent states are
copied back into fixed buffers at the end of the captured step. Observations come out as the graph's own output tensors:
read (copy) them before the next replay.

    stepper = GraphStep(model, state, capacity=4096)     # state: after a prefill
    logits, obs = stepper.step(token_id)                  # replay; obs as model.step fills it
    stepper.launch(next_id)          # optional: the next replay queued now (once obs is copied
                                     # out on the device), taken by the next step(next_id)
"""
from __future__ import annotations

from dataclasses import replace

import torch

from .observed import StepObs
from .mixers.static_cache import StaticCache
from .model import LM, ModelState


def to_static(state: ModelState, capacity: int) -> ModelState:
    """A copy of the state in static form (the copy: a captured step updates its buffers in
    place, and the caller's state must not change). Each layer's state gives its own
    (`to_static`): an MLA or KV cache moves into a fixed-capacity buffer, a delta state is marked
    in_place so the Triton step writes S where it is."""
    return ModelState(state.pos, [None if st is None else st.to_static(capacity) for st in state.layers])


def _buffers(state: ModelState) -> list[torch.Tensor]:
    return [b for st in state.layers if st is not None for b in st.buffers()]


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
        self.caches = [st for st in self.state.layers if isinstance(st, StaticCache)]
        self.capacity = capacity
        device = next(model.parameters()).device
        self.token = torch.zeros(1, dtype=torch.long, device=device)
        self._saved = [b.clone() for b in _buffers(self.state)]
        self._lengths = [st.length for st in self.caches]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(3):                      # warm-up (and compile), as torch requires before capture
                self._step_fn()
                self._restore()                     # each writes at the same place: one free slot is enough
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: the app's other threads go on reading earlier frames' tensors while this
        # one captures; in the default "global" mode any of their CUDA calls aborts the capture
        with torch.inference_mode(), torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.logits, self.obs = self._step_fn()
        self._restore()                             # capture advanced the host-side counts
        del self._saved
        self.steps = 0
        self.ahead = None                           # the token of a replay launched, not yet taken

    def launch(self, token: int) -> bool:
        """Queue the next step's replay now, behind what the device already has to do (the
        copies of this step's observations, host_copy.to_host), so that the device computes it
        while the host turns this step into a frame. step(token) then takes it instead of
        replaying. Its outputs overwrite this step's: call it only once they are copied.
        False (nothing launched) where the cache has no room left for it."""
        if self.ahead is not None or (self.caches and self.caches[0].length >= self.capacity):
            return False
        self.token.fill_(int(token))
        self.graph.replay()
        self.ahead = int(token)
        return True

    def _restore(self) -> None:
        """Put the state back as it was before the warm-up and capture steps."""
        for b, s in zip(_buffers(self.state), self._saved):
            b.copy_(s)
        for st, n in zip(self.caches, self._lengths):
            st.length = n

    def _run(self):
        obs = StepObs() if self.observe else None
        logits, new = self.model.step(self.token, self.state, obs)
        for old, nw in zip(self.state.layers, new.layers):
            if old is not None:
                old.copy_from(nw)                     # back into the buffers the graph captured
        return logits, obs

    def step(self, token: int):
        caches = self.caches
        if caches and caches[0].length >= self.capacity:
            raise IndexError(f"the static cache is full ({self.capacity} tokens)")
        if self.ahead is None:
            self.token.fill_(int(token))
            self.graph.replay()
        elif self.ahead != int(token):        # the device has already stepped on another token
            raise RuntimeError(f"step({token}) after launch({self.ahead}): the launched step cannot be undone")
        self.ahead = None
        for st in caches:
            st.length += 1
        self.steps += 1
        if self.obs is not None:                    # host-side counts the graph could not update
            self.obs.pos = self.state.pos + self.steps - 1
            for layer, st in zip(self.obs.layers, self.state.layers):
                if isinstance(st, StaticCache):     # the row covers the dropped positions of a window too
                    layer.mixer = replace(layer.mixer, length=getattr(st, "start", 0) + st.length,
                                          cache_len=st.held, cache_bytes=st.nbytes)
        return self.logits, self.obs
