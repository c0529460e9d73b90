"""The tiled forms of a matrix product: lanes, register tiles and packed panels.

Every form keeps the row-wise form's bits: each output element is one lane
of one accumulator, which adds its terms a[i, k]·b[k, j] one at a time in
increasing k from 0, and a value stored and reloaded between blocks of K is
exact (f32 or f64; bf16's sums wait in an f32 scratch and are rounded once).
What changes is only which loads serve which lanes. `dot` in
contractions.py chooses the form; `tiles=False` (point zero) takes none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from presk.dtypes import Dtype
from presk.kernel import ir
from presk.kernel.ir import (
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
    Stmt,
    Var,
    VecOp,
)
from presk.kernel.lower.base import ZERO, Names, nest
from presk.kernel.lower.epilogue import finish
from presk.machine import vector_unit

# The packed form: register tiles of [rows, 2 vectors], a vector one register of the
# machine's (presk/machine.py: 16 f32 or 8 f64 lanes with AVX-512, 8 or 4 with AVX),
# reading b from a KC × width panel copied into scratch.
PACK_ROWS = 4  # the packed form's rows come in multiples of this
PACK_VECTORS = 2
PANEL_BYTES = 32 * 1024  # the packed panel stays in L1 while every row block reads it
SUMS_BYTES = 16 * 1024  # bf16's running sums between blocks of K, a chunk of rows
ELEMENT_BYTES = {str(d): d.size for d in (Dtype.F64, Dtype.F32)}  # the arithmetic types


def vector_lanes(arith: str) -> int:
    """The lanes of one vector of the tiled forms in an arithmetic type: one register's."""
    return vector_unit().lanes(ELEMENT_BYTES[arith])


def tile_rows() -> int:
    """The rows of the packed forms' register tile: 12 with 32 registers (24 accumulators),
    6 with 16 (12 accumulators, two loads of b, a splat and a product). With a multiply and
    an add per term (no FMA), more rows per load of b keep both pipes busy."""
    return 12 if vector_unit().registers >= 32 else 6


def column_lanes(dtype: str) -> int:
    """The lanes of the unpacked tiled forms of a dot: 8 output columns, or a register's."""
    return min(8, vector_lanes(ir.arith(dtype)))


def dot_tiled(a: Buffer, b: Buffer, out: Buffer, names: Names) -> tuple[Stmt, ...]:
    """The [1, 8] tile: eight output columns in one vector accumulator across all of K.

    Each lane is one output column, summing its terms in increasing k from 0,
    exactly as the row-wise form does: the bits are the same.
    """
    lanes = column_lanes(out.dtype)
    lead = [names.loop() for _ in a.axes[:-1]]
    k, jb = names.loop(), names.loop()
    s0 = names.scalar()
    acc = "v0"
    column = IBin(IntOp.MUL, IVar(jb), IConst(lanes))
    lead_index = tuple(IVar(v) for v in lead)
    term = ir.VBin(VecOp.MUL, ir.Splat(Var(s0), lanes), ir.VLoad(b, (IVar(k), column), lanes))
    body = (
        ir.VLet(acc, ir.Splat(ZERO, lanes), lanes),
        For(
            k,
            a.shape[-1],
            (
                Let(s0, Load(a, (*lead_index, IVar(k)))),
                ir.VLet(acc, ir.VBin(VecOp.ADD, ir.VVar(acc, lanes), term), lanes),
            ),
        ),
        *finish(names, (ir.VStore(out, (*lead_index, column), ir.VVar(acc, lanes)),)),
    )
    return nest(list(a.shape[:-1]), lead, (For(jb, b.shape[1] // lanes, body),))


def dot_block(
    a: Buffer, b: Buffer, out: Buffer, names: Names, rows: int, vectors: int
) -> tuple[Stmt, ...]:
    """A [rows, 8·vectors] tile of a plain matrix product: rows × vectors accumulators.

    Every accumulator lane is one output element summing its terms in
    increasing k from 0, so the tile computes the row-wise form's bits while
    each load of b serves `rows` rows and each load of a serves 8·vectors columns.
    """
    lanes = column_lanes(out.dtype)
    ib, jb, k = names.loop(), names.loop(), names.loop()
    width = lanes * vectors
    row = [IBin(IntOp.ADD, IBin(IntOp.MUL, IVar(ib), IConst(rows)), IConst(r)) for r in range(rows)]
    col = [
        IBin(IntOp.ADD, IBin(IntOp.MUL, IVar(jb), IConst(width)), IConst(c * lanes))
        for c in range(vectors)
    ]
    acc = [[f"v{r * vectors + c}" for c in range(vectors)] for r in range(rows)]
    b_vectors = [ir.VLoad(b, (IVar(k), col[c]), lanes) for c in range(vectors)]
    inner = tile_step(names, acc, [Load(a, (row[r], IVar(k))) for r in range(rows)], b_vectors)
    zero: list[Stmt] = [
        ir.VLet(acc[r][c], ir.Splat(ZERO, lanes), lanes)
        for r in range(rows)
        for c in range(vectors)
    ]
    stores = finish(
        names,
        tuple(
            ir.VStore(out, (row[r], col[c]), ir.VVar(acc[r][c], lanes))
            for r in range(rows)
            for c in range(vectors)
        ),
    )
    body = (*zero, For(k, a.shape[1], inner), *stores)
    # Column panels outermost: a panel of b (K × 16) stays in cache for every row block.
    return (For(jb, b.shape[1] // width, (For(ib, a.shape[0] // rows, body),)),)


@dataclass(frozen=True)
class Packing:
    """The packed form's sizes at one shape.

    `lanes` per vector, `kc` steps of K per block, and `mc` rows per chunk:
    a bf16 output cannot hold running sums, so over several blocks of K they
    stay in an f32 scratch of `mc` rows; an f32 or f64 output holds its own
    and `mc` is every row.
    """

    lanes: int
    kc: int
    mc: int


def as_matrix(buffer: Buffer) -> Buffer:
    """A buffer of two or more axes viewed as [rows, last axis] (the same row-major data)."""
    if len(buffer.axes) <= 2:
        return buffer
    rows = 1
    for size in buffer.shape[:-1]:
        rows *= size
    return Buffer(buffer.index, buffer.dtype, ((None, rows), buffer.axes[-1]))


def packed_shape(a: Buffer, b: Buffer, out: Buffer) -> Packing | None:
    """The packed form's sizes, or None where its conditions do not hold.

    A plain matrix product in one type, rows a multiple of the tile's, columns
    a multiple of its width, and K cut into equal blocks that fill a panel.
    """
    dtype = out.dtype
    if dtype not in ("f64", "f32", "bf16") or a.dtype != dtype or b.dtype != dtype:
        return None
    if len(a.axes) != 2 or len(b.axes) != 2:
        return None
    size = ELEMENT_BYTES[ir.arith(dtype)]  # bf16 is packed widened to f32
    lanes = vector_lanes(ir.arith(dtype))
    width = lanes * PACK_VECTORS
    (m, k), n = a.shape, b.shape[1]
    if 0 in (m, n, k) or m % PACK_ROWS or n % width:
        return None  # an empty product is the row-wise form's (no panel to fill)
    kc = _k_block(k, PANEL_BYTES // (width * size))
    if kc is None:
        return None
    if dtype != "bf16" or kc == k:
        return Packing(lanes, kc, m)
    most = SUMS_BYTES // (width * size)
    mc = max(d for d in range(PACK_ROWS, min(m, most) + 1, PACK_ROWS) if m % d == 0)
    return Packing(lanes, kc, mc)


def _k_block(k: int, most: int) -> int | None:
    """All of K if it fits a panel, else its largest divisor up to `most` (None if tiny)."""
    if k <= most:
        return k
    kc = max(d for d in range(1, most + 1) if k % d == 0)
    return kc if 4 * kc >= most else None


def dot_packed(
    a: Buffer, b: Buffer, out: Buffer, names: Names, scratch: int, packing: Packing
) -> tuple[Stmt, ...]:
    """Register tiles of [tile_rows(), 2·lanes] reading b from a packed panel, K in blocks of `kc`.

    For each column panel (the outer, split loop), each block of K is copied
    into a `kc` × width scratch panel (bf16 widened to f32, exactly):
    consecutive in memory, where b's own rows lie a whole row apart (4 KiB at
    N = 1024 in f32, all in one cache set). The rows of a chunk then run
    their tiles over the block, twelve rows a tile with 32 registers (24
    accumulators: each load of the panel serves twelve rows, and the adds of
    one step in k are 24 independent chains, enough to hide their latency),
    six with 16, and the chunk's last rows in one shorter tile. A tile's accumulators
    start at 0 in the first block and at the sums the previous block stored
    (in the output, or for bf16 in an f32 scratch): a stored and reloaded f32
    or f64 is exact, so each lane still adds its terms one at a time in
    increasing k from 0 and a bf16 result is rounded once, at the end: the
    bits are the row-wise form's.
    """
    lanes, kc, mc = packing.lanes, packing.kc, packing.mc
    vectors = PACK_VECTORS
    width = lanes * vectors
    blocks = a.shape[1] // kc
    carried = out.dtype == "bf16" and blocks > 1  # sums between blocks in scratch
    jb = names.loop()
    mb = names.loop() if a.shape[0] > mc else None
    kb = names.loop() if blocks > 1 else None
    kp = names.loop()
    arith = ir.arith(out.dtype)
    panel = Buffer(scratch, arith, ((None, kc), (None, width)))
    sums = Buffer(scratch + 1, arith, ((None, mc), (None, width)))

    def in_k(var: str) -> Index:
        """The position in K of step `var` of the current block."""
        return (
            IVar(var)
            if kb is None
            else IBin(IntOp.ADD, IBin(IntOp.MUL, IVar(kb), IConst(kc)), IVar(var))
        )

    col = [
        IBin(IntOp.ADD, IBin(IntOp.MUL, IVar(jb), IConst(width)), IConst(c * lanes))
        for c in range(vectors)
    ]

    def tile(base: Index, rows: int) -> tuple[Stmt, ...]:
        """The tile of `rows` rows from row `base` of the chunk over the current block."""
        k = names.loop()
        tile_row = [_plus(base, IConst(r)) for r in range(rows)]
        row = [
            r if mb is None else IBin(IntOp.ADD, IBin(IntOp.MUL, IVar(mb), IConst(mc)), r)
            for r in tile_row
        ]
        acc = [[f"v{r * vectors + c}" for c in range(vectors)] for r in range(rows)]
        at_out = [[(row[r], col[c]) for c in range(vectors)] for r in range(rows)]
        at_sums = [[(tile_row[r], IConst(c * lanes)) for c in range(vectors)] for r in range(rows)]
        home, home_at = (sums, at_sums) if carried else (out, at_out)

        def each(make: Callable[[int, int], Stmt]) -> tuple[Stmt, ...]:
            """One statement per accumulator."""
            return tuple(make(r, c) for r in range(rows) for c in range(vectors))

        zero = each(lambda r, c: ir.VLet(acc[r][c], ir.Splat(ZERO, lanes), lanes))
        reload = each(lambda r, c: ir.VLet(acc[r][c], ir.VLoad(home, home_at[r][c], lanes), lanes))
        keep = each(lambda r, c: ir.VStore(home, home_at[r][c], ir.VVar(acc[r][c], lanes)))
        final = each(lambda r, c: ir.VStore(out, at_out[r][c], ir.VVar(acc[r][c], lanes)))
        start, done = zero, finish(names, final)
        if kb is not None:
            start = (If(Cmp(CmpOp.EQ, IVar(kb), IConst(0)), zero, reload),)
            last = Cmp(CmpOp.EQ, IVar(kb), IConst(blocks - 1))
            if carried:
                done = (If(last, done, keep),)
            elif names.epilogue is not None:
                done = (If(last, done, final),)  # the output holds the sums: the last block adds
        b_vectors = [ir.VLoad(panel, (IVar(k), IConst(c * lanes)), lanes) for c in range(vectors)]
        step = tile_step(names, acc, [Load(a, (row[r], in_k(k))) for r in range(rows)], b_vectors)
        return (*start, For(k, kc, step), *done)

    pack = For(
        kp,
        kc,
        tuple(
            ir.VStore(panel, (IVar(kp), IConst(c * lanes)), ir.VLoad(b, (in_k(kp), col[c]), lanes))
            for c in range(vectors)
        ),
    )
    rows = tile_rows()
    whole, rest = divmod(mc, rows)
    body: tuple[Stmt, ...] = (pack,)
    if whole:
        ib = names.loop()
        body += (For(ib, whole, tile(IBin(IntOp.MUL, IVar(ib), IConst(rows)), rows)),)
    if rest:
        body += tile(IConst(whole * rows), rest)
    if kb is not None:
        body = (For(kb, blocks, body),)
    if mb is not None:
        body = (For(mb, a.shape[0] // mc, body),)
    if carried:
        body = (ir.Scratch(sums, body),)
    return (For(jb, b.shape[1] // width, (ir.Scratch(panel, body),)),)


def _plus(base: Index, offset: Index) -> Index:
    """base + offset, without adding a zero or two constants."""
    if isinstance(base, IConst) and isinstance(offset, IConst):
        return IConst(base.value + offset.value)
    if base == IConst(0):
        return offset
    if offset == IConst(0):
        return base
    return IBin(IntOp.ADD, base, offset)


def tile_step(
    names: Names,
    acc: list[list[str]],
    a_rows: list[Load],
    b_vectors: list[ir.VLoad],
    swapped: bool = False,
) -> tuple[Stmt, ...]:
    """One step in k of a register tile: acc[r][c] += splat(a_rows[r]) * b_vectors[c].

    `swapped` writes the product's operands the other way round, as the
    reference's term is written (equal values, and equal NaN payloads too).
    """
    lanes = b_vectors[0].lanes
    loads = [f"w{c}" for c in range(len(b_vectors))]
    step: list[Stmt] = [ir.VLet(w, v, lanes) for w, v in zip(loads, b_vectors, strict=True)]
    for r, a_at in enumerate(a_rows):
        s = names.scalar()
        step.append(Let(s, a_at))
        for c, w in enumerate(loads):
            pair = (ir.Splat(Var(s), lanes), ir.VVar(w, lanes))
            term = ir.VBin(VecOp.MUL, pair[1], pair[0]) if swapped else ir.VBin(VecOp.MUL, *pair)
            step.append(
                ir.VLet(acc[r][c], ir.VBin(VecOp.ADD, ir.VVar(acc[r][c], lanes), term), lanes)
            )
    return tuple(step)
