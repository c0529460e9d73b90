"""Results written straight into the caller's buffers (Note [Outputs] in program.py).

A function instance receives its callers' output buffers. A result leaf that
is a buffer of the instance's own frame, and only that leaf, is renamed to
its output parameter throughout the body: the launches that compute it write
there, and no copy is made at the end. Every other leaf (an input passed
through, a view of a stack, a fold's accumulator, a buffer that is two
leaves at once) is still copied.
"""

from __future__ import annotations

from typing import assert_never

from presk.host import ir as h


def in_place(leaves: list[h.Ptr], locals_: list[h.Local], outputs: list[str]) -> dict[str, str]:
    """Frame buffers to rename to the output parameter that receives them."""
    own = {local.name for local in locals_ if isinstance(local, h.Alloc)}
    for local in locals_:
        if isinstance(local, h.Accumulators):
            own -= {local.at_first, local.at_second}
    names: dict[str, str] = {}
    for ptr, out in zip(leaves, outputs, strict=True):
        if isinstance(ptr, str) and ptr in own and leaves.count(ptr) == 1:
            names[ptr] = out
    return names


def renamed_ptr(ptr: h.Ptr, names: dict[str, str]) -> h.Ptr:
    match ptr:
        case str():
            return names.get(ptr, ptr)
        case h.Layer(base, index, stride):
            return h.Layer(renamed_ptr(base, names), index, stride)
        case _:
            assert_never(ptr)


def renamed(stmt: h.Stmt, names: dict[str, str]) -> h.Stmt:
    """The statement with its pointers renamed through `names`."""

    def r(ptrs: tuple[h.Ptr, ...]) -> tuple[h.Ptr, ...]:
        return tuple(renamed_ptr(p, names) for p in ptrs)

    match stmt:
        case h.Site() | h.Swap():
            return stmt
        case h.Launch(kernel, args, split, workers):
            return h.Launch(kernel, r(args), split, workers)
        case h.Call(callee, frame, args):
            return h.Call(callee, frame, r(args))
        case h.Copy(dst, src, size):
            return h.Copy(renamed_ptr(dst, names), renamed_ptr(src, names), size)
        case h.Fold(var, layers, order, body):
            return h.Fold(var, layers, order, tuple(renamed(s, names) for s in body))
        case _:
            assert_never(stmt)
