"""Elaboration: imports, constants in ℚ, modules and instances, dims and bounds."""
