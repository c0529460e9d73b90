"""Scheduling: which primitives share a loop nest (fusion groups)."""
