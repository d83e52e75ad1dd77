"""lineage.prefill: a prompt read in chunks gives the whole forward's last logits and a state
the steps continue from exactly, for every mixer kind; the sliding window and the awkward
chunk sizes (1, one that does not divide T) included."""
import dataclasses

import pytest
import torch

from lineage.model import LM
from lineage.prefill import activation_bytes, prefill
from lineage.presets import PRESETS, get_preset

RUNNABLE = [n for n in PRESETS if not get_preset(n).shape_only and n != "gpt2-small"]


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def _windowed():
    cfg = get_preset("tiny-softmax")
    return dataclasses.replace(cfg, attention=dataclasses.replace(cfg.attention, sliding_window=5))


@pytest.mark.parametrize("name", RUNNABLE + ["windowed"])
@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_chunks_equal_the_whole_forward(name, chunk):
    torch.manual_seed(0)
    model = LM(_windowed() if name == "windowed" else get_preset(name)).double().eval()
    ids = torch.randint(0, 256, (2, 31))
    full, _ = model(ids)
    seen = []
    last, state = prefill(model, ids[:, :23], chunk=chunk, progress=lambda d, t: seen.append((d, t)))
    assert rel(last, full[:, 22]) < 1e-10
    assert seen[-1] == (23, 23) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    outs = []
    with torch.inference_mode():                             # as the app steps
        for t in range(23, 31):                              # the steps continue where it stopped
            out, state = model.step(ids[:, t], state)
            outs.append(out)
    assert rel(torch.stack(outs, 1), full[:, 23:]) < 1e-10


def test_only_the_last_position_reaches_the_head():
    model = LM(get_preset("tiny-kda")).eval()
    calls = []
    model.lm_head.register_forward_hook(lambda m, i, o: calls.append(tuple(i[0].shape)))
    prefill(model, torch.randint(0, 256, (1, 50)), chunk=16)
    assert calls and all(c[1] == 1 for c in calls)


def test_activation_estimate_grows_with_the_chunk_not_the_prompt_for_a_recurrent_model():
    cfg = get_preset("tiny-kda")
    assert activation_bytes(cfg, 10**6, 4) == activation_bytes(cfg, 10**5, 4)
    kimi = get_preset("kimi-linear-48b")             # MLA layers expand the whole prefix per head
    assert activation_bytes(kimi, 131072, 2) > activation_bytes(kimi, 8192, 2)
