"""DeltaNet: a K x V memory per head that corrects what a key recalls.

config.py: its config and descriptor (torch-free); module.py: its nn.Module, its state and its
step. Nothing is imported here, so the config comes without torch."""
