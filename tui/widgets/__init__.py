"""Widgets of the lineage app: one class per file."""
