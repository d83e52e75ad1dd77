"""Training the lineage on memory tasks: tasks.py and corpus.py (generated batches), loop.py
(AdamW, warmup and cosine), checkpoint.py (weights + recipe sidecar), evaluate.py (held-out
scores and mechanism statistics). The `lineage train / eval / arena` commands are in lineage/cli/train.py."""
