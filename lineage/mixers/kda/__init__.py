"""Kimi Delta Attention: the gated delta rule with one decay per key channel.

module.py: its nn.Module, its state and its step."""
