"""The exact reference interpreter (MPFR via gmpy2) and its deterministic random draws."""
