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
from presk.machine import cores, vector_unit

# The packed form: register tiles of [rows, 2 vectors], a vector one register of the
# machine's (presk/machine.py: 16 f32 or 8 f64 lanes with AVX-512, 8 or 4 with AVX),
# reading b from a KC × width panel copied into scratch.
PACK_ROWS = 4  # the packed form's rows come in multiples of this
PACK_VECTORS = 2
PANEL_BYTES = 32 * 1024  # the packed panel stays in L1 while every row block reads it
SUMS_BYTES = 16 * 1024  # bf16's running sums between blocks of K, a chunk of rows
# Where the output holds the sums, as a BLAS blocks: a block of b's columns over a block
# of K (in L2 or L3, in stack scratch: the calling thread's, or an OpenMP worker's, of
# 8 MiB by glibc's default), and a chunk of a's rows over it (read in place, in L2).
B_BLOCK_BYTES = 2 * 1024 * 1024
A_CHUNK_BYTES = 96 * 1024
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
    """The packed form's sizes at one shape: `lanes` per vector, `kc` steps of K
    per block, `mc` rows per chunk and `nc` columns per block.

    Where the output holds the running sums (f32, f64, or bf16 with all of K in
    one block), `nc` columns of b (a multiple of the tile's width dividing N) are
    the blocks of the outer, split loop and a chunk is `mc` rows of a (a
    multiple of the tile's rows; the last chunk may be shorter). A bf16 output
    cannot hold running sums over several blocks of K: they wait in an f32
    scratch of `mc` rows (a divisor of M) and `nc` is one panel's width.
    """

    lanes: int
    kc: int
    mc: int
    nc: int


def as_matrix(buffer: Buffer) -> Buffer:
    """A buffer of two or more axes viewed as [rows, last axis] (the same row-major data)."""
    if len(buffer.axes) <= 2:
        return buffer
    rows = 1
    for size in buffer.shape[:-1]:
        rows *= size
    return Buffer(buffer.index, buffer.dtype, ((None, rows), buffer.axes[-1]))


def packed_shape(a: Buffer, b: Buffer, out: Buffer, workers: int | None = None) -> Packing | None:
    """The packed form's sizes, or None where its conditions do not hold.

    A plain matrix product in one type, rows a multiple of the tile's, columns
    a multiple of its width, and K cut into equal blocks that fill a panel.
    The columns come in a block for each of `workers` (the split's; None: the
    machine's cores, two at least) where the block fits `B_BLOCK_BYTES`: each
    block packs all of a again, so one worker is fastest with one block.
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
    if dtype == "bf16" and kc < k:
        most = SUMS_BYTES // (width * size)
        mc = max(d for d in range(PACK_ROWS, min(m, most) + 1, PACK_ROWS) if m % d == 0)
        return Packing(lanes, kc, mc, width)
    rows = tile_rows()
    mc = min(m, max(rows, A_CHUNK_BYTES // (kc * size) // rows * rows))
    # A block for each worker where the columns allow (bits do not depend on the block).
    blocks = workers if workers is not None else max(2, cores())
    most = min(B_BLOCK_BYTES // (kc * size), max(width, n // blocks))
    nc = max(d for d in range(width, max(width, most) + 1, width) if n % d == 0)
    return Packing(lanes, kc, mc, nc)


def _k_block(k: int, most: int) -> int | None:
    """All of K if it fits a panel, else its largest divisor up to `most` (None if tiny)."""
    if k <= most:
        return k
    kc = max(d for d in range(1, most + 1) if k % d == 0)
    return kc if 4 * kc >= most else None


def dot_packed(
    a: Buffer, b: Buffer, out: Buffer, names: Names, scratch: int, packing: Packing
) -> tuple[Stmt, ...]:
    """Register tiles of [tile_rows(), 2·lanes] reading packed b, K in blocks of `kc`.

    A tile has twelve rows with 32 registers (24 accumulators: each load of
    b serves twelve rows, and the adds of one step in k are 24 independent
    chains, enough to hide their latency), six with 16, and a chunk's last
    rows run in one shorter tile. Its accumulators start at 0 in the first
    block of K and at the sums the previous block stored (in the output, or
    for bf16 in an f32 scratch): a stored and reloaded f32 or f64 is exact, so
    each lane still adds its terms one at a time in increasing k from 0 and
    a bf16 result is rounded once, at the end: the bits are the row-wise
    form's. b's packed copy (bf16 widened to f32, exactly) is read
    consecutively, where its own rows lie a whole row apart (4 KiB at N =
    1024 in f32, all in one cache set). a is read in place, an element a
    step of K for each of the tile's rows, each line serving 16 steps: a
    copy of a into micro-panels, as a BLAS makes, cost 2–9 % of the
    product's time on a 2-core Sapphire Rapids (2026-12-06) and bought
    nothing there (the Zen machines before were not measured without it).
    """
    if out.dtype == "bf16" and a.shape[1] > packing.kc:
        return _dot_carried(a, b, out, names, scratch, packing)
    return _dot_blocked(a, b, out, names, scratch, packing)


def _dot_blocked(
    a: Buffer, b: Buffer, out: Buffer, names: Names, scratch: int, packing: Packing
) -> tuple[Stmt, ...]:
    """The output holds the sums: blocks of `nc` columns (the split loop), then blocks of K.

    For each, the block of b is copied into `B_BLOCK_BYTES` at most of
    panels, one a tile's width (`kc` × width, consecutive), as a BLAS packs
    it, and the rows of a come in chunks of `mc` (`A_CHUNK_BYTES` of the
    block of K at most, which stays in L2 while every panel of the block
    reads it).
    """
    lanes, kc, mc, nc = packing.lanes, packing.kc, packing.mc, packing.nc
    (m, k), n = a.shape, b.shape[1]
    width, rows, blocks = lanes * PACK_VECTORS, tile_rows(), k // kc
    arith = ir.arith(out.dtype)
    jc = names.loop() if n > nc else None
    kb = names.loop() if blocks > 1 else None
    b_block = Buffer(scratch, arith, ((None, nc // width), (None, kc), (None, width)))
    jr = names.loop()
    k0 = _times(IVar(kb), kc) if kb is not None else IConst(0)
    # jc·nc + (jr·width + c·lanes): the split loop's block, then a column within it.
    block = _times(IVar(jc), nc) if jc is not None else IConst(0)
    cols = [
        _plus(block, _plus(_times(IVar(jr), width), IConst(c * lanes))) for c in range(PACK_VECTORS)
    ]

    kp = names.loop()
    pack_b = For(
        jr,
        nc // width,
        (
            For(
                kp,
                kc,
                tuple(
                    ir.VStore(
                        b_block,
                        (IVar(jr), IVar(kp), IConst(c * lanes)),
                        ir.VLoad(b, (_plus(k0, IVar(kp)), cols[c]), lanes),
                    )
                    for c in range(PACK_VECTORS)
                ),
            ),
        ),
    )

    def chunk(base: Index, count: int) -> tuple[Stmt, ...]:
        """The `count` rows of a from row `base`: their tiles over each panel of the block."""
        whole, rest = divmod(count, rows)
        t = names.loop()

        def tile(number: Index, n: int) -> tuple[Stmt, ...]:
            out_rows = [_plus(base, _plus(_times(number, rows), IConst(i))) for i in range(n)]
            return _register_tile(
                names,
                [[(row, col) for col in cols] for row in out_rows],
                out,
                lambda step: [Load(a, (out_rows[i], _plus(k0, step))) for i in range(n)],
                lambda step: [
                    ir.VLoad(b_block, (IVar(jr), step, IConst(c * lanes)), lanes)
                    for c in range(PACK_VECTORS)
                ],
                (kc, kb, blocks),
            )

        tiles: tuple[Stmt, ...] = ()
        if whole:
            tiles += (For(t, whole, tile(IVar(t), rows)),)
        if rest:
            tiles += tile(IConst(whole), rest)
        return (For(jr, nc // width, tiles),)

    full, last = divmod(m, mc)
    ic = names.loop()
    chunks: tuple[Stmt, ...] = ()
    if full:
        chunks += (For(ic, full, chunk(_times(IVar(ic), mc), mc)),)
    if last:
        chunks += chunk(IConst(full * mc), last)
    body: tuple[Stmt, ...] = (ir.Scratch(b_block, (pack_b, *chunks)),)
    if kb is not None:
        body = (For(kb, blocks, body),)
    if jc is not None:
        body = (For(jc, n // nc, body),)
    return body


def _register_tile(
    names: Names,
    at_out: list[list[tuple[Index, Index]]],
    out: Buffer,
    a_rows: Callable[[Index], list[Load]],
    b_vectors: Callable[[Index], list[ir.VLoad]],
    blocking: tuple[int, str | None, int],
    home: tuple[Buffer, list[list[tuple[Index, Index]]]] | None = None,
) -> tuple[Stmt, ...]:
    """A tile of rows × vectors accumulators over the current block of K.

    `at_out[r][c]` is accumulator (r, c)'s place in the output; `a_rows(k)` and
    `b_vectors(k)` the loads of step k of the block; `blocking` the block's
    size, the loop over blocks (None: one) and their count; `home` where the
    sums wait between blocks if not in the output (bf16's scratch).
    """
    kc, kb, blocks = blocking
    lanes = b_vectors(IConst(0))[0].lanes
    grid = [(r, c) for r in range(len(at_out)) for c in range(len(at_out[0]))]
    acc = {(r, c): f"v{r * len(at_out[0]) + c}" for r, c in grid}
    keep_in, keep_at = home if home is not None else (out, at_out)

    def each(make: Callable[[int, int], Stmt]) -> tuple[Stmt, ...]:
        return tuple(make(r, c) for r, c in grid)

    zero = each(lambda r, c: ir.VLet(acc[r, c], ir.Splat(ZERO, lanes), lanes))
    reload = each(lambda r, c: ir.VLet(acc[r, c], ir.VLoad(keep_in, keep_at[r][c], lanes), lanes))
    keep = each(lambda r, c: ir.VStore(keep_in, keep_at[r][c], ir.VVar(acc[r, c], lanes)))
    final = each(lambda r, c: ir.VStore(out, at_out[r][c], ir.VVar(acc[r, c], lanes)))
    start, done = zero, finish(names, final)
    if kb is not None:
        start = (If(Cmp(CmpOp.EQ, IVar(kb), IConst(0)), zero, reload),)
        last = Cmp(CmpOp.EQ, IVar(kb), IConst(blocks - 1))
        if home is not None:
            done = (If(last, done, keep),)
        elif names.epilogue is not None:
            done = (If(last, done, final),)  # the output holds the sums: the last block adds
    k = names.loop()
    rows = [[acc[r, c] for c in range(len(at_out[0]))] for r in range(len(at_out))]
    step = tile_step(names, rows, a_rows(IVar(k)), b_vectors(IVar(k)))
    return (*start, For(k, kc, step), *done)


def _dot_carried(
    a: Buffer, b: Buffer, out: Buffer, names: Names, scratch: int, packing: Packing
) -> tuple[Stmt, ...]:
    """bf16 over several blocks of K: column panels of one tile's width outermost (split).

    Each block of K of the panel is copied into a `kc` × width scratch; the
    rows run in chunks of `mc` whose running sums wait in an f32 scratch
    between blocks, rounded to bf16 once, on the last block's store.
    """
    lanes, kc, mc = packing.lanes, packing.kc, packing.mc
    width = lanes * PACK_VECTORS
    blocks = a.shape[1] // kc
    jb = names.loop()
    mb = names.loop() if a.shape[0] > mc else None
    kb = names.loop()
    kp = names.loop()
    arith = ir.arith(out.dtype)
    panel = Buffer(scratch, arith, ((None, kc), (None, width)))
    sums = Buffer(scratch + 1, arith, ((None, mc), (None, width)))
    k0 = _times(IVar(kb), kc)
    cols = [_plus(_times(IVar(jb), width), IConst(c * lanes)) for c in range(PACK_VECTORS)]

    def tile(base: Index, n: int) -> tuple[Stmt, ...]:
        """The tile of `n` rows from row `base` of the chunk over the current block."""
        tile_row = [_plus(base, IConst(r)) for r in range(n)]
        row = [r if mb is None else _plus(_times(IVar(mb), mc), r) for r in tile_row]
        at_sums: list[list[tuple[Index, Index]]] = [
            [(tile_row[r], IConst(c * lanes)) for c in range(PACK_VECTORS)] for r in range(n)
        ]
        return _register_tile(
            names,
            [[(row[r], col) for col in cols] for r in range(n)],
            out,
            lambda step: [Load(a, (row[r], _plus(k0, step))) for r in range(n)],
            lambda step: [
                ir.VLoad(panel, (step, IConst(c * lanes)), lanes) for c in range(PACK_VECTORS)
            ],
            (kc, kb, blocks),
            (sums, at_sums),
        )

    pack = For(
        kp,
        kc,
        tuple(
            ir.VStore(
                panel,
                (IVar(kp), IConst(c * lanes)),
                ir.VLoad(b, (_plus(k0, IVar(kp)), cols[c]), lanes),
            )
            for c in range(PACK_VECTORS)
        ),
    )
    rows = tile_rows()
    whole, rest = divmod(mc, rows)
    body: tuple[Stmt, ...] = (pack,)
    if whole:
        ib = names.loop()
        body += (For(ib, whole, tile(_times(IVar(ib), rows), rows)),)
    if rest:
        body += tile(IConst(whole * rows), rest)
    body = (For(kb, blocks, body),)
    if mb is not None:
        body = (For(mb, a.shape[0] // mc, body),)
    return (For(jb, b.shape[1] // width, (ir.Scratch(panel, (ir.Scratch(sums, body),)),)),)


def _times(index: Index, n: int) -> Index:
    """index · n, without multiplying a constant or by one."""
    if isinstance(index, IConst):
        return IConst(index.value * n)
    return index if n == 1 else IBin(IntOp.MUL, index, IConst(n))


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
