"""Reading a Hugging Face `config.json`: every field is read by the architecture's file, known
to be irrelevant to inference, or refused; a field nobody understands is an error, because a
silently ignored field is how a loaded model ends up subtly different from the published one."""
from __future__ import annotations

import json
from pathlib import Path

from ..did_you_mean import did_you_mean
from ..files import read_regular
from .problems import PretrainedError

# Fields of every transformers config that do not change what an inference step computes.
GENERIC = {
    "architectures", "model_type", "dtype", "torch_dtype", "transformers_version", "_name_or_path",
    "auto_map", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "use_cache", "initializer_range", "output_router_logits", "router_aux_loss_coef", "tokenizer_class",
    "id2label", "label2id", "return_dict", "output_hidden_states", "output_attentions", "torchscript",
    "problem_type", "task_specific_params", "is_encoder_decoder", "_attn_implementation_autoset",
    "chunk_size_feed_forward", "use_return_dict", "pretraining_tp", "attention_dropout", "max_position_embeddings",
    "model_max_length", "use_sliding_window", "max_window_layers", "sliding_window", "num_nextn_predict_layers",
    "mtp_num_hidden_layers", "mtp_use_dedicated_embeddings", "tie_encoder_decoder", "prefix", "finetuning_task",
    "output_past", "_num_labels", "gradient_checkpointing", "use_bfloat16", "keys_to_ignore_at_inference",
}


def read_config(root: Path) -> dict:
    path = root / "config.json"
    if not path.exists():
        raise PretrainedError(f"{root}: no config.json (a checkpoint directory in the Hugging Face layout has one)")
    try:
        cfg = json.loads(read_regular(path, 4 << 20))
    except (OSError, ValueError) as e:
        raise PretrainedError(f"{path}: not readable JSON ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if not isinstance(cfg, dict):
        raise PretrainedError(f"{path}: expected a JSON object")
    return cfg


class Fields:
    """The config's fields as an architecture file reads them; `done()` refuses what was left."""

    def __init__(self, raw: dict, path: Path, arch: str, prefix: str = ""):
        self.raw, self.path, self.arch = raw, path, arch
        self.prefix = prefix            # "text_config." for a nested object's fields, so errors name them whole
        self.used: set[str] = set(GENERIC)

    def _bad(self, key: str, why: str) -> PretrainedError:
        return PretrainedError(f"{self.path}: {self.prefix}{key}: {why}")

    def sub(self, key: str) -> "Fields":
        """The fields of a nested object (a multimodal checkpoint's `text_config`); the caller
        calls its `done()`."""
        return Fields(self.need(key, dict), self.path, self.arch, f"{self.prefix}{key}.")

    def get(self, key: str, default=None, kind=None):
        self.used.add(key)
        v = self.raw.get(key, default)
        if v is None or kind is None:
            return v
        if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
            raise self._bad(key, f"expected an integer, got {v!r}")
        if kind is int and not 0 <= v <= 1 << 24:
            raise self._bad(key, f"{v} is out of range")
        if kind is float and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise self._bad(key, f"expected a number, got {v!r}")
        if kind is bool and not isinstance(v, bool):
            raise self._bad(key, f"expected true or false, got {v!r}")
        if kind is list and not isinstance(v, list):
            raise self._bad(key, f"expected a list, got {v!r}")
        if kind is dict and not isinstance(v, dict):
            raise self._bad(key, f"expected an object, got {v!r}")
        return float(v) if kind is float else v

    def need(self, key: str, kind=int):
        if self.raw.get(key) is None:
            raise self._bad(key, f"required by the {self.arch} loader but missing")
        return self.get(key, kind=kind)

    def expect(self, key: str, allowed: tuple, default=None):
        """A field with only some values we implement (e.g. an activation)."""
        v = self.get(key, default)
        if v not in allowed:
            raise self._bad(key, f"{v!r} is not supported (the {self.arch} loader implements "
                                 f"{', '.join(repr(a) for a in allowed)})")
        return v

    def ignore(self, *keys: str) -> None:
        """Fields read elsewhere or meaningless for inference in this architecture."""
        self.used.update(keys)

    def done(self) -> None:
        left = sorted(k for k in self.raw if k not in self.used)
        if left:
            raise self._bad(left[0], f"a field the {self.arch} loader does not understand"
                                     f"{did_you_mean(left[0], sorted(self.used))}; refusing rather than "
                                     "guessing what it changes")
