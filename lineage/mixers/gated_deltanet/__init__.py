"""Gated DeltaNet: DeltaNet plus one learned decay per head.

module.py: its nn.Module, its state and its step."""
