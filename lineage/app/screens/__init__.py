"""Modal screens of the lineage app."""
