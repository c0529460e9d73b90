"""Gathers, masks and layout changes: embed and its scatter-add, one_hot, causal_mask,
positions, and the copies of merge, split, split_heads, merge_heads and their adjoints.

A gather reads an index from an i64 buffer and uses it as a row; the
scatter-add of embed's adjoint zeroes its output and then adds each row of
the cotangent at its id, in increasing order of the ids' positions. A layout
change is a copy `out[i…] = x[f(i…)]`: no arithmetic, so no rounding.
"""

from __future__ import annotations

from enum import StrEnum
from typing import assert_never

from presk.kernel.ir import (
    Bin,
    BinOp,
    Buffer,
    Cmp,
    CmpOp,
    For,
    IBin,
    IConst,
    Index,
    IntOp,
    IVar,
    Let,
    Load,
    Select,
    Stmt,
    Store,
)
from presk.kernel.lower.base import (
    ONE,
    ZERO,
    Launch,
    LoweringError,
    Names,
    PrimName,
    Step,
    flat,
    nest,
)


def embed(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """out[ids…, row…] = table[ids[ids…], row…]."""
    table, ids = step.operands
    assert isinstance(table, Buffer) and isinstance(ids, Buffer)
    out = launch.output
    id_vars = [names.loop() for _ in ids.axes]
    row_vars = [names.loop() for _ in table.axes[1:]]
    t = names.scalar()
    body = (
        Let(t, Load(ids, tuple(IVar(v) for v in id_vars)), integer=True),
        *nest(
            list(table.shape[1:]),
            row_vars,
            (
                Store(
                    out,
                    tuple(IVar(v) for v in id_vars + row_vars),
                    Load(table, (IVar(t), *(IVar(v) for v in row_vars))),
                ),
            ),
        ),
    )
    return nest(list(ids.shape), id_vars, body)


def embed_vjp(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """The table's cotangent: zeros, then each id's row of ct added at that id."""
    ct, ids, table = step.operands
    assert isinstance(ct, Buffer) and isinstance(ids, Buffer) and isinstance(table, Buffer)
    out = launch.output
    zero_vars = [names.loop() for _ in out.axes]
    zero = nest(list(out.shape), zero_vars, (Store(out, tuple(IVar(v) for v in zero_vars), ZERO),))
    id_vars = [names.loop() for _ in ids.axes]
    row_vars = [names.loop() for _ in out.axes[1:]]
    t = names.scalar()
    target = (IVar(t), *(IVar(v) for v in row_vars))
    add = Store(
        out,
        target,
        Bin(BinOp.ADD, Load(out, target), Load(ct, tuple(IVar(v) for v in id_vars + row_vars))),
    )
    scatter = nest(
        list(ids.shape),
        id_vars,
        (
            Let(t, Load(ids, tuple(IVar(v) for v in id_vars)), integer=True),
            *nest(list(out.shape[1:]), row_vars, (add,)),
        ),
    )
    return (*zero, *scatter)


def one_hot(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """out[…, j] = 1 where j is the id at […], else 0."""
    (ids,) = step.operands
    assert isinstance(ids, Buffer)
    out = launch.output
    vars_ = [names.loop() for _ in out.axes]
    value = Select(
        Cmp(CmpOp.EQ, IVar(vars_[-1]), Load(ids, tuple(IVar(v) for v in vars_[:-1]))), ONE, ZERO
    )
    return nest(list(out.shape), vars_, (Store(out, tuple(IVar(v) for v in vars_), value),))


def causal_mask(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """out[i, j] = 1 where j ≤ i, else 0."""
    out = launch.output
    i, j = names.loop(), names.loop()
    value = Select(Cmp(CmpOp.LE, IVar(j), IVar(i)), ONE, ZERO)
    return nest(list(out.shape), [i, j], (Store(out, (IVar(i), IVar(j)), value),))


def positions(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """out[i] = i."""
    out = launch.output
    i = names.loop()
    return (For(i, out.shape[0], (Store(out, (IVar(i),), IVar(i)),)),)


# ---------------------------------------------------------------- layout changes


class Layout(StrEnum):
    """A layout change: the name of its primitive, or of the `op` of a shape_vjp."""

    MERGE = "merge"
    SPLIT = "split"
    SPLIT_HEADS = "split_heads"
    MERGE_HEADS = "merge_heads"


def copy(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """A layout change: out[i…] = x[f(i…)] where f maps the output's index to the input's."""
    x = step.operands[0]
    assert isinstance(x, Buffer)
    out = launch.output
    vars_ = [names.loop() for _ in out.axes]
    inverse = step.name == PrimName.SHAPE_VJP  # the adjoint copies back
    name = str(step.attrs["op"]) if inverse else step.name
    try:
        layout = Layout(name)
    except ValueError:
        raise LoweringError(f"no layout rule for `{name}`") from None
    source = _source(layout, inverse, x, out, vars_)
    return nest(
        list(out.shape), vars_, (Store(out, tuple(IVar(v) for v in vars_), Load(x, source)),)
    )


def _source(
    layout: Layout, inverse: bool, x: Buffer, out: Buffer, vars_: list[str]
) -> tuple[Index, ...]:
    """The input index of output index `vars_` for a layout change (or its inverse)."""
    match layout:
        case Layout.MERGE | Layout.SPLIT:
            # Same row-major data, other axes: unflatten the output's linear index.
            return _unflatten(flat(vars_, list(out.shape)), list(x.shape))
        case Layout.SPLIT_HEADS:
            return _merged_heads(x, vars_) if inverse else _split_heads(out, vars_)
        case Layout.MERGE_HEADS:
            return _split_heads(out, vars_) if inverse else _merged_heads(x, vars_)
        case _:
            assert_never(layout)


def _split_heads(out: Buffer, vars_: list[str]) -> tuple[Index, ...]:
    """out[.., h, t, d] = x[.., t, h·hd + d]."""
    *lead, h, t, d = vars_
    hd = out.shape[-1]
    return (
        *(IVar(v) for v in lead),
        IVar(t),
        IBin(IntOp.ADD, IBin(IntOp.MUL, IVar(h), IConst(hd)), IVar(d)),
    )


def _merged_heads(x: Buffer, vars_: list[str]) -> tuple[Index, ...]:
    """out[.., t, h·hd + d] = x[.., h, t, d]."""
    *lead, t, e = vars_
    hd = x.shape[-1]
    return (
        *(IVar(v) for v in lead),
        IBin(IntOp.DIV, IVar(e), IConst(hd)),
        IVar(t),
        IBin(IntOp.MOD, IVar(e), IConst(hd)),
    )


def _unflatten(linear: Index, sizes: list[int]) -> tuple[Index, ...]:
    """The row-major index over `sizes` of a linear index."""
    out: list[Index] = []
    stride = 1
    for size in reversed(sizes):
        out.insert(
            0,
            IBin(IntOp.MOD, IBin(IntOp.DIV, linear, IConst(stride)), IConst(size))
            if stride > 1
            else IBin(IntOp.MOD, linear, IConst(size)),
        )
        stride *= size
    return tuple(out)
