"""Causal softmax attention: GPT-2's, grouped KV heads optional, and what real checkpoints add.

module.py: its nn.Module, its state and its step."""
