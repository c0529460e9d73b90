"""Typing: shapes and broadcasting, primitives' rules, regularity, effects, the checker."""
