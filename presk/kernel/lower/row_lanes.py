"""A row's passes in a form the C printer and compiler run in lanes, with the scalar bits.

Softmax and cross-entropy (softmax.py) take these forms where the tiled
forms are allowed (`Names.tiles`); point zero keeps the plain passes, which
are the reference these must equal bit for bit (tests/test_native_bits_rows.py).

The maximum: each of `lanes` running maxima takes every `lanes`-th element
(`max(m, x)` is `x > m ? x : m`, the scalar pass's operation), and the row's
maximum is their maximum. Without NaN that is the maximum's value; a value
other than 0 and ±∞ has one bit pattern, so it is the scalar pass's bits. A
row with a NaN among its allowed elements, or whose maximum is 0 (±0 tie,
and a row none of whose elements is allowed) or infinite, takes the scalar
pass again: its first allowed element is where the maximum starts, exactly.

The exponentials: computed once, in the block of lanes the printer gives an
innermost loop that calls exp (cgen/lanes.py), stored while the sum adds them
one at a time in increasing order, then read back. A store is exact where the
storage type is the arithmetic type (f64, f32); bf16 keeps them in an f32
scratch row, up to `ROW_SCRATCH` elements (past that, they are computed again).
"""

from __future__ import annotations

from collections.abc import Callable

from presk.kernel import ir
from presk.kernel.ir import (
    Bin,
    BinOp,
    Buffer,
    Cmp,
    CmpOp,
    For,
    IBin,
    IConst,
    If,
    Index,
    IntOp,
    IVar,
    Let,
    Load,
    Neg,
    Scratch,
    Select,
    Stmt,
    Store,
    Var,
)
from presk.kernel.lower.base import ONE, ZERO, Launch, Names

# The most elements of a bf16 row whose exponentials wait in an f32 scratch (64 KiB).
ROW_SCRATCH = 16384

# Element j of a row, and whether the row's mask keeps it.
AtFn = Callable[[Index], tuple[Index, ...]]
AllowedFn = Callable[[Index], Cmp]

# -∞: where a lane's running maximum starts (no finite value is below every element).
NEG_INF = Neg(Bin(BinOp.DIV, ONE, ZERO))


def first_scratch(launch: Launch) -> int:
    """The index of a kernel's first scratch buffer: after all of its own."""
    return 1 + max(buf.index for buf in (*launch.inputs, launch.output, *launch.outputs))


def lanes_of(dtype: str) -> int:
    """A row's lanes: 16 floats or 8 doubles (one AVX-512 register), as the printer's blocks."""
    return 16 if ir.arith(dtype) == "f32" else 8


def _plus(a: Index, b: int) -> Index:
    return a if b == 0 else IBin(IntOp.ADD, a, IConst(b))


def lane_max(
    x: Buffer,
    at: AtFn,
    allowed: AllowedFn | None,
    m: str,
    names: Names,
    scratch: int,
    n: int,
    scalar: tuple[Stmt, ...],
) -> Stmt:
    """`m` = the row's maximum by lanes; the `scalar` pass instead where it must decide.

    `at(j)` is the index of element `j` of the row, `allowed(j)` whether the mask
    keeps it (None: every element is kept).
    """
    lanes = lanes_of(x.dtype)
    arith = ir.arith(x.dtype)
    maxima = Buffer(scratch, arith, ((None, lanes),))
    nans = Buffer(scratch + 1, arith, ((None, lanes),))
    bad = names.scalar()

    value, top_, seen_ = names.scalar(), names.scalar(), names.scalar()

    def step(j: Index, lane: Index) -> tuple[Stmt, ...]:
        # Every operand is computed before the mask selects: no load sits under a
        # condition, so the compiler may run the lanes' loop in vector registers.
        top, seen = Load(maxima, (lane,)), Load(nans, (lane,))
        new_top: ir.Expr = Var(top_)
        new_seen: ir.Expr = Var(seen_)
        if allowed is not None:
            keep = allowed(j)
            new_top, new_seen = Select(keep, new_top, top), Select(keep, new_seen, seen)
        return (
            Let(value, Load(x, at(j))),
            Let(top_, Bin(BinOp.MAX, top, Var(value))),
            Let(seen_, Select(Cmp(CmpOp.NE, Var(value), Var(value)), ONE, seen)),
            Store(maxima, (lane,), new_top),
            Store(nans, (lane,), new_seen),
        )

    lane, block, tail = names.loop(), names.loop(), names.loop()
    blocks, rest = divmod(n, lanes)
    body: list[Stmt] = [
        For(lane, lanes, (Store(maxima, (IVar(lane),), NEG_INF), Store(nans, (IVar(lane),), ZERO)))
    ]
    if blocks:
        j = IBin(IntOp.ADD, IBin(IntOp.MUL, IVar(block), IConst(lanes)), IVar(lane))
        body.append(For(block, blocks, (For(lane, lanes, step(j, IVar(lane))),)))
    if rest:
        body.append(For(tail, rest, step(_plus(IVar(tail), blocks * lanes), IVar(tail))))
    other = IBin(IntOp.ADD, IVar(lane), IConst(1))
    body += [
        Let(m, Load(maxima, (IConst(0),))),
        Let(bad, Load(nans, (IConst(0),))),
        For(
            lane,
            lanes - 1,
            (
                Let(m, Bin(BinOp.MAX, Var(m), Load(maxima, (other,)))),
                Let(bad, Bin(BinOp.MAX, Var(bad), Load(nans, (other,)))),
            ),
        ),
        # 0 or ±∞ (m − m is 0 for every finite m): the scalar pass says which bits.
        Let(bad, Select(Cmp(CmpOp.EQ, Var(m), ZERO), ONE, Var(bad))),
        Let(bad, Select(Cmp(CmpOp.NE, Bin(BinOp.SUB, Var(m), Var(m)), ZERO), ONE, Var(bad))),
        If(Cmp(CmpOp.NE, Var(bad), ZERO), scalar),
    ]
    return Scratch(maxima, (Scratch(nans, tuple(body)),))


def kept_row(out: Buffer, n: int, scratch: int) -> Buffer | None:
    """Where a row's exponentials wait: the output itself, an f32 scratch row for bf16
    (None if the row is longer than `ROW_SCRATCH`)."""
    if out.dtype != "bf16":
        return out
    if n > ROW_SCRATCH:
        return None
    return Buffer(scratch, ir.arith(out.dtype), ((None, n),))


def in_row(row: Buffer, out: Buffer, at: tuple[Index, ...], j: str) -> tuple[Index, ...]:
    """The index of element `j` in the row buffer (the output's own index if it is the output)."""
    return at if row is out else (IVar(j),)


def row_scratch(row: Buffer, out: Buffer, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """`body` inside the scratch row's declaration when the row is not the output."""
    return body if row is out else (Scratch(row, body),)
