"""DeltaNet: a K x V memory per head that corrects what a key recalls.

module.py: its nn.Module, its state and its step."""
