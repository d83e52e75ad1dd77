"""Linear attention: an additive K x V memory per head plus a normaliser.

module.py: its nn.Module, its state and its step."""
