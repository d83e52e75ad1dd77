"""The scenario format (version 1): typed models with strict field checks.

A scenario names the model(s), their weights, the input, how to decode, how many steps, which
panels to show and the teaching captions. Field types and ranges are checked here, by
pydantic; checks across fields are in `checks.py`. No torch here (validation must be instant).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from .panels import PANEL_KINDS

MAX_STEPS = 100_000


def _admits(annotation, types: tuple) -> bool:
    """Whether a field's type takes a value of one of `types` (Any takes all)."""
    if annotation is Any or annotation in types:
        return True
    return any(_admits(a, types) for a in getattr(annotation, "__args__", ()))
MAX_TEXT = 100_000
MAX_INPUT_FILE = 16 << 20          # input.file: 16 MiB of text, some 4M tokens (a 128K-token paper is ~500 KB)
# torch.Generator.manual_seed takes 0..2^64-1 (past it: "Overflow when unpacking long long",
# unlocated, at the run's first sampled step)
MAX_DECODING_SEED = 2**64 - 1
MAX_INPUT_TOKENS = 1 << 24         # decoding.prefill: a file's input is not bounded by MAX_TEXT


class Strict(BaseModel):
    # no inf or NaN anywhere: figures divide by these numbers and models would compute NaN
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _yes_is_not_one(cls, data):
        """YAML reads yes/no/true/false as booleans, and pydantic's lax mode takes True for 1:
        `steps: yes` or `version: true` must be refused, not run one step. A yes/no given to a
        number field becomes the word, which that field then refuses at its own place. (Full
        strict mode would also refuse `2.8e12`, which YAML 1.1 reads as text.)"""
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        return {k: (str(v).lower() if isinstance(v, bool) and k in fields
                    and not _admits(fields[k].annotation, (bool, str)) else v) for k, v in data.items()}


# ------------------------------------------------------------------------------- models

class MemorySpec(Strict):
    """A bare memory with hand-set keys and values, fed directly by a task (the toy figures)."""
    rule: Literal["linear", "gated_linear", "delta", "gated_delta", "kda"]
    key_dim: int = Field(2, ge=1, le=256)
    value_dim: int = Field(1, ge=1, le=256)
    channel_decay: list[float] | None = None    # kda, gated_linear: a log decay per key channel applied every step (<= 0)
    key_overlap: float = Field(0.0, ge=0.0, lt=1.0)   # generated keys share this cosine with each other


class ModelSpec(Strict):
    """Exactly one of: preset (optionally with overrides), config (inline), memory (toy), or
    pretrained (a checkpoint directory in the Hugging Face layout, with its own dtype and device)."""
    name: str | None = None
    preset: str | None = None
    overrides: dict[str, Any] = {}
    config: dict[str, Any] | None = None
    memory: MemorySpec | None = None
    pretrained: str | None = Field(None, min_length=1, max_length=4096)   # relative to the scenario
    dtype: Literal["float32", "float64", "bfloat16", "float16"] | None = None   # pretrained: None = its own
    device: Literal["auto", "cpu", "cuda"] | None = None                 # pretrained: None = the scenario's
    # pretrained: its layers placed over devices (auto, balanced, sequential, cuda:0,cpu or a
    # map FILE.json relative to the scenario; lineage.families.placement), instead of `device`
    device_map: str | None = Field(None, min_length=1, max_length=4096)
    checkpoint: str | None = None        # this model's .safetensors (relative to the scenario); else weights.checkpoint

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("preset", "config", "memory", "pretrained") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of preset, config, memory or pretrained (got {', '.join(given) or 'none'})")
        if self.overrides and self.preset is None:
            raise ValueError("overrides apply to a preset; write the whole config inline instead")
        if (self.dtype or self.device or self.device_map) and self.pretrained is None:
            raise ValueError("dtype and device per model are for pretrained checkpoints, as is device_map "
                             "(presets use the scenario's)")
        if self.device and self.device_map:
            raise ValueError("give device or device_map, not both (a device map names the devices)")
        return self

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.memory is not None:
            return f"{self.memory.rule} memory"
        if self.pretrained is not None:
            return Path(self.pretrained.rstrip("/")).name or self.pretrained
        return self.preset or str((self.config or {}).get("name", "custom"))


class WeightsSpec(Strict):
    seed: int = Field(0, ge=0, le=2**31 - 1)
    checkpoint: str | None = None                # a .safetensors file, relative to the scenario
    set: dict[str, Any] = {}                     # hand-set values: memory models take 'keys' and 'values'


# -------------------------------------------------------------------------------- input

class TwoFacts(Strict):
    """Write two facts whose unit keys overlap by `overlap` (cosine), then read both back."""
    kind: Literal["two_facts"]
    overlap: float = Field(0.7, ge=-1.0, le=1.0)
    beta: float = Field(1.0, ge=0.0, le=1.0)
    values: tuple[float, float] = (1.0, 1.0)


class MQAR(Strict):
    """Multi-query associative recall: `pairs` key-value pairs, then the keys asked again in shuffled order."""
    kind: Literal["mqar"]
    pairs: int = Field(8, ge=1, le=4096)
    vocab: int = Field(256, ge=4, le=65536)      # keys from the first half, values from the second
    seed: int = Field(0, ge=0)
    beta: float = Field(1.0, ge=0.0, le=1.0)
    distinct_values: bool = False                # no two keys share a value (none reads right by coincidence)


class TopicShift(Strict):
    """A run of associations, a separator that decays memory by `separator_gate`, then a new run."""
    kind: Literal["topic_shift"]
    pairs: int = Field(4, ge=1, le=1024)         # per topic
    separator_gate: float = Field(-5.0, le=0.0)  # log decay applied by the separator token
    vocab: int = Field(256, ge=4, le=65536)
    seed: int = Field(0, ge=0)
    beta: float = Field(1.0, ge=0.0, le=1.0)
    distinct_values: bool = False


Task = Annotated[Union[TwoFacts, MQAR, TopicShift], Field(discriminator="kind")]


class InputSpec(Strict):
    """Exactly one of: text, ids, a task, or a text file (`file`, relative to the scenario, read
    when the scenario is loaded: its text is then `text` too, so every check reads it alike)."""
    text: str | None = Field(None, max_length=MAX_TEXT)
    ids: list[Annotated[int, Field(ge=0)]] | None = Field(None, max_length=MAX_TEXT)
    task: Task | None = None
    file: str | None = Field(None, min_length=1, max_length=4096)     # UTF-8 text, at most MAX_INPUT_FILE bytes

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("text", "ids", "task", "file") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of text, ids, task or file (got {', '.join(given) or 'none'})")
        if self.text == "" or self.ids == []:
            raise ValueError("the input is empty")
        return self


class Decoding(Strict):
    mode: Literal["teacher", "greedy", "sample"] = "teacher"
    prefill: int = Field(0, ge=0, le=MAX_INPUT_TOKENS)   # tokens consumed at once (chunked) before the first frame
    temperature: float = Field(1.0, gt=0.0, le=100.0)
    top_k: int = Field(0, ge=0)                  # 0: the whole vocabulary
    seed: int = Field(0, ge=0, le=MAX_DECODING_SEED)


# ------------------------------------------------------------------------------- panels

class Panel(Strict):
    kind: Literal[PANEL_KINDS]                   # the list in panels.py: a new panel's kind goes there only
    model: int = Field(0, ge=0)
    layer: int | None = Field(None, ge=0)
    head: int = Field(0, ge=0)
    quantity: Literal["S", "dS", "error"] = "S"  # state panel: the state, the last write, or v - read-back
    scale: Literal["auto", "diverging", "sequential"] = "auto"
    # state panels: "shared" colours every shared state panel on one scale (models compared side by side)
    colour_range: Literal["own", "shared"] = "own"
    context: int | None = Field(None, ge=1, le=1 << 24)   # cache panel: the context to project to
    title: str | None = None


class Caption(Strict):
    """A note shown from `step` through `last` (default: until the next caption starts), the
    steps counted from 1 as the counter, `g` and `--step` count them. `slide` is the step a
    slide of it shows (default `last`: the claim has been made true by then).

    Files written before captions counted from 1 say `at:` / `until:`, counted from 0: they
    are read as they were meant. In the code, `at` / `until` / `shot` are 0-based frame indices."""
    step: int = Field(ge=1)
    text: str = Field(min_length=1, max_length=2000)
    last: int | None = Field(None, ge=1)
    slide: int | None = Field(None, ge=1)
    # the panel kinds it is about, `panel: state` or `panel: [state, decay]`: the app brings
    # them into view when the caption comes (the first focused), and a slide of a panel it
    # does not name leaves the caption out. Written `panel`, held as `panels`, a tuple
    panels: tuple[Literal[PANEL_KINDS], ...] = Field((), alias="panel", max_length=16)

    @model_validator(mode="before")
    @classmethod
    def _counted_from_zero(cls, data):
        if not isinstance(data, dict) or not ({"at", "until"} & set(data)):
            return data
        if {"step", "last"} & set(data):
            raise ValueError("give step/last (counted from 1) or the older at/until (counted from 0), not both")
        data = dict(data)
        for old, new in (("at", "step"), ("until", "last")):
            if old in data:
                n = data.pop(old)
                if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    raise ValueError(f"{old}: {n!r} is not a step (at/until count from 0; step/last from 1)")
                data[new] = n + 1
        return data

    @model_validator(mode="before")
    @classmethod
    def _one_panel_is_a_list(cls, data):
        # `panel: state` is the list of one; each name of a longer list is refused at its place
        if isinstance(data, dict) and isinstance(data.get("panel"), str):
            data = {**data, "panel": [data["panel"]]}
        return data

    @model_validator(mode="after")
    def _in_order(self):
        if len(set(self.panels)) < len(self.panels):
            raise ValueError(f"panel: {', '.join(self.panels)} names a panel twice")
        if self.last is not None and self.last < self.step:
            raise ValueError(f"last ({self.last}) is before step ({self.step})")
        if self.slide is not None and not (self.step <= self.slide <= (self.last or self.slide)):
            raise ValueError(f"slide ({self.slide}) is not among the steps the caption shows "
                             f"({self.step}-{self.last if self.last is not None else 'the next caption'})")
        return self

    @property
    def panel(self) -> str | None:
        """The first panel it names (a panel slide's text starts from it), None where it names none."""
        return self.panels[0] if self.panels else None

    @property
    def at(self) -> int:
        return self.step - 1

    @property
    def until(self) -> int | None:
        return None if self.last is None else self.last - 1

    @property
    def shot(self) -> int | None:
        return None if self.slide is None else self.slide - 1


# ------------------------------------------------------------------------------ figures

class ParamRatioFigure(Strict):
    kind: Literal["param_ratio"]
    big: str = "k3"
    small: str = "gpt2-small"
    published_big: float = Field(2.8e12, gt=0, le=1e16)      # parameter counts; a ratio divides by them
    published_small: float = Field(124e6, gt=0, le=1e16)


class KVCacheFigure(Strict):
    kind: Literal["kv_cache"]
    layers: int = Field(93, ge=1, le=1000)
    kv_heads: int = Field(8, ge=1, le=1024)
    head_dim: int = Field(128, ge=1, le=4096)
    dtype_bytes: int = Field(2, ge=1, le=8)
    card_gb: float = Field(141.0, gt=0, le=1e6)
    cards: int = Field(8, ge=1, le=1024)
    weight_gb: float = Field(0.0, ge=0, le=1e9)
    compare: str | None = None                   # a preset shown beside, counted as published (cache + state)
    contexts: list[Annotated[int, Field(ge=1, le=1 << 30)]] = [8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]


class ChunkDialFigure(Strict):
    kind: Literal["chunk_dial"]
    length: int = Field(8192, ge=1, le=1 << 24)
    dim: int = Field(128, ge=1, le=65536)
    chunks: list[Annotated[int, Field(ge=1)]] = [1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


class TwoFactsFigure(Strict):
    """The two-facts figure's dials: one (overlap, beta) setting per step, through the real ops."""
    kind: Literal["two_facts"]
    # each [overlap c, beta] (values from `values`) or [c, beta, v1, v2]; c and beta in [0, 1]
    settings: list[list[Annotated[float, Field(ge=-1e6, le=1e6)]]] = Field([[0.7, 1.0]], min_length=1, max_length=200)
    values: tuple[float, float] = (1.0, 1.0)

    @model_validator(mode="after")
    def _settings(self):
        for j, s in enumerate(self.settings):
            if len(s) not in (2, 4):
                raise ValueError(f"settings[{j}]: give [overlap, beta] or [overlap, beta, v1, v2] (got {len(s)} numbers)")
            if not (0.0 <= s[0] <= 1.0 and 0.0 <= s[1] <= 1.0):
                raise ValueError(f"settings[{j}]: overlap and beta must be in [0, 1] (got {s[0]:g}, {s[1]:g})")
        return self


class ShapesFigure(Strict):
    """Arithmetic over presets: layer map, MoE sparsity, memory table, active parameters and
    decode traffic read the same shapes."""
    kind: Literal["layer_map", "moe_sparsity", "memory_table", "active_ratio", "decode_bytes"]
    presets: list[str] = ["gpt2-small", "kimi-linear-48b", "k3"]
    contexts: list[Annotated[int, Field(ge=1, le=1 << 30)]] = [1024, 4096, 16384, 65536, 262144, 1048576]


Figure = Annotated[Union[ParamRatioFigure, KVCacheFigure, ChunkDialFigure, TwoFactsFigure, ShapesFigure],
                   Field(discriminator="kind")]


# ----------------------------------------------------------------------------- scenario

class Scenario(Strict):
    version: Literal[1]
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    model: ModelSpec | None = None
    models: list[ModelSpec] | None = Field(None, min_length=1, max_length=8)
    weights: WeightsSpec = WeightsSpec()
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["float32", "float64", "bfloat16"] = "float32"
    input: InputSpec | None = None
    decoding: Decoding = Decoding()
    steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    figure: Figure | None = None
    panels: list[Panel] = Field([], max_length=16)
    captions: list[Caption] = Field([], max_length=1000)

    @model_validator(mode="after")
    def _shape(self):
        if self.model is not None and self.models is not None:
            raise ValueError("give model or models, not both")
        if self.figure is None and self.model is None and self.models is None:
            raise ValueError("give a model (or models), or a figure")
        if (self.model or self.models) and self.input is None:
            raise ValueError("a model needs an input (text, ids, task or file)")
        return self

    @property
    def model_specs(self) -> list[ModelSpec]:
        return [self.model] if self.model is not None else list(self.models or [])

    def model_path(self, i: int) -> tuple:
        """Where model i sits in the file, for the problems that name it: ('model',) or ('models', i)."""
        return ("model",) if self.model is not None else ("models", i)

    # set by load(): the file's path (checkpoints are relative to it) and its exact text (traces keep it)
    _source: str | None = PrivateAttr(None)
    _text: str | None = PrivateAttr(None)

    @property
    def source(self) -> str | None:
        return self._source

    @property
    def text(self) -> str | None:
        return self._text

    @property
    def base_dir(self) -> Path | None:
        return Path(self._source).resolve().parent if self._source and Path(self._source).exists() else None
