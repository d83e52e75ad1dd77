"""Causal softmax attention: GPT-2's, grouped KV heads optional, and what real checkpoints add.

config.py: its config and descriptor (torch-free); module.py: its nn.Module, its state and its
step. Nothing is imported here, so the config comes without torch."""
