"""lineage: every memory mechanism from GPT-2 to Kimi K3 as readable PyTorch.

    ops.py configs.py presets.py model.py graph_step.py backend.py tokenizer.py
    arithmetic.py   parameters, cache and state bytes from a config (no torch)
    figures.py      the seed essays' figures (no torch at import)
    mechanisms/     one file per row of the lineage (nn.Modules and their states)
    scenario/       scenario files: reader, schema, checks, tasks (no torch)
    playback/       frames, traces, sessions and their runners, the toy memory

Import torch-free pieces directly (`lineage.configs`, `lineage.presets`, `lineage.arithmetic`,
`lineage.scenario`); nothing here imports textual or rich.
"""
__version__ = "0.1.0"


def load_pretrained(path, device="cpu", dtype=None, device_map=None):
    """(LM, tokenizer or None) from a checkpoint directory in the Hugging Face layout; see
    lineage.families. Imported lazily: `import lineage` stays free of torch."""
    from .families import load_pretrained as load
    return load(path, device, dtype, device_map)
