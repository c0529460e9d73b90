"""presk: a compiler for a typed tensor language.

Shapes are proved by the checker, the reference interpreter is exact (MPFR),
and native code is printed as C. See docs/architecture.md for the pipeline
and docs/python.md for this API:

    prog = presk.load("model.psk")              # a checked program
    f = prog.entry("loss", dims={"B": 8})       # compiled once
    f(*f.inputs(seed=0))                        # called many times, on arrays
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The API loads on first use, so that `presk --version` and the stages stay light.
_API = {
    "load": "presk.api",
    "Program": "presk.api",
    "Entry": "presk.api",
    "FunctionSummary": "presk.api",
    "CompileError": "presk.api",
    "RuntimeFailure": "presk.api",
    "Key": "presk.api",
    "UsageError": "presk.diagnostics",
    "NotBuiltYet": "presk.diagnostics",
}

if TYPE_CHECKING:
    from presk.api import (
        CompileError,
        Entry,
        FunctionSummary,
        Key,
        Program,
        RuntimeFailure,
        load,
    )
    from presk.diagnostics import NotBuiltYet, UsageError


def __getattr__(name: str) -> Any:
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'presk' has no attribute {name!r}")


__all__ = [
    "CompileError",
    "Entry",
    "FunctionSummary",
    "Key",
    "NotBuiltYet",
    "Program",
    "RuntimeFailure",
    "UsageError",
    "__version__",
    "load",
]
