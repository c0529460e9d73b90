"""A function's frame packed by buffer lifetimes: buffers never live at once share bytes.

The recording gives every buffer of a function instance its own place in the
frame. A gradient's functions hold many buffers, each read by a few
statements only, so `pack` gives each buffer its live range, from the first
statement of the body that names it to the last (a fold counts as one
statement, so the buffers of a loop body never share), and places it at the
lowest offset no buffer live at the same time covers. Every buffer is written
before it is read (frames are reused from call to call already), so sharing
bytes between buffers whose ranges are disjoint changes no value.
"""

from __future__ import annotations

from typing import assert_never

from presk.host import ir as h


def _names(stmt: h.Stmt) -> set[str]:
    """The pointer names a statement reads or writes (a view names its base)."""

    def base(p: h.Ptr) -> str:
        while isinstance(p, h.Layer):
            p = p.base
        return p

    match stmt:
        case h.Site():
            return set()
        case h.Launch(_, args) | h.Call(_, _, args):
            return {base(p) for p in args}
        case h.Copy(dst, src, _):
            return {base(dst), base(src)}
        case h.Swap(_, first, second):
            return {first, second}
        case h.Fold(_, _, _, body):
            return set().union(*(_names(s) for s in body))
        case _:
            assert_never(stmt)


def pack(
    locals_: list[h.Local], body: list[h.Stmt], sizes: dict[str, int]
) -> tuple[list[h.Local], int]:
    """The locals at packed offsets, and the frame's bytes."""
    # An accumulator pointer stands for both of its buffers.
    aliases: dict[str, set[str]] = {}
    for local in locals_:
        if isinstance(local, h.Accumulators):
            both = {local.at_first, local.at_second}
            aliases[local.first] = aliases[local.second] = both
    live: dict[str, tuple[int, int]] = {}
    for i, stmt in enumerate(body):
        for name in _names(stmt):
            for buffer in aliases.get(name, {name}):
                first, _ = live.get(buffer, (i, i))
                live[buffer] = (first, i)
    allocs = [local for local in locals_ if isinstance(local, h.Alloc)]
    placed: dict[str, int] = {}
    taken: list[tuple[int, int, int]] = []  # (offset, size, last statement)
    frame = 0
    for alloc in sorted(allocs, key=lambda a: live.get(a.name, (-1, -1))):
        if alloc.name not in live:
            placed[alloc.name] = 0  # never named by a statement: never dereferenced
            continue
        first, last = live[alloc.name]
        taken = [t for t in taken if t[2] >= first]
        size = sizes[alloc.name]
        offset = 0
        for start, length, _ in sorted(taken):
            if offset + size <= start:
                break
            offset = max(offset, start + length)
        taken.append((offset, size, last))
        placed[alloc.name] = offset
        frame = max(frame, offset + size)
    out: list[h.Local] = []
    for local in locals_:
        match local:
            case h.Alloc(name, dtype, _):
                out.append(h.Alloc(name, dtype, placed[name]))
            case h.Accumulators():
                out.append(local)
            case _:
                assert_never(local)
    return out, frame
