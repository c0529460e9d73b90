"""presk: a compiler for a typed tensor language.

Shapes are proved by the checker, the reference interpreter is exact (MPFR),
and native code is printed as C. See docs/architecture.md for the pipeline.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
