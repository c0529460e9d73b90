"""Row-wise primitives: softmax, log_softmax, their adjoints, cross_entropy, argmax, sample.

A row is every element along one axis (the last unless named), the other
axes looped over outside it. Softmax, log_softmax and cross_entropy subtract
the row maximum before exp; sums run in increasing order; a masked softmax
takes its maximum from the allowed positions and gives 0 at the refused
ones; argmax keeps the last maximum; sample draws one uniform per row and
takes the first position whose running sum of probabilities exceeds it.
"""

from __future__ import annotations

from collections.abc import Callable

from presk.kernel.ir import (
    Bin,
    BinOp,
    Buffer,
    Cmp,
    CmpOp,
    Expr,
    Fn,
    For,
    IBin,
    IConst,
    If,
    Index,
    IntOp,
    IVar,
    Let,
    Libm,
    Load,
    Random,
    Select,
    Stmt,
    Store,
    Var,
)
from presk.kernel.lower.base import (
    ONE,
    ZERO,
    Launch,
    Names,
    PrimName,
    Step,
    align_positions,
    axis_of,
    flat,
    nest,
)
from presk.kernel.lower.row_lanes import (
    AllowedFn,
    first_scratch,
    in_row,
    kept_row,
    lane_max,
    row_scratch,
)


def _rows(x: Buffer, axis: str | None, names: Names) -> tuple[list[str], list[int], str, int, int]:
    """Loop variables over every axis but `axis`, the row axis's variable and position."""
    position = len(x.axes) - 1 if axis is None else axis_of(x, axis)
    vars_ = [names.loop() for _ in x.axes]
    outer = [v for i, v in enumerate(vars_) if i != position]
    sizes = [s for i, s in enumerate(x.shape) if i != position]
    return outer, sizes, vars_[position], position, x.shape[position]


def _at(
    x: Buffer, outer: list[str], position: int, j: Index, row: Index | None = None
) -> tuple[Index, ...]:
    """Element `j` of a row; `row` in place of the innermost outer variable if given."""
    idx: list[Index] = [IVar(v) for v in outer]
    if row is not None:
        idx[-1] = row
    idx.insert(position, j)
    return tuple(idx)


def _allowed(mask: Buffer, x: Buffer, at: tuple[Index, ...]) -> Cmp:
    """Whether the mask keeps element `at` of `x`."""
    return Cmp(CmpOp.NE, _load_at(mask, x, at), IConst(0))


def softmax(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    x = step.operands[0]
    assert isinstance(x, Buffer)
    mask = step.operands[1] if len(step.operands) > 1 else None
    out = launch.output
    outer, sizes, j, pos, n = _rows(x, str(step.attrs["axis"]), names)
    m, s, e = names.scalar(), names.scalar(), names.scalar()
    at = _at(x, outer, pos, IVar(j))
    mask_of = mask if isinstance(mask, Buffer) else None
    keeps = _keeps(mask_of, x, outer, pos)
    log = step.name == PrimName.LOG_SOFTMAX
    # Rows in blocks of the innermost outer loop, the loops around it left to the split.
    blocked = not log and out.dtype != "bf16" and len(outer) >= 2 and sizes[-1] >= SUM_ROWS
    if names.tiles and names.passes == 3:
        row = _Row(x, out, outer, pos, j, n, names, launch)
        if blocked:
            return _interleaved(row, sizes, mask_of, keeps, m)
        return nest(sizes, outer, row.softmax((m, s, e), log, keeps))
    if names.tiles and blocked:  # two passes
        return _two_interleaved(_Row(x, out, outer, pos, j, n, names, launch), sizes, mask_of)
    if keeps is None:
        first = _plain_max(x, outer, pos, j, n, m)
        if names.passes == 2 and not log:
            return nest(sizes, outer, (*first, *_two_passes(out, at, j, n, e, s, m, x, None)))
        body: tuple[Stmt, ...] = (*first, Let(s, ZERO), For(j, n, (_add_exp(s, x, at, m),)))
        if log:
            value: Expr = Bin(BinOp.SUB, Bin(BinOp.SUB, Load(x, at), Var(m)), Fn(Libm.LOG, Var(s)))
        else:
            value = Bin(BinOp.DIV, Fn(Libm.EXP, Bin(BinOp.SUB, Load(x, at), Var(m))), Var(s))
        body += (For(j, n, (Store(out, at, value),)),)
        return nest(sizes, outer, body)
    allowed = keeps(IVar(j))
    first = _masked_max(x, allowed, outer, pos, j, n, m, names.scalar())
    if names.passes == 2 and not log:
        return nest(sizes, outer, (*first, *_two_passes(out, at, j, n, e, s, m, x, allowed)))
    body = (
        *first,
        Let(s, ZERO),
        For(j, n, (If(allowed, (_add_exp(s, x, at, m),)),)),
        For(
            j,
            n,
            (
                If(
                    allowed,
                    (
                        Let(e, Fn(Libm.EXP, Bin(BinOp.SUB, Load(x, at), Var(m)))),
                        Store(out, at, Bin(BinOp.DIV, Var(e), Var(s))),
                    ),
                    (Store(out, at, ZERO),),
                ),
            ),
        ),
    )
    return nest(sizes, outer, body)


# Rows whose sums one loop over the row's elements takes together (eight chains of adds).
SUM_ROWS = 8


def _interleaved(
    row: _Row, sizes: list[int], mask: Buffer | None, keeps: AllowedFn | None, m: str
) -> tuple[Stmt, ...]:
    """The three passes with the sums of `SUM_ROWS` rows taken in one loop.

    Each row's sum is one chain of dependent adds in increasing order, which no
    vector may reorder; rows are independent, so the exponentials of every row of
    the innermost outer loop are stored first (0 at refused positions), then each
    block of rows adds its stored elements into its own sums, side by side, and
    divides. A refused position adds its stored +0: a sum of terms ≥ +0 (or NaN)
    is unchanged by it, bit for bit, so every sum is the three passes' own.
    """
    x, out, outer, pos, j, n, names = row.x, row.out, row.outer, row.pos, row.j, row.n, row.names
    last, count = outer[-1], sizes[-1]
    store: Stmt = Store(out, row.at, row.exponent(m))
    zero: Stmt = Store(out, row.at, ZERO)
    exps = For(j, n, (store,) if keeps is None else (If(keeps(IVar(j)), (store,), (zero,)),))
    first = row.maximum(m, keeps)

    def block(base: Index, rows: int) -> tuple[Stmt, ...]:
        sums = [names.scalar() for _ in range(rows)]
        at = [_at(x, outer, pos, IVar(j), IBin(IntOp.ADD, base, IConst(r))) for r in range(rows)]
        adds = tuple(
            Let(t, Bin(BinOp.ADD, Var(t), Load(out, a))) for t, a in zip(sums, at, strict=True)
        )
        divides = (
            _divide(out, a, t, j, n, None if mask is None else _allowed(mask, x, a))
            for t, a in zip(sums, at, strict=True)
        )
        return (*(Let(t, ZERO) for t in sums), For(j, n, adds), *divides)

    body = (For(last, count, (first, exps)), *_in_blocks(names, count, block))
    return nest(sizes[:-1], outer[:-1], body)


def _load_at(mask: Buffer, x: Buffer, index: tuple[Index, ...]) -> Load:
    """The mask's element aligned with element `index` of `x` (load_aligned's rule)."""
    positions = align_positions(mask.axes, x.axes)
    return Load(mask, tuple(index[p] for p in positions))


def _add_exp(s: str, x: Buffer, at: tuple[Index, ...], m: str) -> Stmt:
    """s = s + exp(x − m)."""
    return Let(s, Bin(BinOp.ADD, Var(s), Fn(Libm.EXP, Bin(BinOp.SUB, Load(x, at), Var(m)))))


def _plain_max(
    x: Buffer, outer: list[str], pos: int, j: str, n: int, m: str, row: Index | None = None
) -> tuple[Stmt, ...]:
    """The scalar pass: m starts at the row's first element, then `x > m ? x : m`."""
    at = _at(x, outer, pos, IVar(j), row)
    return (
        Let(m, Load(x, _at(x, outer, pos, IConst(0), row))),
        For(j, n, (Let(m, Select(Cmp(CmpOp.GT, Load(x, at), Var(m)), Load(x, at), Var(m))),)),
    )


def _masked_max(
    x: Buffer,
    allowed: Cmp,
    outer: list[str],
    pos: int,
    j: str,
    n: int,
    m: str,
    seen: str,
    row: Index | None = None,
) -> tuple[Stmt, ...]:
    """The scalar pass of a masked row: m starts at the first allowed position (0 if none)."""
    at = _at(x, outer, pos, IVar(j), row)
    larger = Select(Cmp(CmpOp.GT, Load(x, at), Var(m)), Load(x, at), Var(m))
    first = Select(Cmp(CmpOp.EQ, Var(seen), ZERO), Load(x, at), larger)
    return (
        Let(seen, ZERO),
        Let(m, ZERO),
        For(j, n, (If(allowed, (Let(m, first), Let(seen, ONE))),)),
    )


class _Row:
    """One row of `x` (the loops over the other axes outside) in the lanes' form of
    row_lanes.py: the maximum by lanes, each exponential once, kept while the sum
    adds it, then read back."""

    def __init__(
        self,
        x: Buffer,
        out: Buffer,
        outer: list[str],
        pos: int,
        j: str,
        n: int,
        names: Names,
        launch: Launch,
    ) -> None:
        self.x, self.out, self.outer, self.pos, self.j, self.n = x, out, outer, pos, j, n
        self.names = names
        self.scratch = first_scratch(launch)
        self.at = _at(x, outer, pos, IVar(j))

    def maximum(self, m: str, keeps: AllowedFn | None, row: Index | None = None) -> Stmt:
        """m = the row's maximum (of its allowed elements), the scalar pass's bits; the
        row `row` of the innermost outer loop where given."""
        x, outer, pos, j, n = self.x, self.outer, self.pos, self.j, self.n
        if keeps is None:
            scalar = _plain_max(x, outer, pos, j, n, m, row)
        else:
            seen = self.names.scalar()
            scalar = _masked_max(x, keeps(IVar(j)), outer, pos, j, n, m, seen, row)
        element = lambda k: _at(x, outer, pos, k, row)  # noqa: E731
        return lane_max(x, element, keeps, m, self.names, self.scratch, n, scalar)

    def exponent(self, m: str) -> Expr:
        return Fn(Libm.EXP, Bin(BinOp.SUB, Load(self.x, self.at), Var(m)))

    def sum(self, s: str, m: str) -> tuple[Stmt, ...]:
        """s = Σ exp(x − m), in increasing order."""
        return (Let(s, ZERO), For(self.j, self.n, (_add_exp(s, self.x, self.at, m),)))

    def kept(self, s: str, m: str, e: str) -> tuple[Buffer, tuple[Index, ...], tuple[Stmt, ...]]:
        """Where the exponentials wait, the element's index there, and the statements of
        one element of the sum: e = exp(x − m) kept, s = s + e."""
        row = kept_row(self.out, self.n, self.scratch + 2)
        assert row is not None
        r = in_row(row, self.out, self.at, self.j)
        keep = (
            Let(e, self.exponent(m)),
            Store(row, r, Var(e)),
            Let(s, Bin(BinOp.ADD, Var(s), Var(e))),
        )
        return row, r, keep

    def softmax(
        self, scalars: tuple[str, str, str], log: bool, keeps: AllowedFn | None
    ) -> tuple[Stmt, ...]:
        m, s, e = scalars
        out, at, j, n = self.out, self.at, self.j, self.n
        first = self.maximum(m, keeps)
        if log:
            ls = self.names.scalar()
            value = Bin(BinOp.SUB, Bin(BinOp.SUB, Load(self.x, at), Var(m)), Var(ls))
            # log(s) once per row: the same value at every element.
            once = Let(ls, Fn(Libm.LOG, Var(s)))
            return (first, *self.sum(s, m), once, For(j, n, (Store(out, at, value),)))
        allowed = None if keeps is None else keeps(IVar(j))
        if kept_row(out, n, self.scratch + 2) is None:  # a long bf16 row: exp twice
            again = Store(out, at, Bin(BinOp.DIV, self.exponent(m), Var(s)))
            if allowed is None:
                return (first, *self.sum(s, m), For(j, n, (again,)))
            add = _add_exp(s, self.x, at, m)
            return (
                first,
                Let(s, ZERO),
                For(j, n, (If(allowed, (add,)),)),
                For(j, n, (If(allowed, (again,), (Store(out, at, ZERO),)),)),
            )
        row, r, keep = self.kept(s, m, e)
        divide: Stmt = Store(out, at, Bin(BinOp.DIV, Load(row, r), Var(s)))
        if allowed is None:
            body = (first, Let(s, ZERO), For(j, n, keep), For(j, n, (divide,)))
            return row_scratch(row, out, body)
        # A refused position keeps +0, and +0 / s is +0 for every s > 0 (∞ included): such
        # a row divides at every position; a sum of 0 (nothing allowed) or NaN does not.
        third = If(
            Cmp(CmpOp.GT, Var(s), ZERO),
            (For(j, n, (divide,)),),
            (For(j, n, (If(allowed, (divide,), (Store(out, at, ZERO),)),)),),
        )
        second = For(j, n, (If(allowed, keep, (Store(row, r, ZERO),)),))
        return row_scratch(row, out, (first, Let(s, ZERO), second, third))


def _two_interleaved(row: _Row, sizes: list[int], mask: Buffer | None) -> tuple[Stmt, ...]:
    """Two passes over each row, `SUM_ROWS` rows at a time: each row's maximum by lanes,
    then one loop over the rows' elements that stores each exponential (+0 where the
    mask refuses it) and adds it to its row's sum, the rows' sums side by side (eight
    chains of adds, where a row alone is one), then each row divided in place. Each sum
    adds its row's allowed terms in increasing order, and a stored exponential is exact
    (f32, f64), so the bits are the three passes'."""
    x, out, outer, pos, j, n, names = row.x, row.out, row.outer, row.pos, row.j, row.n, row.names

    def block(base: Index, rows: int) -> tuple[Stmt, ...]:
        firsts = [IBin(IntOp.ADD, base, IConst(r)) for r in range(rows)]
        at = [_at(x, outer, pos, IVar(j), first) for first in firsts]
        maxima = [names.scalar() for _ in range(rows)]
        sums = [names.scalar() for _ in range(rows)]
        body: list[Stmt] = [
            row.maximum(m, _keeps(mask, x, outer, pos, first), first)
            for m, first in zip(maxima, firsts, strict=True)
        ]
        body += [Let(t, ZERO) for t in sums]
        steps: list[Stmt] = []
        for a, m, t in zip(at, maxima, sums, strict=True):
            e = names.scalar()
            value: Expr = Fn(Libm.EXP, Bin(BinOp.SUB, Load(x, a), Var(m)))
            if mask is not None:
                # A refused position stores +0 and adds it: a sum of terms ≥ +0 (or NaN)
                # is unchanged by +0, bit for bit, and no branch waits on the mask.
                value = Select(_allowed(mask, x, a), value, ZERO)
            steps += (Let(e, value), Store(out, a, Var(e)), Let(t, Bin(BinOp.ADD, Var(t), Var(e))))
        body.append(For(j, n, tuple(steps)))
        for a, t in zip(at, sums, strict=True):
            body.append(_divide(out, a, t, j, n, None if mask is None else _allowed(mask, x, a)))
        return tuple(body)

    return nest(sizes[:-1], outer[:-1], _in_blocks(names, sizes[-1], block))


def _in_blocks(
    names: Names, count: int, block: Callable[[Index, int], tuple[Stmt, ...]]
) -> tuple[Stmt, ...]:
    """The `count` rows of the innermost outer loop, `SUM_ROWS` at a time (`block(first
    row, rows)`), the last block shorter."""
    blocks, rest = divmod(count, SUM_ROWS)
    rb = names.loop()
    out: tuple[Stmt, ...] = (
        For(rb, blocks, block(IBin(IntOp.MUL, IVar(rb), IConst(SUM_ROWS)), SUM_ROWS)),
    )
    return (*out, *block(IConst(blocks * SUM_ROWS), rest)) if rest else out


def _keeps(
    mask: Buffer | None, x: Buffer, outer: list[str], pos: int, row: Index | None = None
) -> AllowedFn | None:
    """Whether the mask keeps element k of a row (the row `row` of the innermost outer
    loop where given); None without a mask."""
    if mask is None:
        return None
    return lambda k: _allowed(mask, x, _at(x, outer, pos, k, row))


def _divide(out: Buffer, a: tuple[Index, ...], t: str, j: str, n: int, ok: Cmp | None) -> Stmt:
    """A row of stored exponentials (+0 where refused) divided in place by its sum `t`.
    +0 / t is +0 for t > 0 (∞ included), so such a row divides at every position; a sum
    of 0 (nothing allowed) or NaN divides only the allowed positions, as the three
    passes do."""
    divide: Stmt = Store(out, a, Bin(BinOp.DIV, Load(out, a), Var(t)))
    if ok is None:
        return For(j, n, (divide,))
    return If(
        Cmp(CmpOp.GT, Var(t), ZERO),
        (For(j, n, (divide,)),),
        (For(j, n, (If(ok, (divide,), (Store(out, a, ZERO),)),)),),
    )


def _two_passes(
    out: Buffer,
    at: tuple[Index, ...],
    j: str,
    n: int,
    e: str,
    s: str,
    m: str,
    x: Buffer,
    allowed: Cmp | None,
) -> tuple[Stmt, ...]:
    """A layout plan's two passes after the maximum: each exponential computed once,
    stored in the output while the sum is taken, then divided in place. Storing it is
    exact where the storage type is the arithmetic type (f64, f32; a plan cannot state
    this for bf16), so the bits are the three passes'."""
    exp: Stmt = Let(e, Fn(Libm.EXP, Bin(BinOp.SUB, Load(x, at), Var(m))))
    keep = (exp, Store(out, at, Var(e)), Let(s, Bin(BinOp.ADD, Var(s), Var(e))))
    divide: Stmt = Store(out, at, Bin(BinOp.DIV, Load(out, at), Var(s)))
    if allowed is None:
        return (Let(s, ZERO), For(j, n, keep), For(j, n, (divide,)))
    return (
        Let(s, ZERO),
        For(j, n, (If(allowed, keep, (Store(out, at, ZERO),)),)),
        For(j, n, (If(allowed, (divide,), ()),)),
    )


def softmax_vjp(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, y = step.operands
    assert isinstance(ct, Buffer) and isinstance(y, Buffer)
    out = launch.output
    outer, sizes, j, pos, n = _rows(y, str(step.attrs["axis"]), names)
    s = names.scalar()
    at = _at(y, outer, pos, IVar(j))
    if step.name == PrimName.SOFTMAX_VJP:
        body: tuple[Stmt, ...] = (
            Let(s, ZERO),
            For(j, n, (Let(s, Bin(BinOp.ADD, Var(s), Bin(BinOp.MUL, Load(ct, at), Load(y, at)))),)),
            For(
                j,
                n,
                (
                    Store(
                        out, at, Bin(BinOp.MUL, Load(y, at), Bin(BinOp.SUB, Load(ct, at), Var(s)))
                    ),
                ),
            ),
        )
    else:
        body = (
            Let(s, ZERO),
            For(j, n, (Let(s, Bin(BinOp.ADD, Var(s), Load(ct, at))),)),
            For(
                j,
                n,
                (
                    Store(
                        out,
                        at,
                        Bin(
                            BinOp.SUB,
                            Load(ct, at),
                            Bin(BinOp.MUL, Fn(Libm.EXP, Load(y, at)), Var(s)),
                        ),
                    ),
                ),
            ),
        )
    return nest(sizes, outer, body)


def _row_stats(
    logits: Buffer, outer: list[str], pos: int, j: str, n: int, m: str, s: str
) -> tuple[Stmt, ...]:
    """m = the row's maximum, s = Σ exp(x − m), in increasing order."""
    at = _at(logits, outer, pos, IVar(j))
    return (
        Let(m, Load(logits, _at(logits, outer, pos, IConst(0)))),
        For(
            j,
            n,
            (Let(m, Select(Cmp(CmpOp.GT, Load(logits, at), Var(m)), Load(logits, at), Var(m))),),
        ),
        Let(s, ZERO),
        For(
            j,
            n,
            (
                Let(
                    s,
                    Bin(BinOp.ADD, Var(s), Fn(Libm.EXP, Bin(BinOp.SUB, Load(logits, at), Var(m)))),
                ),
            ),
        ),
    )


def cross_entropy(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    logits, targets = step.operands
    assert isinstance(logits, Buffer) and isinstance(targets, Buffer)
    outer, sizes, j, pos, n = _rows(logits, None, names)
    m, s, tid = names.scalar(), names.scalar(), names.scalar()
    row = tuple(IVar(v) for v in outer)
    xt = Load(logits, _at(logits, outer, pos, IVar(tid)))
    loss = Bin(BinOp.SUB, Fn(Libm.LOG, Var(s)), Bin(BinOp.SUB, xt, Var(m)))
    if names.tiles:
        lanes = _Row(logits, launch.output, outer, pos, j, n, names, launch)
        stats: tuple[Stmt, ...] = (lanes.maximum(m, None), *lanes.sum(s, m))
    else:
        stats = _row_stats(logits, outer, pos, j, n, m, s)
    body = (
        *stats,
        Let(tid, Load(targets, row), integer=True),
        Store(launch.output, row, loss),
    )
    return nest(sizes, outer, body)


def cross_entropy_vjp(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """ct · (softmax(logits) − one_hot(targets)), row by row."""
    ct, logits, targets = step.operands
    assert isinstance(ct, Buffer) and isinstance(logits, Buffer) and isinstance(targets, Buffer)
    outer, sizes, j, pos, n = _rows(logits, None, names)
    m, s = names.scalar(), names.scalar()
    at = _at(logits, outer, pos, IVar(j))
    row = tuple(IVar(v) for v in outer)
    q = Bin(BinOp.DIV, Fn(Libm.EXP, Bin(BinOp.SUB, Load(logits, at), Var(m))), Var(s))
    value = Bin(
        BinOp.MUL,
        Load(ct, row),
        Select(Cmp(CmpOp.EQ, IVar(j), Load(targets, row)), Bin(BinOp.SUB, q, ONE), q),
    )
    out = launch.output
    if names.tiles:
        lanes = _Row(logits, out, outer, pos, j, n, names, launch)
        first = lanes.maximum(m, None)
        if kept_row(out, n, lanes.scratch + 2) is None:  # a long bf16 row: exp twice
            body: tuple[Stmt, ...] = (first, *lanes.sum(s, m), For(j, n, (Store(out, at, value),)))
            return nest(sizes, outer, body)
        kept, r, keep = lanes.kept(s, m, names.scalar())
        q = Bin(BinOp.DIV, Load(kept, r), Var(s))
        one_hot = Select(Cmp(CmpOp.EQ, IVar(j), Load(targets, row)), Bin(BinOp.SUB, q, ONE), q)
        grad = Store(out, at, Bin(BinOp.MUL, Load(ct, row), one_hot))
        passes = (first, Let(s, ZERO), For(j, n, keep), For(j, n, (grad,)))
        return nest(sizes, outer, row_scratch(kept, out, passes))
    body = (
        *_row_stats(logits, outer, pos, j, n, m, s),
        For(j, n, (Store(out, at, value),)),
    )
    return nest(sizes, outer, body)


def argmax(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    (x,) = step.operands
    assert isinstance(x, Buffer)
    axis = step.attrs.get("axis")
    outer, sizes, j, pos, n = _rows(x, None if axis is None else str(axis), names)
    best, m = names.scalar(), names.scalar()
    at = _at(x, outer, pos, IVar(j))
    # `>=` keeps the last of equal maxima, as the reference does.
    body = (
        Let(best, IConst(0), integer=True),
        Let(m, Load(x, _at(x, outer, pos, IConst(0)))),
        For(
            j,
            n,
            (
                If(
                    Cmp(CmpOp.GE, Load(x, at), Var(m)),
                    (Let(best, IVar(j), integer=True), Let(m, Load(x, at))),
                ),
            ),
        ),
        Store(launch.output, tuple(IVar(v) for v in outer), IVar(best)),
    )
    return nest(sizes, outer, body)


def sample(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    key, logits = step.operands
    assert isinstance(key, Buffer) and isinstance(logits, Buffer)
    outer, sizes, j, pos, n = _rows(logits, None, names)
    m, s, u, acc, choice, done = (names.scalar() for _ in range(6))
    at = _at(logits, outer, pos, IVar(j))
    p = Bin(BinOp.DIV, Fn(Libm.EXP, Bin(BinOp.SUB, Load(logits, at), Var(m))), Var(s))
    row = flat(outer, sizes) if outer else IConst(0)
    body = (
        Let(m, Load(logits, _at(logits, outer, pos, IConst(0)))),
        For(
            j,
            n,
            (Let(m, Select(Cmp(CmpOp.GT, Load(logits, at), Var(m)), Load(logits, at), Var(m))),),
        ),
        Let(s, ZERO),
        For(
            j,
            n,
            (
                Let(
                    s,
                    Bin(BinOp.ADD, Var(s), Fn(Libm.EXP, Bin(BinOp.SUB, Load(logits, at), Var(m)))),
                ),
            ),
        ),
        Random(u, key, row),
        Let(acc, ZERO),
        Let(choice, IConst(n - 1), integer=True),
        Let(done, ZERO),
        For(
            j,
            n,
            (
                Let(acc, Bin(BinOp.ADD, Var(acc), p)),
                If(
                    Cmp(CmpOp.EQ, Var(done), ZERO),
                    (
                        If(
                            Cmp(CmpOp.LT, Var(u), Var(acc)),
                            (Let(choice, IVar(j), integer=True), Let(done, ONE)),
                        ),
                    ),
                ),
            ),
        ),
        Store(launch.output, tuple(IVar(v) for v in outer), IVar(choice)),
    )
    return nest(sizes, outer, body)
