"""A prompt of a few thousand tokens, read the way the app reads it (lineage.prefill: chunks of
4,096 on the CPU, each continuing the last one's state and caches), gives transformers' logits
for its last position and for the step after it: a tiny Kimi Linear (KDA, MLA, MoE) and a tiny
GPT-2 (learned positions, a KV cache), in float32."""
import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402

import lineage  # noqa: E402
from lineage.observed import StepObs  # noqa: E402
from lineage.prefill import CHUNK, prefill  # noqa: E402

from .helpers import rel  # noqa: E402
from .test_gpt2 import gpt2  # noqa: E402
from .test_hybrids import kimi  # noqa: E402

T = CHUNK + 404                  # past one chunk: the second continues the first's state and caches


@pytest.mark.parametrize("make, vocab", [(kimi, 97), (lambda p: gpt2(p, n_positions=T + 1), 101)], ids=["kimi", "gpt2"])
def test_a_long_prompt_in_chunks_equals_transformers(tmp_path, make, vocab):
    ref = make(tmp_path)
    ours, _ = lineage.load_pretrained(tmp_path)
    ids = torch.randint(0, vocab, (1, T + 1), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        done = []
        logits, state = prefill(ours, ids[:, :T], progress=lambda d, n: done.append(d))
        assert done == [CHUNK, T]
        out = ref(ids[:, :T], use_cache=True, logits_to_keep=1)
        assert rel(logits, out.logits[:, -1]) < 1e-4
        step, _ = ours.step(ids[:, T], state, StepObs())
        nxt = ref(ids[:, T:], cache=out.past_key_values, use_cache=True)
        assert rel(step, nxt.logits[:, 0]) < 1e-4
