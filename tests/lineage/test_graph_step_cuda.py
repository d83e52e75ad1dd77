"""A model's step captured in a CUDA graph and replayed gives what the eager step gives, for
the caches that grow (MLA latents, softmax K and V) and the states that do not. Needs a GPU:
skipped elsewhere (the CPU checks the static caches' steps in test_model.py)."""
import pytest
import torch

from lineage.model import LM
from lineage.presets import get_preset
from tests.lineage.test_model import _rotary_conv_softmax, _rotary_softmax, rel
from lineage.observed import StepObs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


@pytest.mark.parametrize("name", ["k3-mini", "rotary-softmax", "rotary-conv-softmax"])
def test_graph_replay_equals_eager_steps(name):
    from lineage.backend import resolve, set_backend
    from lineage.graph_step import GraphStep
    torch.manual_seed(0)
    dev = torch.device("cuda")
    made = {"rotary-softmax": _rotary_softmax, "rotary-conv-softmax": _rotary_conv_softmax}   # conv: its cache updated in place
    model = LM(made[name]() if name in made else get_preset(name)).to(dev).eval()
    set_backend(model, resolve(dev)[0])                     # as the app does: the Triton kernels here
    ids = torch.randint(0, 256, (1, 24), device=dev)
    with torch.inference_mode():
        _, st = model(ids[:, :8])
        stepper = GraphStep(model, st, capacity=64)        # works on its own copy of the state
        for t in range(8, 24):
            graph_logits, obs = stepper.step(int(ids[0, t]))
            eager_obs = StepObs()
            eager_logits, st = model.step(ids[:, t], st, eager_obs)
            assert rel(graph_logits.float(), eager_logits.float()) < 1e-4, t
            for g, e in zip(obs.layers, eager_obs.layers):
                n = getattr(e.mixer, "cache_len", None)
                assert getattr(g.mixer, "cache_len", None) == n
                if n is not None:                           # the static buffer's attention, trimmed as frames do
                    assert rel(g.mixer.weights[..., :n].float(), e.mixer.weights.float()) < 1e-4


def softmax_on_gpu(n: int):
    """A small rotary softmax model on the GPU and n random byte ids (1, n), seeded."""
    torch.manual_seed(0)
    dev = torch.device("cuda")
    return LM(_rotary_softmax()).to(dev).eval(), torch.randint(0, 256, (1, n), device=dev)


def test_capture_needs_only_one_free_slot():
    """The warm-up steps before capture each write at the same place (put back after each):
    a cache with room for one more token can still be captured."""
    from lineage.graph_step import GraphStep
    model, ids = softmax_on_gpu(9)
    with torch.inference_mode():
        _, st = model(ids[:, :8])
        stepper = GraphStep(model, st, capacity=9)
        graph_logits, _ = stepper.step(int(ids[0, 8]))
        eager_logits, _ = model.step(ids[:, 8], st, StepObs())
        assert rel(graph_logits.float(), eager_logits.float()) < 1e-4


def test_capture_beside_a_thread_reading_the_device():
    """The app's main thread reads earlier frames' tensors (device to host copies) while the
    stepping thread captures. In torch's default "global" capture mode such a copy aborts the
    capture ("operation not permitted when stream is capturing"): seen under load on the H100."""
    import threading
    from lineage.graph_step import GraphStep
    model, ids = softmax_on_gpu(40)
    busy = torch.randn(1 << 16, device="cuda")
    stop = threading.Event()

    def read():
        while not stop.is_set():
            busy.cpu()
    with torch.inference_mode():
        _, st = model(ids[:, :8])
        reader = threading.Thread(target=read)
        reader.start()
        try:
            steppers = [GraphStep(model, st, capacity=40) for _ in range(5)]   # five captures, each beside it
        finally:
            stop.set()
            reader.join()
        graph_logits, _ = steppers[-1].step(int(ids[0, 8]))
        eager_logits, _ = model.step(ids[:, 8], st, StepObs())
        assert rel(graph_logits.float(), eager_logits.float()) < 1e-4
