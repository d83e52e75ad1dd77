"""lineage: every memory mechanism from GPT-2 to Kimi K3 as readable PyTorch, and the app that
shows them at work. The folders follow the lineage:

    ops/         each op's float reference beside its Triton kernels (ops.kernels: the fast ones)
    mixers/      one folder per sequence mixer (softmax, linear, DeltaNet, Gated DeltaNet, KDA,
                 Mamba-2, MLA): its torch-free config.py and its nn.Module in module.py
    ffns/        dense FFN and MoE;  attnres.py  attention over depth;  model.py  the LM
    configs.py   the model's config and every config name, MIXERS and FFNS (no torch); presets.py
    families/    real checkpoints, one mapping file per family (gpt2, llama, qwen3_next, ...)
    scenario/    scenario files: reader, schema, checks, tasks (no torch)
    playback/    frames, traces, sessions and their runners, the trace cache, the player
    training/    train, eval and the arena's models
    app/         the Textual app: screens, panels, widgets, exports
    cli/         the `lineage` command
    scenarios/   the bundled scenarios, weights and held-out text (package data)

Import torch-free pieces directly (`lineage.configs`, `lineage.presets`, `lineage.arithmetic`,
`lineage.scenario`); only app/ and cli/serve.py import textual or rich.
"""
__version__ = "0.1.0"


def load_pretrained(path, device="cpu", dtype=None, device_map=None):
    """(LM, tokenizer or None) from a checkpoint directory in the Hugging Face layout; see
    lineage.families. Imported lazily: `import lineage` stays free of torch."""
    from .families import load_pretrained as load
    return load(path, device, dtype, device_map)
