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
    hub.py           a hub id (org/name) found in the local Hugging Face cache, offline; refs read bounded
    problems.py      PretrainedError: one line for the user
"""
from .problems import PretrainedError

__all__ = ["load_pretrained", "read_model_config", "is_checkpoint", "PretrainedError"]


def __getattr__(name: str):
    """The loader's names, imported when first asked for: the loader imports torch (through the
    families' files), and `lineage params k3` or a hub id's lookup (hub.py) must not wait for it."""
    if name in ("load_pretrained", "read_model_config", "is_checkpoint"):
        from . import loader
        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
