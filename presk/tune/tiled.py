"""A tiled point of a contraction outlined from its parameters, its kernel never built.

`presk plan` prices every point of every nest, and a contraction's space is
most of them. Lowering a point (kernel/lower/layouts.py `tiled`) builds a
statement per accumulator, load and store of its register tile, and the
model then reads each back (tune/outline.py); but the shape of that kernel
follows from the point and the product's sizes alone. This module walks
the same block structure as `tiled` (batch loops, the block loops in the
point's order, each cut into whole blocks and a shorter last one, a leaf of
rows × columns accumulators) and writes the outline the model would have
read off the kernel: each leaf's loads, operations and access patterns
counted from the tile's size, its patterns found from one access of each
operand and the offsets its rows and columns add. tests/test_plans_fast.py
checks it against the built kernels' outlines, point by point.

A split is decided on the outline too: the loops down to it must be a
perfect nest, and the loop must own its output elements (sched/split.py):
a batch loop and the block loops over I and J do, the loop over blocks of
K does not; by default (no split stated) a loop over I owns them only while
its stores are scalar, as the default's rule takes a vector store's width
on every index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from presk.kernel.ir import IBin, IConst, Index, IntOp, IVar
from presk.kernel.layout import NO_SPLIT, Layout, Split
from presk.kernel.lower.base import Launch, Names
from presk.kernel.lower.layouts import Tile, tile_of
from presk.sched.split import WORK_THRESHOLD
from presk.tune.outline import (
    Body,
    Branch,
    Gather,
    Leaf,
    Loop,
    Nested,
    Outline,
    element_bytes,
    max_lanes,
    pattern,
    work,
)

Part = Leaf | Nested
# Whether a block is the first of its loop: known, or (None) a test of the loop variable.
First = bool | None
# A block of K: its first index, its length, whether it is the first.
_Block = tuple[Index, int, First]


def _plus(base: Index, offset: int) -> Index:
    """`base + offset` as the lowering writes it (layouts.py `_plus`)."""
    if offset == 0:
        return base
    if base == IConst(0):
        return IConst(offset)
    return IBin(IntOp.ADD, base, IConst(offset))


def _plus_var(k0: Index, k: str) -> Index:
    """`k0 + k`, as the lowering writes a step's k."""
    return IVar(k) if k0 == IConst(0) else IBin(IntOp.ADD, k0, IVar(k))


def _body(parts: list[Part]) -> Body:
    leaf = Gather()
    nested: list[Nested] = []
    for part in parts:
        if isinstance(part, Leaf):
            leaf.add(part)
        else:
            nested.append(part)
    return Body(leaf.leaf(), tuple(nested))


def _blocked(
    names: Names, total: int, size: int, make: Callable[[Index, int, First], list[Part]], role: str
) -> list[Part]:
    """`total` cut into blocks of `size`, as adjoint_tiles.py `blocked` cuts it."""
    whole, rest = divmod(total, size)
    out: list[Part] = []
    if whole == 1:
        out += make(IConst(0), size, True)
    elif whole > 1:
        v = names.loop()
        base = IBin(IntOp.MUL, IVar(v), IConst(size))
        out.append(Loop(v, whole, _body(make(base, size, None)), role))
    if rest:
        out += make(IConst(whole * size), rest, whole == 0)
    return out


class _Outliner:
    """The outline of one tiled point's kernel, built as layouts.py `tiled` builds the kernel."""

    def __init__(self, tile: Tile) -> None:
        self.tile, self.p, self.names = tile, tile.p, tile.names

    def leaf(self, i0: Index, rows: int, j0: Index, cols: int, block: _Block | None) -> list[Part]:
        """The accumulators of rows × cols outputs at (i0, j0) (layouts.py `Tile.leaf`)."""
        lanes = self.tile.lanes
        lanes = lanes if cols % lanes == 0 and self.tile.b_vector is not None else 1
        vectors = cols // lanes
        tile = rows * vectors
        out, at = self.p.out, self.p.out_at
        out_bytes = lanes * element_bytes(out)
        key, o00 = pattern(out, at(i0, j0))
        di = pattern(out, at(_plus(i0, 1), j0))[1] - o00 if rows > 1 else 0.0
        dj = pattern(out, at(i0, _plus(j0, lanes)))[1] - o00 if vectors > 1 else 0.0
        outs = frozenset(o00 + r * di + c * dj for r in range(rows) for c in range(vectors))
        written = ((key, outs, out_bytes),)
        zero = Leaf(0, 0, (), tile, lanes)
        store = Leaf(tile, 0, written, tile, lanes)

        def run(k0: Index, kn: int) -> list[Part]:
            k = self.names.loop()
            step = self._steps(i0, rows, j0, cols, lanes, _plus_var(k0, k))
            return [Loop(k, kn, Body(step), "k")]

        if block is not None:
            k0, kn, first = block
            reload = Leaf(tile, 0, written, tile, lanes)
            start: list[Part]
            if first is None:
                start = [Branch(Leaf(), _body([zero]), _body([reload]))]
            else:
                start = [zero if first else reload]
            return [*start, *run(k0, kn), store]
        if not self.tile.kblock:
            return [zero, *run(IConst(0), self.p.k), store]
        inner = _blocked(
            self.names, self.p.k, self.tile.kblock, lambda k0, kn, _f: run(k0, kn), "K"
        )
        return [zero, *inner, store]

    def _steps(self, i0: Index, rows: int, j0: Index, cols: int, lanes: int, k: Index) -> Leaf:
        """One step in k of the tile (tiles.py `tile_step`, or its scalar form)."""
        vectors = cols // lanes
        a0 = self.p.a(i0, k)
        a_key, a00 = pattern(a0.buffer, a0.index)
        da = 0.0
        if rows > 1:
            a1 = self.p.a(_plus(i0, 1), k)
            da = pattern(a1.buffer, a1.index)[1] - a00
        b0 = self.tile.b(k, j0)
        b_key, b00 = pattern(b0.buffer, b0.index)
        db = 0.0
        if vectors > 1:
            b1 = self.tile.b(k, _plus(j0, lanes))
            db = pattern(b1.buffer, b1.index)[1] - b00
        a_consts = frozenset(a00 + r * da for r in range(rows))
        b_consts = frozenset(b00 + c * db for c in range(vectors))
        step = Gather()
        step.access(a_key, a_consts, element_bytes(a0.buffer))
        step.access(b_key, b_consts, lanes * element_bytes(b0.buffer))
        if lanes > 1:  # a vector of b per column vector, a scalar of a per row, two ops each
            step.loads, step.count = vectors + rows, vectors + rows + rows * vectors
            step.lanes = lanes
        else:  # a scalar of a per row, then b reloaded for every accumulator
            step.loads, step.count = rows + rows * cols, rows + rows * cols
        step.ops = 2 * rows * vectors
        step.carried = True  # each accumulator adds to itself
        return step.leaf()

    def levels(self, levels: str, at: dict[str, _Block], keep: bool) -> list[Part]:
        """The block loops in `levels` order (outermost first), then a leaf."""
        p, tile = self.p, self.tile
        if not levels:
            i0, rows, _ = at["I"]
            j0, cols, _ = at["J"]
            return self.leaf(i0, rows, j0, cols, at["K"] if keep else None)
        axis, rest = levels[0], levels[1:]
        sizes = {"I": (p.m, tile.rows), "J": (p.n, tile.columns), "K": (p.k, tile.kblock)}
        total, size = sizes[axis]

        def make(base: Index, n: int, first: First) -> list[Part]:
            return self.levels(rest, at | {axis: (base, n, first)}, keep)

        return _blocked(self.names, total, size, make, axis)


def outline_tiled(launch: Launch, point: Layout) -> Outline:
    """The outline of the kernel `lower(launch, dtype, True, point)` builds for a tiled
    point, unsplit (a pack's panel is the launch's last input, as with_pack_input puts it)."""
    names = Names(tiles=True, passes=point.passes or 3)
    tile = tile_of(launch.steps[-1], launch, names, point)
    order = point.order or "IJ"
    keep = bool(tile.kblock) and not order.endswith("K")
    body = _body(_Outliner(tile).levels(order if keep else order.replace("K", ""), {}, keep))
    for var, bound in reversed(tile.p.batch):
        body = Body(Leaf(), (Loop(var, bound, body, "batch"),))
    outputs = tuple(launch.outputs) if launch.outputs else (launch.output,)
    return Outline(body, (*launch.inputs, *outputs))


def _loop_at(body: Body, depth: int) -> Loop | None:
    """The loop at `depth` if the loops down to it are a perfect nest."""
    loop: Loop | None = None
    for _ in range(depth + 1):
        if body.leaf.count or len(body.nested) != 1 or not isinstance(body.nested[0], Loop):
            return None
        loop = body.nested[0]
        body = loop.body
    return loop


def split_tiled(outline: Outline, chosen: Split | None, threads: int) -> Outline | None:
    """The outline split as host/program.py `split_kernel` splits the kernel (with the
    machine's count `threads`), or None where the point's split is refused."""
    if chosen is None:
        loop = _loop_at(outline.body, 0)
        if threads < 2 or loop is None or loop.bound < 2 or work(outline.body) < WORK_THRESHOLD:
            return outline
        owned = loop.role in ("batch", "J") or (loop.role == "I" and max_lanes(loop.body) == 1)
        return replace(outline, split=True) if owned else outline
    if chosen == NO_SPLIT:
        return outline
    if chosen.workers not in {threads, max(1, threads // 2)}:
        return None
    loop = _loop_at(outline.body, chosen.depth)
    if loop is None or loop.role not in ("batch", "I", "J"):
        return None
    workers = 0 if chosen.workers == threads else chosen.workers
    return replace(outline, split=True, split_depth=chosen.depth, workers=workers)


__all__ = ["outline_tiled", "split_tiled"]
