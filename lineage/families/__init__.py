"""Real checkpoints in the Hugging Face layout, loaded into the project's own modules.

    loader.py        load_pretrained: config -> ModelConfig, meta build, tensors streamed into place
    shards.py        safetensors files (single or indexed shards), checked before reading; never pickle
    hfconfig.py      config.json fields: read, known to be irrelevant, or refused
    claims.py        config.json's layers and sizes checked against the safetensors headers, before the build
    gpt2.py  kimi_linear.py  qwen3_next.py    one architecture each: config fields and tensor names
    llama.py         Llama-style softmax models: model_types llama, qwen3, mistral
    experts.py       the MoE tensor names both hybrids share
    tokenizer.py     the checkpoint's tokenizer (tokenizer.json or tiktoken.model), or None
    scenario.py      the scenario `lineage run DIR` opens (default panels per architecture)
    problems.py      PretrainedError: one line for the user
"""
from .loader import is_checkpoint, load_pretrained, read_model_config
from .problems import PretrainedError

__all__ = ["load_pretrained", "read_model_config", "is_checkpoint", "PretrainedError"]
