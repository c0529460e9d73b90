"""Exports: an entry as a standalone C program (and later other targets)."""
