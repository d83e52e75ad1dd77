"""Mamba-2: a state per head that only fades and adds.

config.py: its config and descriptor (torch-free); module.py: its nn.Module, its state and its
step. Nothing is imported here, so the config comes without torch."""
