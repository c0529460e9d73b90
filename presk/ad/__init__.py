"""Reverse-mode differentiation on PSK-Core: rules per primitive, the reverse sweep."""
