"""Packed products beyond `dot`: its two adjoints and the batched eins, as register tiles.

Each is a matrix product out[i, j] = Σ_k A(i, k)·B(k, j) over views of its
buffers (`Product`). For `dot_vjp_l`, A is dy (rows × the summed columns)
and B is wᵀ, copied into the panel transposed; for `dot_vjp_r`, A is xᵀ
(read as x[k, i], four adjacent elements a step) and B is dy, whose rows
are the summed axis (batch × seq, flattened) and copy as vectors. An ein
whose names are batch names, one row, one column and one summed name (the
attention scores and their weighted sum, and their adjoints) is such a
product per batch element, inside loops over the batch names.

Every output element is one lane of one accumulator that starts at 0 and
adds its terms one at a time in increasing k, each term's operands in the
order the row-wise form (`contract`) writes them: a value stored and
reloaded between blocks of K is exact (f32, f64; bf16's sums wait in an
f32 scratch and are rounded once), so the bits are the row-wise form's.
Edges keep those bits too: the last block of K may be short, the last row
tile (of twelve rows, as the forward
dot's) has fewer rows, and columns past the last whole panel take the
row-wise sum itself. Narrower than one register, a product takes vectors of
fewer lanes, down to 16 bytes (`narrow_lanes`); narrower still, it stays row-wise.

Where A is read by columns (`dot_vjp_r`'s x[k, i]: a step in k jumps a
whole row of x, a page apart for wide layers), the rows come in chunks and
each chunk's block of A is copied once into a second panel, then read by
every panel of columns (`_Form.by_chunks`): the loop over blocks of K moves
outside the one over panels, which changes no output element's order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

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
    Stmt,
    Store,
    Var,
)
from presk.kernel.lower.base import ZERO, Names
from presk.kernel.lower.epilogue import finish
from presk.kernel.lower.tiles import (
    ELEMENT_BYTES,
    PACK_ROWS,
    PACK_VECTORS,
    PANEL_BYTES,
    SUMS_BYTES,
    tile_rows,
    tile_step,
    vector_lanes,
)

# Whether a block is the first (or last) of its loop: known, or a test of the loop variable.
Cond = bool | Cmp
# A block of a blocked range: its first index, its length, whether it is first, last.
Block = Callable[[Index, int, Cond, Cond], tuple[Stmt, ...]]


@dataclass(frozen=True)
class Product:
    """A contraction as a matrix product over views: out[i, j] = Σ_k a(i, k)·b(k, j).

    `b_vector(k, j, lanes)` loads b(k, j..j+lanes) when those are consecutive
    in memory (else the panel is copied element by element, transposed).
    """

    m: int
    n: int
    k: int
    a: Callable[[Index, Index], Load]
    b: Callable[[Index, Index], Load]
    b_vector: Callable[[Index, Index, int], ir.VLoad] | None
    out: Buffer  # its last axis the product's columns
    out_at: Callable[[Index, Index], tuple[Index, ...]] = lambda i, j: (i, j)
    batch: tuple[tuple[str, int], ...] = ()  # loops around the product: (variable, size)
    swapped: bool = False  # the source writes each term b(k, j)·a(i, k)
    a_by_columns: bool = False  # a(i, k) and a(i + 1, k) are adjacent in memory


def view(buffer: Buffer, cut: int) -> Buffer:
    """The buffer as a matrix: its axes before `cut` flattened into rows, the rest into columns."""
    rows = cols = 1
    for size in buffer.shape[:cut]:
        rows *= size
    for size in buffer.shape[cut:]:
        cols *= size
    return Buffer(buffer.index, buffer.dtype, ((None, rows), (None, cols)))


def dot_product(a: Buffer, b: Buffer, out: Buffer) -> Product:
    """y = x·w: out[i, j] = Σ_k x[i, k]·w[k, j], x's leading axes and w's trailing ones flat."""
    lead = len(a.axes) - 1
    x, w, y = view(a, lead), view(b, 1), view(out, lead)
    return Product(
        m=y.shape[0],
        n=y.shape[1],
        k=x.shape[1],
        a=lambda i, k: Load(x, (i, k)),
        b=lambda k, j: Load(w, (k, j)),
        b_vector=lambda k, j, lanes: ir.VLoad(w, (k, j), lanes),
        out=y,
    )


def vjp_l_product(ct: Buffer, b: Buffer, out: Buffer) -> Product:
    """dx = dy·wᵀ: out[i, j] = Σ_s dy[i, s]·w[j, s], s over w's axes after the first."""
    lead = len(out.axes) - 1
    dy, w, dx = view(ct, lead), view(b, 1), view(out, lead)
    return Product(
        m=dx.shape[0],
        n=dx.shape[1],
        k=dy.shape[1],
        a=lambda i, s: Load(dy, (i, s)),
        b=lambda s, j: Load(w, (j, s)),
        b_vector=None,
        out=dx,
    )


def vjp_r_product(a: Buffer, ct: Buffer, out: Buffer) -> Product:
    """dw = xᵀ·dy: out[i, j] = Σ_l x[l, i]·dy[l, j], l over x's leading axes, flattened."""
    lead = len(a.axes) - 1
    x, dy, dw = view(a, lead), view(ct, lead), view(out, 1)
    return Product(
        m=dw.shape[0],
        n=dw.shape[1],
        k=x.shape[0],
        a=lambda i, l: Load(x, (l, i)),
        b=lambda l, j: Load(dy, (l, j)),
        b_vector=lambda l, j, lanes: ir.VLoad(dy, (l, j), lanes),
        out=dw,
        a_by_columns=True,
    )


def ein_product(
    names: Names,
    out: Buffer,
    out_names: list[str],
    a: Buffer,
    a_names: list[str],
    b: Buffer,
    b_names: list[str],
    swapped: bool = False,
) -> Product | None:
    """`contract`'s sum as a batched product, or None where it is not one.

    It is one when the names are the batch names (in all three), one row name
    (out and a), one column name (out and b, out's last axis) and one summed
    name (a and b): for each batch element, out[i, j] = Σ_k a[i, k]·b[k, j],
    with k increasing as `contract` sums it. Where out's last axis is a's
    name, the operands trade roles (`swapped`: each term keeps its order).
    """
    if not swapped and out_names and out_names[-1] in a_names and out_names[-1] not in b_names:
        return ein_product(names, out, out_names, b, b_names, a, a_names, swapped=True)
    if any(len(set(ns)) != len(ns) for ns in (out_names, a_names, b_names)):
        return None
    batch = [n for n in out_names if n in a_names and n in b_names]
    rows = [n for n in out_names if n in a_names and n not in b_names]
    cols = [n for n in out_names if n in b_names and n not in a_names]
    summed = [n for n in a_names if n not in out_names]
    if len(rows) != 1 or len(cols) != 1 or len(summed) != 1 or out_names[-1] != cols[0]:
        return None
    if (
        set(b_names) != {*batch, *cols, *summed}
        or set(a_names) != {*batch, *rows, *summed}
        or set(out_names) != {*batch, *rows, *cols}
    ):
        return None
    (i_name,), (j_name,), (k_name,) = rows, cols, summed
    var = {n: names.loop() for n in batch}

    def at(buffer_names: list[str], roles: dict[str, Index]) -> tuple[Index, ...]:
        return tuple(roles[n] if n in roles else IVar(var[n]) for n in buffer_names)

    size = dict(zip(a_names, a.shape, strict=True)) | dict(zip(b_names, b.shape, strict=True))
    b_vector = None
    if b_names[-1] == j_name:

        def b_vector(k: Index, j: Index, lanes: int) -> ir.VLoad:
            return ir.VLoad(b, at(b_names, {k_name: k, j_name: j}), lanes)

    return Product(
        m=size[i_name],
        n=size[j_name],
        k=size[k_name],
        a=lambda i, k: Load(a, at(a_names, {i_name: i, k_name: k})),
        b=lambda k, j: Load(b, at(b_names, {k_name: k, j_name: j})),
        b_vector=b_vector,
        out=out,
        out_at=lambda i, j: at(out_names, {i_name: i, j_name: j}),
        batch=tuple((var[n], size[n]) for n in batch),
        swapped=swapped,
        a_by_columns=a_names[-1] == i_name,
    )


def _plus(base: Index, offset: Index) -> Index:
    if base == IConst(0):
        return offset
    if offset == IConst(0):
        return base
    return IBin(IntOp.ADD, base, offset)


def _choose(cond: Cond, then: tuple[Stmt, ...], other: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    if cond is True:
        return then
    if cond is False:
        return other
    return (If(cond, then, other),)


def blocked(names: Names, total: int, size: int, make: Block) -> tuple[Stmt, ...]:
    """`total` cut into blocks of `size` (a loop over the whole ones) and a shorter last one."""
    whole, rest = divmod(total, size)
    out: list[Stmt] = []
    if whole == 1:
        out.extend(make(IConst(0), size, True, rest == 0))
    elif whole > 1:
        v = names.loop()
        last: Cond = Cmp(CmpOp.EQ, IVar(v), IConst(whole - 1)) if rest == 0 else False
        first = Cmp(CmpOp.EQ, IVar(v), IConst(0))
        base = IBin(IntOp.MUL, IVar(v), IConst(size))
        out.append(For(v, whole, make(base, size, first, last)))
    if rest:
        out.extend(make(IConst(whole * size), rest, whole == 0, True))
    return tuple(out)


def packed_product(p: Product, names: Names, scratch: int) -> tuple[Stmt, ...] | None:
    """The packed register-tiled form of `p`, or None where no whole vector of columns fits.

    For each panel of 2·lanes columns (the outer, split loop), each block of
    K is copied into a scratch panel (bf16 widened to f32, exactly), then every
    row tile runs over it: its accumulators start at 0 in the first block and
    at the sums the previous block stored (in the output, or for bf16 in an
    f32 scratch, in chunks of rows). Where all of K is one block and every
    panel fits the panel's budget together, b is copied once and the row tiles
    are the outer loop instead (`_Form.by_rows`).
    """
    dtype = p.out.dtype
    if dtype not in ELEMENT_BYTES and dtype != "bf16":
        return None
    arith = ir.arith(dtype)
    size = ELEMENT_BYTES[arith]
    lanes = narrow_lanes(p.n, arith)
    vectors = PACK_VECTORS if p.n % (PACK_VECTORS * lanes) == 0 else 1
    width = lanes * vectors
    panels = p.n // width
    if panels == 0 or p.m == 0 or p.k == 0:
        return None
    kc = min(p.k, PANEL_BYTES // (width * size))
    carried = dtype == "bf16" and p.k > kc  # sums between blocks of K in scratch
    mc = min(p.m, SUMS_BYTES // (width * size) // PACK_ROWS * PACK_ROWS) if carried else p.m
    chunk = _chunk_rows(p.m) if p.a_by_columns and not carried else None
    whole = (
        chunk is None and p.k <= kc and panels > 1 and panels * p.k * width * size <= PANEL_BYTES
    )
    panel = ((None, panels), (None, p.k), (None, width)) if whole else ((None, kc), (None, width))
    form = _Form(
        p,
        names,
        lanes,
        vectors,
        names.loop(),
        Buffer(scratch, arith, panel),
        Buffer(scratch + 1, arith, ((None, mc), (None, width))) if carried else None,
    )
    main: tuple[Stmt, ...]
    if whole:
        main = form.by_rows(panels)
    elif chunk is not None:
        a_panel = Buffer(scratch + 1, arith, ((None, kc), (None, chunk)))
        main = form.by_chunks(a_panel, panels)
    else:
        body = blocked(names, p.m, mc, form.chunk)
        if form.sums is not None:
            body = (ir.Scratch(form.sums, body),)
        main = (For(form.jb, panels, (ir.Scratch(form.panel, body),)),)
    if p.n % width:
        main = (*main, *_row_wise_columns(p, names, panels * width))
    for var, bound in reversed(p.batch):
        main = (For(var, bound, main),)
    return main


# The narrowest vector the narrow products take: 16 bytes (four f32 lanes, two f64).
NARROW_BYTES = 16


def narrow_lanes(n: int, arith: str) -> int:
    """A register's lanes, or for fewer columns (attention's weighted sum at a head width
    of 4 or 8) the most lanes, halving down to 16 bytes, that `n` columns fill: each lane
    is still one output element, and a tile of rows in such narrow vectors keeps as many
    sums going at once as a wide one."""
    lanes = vector_lanes(arith)
    floor = NARROW_BYTES // ELEMENT_BYTES[arith]
    while lanes > n and lanes // 2 >= floor:
        lanes //= 2
    return lanes


# A chunk of rows whose block of A is copied once for every panel: this many row tiles.
CHUNK_TILES = (8, 6, 4)


def _chunk_rows(m: int) -> int | None:
    """The rows of a chunk that divides `m` at least twice (the chunks' loop is split), or
    None where no chunk does."""
    for tiles in CHUNK_TILES:
        rows = tiles * tile_rows()
        if m % rows == 0 and m >= 2 * rows:
            return rows
    return None


@dataclass(frozen=True)
class _Form:
    """One packed form: the product, its vectors, the panel loop `jb` and its scratch.

    `sums` holds bf16's running sums between blocks of K (None: the output holds them).
    """

    p: Product
    names: Names
    lanes: int
    vectors: int
    jb: str
    panel: Buffer
    sums: Buffer | None

    def at_panel(self, k: Index, c: Index) -> tuple[Index, ...]:
        """The panel's element at step `k`, column `c` of the current panel (a scratch of
        three axes holds every panel of b, indexed by the panel first: `by_rows`)."""
        return (IVar(self.jb), k, c) if len(self.panel.axes) == 3 else (k, c)

    def column(self, c: int) -> Index:
        """The output column of vector `c` of the current panel."""
        width = self.lanes * self.vectors
        return IBin(
            IntOp.ADD, IBin(IntOp.MUL, IVar(self.jb), IConst(width)), IConst(c * self.lanes)
        )

    def chunk(self, m0: Index, mn: int, _first: Cond, _last: Cond) -> tuple[Stmt, ...]:
        """The `mn` rows from `m0` over every block of K."""

        def block(k0: Index, kn: int, first: Cond, last: Cond) -> tuple[Stmt, ...]:
            def tile(r0: Index, rows: int, _f: Cond, _l: Cond) -> tuple[Stmt, ...]:
                return self.tile(
                    m0, [_plus(r0, IConst(r)) for r in range(rows)], k0, kn, first, last
                )

            return (self.pack(k0, kn), *blocked(self.names, mn, tile_rows(), tile))

        return blocked(self.names, self.p.k, self.panel.shape[0], block)

    def by_chunks(self, a_panel: Buffer, panels: int) -> tuple[Stmt, ...]:
        """Chunks of rows (the outer, split loop), each over the blocks of K: the chunk's
        block of A is copied to `a_panel`, then each panel of B is copied and every row
        tile of the chunk runs over both."""
        names, rows = self.names, a_panel.shape[1]
        ic = names.loop()
        m0 = IBin(IntOp.MUL, IVar(ic), IConst(rows))

        def block(k0: Index, kn: int, first: Cond, last: Cond) -> tuple[Stmt, ...]:
            def tile(r0: Index, n: int, _f: Cond, _l: Cond) -> tuple[Stmt, ...]:
                rows_ = [_plus(r0, IConst(r)) for r in range(n)]
                return self.tile(m0, rows_, k0, kn, first, last, a_panel)

            kp, r = names.loop(), names.loop()
            copy = Store(
                a_panel, (IVar(kp), IVar(r)), self.p.a(_plus(m0, IVar(r)), _plus(k0, IVar(kp)))
            )
            panel = (self.pack(k0, kn), *blocked(names, rows, tile_rows(), tile))
            return (
                For(kp, kn, (For(r, rows, (copy,)),)),
                For(self.jb, panels, (ir.Scratch(self.panel, panel),)),
            )

        body = blocked(names, self.p.k, self.panel.shape[0], block)
        return (For(ic, self.p.m // rows, (ir.Scratch(a_panel, body),)),)

    def by_rows(self, panels: int) -> tuple[Stmt, ...]:
        """All of K in one block and all of b in one panel of L1 (attention's scores, a
        head's few columns of K): b is copied once, then each row tile runs along every
        panel, so the output is written row after row, as the hardware's prefetchers
        stream it, rather than down a panel's columns, a row's width apart."""
        names, k = self.names, self.p.k
        copy = replace(self, jb=names.loop())

        def tile(r0: Index, n: int, _f: Cond, _l: Cond) -> tuple[Stmt, ...]:
            rows = [_plus(r0, IConst(r)) for r in range(n)]
            return (For(self.jb, panels, self.tile(IConst(0), rows, IConst(0), k, True, True)),)

        body = (
            For(copy.jb, panels, (copy.pack(IConst(0), k),)),
            *blocked(names, self.p.m, tile_rows(), tile),
        )
        return (ir.Scratch(self.panel, body),)

    def pack(self, k0: Index, kn: int) -> Stmt:
        """Copy b(k0 + kp, panel columns) into the panel for kp < kn."""
        p, lanes, kp = self.p, self.lanes, self.names.loop()
        if p.b_vector is not None:
            copies = tuple(
                ir.VStore(
                    self.panel,
                    self.at_panel(IVar(kp), IConst(c * lanes)),
                    p.b_vector(_plus(k0, IVar(kp)), self.column(c), lanes),
                )
                for c in range(self.vectors)
            )
            return For(kp, kn, copies)
        # Transposed: read b's memory in order (along k), write the panel's columns.
        jp = self.names.loop()
        width = self.panel.shape[-1]
        column = _plus(IBin(IntOp.MUL, IVar(self.jb), IConst(width)), IVar(jp))
        copy = Store(
            self.panel, self.at_panel(IVar(kp), IVar(jp)), p.b(_plus(k0, IVar(kp)), column)
        )
        return For(jp, width, (For(kp, kn, (copy,)),))

    def tile(
        self,
        m0: Index,
        rows: list[Index],
        k0: Index,
        kn: int,
        first: Cond,
        last: Cond,
        a_panel: Buffer | None = None,
    ) -> tuple[Stmt, ...]:
        """A register tile of rows m0 + rows[r] over the block of K at `k0`, reading A
        from `a_panel` (its rows[r], the block's k) where a chunk's A is copied there."""
        lanes, k = self.lanes, self.names.loop()
        grid = [(r, c) for r in range(len(rows)) for c in range(self.vectors)]
        acc = [[f"v{r * self.vectors + c}" for c in range(self.vectors)] for r in range(len(rows))]
        at_out = [
            [self.p.out_at(_plus(m0, i), self.column(c)) for c in range(self.vectors)] for i in rows
        ]
        home, home_at = (self.p.out, at_out)
        if self.sums is not None:
            home = self.sums
            home_at = [[(i, IConst(c * lanes)) for c in range(self.vectors)] for i in rows]

        def vectors(make: Callable[[int, int], Stmt]) -> tuple[Stmt, ...]:
            return tuple(make(r, c) for r, c in grid)

        zero = vectors(lambda r, c: ir.VLet(acc[r][c], ir.Splat(ZERO, lanes), lanes))
        reload = vectors(
            lambda r, c: ir.VLet(acc[r][c], ir.VLoad(home, home_at[r][c], lanes), lanes)
        )
        keep = vectors(lambda r, c: ir.VStore(home, home_at[r][c], ir.VVar(acc[r][c], lanes)))
        final = vectors(lambda r, c: ir.VStore(self.p.out, at_out[r][c], ir.VVar(acc[r][c], lanes)))
        if a_panel is None:
            a_rows = [self.p.a(_plus(m0, i), _plus(k0, IVar(k))) for i in rows]
        else:
            a_rows = [Load(a_panel, (IVar(k), i)) for i in rows]
        b_vectors = [
            ir.VLoad(self.panel, self.at_panel(IVar(k), IConst(c * lanes)), lanes)
            for c in range(self.vectors)
        ]
        step = tile_step(self.names, acc, a_rows, b_vectors, self.p.swapped)
        if self.sums is None and self.names.epilogue is None:
            done = final
        else:  # where the output holds the sums between blocks, the last block's are final
            other = final if self.sums is None else keep
            done = _choose(last, finish(self.names, final), other)
        return (*_choose(first, zero, reload), For(k, kn, step), *done)


def _row_wise_columns(p: Product, names: Names, first: int) -> tuple[Stmt, ...]:
    """Columns from `first` on in the row-wise form: a scalar sum from 0 in increasing k."""
    i, j, k = names.loop(), names.loop(), names.loop()
    acc = names.scalar()
    column = _plus(IConst(first), IVar(j))
    pair = (p.a(IVar(i), IVar(k)), p.b(IVar(k), column))
    term = Bin(BinOp.MUL, pair[1], pair[0]) if p.swapped else Bin(BinOp.MUL, *pair)
    body = (
        Let(acc, ZERO),
        For(k, p.k, (Let(acc, Bin(BinOp.ADD, Var(acc), term)),)),
        *finish(names, (Store(p.out, p.out_at(IVar(i), column), Var(acc)),)),
    )
    return (For(i, p.m, (For(j, p.n - first, body),)),)
