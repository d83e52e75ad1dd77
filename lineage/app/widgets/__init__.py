"""Domain-free widgets of the lineage app: one class per file."""
