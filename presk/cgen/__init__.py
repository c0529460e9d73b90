"""C generation: kernels and the host program printed as C text."""
