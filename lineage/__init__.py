"""lineage: every memory mechanism from GPT-2 to Kimi K3 as readable PyTorch.

Import torch-free pieces directly (`lineage.configs`, `lineage.presets`, `lineage.params`,
`lineage.memory`); the mechanisms live in `lineage.ops` and one module file each.
"""
__version__ = "0.1.0"
