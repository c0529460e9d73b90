"""PSK-Kernel: loop nests over row-major buffers, their lowering from primitives, their text."""
