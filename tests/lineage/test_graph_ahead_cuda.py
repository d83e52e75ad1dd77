"""A captured step queued before the last one's frame is built (GraphStep.launch, host_copy's
`ahead`) gives the frames stepping one at a time gives, bit for bit: through the input and past
its end, where the next token is the model's own guess and nothing is queued. Needs a GPU."""
import pytest
import torch

from lineage.observed import StepObs
from tests.lineage.test_graph_step_cuda import softmax_on_gpu
from tests.lineage.test_model import rel

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


def test_a_launched_step_is_the_step_taken_next():
    from lineage.graph_step import GraphStep
    model, ids = softmax_on_gpu(14)
    with torch.inference_mode():
        _, st = model(ids[:, :8])
        stepper = GraphStep(model, st, capacity=12)
        stepper.step(int(ids[0, 8]))
        assert stepper.launch(int(ids[0, 9])) and not stepper.launch(int(ids[0, 9]))   # one at a time
        with pytest.raises(RuntimeError, match="cannot be undone"):
            stepper.step(int(ids[0, 10]))
        logits, _ = stepper.step(int(ids[0, 9]))
        for t in (8, 9):
            eager, st = model.step(ids[:, t], st, StepObs())
        assert rel(logits.float(), eager.float()) < 1e-4
        stepper.step(int(ids[0, 10]))
        stepper.step(int(ids[0, 11]))                      # 12 of 12 slots written
        assert not stepper.launch(int(ids[0, 12]))         # no room: nothing queued
        with pytest.raises(IndexError, match="full"):
            stepper.step(int(ids[0, 12]))


def test_frames_queued_ahead_equal_frames_one_at_a_time(monkeypatch):
    from lineage.graph_step import GraphStep
    from lineage.playback.session import Session
    from lineage.scenario import load
    from tests.app.helpers import SC

    def frames(ahead: bool) -> list:
        # one at a time: every launch answers as a full cache does (nothing queued), so each
        # step replays its graph when it is taken
        launch = GraphStep.launch if ahead else (lambda self, token: False)
        monkeypatch.setattr(GraphStep, "launch", launch)
        s = Session(load(SC / "tour.yaml"))
        try:
            assert s.runner.models[0].graph_mode is not None        # the captured step, on this GPU
            n = len(s.runner.tokens) - s.sc.decoding.prefill + 20   # the input, then 20 guessed
            return [s.frame(i) for i in range(n)]
        finally:
            s.close()
    queued, single = frames(True), frames(False)
    assert [f.meta["source"] for f in queued][-21:] == ["input"] + ["greedy"] * 20
    for a, b in zip(queued, single):
        assert a == b, a.step
