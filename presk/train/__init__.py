"""Training: the loop around a compiled (or interpreted) training step."""
