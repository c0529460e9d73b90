"""Reductions and their adjoints: sum, mean, max over an axis or all; sum_to; zeros.

A sum adds its terms in increasing row-major order of the reduced axes,
from 0; a maximum starts at the group's first element and keeps the first
on ties; the adjoint of a maximum sends the cotangent to the first maximal
element of each group, as the reference does.

A sum that keeps its operand's last axis (a bias's gradient: dy summed over
batch and seq) runs in lanes along that axis (`column_sums`): each lane is
one output element, adding its terms from 0 in the same order, so the bits
are the scalar form's (statement H: a lane is a different element, never a
partial sum). The scalar form reads a column at a stride of a whole row.
"""

from __future__ import annotations

from enum import StrEnum
from typing import assert_never

from presk.kernel import ir
from presk.kernel.ir import (
    Bin,
    BinOp,
    Buffer,
    Cmp,
    CmpOp,
    Expr,
    For,
    IBin,
    IConst,
    If,
    Index,
    IntOp,
    IVar,
    Let,
    Load,
    Select,
    Stmt,
    Store,
    Var,
    VecOp,
)
from presk.kernel.lower.base import (
    ONE,
    ZERO,
    Launch,
    LoweringError,
    Names,
    Step,
    align_positions,
    axis_of,
    c,
    nest,
)
from presk.kernel.lower.tiles import ELEMENT_BYTES, vector_lanes

# Accumulators of a lane block of column sums: enough independent adds in flight to keep
# both vector pipes busy, each row's loads a few whole cache lines.
COLUMN_VECTORS = (8, 4, 2, 1)


class Reduction(StrEnum):
    """What a reduction computes: the names of `sum`, `mean`, `max` and of reduce_vjp's kind."""

    SUM = "sum"
    MEAN = "mean"
    MAX = "max"


def _reduction(name: object) -> Reduction:
    try:
        return Reduction(str(name))
    except ValueError:
        raise LoweringError(f"no reduction `{name}`") from None


def _reduced(x: Buffer, axis: object) -> list[int]:
    """The positions a reduction over `axis` (None: every axis) removes."""
    return list(range(len(x.axes))) if axis is None else [axis_of(x, str(axis))]


def reduce(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """sum, mean or max of a buffer, over one axis or all."""
    (x,) = [o for o in step.operands if isinstance(o, Buffer)]
    out = launch.output
    kind = _reduction(step.name)
    reduced = _reduced(x, step.attrs.get("axis"))
    vars_ = [names.loop() for _ in x.axes]
    kept = [v for i, v in enumerate(vars_) if i not in reduced]
    kept_sizes = [s for i, s in enumerate(x.shape) if i not in reduced]
    red_vars = [vars_[i] for i in reduced]
    red_sizes = [x.shape[i] for i in reduced]
    count = 1
    for s in red_sizes:
        count *= s
    if kind is Reduction.SUM and names.tiles:
        lanes = column_sums(x, out, vars_, kept, names)
        if lanes is not None:
            return lanes
    acc = names.scalar()
    load = Load(x, tuple(IVar(v) for v in vars_))
    result: Expr = Var(acc)
    match kind:
        case Reduction.MAX:
            first = Load(
                x, tuple(IConst(0) if i in reduced else IVar(v) for i, v in enumerate(vars_))
            )
            init: Stmt = Let(acc, first)
            update: Stmt = Let(acc, Select(Cmp(CmpOp.GT, load, Var(acc)), load, Var(acc)))
        case Reduction.SUM | Reduction.MEAN:
            init = Let(acc, ZERO)
            update = Let(acc, Bin(BinOp.ADD, Var(acc), load))
            if kind == Reduction.MEAN:
                result = Bin(BinOp.DIV, result, c(count))
        case _:
            assert_never(kind)
    inner = nest(red_sizes, red_vars, (update,))
    body = (init, *inner, Store(out, tuple(IVar(v) for v in kept), result))
    return nest(kept_sizes, kept, body)


def reduce_vjp(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """The cotangent of a reduction spread back over its operand's shape."""
    ct, a = step.operands[:2]
    assert isinstance(ct, Buffer) and isinstance(a, Buffer)
    out = launch.output
    reduced = _reduced(a, step.attrs.get("axis"))
    vars_ = [names.loop() for _ in a.axes]
    at = tuple(IVar(v) for v in vars_)
    ct_index = tuple(IVar(v) for i, v in enumerate(vars_) if i not in reduced)
    count = 1
    for i in reduced:
        count *= a.shape[i]
    g = Load(ct, ct_index)
    kind = _reduction(step.attrs["kind"])
    match kind:
        case Reduction.SUM:
            return nest(list(a.shape), vars_, (Store(out, at, g),))
        case Reduction.MEAN:
            return nest(list(a.shape), vars_, (Store(out, at, Bin(BinOp.DIV, g, c(count))),))
        case Reduction.MAX:
            y = step.operands[2]
            assert isinstance(y, Buffer)
            return _max_vjp(a, y, out, vars_, reduced, names, g, ct_index)
        case _:
            assert_never(kind)


def _max_vjp(
    a: Buffer,
    y: Buffer,
    out: Buffer,
    vars_: list[str],
    reduced: list[int],
    names: Names,
    g: Load,
    ct_index: tuple[IVar, ...],
) -> tuple[Stmt, ...]:
    """The cotangent goes to the first maximal element of each group, 0 elsewhere."""
    kept = [v for i, v in enumerate(vars_) if i not in reduced]
    kept_sizes = [s for i, s in enumerate(a.shape) if i not in reduced]
    red = [vars_[i] for i in reduced]
    red_sizes = [a.shape[i] for i in reduced]
    taken = names.scalar()
    at = tuple(IVar(v) for v in vars_)
    inner = nest(
        red_sizes,
        red,
        (
            If(
                Cmp(CmpOp.EQ, Var(taken), ZERO),
                (
                    If(
                        Cmp(CmpOp.EQ, Load(a, at), Load(y, ct_index)),
                        (Store(out, at, g), Let(taken, ONE)),
                        (Store(out, at, ZERO),),
                    ),
                ),
                (Store(out, at, ZERO),),
            ),
        ),
    )
    return nest(kept_sizes, kept, (Let(taken, ZERO), *inner))


def sum_to(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """A cotangent summed down to the shape of `like` (the adjoint of a broadcast)."""
    ct, like = step.operands
    assert isinstance(ct, Buffer) and isinstance(like, Buffer)
    out = launch.output
    positions = align_positions(like.axes, ct.axes)
    vars_ = [names.loop() for _ in ct.axes]
    kept = [vars_[p] for p in positions]
    summed = [v for i, v in enumerate(vars_) if i not in positions]
    summed_sizes = [ct.shape[i] for i in range(len(vars_)) if i not in positions]
    if names.tiles:
        lanes = column_sums(ct, out, vars_, kept, names)
        if lanes is not None:
            return lanes
    acc = names.scalar()
    inner = nest(
        summed_sizes,
        summed,
        (Let(acc, Bin(BinOp.ADD, Var(acc), Load(ct, tuple(IVar(v) for v in vars_)))),),
    )
    body = (Let(acc, ZERO), *inner, Store(out, tuple(IVar(v) for v in kept), Var(acc)))
    return nest(list(out.shape), kept, body)


def column_sums(
    x: Buffer, out: Buffer, vars_: list[str], kept: list[str], names: Names
) -> tuple[Stmt, ...] | None:
    """`out[kept…] = Σ x[vars_…]` over the other variables, in lanes along x's last axis.

    Taken when that axis is kept as out's last (the sums are columns) and
    holds at least one vector: the kept loops before it stay outside, then
    blocks of `vectors` × lanes columns, each an accumulator per vector from
    0, adding rows in the scalar form's order; the columns past the last
    whole vector take the scalar form. None where the form does not apply.
    """
    arith = ir.arith(x.dtype)
    if arith not in ELEMENT_BYTES or not kept or kept[-1] != vars_[-1] or len(kept) == len(vars_):
        return None
    lanes = vector_lanes(arith)
    columns = x.shape[-1]
    if columns < lanes:
        return None
    vectors = next(v for v in COLUMN_VECTORS if columns % (v * lanes) == 0 or v == 1)
    width = vectors * lanes
    blocks, rest = divmod(columns, width)
    outer = kept[:-1]
    sizes = dict(zip(vars_, x.shape, strict=True))
    summed = [v for v in vars_ if v not in kept]
    jb = names.loop()
    acc = [f"v{c}" for c in range(vectors)]

    def at(column: Index) -> tuple[tuple[Index, ...], tuple[Index, ...]]:
        """x's and out's index of the vector at `column` inside the loops."""
        x_at = tuple(column if v == vars_[-1] else IVar(v) for v in vars_)
        return x_at, tuple(column if v == vars_[-1] else IVar(v) for v in kept)

    def column(c: int) -> Index:
        return IBin(IntOp.ADD, IBin(IntOp.MUL, IVar(jb), IConst(width)), IConst(c * lanes))

    step = tuple(
        ir.VLet(
            acc[c],
            ir.VBin(VecOp.ADD, ir.VVar(acc[c], lanes), ir.VLoad(x, at(column(c))[0], lanes)),
            lanes,
        )
        for c in range(vectors)
    )
    block = (
        *(ir.VLet(a, ir.Splat(ZERO, lanes), lanes) for a in acc),
        *nest([sizes[v] for v in summed], summed, step),
        *(ir.VStore(out, at(column(c))[1], ir.VVar(acc[c], lanes)) for c in range(vectors)),
    )
    body: tuple[Stmt, ...] = (For(jb, blocks, block),)
    if rest:
        # The last columns one at a time, as the scalar form sums them.
        j, s = names.loop(), names.scalar()
        col = IBin(IntOp.ADD, IConst(blocks * width), IVar(j))
        x_at, out_at = at(col)
        inner = nest(
            [sizes[v] for v in summed],
            summed,
            (Let(s, Bin(BinOp.ADD, Var(s), Load(x, x_at))),),
        )
        body = (*body, For(j, rest, (Let(s, ZERO), *inner, Store(out, out_at, Var(s)))))
    return nest([sizes[v] for v in outer], outer, body)


def fill(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """zeros_like: every element 0."""
    out = launch.output
    vars_ = [names.loop() for _ in out.axes]
    return nest(list(out.shape), vars_, (Store(out, tuple(IVar(v) for v in vars_), ZERO),))
