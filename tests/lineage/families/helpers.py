"""Shared by the pretrained tests: save a transformers model, load it with ours, compare logits
over a prefill and then token by token against transformers with its own cache."""
from __future__ import annotations

import importlib
import sys

import torch

import lineage
from lineage.observed import StepObs


def import_cpu_models(*modules: str) -> None:
    """Import transformers' modeling modules with fla hidden. transformers chooses fla's Triton
    kernels when it can import fla, at the moment a modeling module is imported, and those kernels
    refuse CPU tensors: on a GPU box with fla installed the CPU comparisons below would run into
    them. Hidden, it takes its own PyTorch paths, which are what these tests compare against."""
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "fla" or k.startswith("fla.")}
    sys.modules["fla"] = None                   # None in sys.modules: `import fla` raises ImportError
    try:
        for m in modules:
            importlib.import_module(f"transformers.models.{m}")
    finally:
        del sys.modules["fla"]
        sys.modules.update(saved)


def save(ref, path) -> None:
    ref.save_pretrained(str(path))


def rel(a, b) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def compare(ref, path, vocab: int, prefill: int = 7, steps: int = 5, seed: int = 0, state_check=None):
    """Logits relative errors (prefill, then each step); `state_check(i_step, hf_cache, our_state)`
    may compare recurrent states too."""
    ours, _ = lineage.load_pretrained(path)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (1, prefill + steps), generator=g)
    errs = []
    with torch.no_grad():
        out = ref(ids[:, :prefill], use_cache=True)
        logits, state = ours(ids[:, :prefill])
        errs.append(rel(logits, out.logits))
        cache = out.past_key_values  # transformers 5 still returns it under this name
        for i in range(steps):
            t = ids[:, prefill + i]
            out = ref(t[:, None], cache=cache, use_cache=True)
            cache = out.past_key_values  # transformers 5 still returns it under this name
            obs = StepObs()
            logits, state = ours.step(t, state, obs)
            errs.append(rel(logits, out.logits[:, 0]))
            if state_check is not None:
                state_check(i, cache, state)
    return errs


def greedy_equal(ref, path, ids=(5, 17, 33, 8, 61, 2, 44), new: int = 12) -> None:
    """Our model loaded from `path` decodes the same `new` greedy tokens after `ids` as
    transformers' `ref.generate`: the prefill, then one cached step a token."""
    model, _ = lineage.load_pretrained(path)
    ids = torch.tensor([list(ids)])
    with torch.no_grad():
        want = ref.generate(ids, max_new_tokens=new, do_sample=False, eos_token_id=None,
                            pad_token_id=0)[0, ids.shape[1]:]
        logits, state = model(ids)
        got = [int(logits[0, -1].argmax())]
        for _ in range(new - 1):
            logits, state = model.step(torch.tensor([got[-1]]), state)
            got.append(int(logits[0].argmax()))
    assert got == want.tolist()
