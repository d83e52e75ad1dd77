"""A checkpoint's layers placed by a device map and stepped across devices (issue 32): each
tensor loads onto its layer's device, the hidden state crosses at layer boundaries, and the
logits, states and frames equal the one-device run. On the CPU alone the maps' wiring and
refusals; with CUDA, a model split between cuda:0 and the CPU against the CPU alone."""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import torch  # noqa: E402

import lineage  # noqa: E402
from lineage.observed import StepObs  # noqa: E402
from lineage.playback.session import Session  # noqa: E402
from lineage.scenario import loads  # noqa: E402
from lineage.scenario.problems import ScenarioError  # noqa: E402
from lineage.cli.main import main  # noqa: E402

from .helpers import rel  # noqa: E402
from .test_hybrids import kimi  # noqa: E402

LAYERS = 5          # kimi(): KDA x 3, MLA, KDA; MoE after the first layer
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("dm") / "kimi-tiny"
    kimi(path)
    return path


def split_map(tmp_path, first: str, rest: str, at: int = 2):
    """A map file: the embedding and layers before `at` on `first`, the rest and the head on `rest`."""
    m = {"model.embed_tokens": first, **{f"model.layers.{i}": first if i < at else rest for i in range(LAYERS)},
         "model.norm": rest, "lm_head": rest}
    f = tmp_path / "map.json"
    f.write_text(json.dumps(m))
    return f


def run(model, ids, prefill: int):
    """Logits of the prefill and of each step after it, the last state, the steps' observations."""
    with torch.no_grad():
        logits, state = model(ids[:, :prefill])
        out, obs = [logits[0, -1].float().cpu()], []
        for t in range(prefill, ids.shape[1]):
            o = StepObs()
            lg, state = model.step(ids[:, t].to(model.wte.weight.device), state, o)
            out.append(lg[0].float().cpu())
            obs.append(o)
    return out, state, obs


def scenario(ckpt, model_extra: str) -> str:
    return f"""version: 1
title: a placed checkpoint
model: {{pretrained: {ckpt}{model_extra}}}
input: {{ids: [5, 9, 11, 3, 40, 2, 17, 8]}}
decoding: {{mode: teacher, prefill: 3}}
steps: 4
panels: [{{kind: tokens}}, {{kind: state, layer: 0}}, {{kind: state, layer: 4}}, {{kind: routing}}, {{kind: cache}}]
"""


def test_a_map_of_the_cpu_alone_loads_the_same_model(ckpt, tmp_path):
    """Every layer mapped to the CPU: the same weights, nothing spread, the same logits."""
    plain, _ = lineage.load_pretrained(ckpt)
    from lineage.families.placement import plan_map
    from lineage.families import read_model_config
    cfg = read_model_config(ckpt)[0]
    p = plan_map(cfg, str(split_map(tmp_path, "cpu", "cpu")), context=16)
    placed, _ = lineage.load_pretrained(ckpt, device_map=p.device_map)
    assert placed.places is None and set(p.device_map.values()) == {"cpu"}
    ids = torch.randint(3, 97, (1, 9), generator=torch.Generator().manual_seed(2))
    a, _, _ = run(plain, ids, 5)
    b, _, _ = run(placed, ids, 5)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_a_map_that_misses_a_layer_is_refused(ckpt):
    from lineage.families import PretrainedError
    with pytest.raises(PretrainedError, match="places no blocks.4"):
        lineage.load_pretrained(ckpt, device_map={"wte": "cpu", **{f"blocks.{i}": "cpu" for i in range(4)},
                                                  "norm_f": "cpu", "lm_head": "cpu"})


def test_a_scenario_says_where_each_layer_went(ckpt):
    s = Session(loads(scenario(ckpt, ", device_map: cpu")), device="cpu")
    notes = " ".join(s.info["notes"])
    assert "placed by device map cpu: cpu embedding, layers 0-4, final norm, head" in notes, notes
    assert s.frame(3).state(0, 4) is not None
    s.close()


def test_device_and_device_map_together_are_refused(ckpt):
    with pytest.raises(ScenarioError, match="device or device_map, not both"):
        loads(scenario(ckpt, ", device: cpu, device_map: cpu"))
    with pytest.raises(ScenarioError, match="as is device_map"):
        loads("version: 1\ntitle: t\nmodel: {preset: tiny-kda, device_map: auto}\ninput: {text: hi}\n")


def test_a_map_naming_an_absent_gpu_is_one_located_line(ckpt, tmp_path, capsys):
    """`lineage record DIR --device-map cuda:7` on a box without that GPU: one line, exit 2,
    naming the map and the device, placed at the scenario's device_map."""
    code = main(["record", str(ckpt), "--ids", "5,6,7", "--device-map", "cuda:7", "-o", str(tmp_path / "t.trace")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "device_map" in err[0] and ("cuda:7 is not visible" in err[0] or "no GPU is visible" in err[0]), err[0]
    assert "--gpu-memory" not in err[0]          # lineage memory's flag: a run has none
    assert not (tmp_path / "t.trace").exists()


@cuda
def test_split_between_cuda_and_cpu_equals_the_cpu(ckpt, tmp_path):
    """Layers 0-1 and the embedding on cuda:0 (Triton kernels), layers 2-4 and the head on the
    CPU (the reference): the same logits, states and observations as the whole model on the CPU,
    each layer's state on its own device."""
    from lineage.backend import set_backend
    from lineage.families import read_model_config
    from lineage.families.placement import plan_map
    cfg = read_model_config(ckpt)[0]
    p = plan_map(cfg, str(split_map(tmp_path, "cuda:0", "cpu")), context=16, weight_bytes=4)
    placed, _ = lineage.load_pretrained(ckpt, device_map=p.device_map, dtype="float32")
    set_backend(placed, "triton")
    assert [d.type for d in placed.places] == ["cuda", "cuda", "cpu", "cpu", "cpu"]
    assert placed.blocks[1].mixer.backend == "triton" and placed.blocks[2].mixer.backend == "reference"
    plain, _ = lineage.load_pretrained(ckpt)
    ids = torch.randint(3, 97, (1, 12), generator=torch.Generator().manual_seed(3))
    a, sa, oa = run(plain, ids, 6)
    b, sb, ob = run(placed, ids, 6)
    assert max(rel(y, x) for x, y in zip(a, b)) < 1e-4
    assert [st.S.device.type for st in sb.layers if hasattr(st, "S")] == ["cuda", "cuda", "cpu", "cpu"]
    for x, y in zip(sa.layers, sb.layers):
        if hasattr(x, "S"):
            assert rel(y.S.cpu(), x.S) < 1e-4
    for x, y in zip(oa, ob):
        assert torch.equal(x.top_ids.cpu(), y.top_ids.cpu())
        assert rel(y.top_probs.cpu(), x.top_probs) < 1e-4


@cuda
def test_a_session_on_a_split_model_gives_the_cpu_frames(ckpt, tmp_path):
    """The app's Session on `device_map: cuda:0 / cpu` against the CPU alone: the same frames
    (tokens, states, routing), stepped eagerly, with the placement said in the notes."""
    m = split_map(tmp_path, "cuda:0", "cpu", at=3)
    split = Session(loads(scenario(ckpt, f", device_map: {m}, dtype: float32")))
    alone = Session(loads(scenario(ckpt, ", device: cpu")))
    notes = " ".join(split.info["notes"])
    assert "cuda:0 embedding, layers 0-2" in notes and "cpu layers 3-4, final norm, head" in notes, notes
    assert "run eagerly" in notes
    for i in range(4):
        f, g = split.frame(i), alone.frame(i)
        assert f.token().token == g.token().token and list(f.guesses(0).ids) == list(g.guesses(0).ids)
        assert abs(f.guesses(0).probs - g.guesses(0).probs).max() < 1e-4
        for layer in (0, 4):         # float16 on the host: equal to its rounding
            a, b = (torch.as_tensor(x.state(0, layer).S).float() for x in (f, g))
            assert rel(a, b) < 2e-3, (i, layer)
    split.close(), alone.close()


def test_validate_plans_the_map_as_record_would(ckpt, tmp_path, capsys):
    """`lineage validate` plans a scenario's device_map here: a GPU this machine lacks is one
    line at model.device_map, exit 2; a map of the CPU validates."""
    bad, good = tmp_path / "bad.yaml", tmp_path / "good.yaml"
    bad.write_text(scenario(ckpt, ", device_map: 'cuda:7'"))
    good.write_text(scenario(ckpt, ", device_map: cpu"))
    assert main(["validate", str(good)]) == 0
    capsys.readouterr()
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.device_map" in err[0] and "cuda:7" in err[0], err


def test_validate_refuses_a_fifo_map_at_once(ckpt, tmp_path, capsys):
    """A scenario's device_map naming a FIFO (relative to the scenario): validate refuses it
    without opening it for a blocking read, one line at model.device_map, exit 2 (issue 51)."""
    from .test_placement import never_blocks
    os.mkfifo(tmp_path / "pipe.json")
    sc = tmp_path / "s.yaml"
    sc.write_text(scenario(ckpt, ", device_map: pipe.json"))
    with never_blocks():
        assert main(["validate", str(sc)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.device_map" in err[0] and "a FIFO" in err[0], err


@pytest.mark.skipif(torch.cuda.is_available(), reason="auto on a machine without a GPU")
def test_auto_without_a_gpu_places_everything_on_the_cpu(ckpt):
    """As Hugging Face's device_map="auto": no GPU, every layer on the CPU."""
    s = Session(loads(scenario(ckpt, ", device_map: auto")), device="cpu")
    assert "placed by device map auto: cpu embedding, layers 0-4, final norm, head" in " ".join(s.info["notes"])
    s.close()


def test_a_map_of_one_other_device_runs_there(ckpt):
    """Every layer mapped to the CPU while the scenario's device is another (a GPU box's auto,
    here the meta device standing in): the ids, the memory check and the step follow the map."""
    s = Session(loads(scenario(ckpt, ", device_map: cpu")), device="meta")
    r = s.runner.models[0]
    assert r.model.places is None and r.device.type == "cpu" and r.graph_mode is None
    assert s.frame(3).state(0, 4) is not None
    s.close()


def test_a_map_without_accelerate_is_one_line(ckpt, tmp_path, capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "accelerate", None)       # `import accelerate` raises ImportError
    code = main(["record", str(ckpt), "--ids", "5,6,7", "--device-map", "cpu", "-o", str(tmp_path / "t.trace")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "needs accelerate" in err[0], err


def test_the_plan_counts_the_bytes_the_load_allocates(ckpt):
    """A float32 checkpoint mapped to the CPU with no dtype asked: the plan's weight bytes are
    the loaded parameters' bytes (it planned bf16's 2 bytes a weight before)."""
    from lineage.families.placement import plan_checkpoint
    p = plan_checkpoint(ckpt, "cpu", 16, None)
    model, _ = lineage.load_pretrained(ckpt, device_map=p.device_map)
    loaded = sum(t.numel() * t.element_size() for t in {id(t): t for t in model.parameters()}.values())
    assert sum(d.weight_bytes for d in p.devices) == loaded


def test_the_stream_keeps_its_dtype_across_a_block_of_another():
    """A bf16 stream that took a float32 block's output (a CPU layer beside bf16 GPU layers)
    crosses to the next block in bf16, as a one-device bf16 model's would."""
    from lineage.model import Residual
    res = Residual(torch.ones(1, 4, dtype=torch.bfloat16))
    res.add(torch.full((1, 4), 0.5))                             # float32: the stream is promoted
    assert res.x.dtype == torch.float32
    res.to("cpu")
    assert res.x.dtype == torch.bfloat16 and res.x.tolist() == [[1.5] * 4]
