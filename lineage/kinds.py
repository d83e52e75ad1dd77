"""The descriptors of a mixer kind and an FFN kind: everything the rest of lineage asks about a
kind (its config, its module, what it has, how the layer map draws it), so that validation, the
panels, the backend and eval ask a flag, never a kind's name; and `MechanismConfig`, what every
mechanism's config answers. The registries themselves: `MIXERS`, each mixer's descriptor from
its folder's config.py (lineage/mixers/NAME/), listed in lineage/mixers/__init__.py; `FFNS` in
lineage/configs.py, which exports both. Torch-free."""
from __future__ import annotations

from dataclasses import dataclass


class MechanismConfig:
    """What a mechanism config answers without torch. Bytes: cache per token at `dtype_bytes`
    (bf16 by default), state per sequence at `dtype_bytes` (fp32) plus any cache-dtype buffers.
    What a mixer kind has (a state, a decay) is its descriptor's to say (`Mixer` below)."""

    def params(self) -> int:
        raise NotImplementedError

    def active_params(self) -> int:
        return self.params()

    def cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 0

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        return 0

    def check(self, name: str, field: str) -> None:
        """Raise ConfigError (lineage/config_checks.py) for a rule among this config's own values
        that its module would refuse, such as a head count dividing another; `name` is the
        model's, `field` the ModelConfig field holding this config, so the message and the error's
        place name both. Every number is already in range (`check_numbers`)."""


@dataclass(frozen=True)
class Mixer:
    """One mixer kind: everything the rest of lineage asks about it, in one place. Validation,
    the panels, the backend and eval ask these flags, not the kind's name. Torch-free: the
    nn.Module is named, not imported (`lineage.model.mixer_class` imports it)."""
    name: str                          # the kind, as ModelConfig.mixers writes it
    label: str                         # for people
    field: str                         # the ModelConfig field that holds its config
    config: type                       # its config class, beside it in its folder's config.py
    module: str                        # its nn.Module, "package.module:Class"
    glyph: str                         # its cell in the layer map (the figure panel)
    colour: str                        # that cell's style
    holds_state: bool = False          # a K x V state S per head, observed as S, dS, k, v, read (the state panel)
    has_decay: bool = False            # a learned log decay g = _decay(x) <= 0 (the decay panel, eval's probe)
    attends: bool = False              # softmax rows over a cache that grows per token
    gate: bool = False                 # observes its output gate per channel, if its config has one (the gate panel)
    kernel: bool = False               # lineage.ops.kernels has its op and step; else the reference runs, on CUDA too
    tiny: str | None = None            # its one-mechanism preset, whose MQAR weights `lineage arena` compares
    aliases: tuple[str, ...] = ()      # the other names it goes by: its class, op, preset, toy memory rule


@dataclass(frozen=True)
class Ffn:
    """One FFN kind, as a Mixer is one mixer kind: what the rest of lineage asks about it (the
    model's module, the layer map's cell, the routing panel, the kernels, parameter counts)."""
    name: str                          # the kind, as ModelConfig.ffns writes it
    field: str | None                  # the ModelConfig field that holds its config; None: no FFN
    config: type | None                # its config class (lineage/configs.py)
    module: str | None                 # its nn.Module, "package.module:Class"
    glyph: str                         # its cell under the mixers' in the layer map (the figure panel)
    colour: str | None                 # that cell's style
    routes: bool = False               # a router picks experts per token: the routing panel, active
                                       # parameters, and lineage.ops.kernels.moe_experts on the step
