"""The host program: an entry recorded at concrete shapes as C functions and launches."""
