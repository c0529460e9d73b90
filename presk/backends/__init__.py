"""Backends: the seam between PSK-Core and an executor (the reference is presk/interp)."""
