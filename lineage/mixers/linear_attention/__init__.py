"""Linear attention: an additive K x V memory per head plus a normaliser.

config.py: its config and descriptor (torch-free); module.py: its nn.Module, its state and its
step. Nothing is imported here, so the config comes without torch."""
