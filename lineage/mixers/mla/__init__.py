"""Multi-head latent attention: one compressed latent per token in the cache.

module.py: its nn.Module, its state and its step."""
