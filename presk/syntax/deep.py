"""Room for the recursive passes over deep syntax trees, and the limits that bound them.

The parser, the elaborator and the checker are recursive walks over the AST, so their
depth follows the program's: a flat sum of n terms is a left-nested chain of n binary
nodes, 1000 nested parentheses cost the parser about ten frames each, and a chain of
imports nests the loader once per file. Python's default limit (1000 frames on an 8 MiB
stack) refuses such ordinary programs. `call_deep` runs a function in a worker thread
with a large stack and a raised recursion limit instead; `deep` wraps a stage's entry
point with it. Calls nest: inside a worker, a wrapped function is called directly.

The limits below bound what the walks may meet, so that the room given is always
enough. The parser refuses (E0015) more than `MAX_NESTING` levels of brackets and
prefix operators, which bounds its own recursion, and a declaration whose tree is
deeper than `MAX_DEPTH` (long operator chains nest without brackets), which bounds
every later walk. The stack below holds `MAX_DEPTH` levels of any walk with a wide
margin.

Invariants: the worker's result or exception is the caller's, unchanged; the recursion
limit is restored when the outermost worker ends.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["MAX_DEPTH", "MAX_NESTING", "call_deep", "deep"]

# Levels of brackets, prefix operators, lambdas, `^` and types nested in one another
# (the parser takes about ten frames for each).
MAX_NESTING = 4096
# The height of a declaration's syntax tree: a sum of 20000 terms is 20000 levels high.
MAX_DEPTH = 20_000

# Frames a walk may take per tree level, generously (the checker takes about five).
_FRAMES_PER_LEVEL = 24
_RECURSION_LIMIT = max(MAX_DEPTH, 10 * MAX_NESTING) * _FRAMES_PER_LEVEL + 10_000
# Python frames live on the heap (3.11), but C-level recursion (dataclass __eq__/__hash__
# and __repr__ of nested nodes, pattern matching through __init__) uses the C stack.
# Pages are committed only when touched, so a large reservation costs nothing.
_STACK_BYTES = 1 << 30

_local = threading.local()
_lock = threading.Lock()

P = ParamSpec("P")
R = TypeVar("R")


def call_deep(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)`, run where a walk of `MAX_DEPTH` levels fits.

    In a worker already, `fn` is called directly; otherwise a thread with a large stack
    runs it while the caller waits, and its result is returned or its exception re-raised.
    """
    if getattr(_local, "deep", False):
        return fn(*args, **kwargs)
    outcome: list[R] = []
    failure: list[BaseException] = []

    def work() -> None:
        _local.deep = True
        try:
            outcome.append(fn(*args, **kwargs))
        except BaseException as error:  # re-raised in the caller's thread below
            failure.append(error)

    # The stack size and the recursion limit are process-wide settings: raise them for
    # the worker's lifetime only (the caller waits meanwhile), then put back what was there.
    # A daemon worker does not keep the process alive after an interrupt of the caller.
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
    try:
        with _lock:
            old_stack = threading.stack_size(_STACK_BYTES)
            try:
                worker = threading.Thread(target=work, name="presk-deep", daemon=True)
                worker.start()
            finally:
                threading.stack_size(old_stack)
        worker.join()
    finally:
        sys.setrecursionlimit(old_limit)
    if failure:
        raise failure[0]
    return outcome[0]


def deep(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a stage's entry point so that it always runs under `call_deep`."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return call_deep(fn, *args, **kwargs)

    return wrapper
