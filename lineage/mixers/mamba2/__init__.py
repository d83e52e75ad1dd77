"""Mamba-2: a state per head that only fades and adds.

module.py: its nn.Module, its state and its step."""
