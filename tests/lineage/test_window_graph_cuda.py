"""A sliding-window model's step captured in a CUDA graph gives what the eager step gives, from
a prefill shorter than the window and from one longer (whose cache already dropped tokens), and
reports W tokens cached. Needs a GPU: skipped elsewhere (test_llama.py checks the static step
on the CPU)."""
import dataclasses

import pytest
import torch

from lineage.configs import RopeScalingConfig
from lineage.model import LM
from tests.lineage.test_model import _rotary_softmax, rel
from lineage.observed import StepObs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


@pytest.mark.parametrize("prefill", [3, 9])
def test_windowed_graph_replay_equals_eager_steps(prefill):
    from lineage.graph_step import GraphStep
    torch.manual_seed(0)
    dev = torch.device("cuda")
    cfg = _rotary_softmax()
    att = dataclasses.replace(cfg.attention, sliding_window=5,
                              rope_scaling=RopeScalingConfig("yarn", 4.0, 8), rope_dim=cfg.attention.dim)
    model = LM(dataclasses.replace(cfg, attention=att)).to(dev).eval()
    ids = torch.randint(0, 256, (1, prefill + 12), device=dev)
    with torch.inference_mode():
        _, st = model(ids[:, :prefill])
        stepper = GraphStep(model, st, capacity=32)
        for t in range(prefill, prefill + 12):
            graph_logits, obs = stepper.step(int(ids[0, t]))
            eager_obs = StepObs()
            eager_logits, st = model.step(ids[:, t], st, eager_obs)
            assert rel(graph_logits.float(), eager_logits.float()) < 1e-4, t
            for g, e in zip(obs.layers, eager_obs.layers):
                assert g.mixer.cache_len == e.mixer.cache_len == min(t + 1, 5)
                assert g.mixer.cache_bytes == e.mixer.cache_bytes
                n = e.mixer.length
                assert g.mixer.length == n == t + 1
                assert rel(g.mixer.weights[..., :n].float(), e.mixer.weights.float()) < 1e-4
