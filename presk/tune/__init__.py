"""Layouts chosen and measured: an entry's nests captured, their points compiled side by side."""
