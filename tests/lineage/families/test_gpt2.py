"""GPT-2 checkpoints: equal to transformers' GPT2LMHeadModel, prefill and cached steps."""
import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

import lineage  # noqa: E402

from .helpers import compare  # noqa: E402
from lineage.observed import AttentionObs, StepObs


def gpt2(path, tie=True, **kw):
    torch.manual_seed(0)
    cfg = dict(n_embd=36, n_layer=3, n_head=3, vocab_size=101, n_positions=40, bos_token_id=0, eos_token_id=0,
               tie_word_embeddings=tie)
    cfg.update(kw)
    ref = GPT2LMHeadModel(GPT2Config(**cfg)).eval()
    for p in ref.parameters():          # transformers' init leaves biases and norms at 0 / 1: stir them
        torch.nn.init.normal_(p, std=0.2)
    ref.save_pretrained(str(path))
    return ref


@pytest.mark.parametrize("tie", [True, False])
def test_gpt2_equals_transformers(tmp_path, tie):
    ref = gpt2(tmp_path, tie=tie)
    errs = compare(ref, tmp_path, 101, prefill=7, steps=5)
    assert max(errs) < 1e-4, errs


def test_gpt2_awkward_sizes(tmp_path):
    ref = gpt2(tmp_path, n_embd=30, n_head=5, n_layer=2, n_inner=17, vocab_size=53, n_positions=13)
    assert max(compare(ref, tmp_path, 53, prefill=1, steps=11)) < 1e-4


def test_gpt2_is_the_projects_own_model(tmp_path):
    gpt2(tmp_path)
    model, tok = lineage.load_pretrained(tmp_path)
    assert type(model).__name__ == "LM" and tok is None
    assert model.lm_head.weight is model.wte.weight               # tied, as GPT-2
    obs = StepObs()
    model.step(torch.tensor([3]), None, obs)
    assert isinstance(obs.layers[0].mixer, AttentionObs) and obs.layers[0].mixer.cache_len == 1


def test_dtype_and_hub_names(tmp_path):
    """Hub files have no `transformer.` prefix and keep the causal mask buffer; bf16 is loaded as bf16."""
    from safetensors.torch import load_file, save_file
    gpt2(tmp_path)
    sd = load_file(str(tmp_path / "model.safetensors"))
    hub = {k.removeprefix("transformer."): v for k, v in sd.items()}
    hub["h.0.attn.bias"] = torch.ones(1, 1, 40, 40)
    save_file(hub, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    model, _ = lineage.load_pretrained(tmp_path, dtype="bfloat16")
    assert model.wte.weight.dtype == torch.bfloat16
    assert torch.equal(model.wte.weight.float(), sd["transformer.wte.weight"].bfloat16().float())
