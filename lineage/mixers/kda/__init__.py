"""Kimi Delta Attention: the gated delta rule with one decay per key channel.

config.py: its config and descriptor (torch-free); module.py: its nn.Module, its state and its
step. Nothing is imported here, so the config comes without torch."""
