"""Reading a Hugging Face `config.json`: every field is read by the architecture's file, known
to be irrelevant to inference, or refused; a field nobody understands is an error, because a
silently ignored field is how a loaded model ends up subtly different from the published one."""
from __future__ import annotations

import json
import math
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

CONFIG_BYTES = 4 << 20      # config.json (the largest published ones are a few KB)
MAX_INT = 1 << 24           # any integer field
MAX_LIST = 1 << 16          # any list field's length
# The largest a config.json may claim, each well past the published checkpoints (126 layers in
# Llama 3.1 405B, 512 experts in Qwen3-Next, vocabularies of 262,144, widths of 53,248): a claim
# past them is refused before anything is built or counted, so a lying file cannot cost minutes.
MAX_LAYERS, MAX_EXPERTS, MAX_VOCAB, MAX_WIDTH = 1024, 4096, 1 << 22, 1 << 18
BOUNDS = {
    **dict.fromkeys(("num_hidden_layers", "n_layer"), MAX_LAYERS),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok",
                     "num_experts_per_token", "num_shared_experts", "n_shared_experts"), MAX_EXPERTS),
    "vocab_size": MAX_VOCAB,
    **dict.fromkeys(("hidden_size", "n_embd", "intermediate_size", "moe_intermediate_size", "n_inner",
                     "shared_expert_intermediate_size", "kv_lora_rank", "q_lora_rank"), MAX_WIDTH),
    **dict.fromkeys(("num_attention_heads", "n_head", "num_key_value_heads", "num_heads", "linear_num_heads",
                     "linear_num_value_heads", "linear_num_key_heads", "head_dim", "linear_head_dim",
                     "linear_key_head_dim", "linear_value_head_dim", "qk_nope_head_dim", "qk_rope_head_dim",
                     "v_head_dim", "state_size", "n_groups", "expand", "num_expert_group", "n_group",
                     "topk_group"), 1 << 16),
    **dict.fromkeys(("conv_kernel", "linear_conv_kernel_dim", "short_conv_kernel_size"), 1 << 10),
}
# integer fields for which 0 means nothing (a count of heads, a size, a step): at least 1 when given
POSITIVE = {
    "num_hidden_layers", "n_layer", "hidden_size", "n_embd", "vocab_size", "n_positions", "intermediate_size",
    "num_attention_heads", "n_head", "num_key_value_heads", "num_heads", "head_dim", "linear_num_heads",
    "linear_head_dim", "linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim",
    "linear_value_head_dim", "qk_nope_head_dim", "v_head_dim", "kv_lora_rank", "state_size", "n_groups",
    "expand", "conv_kernel", "chunk_size", "linear_conv_kernel_dim", "short_conv_kernel_size",
    "full_attention_interval", "decoder_sparse_step", "num_experts_per_tok", "num_experts_per_token",
    "num_expert_group", "n_group", "topk_group", "max_position_embeddings", "original_max_position_embeddings",
    "moe_layer_freq",
}


def read_config(root: Path) -> dict:
    path = root / "config.json"
    if not path.exists():
        raise PretrainedError(f"{root}: no config.json (a checkpoint directory in the Hugging Face layout has one)")
    return read_json(path, CONFIG_BYTES)


def read_json(path: Path, limit: int, members: int | None = None) -> dict:
    """A JSON object from a regular file of at most `limit` bytes; PretrainedError, one line, for
    anything else (a FIFO, a link to /dev/zero, junk, nesting too deep for the parser). With
    `members`, at most that many object members, counted as the colons in the text before it is
    parsed (an upper bound): parsed, each costs a few hundred bytes, so a file of tiny ones would
    cost twenty times its size."""
    try:
        raw = read_regular(path, limit)
    except OSError as e:            # a FIFO, a device, past the limit: the reader's reason, without errno
        raise PretrainedError(f"{path}: cannot be read ({e.strerror or type(e).__name__})") from None
    if members is not None and raw.count(b":") > members:
        raise PretrainedError(f"{path}: over {members:,} entries (lineage reads at most that many)")
    try:
        data = json.loads(raw)
    except RecursionError:          # json.loads recurses once per nested [ or {
        raise PretrainedError(f"{path}: not readable JSON (nested too deeply)") from None
    except ValueError as e:
        raise PretrainedError(f"{path}: not readable JSON ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if not isinstance(data, dict):
        raise PretrainedError(f"{path}: expected a JSON object")
    return data


def _kind_problem(v, kind) -> str | None:
    """Why `v` (not None) is not a value of `kind`, or None when it is."""
    if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
        return f"expected an integer, got {_short(v)}"
    if kind is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"expected a number, got {_short(v)}"
        if isinstance(v, int) and abs(v) > 1 << 1000 or not math.isfinite(v):
            return f"expected a finite number, got {_short(v)}"
    if kind is bool and not isinstance(v, bool):
        return f"expected true or false, got {_short(v)}"
    if kind is str and not isinstance(v, str):
        return f"expected a string, got {_short(v)}"
    if kind is list and not isinstance(v, list):
        return f"expected a list, got {_short(v)}"
    if kind is dict and not isinstance(v, dict):
        return f"expected an object, got {_short(v)}"
    return None


def _short(v) -> str:
    """A value as a message shows it: a long or deeply nested one is cut, never walked whole."""
    if isinstance(v, (list, dict)):
        return f"a list of {len(v)}" if isinstance(v, list) else f"an object of {len(v)} fields"
    text = repr(v) if not isinstance(v, int) or abs(v) < 10 ** 30 else f"an integer of {len(str(abs(v)))} digits"
    return text if len(text) <= 60 else text[:57] + "..."


class Fields:
    """The config's fields as an architecture file reads them, the only way it reads them: each
    value checked for its kind (an integer within BOUNDS, at least 1 where POSITIVE names it or
    the caller asks; a finite number; a string; a list whose elements are checked too; a nested
    object through `sub`), so no value from config.json reaches the arithmetic unchecked.
    `done()` refuses the fields that were left."""

    def __init__(self, raw: dict, path: Path, arch: str, prefix: str = "", generic: bool = True):
        self.raw, self.path, self.arch = raw, path, arch
        self.prefix = prefix            # "text_config." for a nested object's fields, so errors name them whole
        self.used: set[str] = set(GENERIC) if generic else set()

    def _bad(self, key: str, why: str) -> PretrainedError:
        return PretrainedError(f"{self.path}: {self.prefix}{key}: {why}")

    def sub(self, key: str, required: bool = True, generic: bool = True) -> "Fields":
        """The fields of a nested object (a multimodal checkpoint's `text_config`, a
        `rope_parameters`); without `required`, an absent or null one reads as empty. The caller
        calls its `done()`, or checks its keys itself."""
        raw = self.need(key, dict) if required else self.get(key, kind=dict) or {}
        return Fields(raw, self.path, self.arch, f"{self.prefix}{key}.", generic=generic)

    def _checked(self, key: str, v, kind, least):
        why = _kind_problem(v, kind)
        if why is not None:
            raise self._bad(key, why)
        if kind is int:
            if least is None:
                least = 1 if key in POSITIVE else 0
            most = BOUNDS.get(key, MAX_INT)
            if v < least:
                raise self._bad(key, f"{v} is out of range (expected at least {least})")
            if v > most:
                raise self._bad(key, f"{_short(v)} is out of range (lineage reads at most {most:,}"
                                     f"{'' if key not in BOUNDS else ' for this field'})")
        if kind is float:
            v = float(v)
            if least is not None and v < least:
                raise self._bad(key, f"{v} is out of range (expected at least {least})")
        return v

    def get(self, key: str, default=None, kind=None, least=None):
        """The field, or `default` when it is absent or null; `kind` checks it (int, float, bool,
        str, list, dict). An int is at least `least` (else 1 for the POSITIVE fields, else 0)."""
        self.used.add(key)
        v = self.raw.get(key)
        if v is None:
            v = default
        if v is None or kind is None:
            return v
        return self._checked(key, v, kind, least)

    def need(self, key: str, kind=int, least=1):
        """A field that must be given; an int one (a size, a count) is at least `least`."""
        if self.raw.get(key) is None:
            raise self._bad(key, f"required by the {self.arch} loader but missing")
        return self.get(key, kind=kind, least=least)

    def list_of(self, key: str, kind, default=None, least=None) -> list | None:
        """A list whose every element is of `kind` (each int at least `least`, else 0)."""
        v = self.get(key, default, list)
        if v is None:
            return None
        if len(v) > MAX_LIST:
            raise self._bad(key, f"a list of {len(v):,} entries (lineage reads at most {MAX_LIST:,})")
        for i, x in enumerate(v):
            why = None if x is not None else "is null"
            why = why or _kind_problem(x, kind)
            if why is None and kind is int and not (least or 0) <= x <= MAX_INT:
                why = f"{_short(x)} is out of range"
            if why is not None:
                raise self._bad(f"{key}[{i}]", why)
        return [float(x) for x in v] if kind is float else list(v)

    def expect(self, key: str, allowed: tuple, default=None):
        """A field with only some values we implement (e.g. an activation)."""
        v = self.get(key, default)
        if isinstance(v, (list, dict)) or not any(type(a) is type(v) and a == v for a in allowed):
            raise self._bad(key, f"{_short(v)} is not supported (the {self.arch} loader implements "
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
