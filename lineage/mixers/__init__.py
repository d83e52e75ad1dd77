"""One file per row of the lineage: each mechanism's nn.Module, its state and its step."""
