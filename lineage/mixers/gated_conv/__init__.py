"""The gated short convolution (LFM2's conv layers): no memory but the last few inputs.

config.py: its config and descriptor (torch-free); module.py: its nn.Module, its state and its
step. Nothing is imported here, so the config comes without torch."""
