"""One builder for every tiled point of a contraction's layout space.

A contraction is a matrix product over views (`Product`, adjoint_tiles.py):
`dot`, its two adjoints, and an `ein` of attention's pattern with its
adjoints. A point (kernel/layout.py) chooses the register tile [m_i, n_j],
a block of K, the order of the block loops, the lanes and a pack of
operand 1 into a [K, J] panel by a kernel of its own. Whatever it chooses,
each output element is one accumulator (or one lane of one) that starts at
0 and adds its terms one at a time in increasing k, each term's operands in
the order the row-wise form writes them; when the loop over blocks of K
encloses the loops over I or J, the sums are stored in the output at the
end of a block and reloaded at the start of the next, which is exact only
where the storage type is the arithmetic type (so never for bf16). The
bits are the row-wise form's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from presk.kernel import ir
from presk.kernel.ir import (
    Bin,
    BinOp,
    Buffer,
    For,
    IConst,
    Index,
    IVar,
    Let,
    Load,
    Stmt,
    Store,
    Var,
)
from presk.kernel.layout import Layout, Nest, NestKind, register_lanes
from presk.kernel.lower.adjoint_tiles import (
    Cond,
    Product,
    blocked,
    dot_product,
    ein_product,
    vjp_l_product,
    vjp_r_product,
)
from presk.kernel.lower.base import (
    ZERO,
    Launch,
    LayoutError,
    Names,
    PrimName,
    Step,
    nest,
    prim_name,
)
from presk.kernel.lower.contractions import relabelled
from presk.kernel.lower.elementwise import ELEMENTWISE
from presk.kernel.lower.epilogue import finish
from presk.kernel.lower.tiles import tile_step

CONTRACTIONS = (
    PrimName.DOT,
    PrimName.EIN,
    PrimName.DOT_VJP_L,
    PrimName.DOT_VJP_R,
    PrimName.EIN_VJP_L,
    PrimName.EIN_VJP_R,
)
SOFTMAXES = (PrimName.SOFTMAX,)


def _names_of(buffer: Buffer) -> list[str]:
    return [str(n) for n, _ in buffer.axes]


def product_of(step: Step, launch: Launch, names: Names) -> Product | None:
    """The launch's contraction as a matrix product over views, or None if it is none."""
    out = launch.output
    ops = [o for o in step.operands if isinstance(o, Buffer)]
    if len(ops) != len(step.operands):
        return None
    match prim_name(step.name):
        case PrimName.DOT:
            a, b = ops
            return dot_product(a, b, out)
        case PrimName.DOT_VJP_L:
            ct, b = ops
            return vjp_l_product(ct, b, out)
        case PrimName.DOT_VJP_R:
            a, ct = ops
            return vjp_r_product(a, ct, out)
        case PrimName.EIN:
            a, b = ops
            out_names = [str(n) for n in step.attrs["out"]]  # type: ignore[attr-defined]
            b_names = relabelled(b, step.attrs.get("relabel"))
            return ein_product(names, out, out_names, a, _names_of(a), b, b_names)
        case PrimName.EIN_VJP_L:
            ct, b, a = ops
            ct_names = [str(n) for n in step.attrs["out"]]  # type: ignore[attr-defined]
            b_names = relabelled(b, step.attrs.get("relabel"))
            return ein_product(names, out, _names_of(a), ct, ct_names, b, b_names)
        case PrimName.EIN_VJP_R:
            ct, a, b = ops
            ct_names = [str(n) for n in step.attrs["out"]]  # type: ignore[attr-defined]
            b_names = relabelled(b, step.attrs.get("relabel"))
            return ein_product(names, out, b_names, ct, ct_names, a, _names_of(a))
    return None


def nest_of(launch: Launch) -> Nest:
    """What the layout space of a launch depends on."""
    dtype = launch.output.dtype
    if len(launch.steps) > 1:
        return Nest(NestKind.ELEMENTWISE, dtype)
    root = launch.steps[-1]
    name = prim_name(root.name)
    if name in CONTRACTIONS:
        p = product_of(root, launch, Names(tiles=True))
        one_type = all(
            isinstance(o, Buffer) and o.dtype == dtype for o in root.operands
        ) and dtype in ("f64", "f32", "bf16")
        if p is not None and one_type:
            return Nest(NestKind.CONTRACTION, dtype, p.m, p.n, p.k, p.b_vector is not None)
        return Nest(NestKind.OTHER, dtype)
    if name in SOFTMAXES:
        return Nest(NestKind.SOFTMAX, dtype)
    return Nest(NestKind.ELEMENTWISE if name in ELEMENTWISE else NestKind.OTHER, dtype)


def panel_of(launch: Launch) -> Buffer:
    """The buffer a pack fills: operand 1 of the product as [batch…, K, J], in its own type."""
    p = product_of(launch.steps[-1], launch, Names(tiles=True))
    assert p is not None
    dtype = launch.output.dtype
    axes = (*((None, size) for _, size in p.batch), (None, p.k), (None, p.n))
    return Buffer(len(launch.inputs), dtype, axes)


def operand_1(launch: Launch) -> Buffer:
    """The buffer a pack copies: the one the product's b(k, j) reads."""
    p = product_of(launch.steps[-1], launch, Names(tiles=True))
    assert p is not None
    return p.b(IConst(0), IConst(0)).buffer


def pack_body(launch: Launch, panel: Buffer, names: Names) -> tuple[Stmt, ...]:
    """The pack kernel's body: panel[batch…, k, j] = b(k, j), read along k (b's memory order).

    The product is the contraction's own launch's: an adjoint's sizes come from its output
    (dx = dy·wᵀ sums over what dx does not have), not from the panel's.
    """
    p = product_of(launch.steps[-1], launch, names)
    assert p is not None
    k, j = names.loop(), names.loop()
    batch = [IVar(v) for v, _ in p.batch]
    copy = Store(panel, (*batch, IVar(k), IVar(j)), p.b(IVar(k), IVar(j)))
    inner = (For(j, p.n, (For(k, p.k, (copy,)),)),)
    return nest([s for _, s in p.batch], [v for v, _ in p.batch], inner)


def check_point(nest: Nest, point: Layout, workers_ok: Callable[[int], bool] | None = None) -> None:
    """Refuse what a nest of this kind, type and shape cannot take (E7002's reasons)."""
    stated = {f for f in ("form", "tile", "kblock", "order", "lanes", "pack", "passes", "epilogue")}
    used = {f for f in stated if getattr(point, f) is not None}
    allowed: set[str]
    match nest.kind:
        case NestKind.CONTRACTION:
            allowed = {"form", "tile", "kblock", "order", "lanes", "pack", "epilogue"}
        case NestKind.SOFTMAX:
            allowed = {"passes"}
        case NestKind.ELEMENTWISE:
            allowed = {"lanes"}
        case NestKind.OTHER:
            allowed = set()
    extra = sorted(used - allowed)
    if extra:
        raise LayoutError(f"a {nest.kind.value} nest has no `{extra[0]}` to choose")
    if point.passes is not None:
        if point.passes not in (2, 3):
            raise LayoutError(f"`passes` is 2 or 3, not {point.passes}")
        if point.passes == 2 and nest.dtype == "bf16":
            raise LayoutError(
                "two passes store the exponentials in a bf16 output, which would round them twice"
            )
    if nest.kind is NestKind.ELEMENTWISE and point.lanes not in (None, 1):
        raise LayoutError("an elementwise nest takes `lanes` 1 (scalar) or its default")
    if nest.kind is NestKind.CONTRACTION:
        _check_contraction(nest, point)


def _check_contraction(nest: Nest, point: Layout) -> None:
    if point.form not in (None, "rowwise", "tiled"):
        raise LayoutError(f"`form` is rowwise or tiled, not {point.form!r}")
    tiled_fields = [f for f in ("tile", "kblock", "order", "lanes", "pack")]
    if point.form != "tiled":
        stated = [f for f in tiled_fields if getattr(point, f) is not None]
        if stated:
            raise LayoutError(f'`{stated[0]}` is a choice of the tiled form: state "form": "tiled"')
        return
    mi, nj = point.tile or (1, 1)
    if mi < 1 or nj < 1 or mi * nj > 256:
        raise LayoutError(f"the tile [{mi}, {nj}] is not a register tile")
    kblock = point.kblock or 0
    if kblock < 0:
        raise LayoutError(f"`kblock` {kblock} is not a block of K")
    order = point.order or "IJ"
    if sorted(order) != sorted("IJK" if kblock else "IJ"):
        wanted = "a permutation of IJK" if kblock else "IJ or JI"
        raise LayoutError(f"`order` {order} is not {wanted}")
    if kblock and not order.endswith("K") and nest.dtype == "bf16":
        raise LayoutError(
            "this k-block would store and reload bf16 partial sums between blocks of K "
            "(exact only where the storage type is the arithmetic type)"
        )
    lanes = point.lanes or 1
    if lanes > 1:
        if lanes > register_lanes(nest.dtype) or nj % lanes or lanes not in (4, 8, 16):
            raise LayoutError(
                f"{lanes} lanes do not divide the tile's {nj} columns in one {nest.dtype} register"
            )
        if not nest.contiguous and not point.pack:
            raise LayoutError(
                "lanes read operand 1 consecutively along J, which this nest's operand 1 "
                "is not: it needs a pack"
            )


@dataclass(frozen=True)
class Tile:
    """A tiled point of one product: the loads of b (from a panel if packed), its sizes."""

    p: Product
    names: Names
    rows: int
    columns: int
    lanes: int
    kblock: int
    b: Callable[[Index, Index], Load]
    b_vector: Callable[[Index, Index, int], ir.VLoad] | None

    def leaf(
        self,
        i0: Index,
        rows: int,
        j0: Index,
        cols: int,
        block: tuple[Index, int, Cond, Cond] | None,
    ) -> tuple[Stmt, ...]:
        """The accumulators of rows × cols outputs at (i0, j0).

        Over all of K with the sums in registers (`block` None), or over one
        block (k0, kn, first, last) of it, the sums reloaded from the output
        unless it is the first block and stored after it (the last block's
        stores are final, and take the epilogue).
        """
        lanes = self.lanes if cols % self.lanes == 0 and self.b_vector is not None else 1
        vectors = cols // lanes
        ii = [_plus(i0, IConst(r)) for r in range(rows)]
        jj = [_plus(j0, IConst(c * lanes)) for c in range(vectors)]
        if lanes > 1:
            acc = [[f"v{r * vectors + c}" for c in range(vectors)] for r in range(rows)]
        else:
            acc = [[self.names.scalar() for _ in range(vectors)] for _ in range(rows)]
        grid = [(r, c) for r in range(rows) for c in range(vectors)]
        out, at = self.p.out, self.p.out_at

        def each(make: Callable[[int, int], Stmt]) -> tuple[Stmt, ...]:
            return tuple(make(r, c) for r, c in grid)

        if lanes > 1:
            zero = each(lambda r, c: ir.VLet(acc[r][c], ir.Splat(ZERO, lanes), lanes))
            reload = each(
                lambda r, c: ir.VLet(acc[r][c], ir.VLoad(out, at(ii[r], jj[c]), lanes), lanes)
            )
            store = each(lambda r, c: ir.VStore(out, at(ii[r], jj[c]), ir.VVar(acc[r][c], lanes)))
        else:
            zero = each(lambda r, c: Let(acc[r][c], ZERO))
            reload = each(lambda r, c: Let(acc[r][c], Load(out, at(ii[r], jj[c]))))
            store = each(lambda r, c: Store(out, at(ii[r], jj[c]), Var(acc[r][c])))

        def steps(k: Index) -> tuple[Stmt, ...]:
            a_rows = [self.p.a(i, k) for i in ii]
            if lanes > 1:
                assert self.b_vector is not None
                vecs = [self.b_vector(k, j, lanes) for j in jj]
                return tile_step(self.names, acc, a_rows, vecs, self.p.swapped)
            out_steps: list[Stmt] = []
            for r, a_at in enumerate(a_rows):
                s = self.names.scalar()
                out_steps.append(Let(s, a_at))
                for c, j in enumerate(jj):
                    pair = (Var(s), self.b(k, j))
                    term = (
                        Bin(BinOp.MUL, pair[1], pair[0])
                        if self.p.swapped
                        else Bin(BinOp.MUL, *pair)
                    )
                    out_steps.append(Let(acc[r][c], Bin(BinOp.ADD, Var(acc[r][c]), term)))
            return tuple(out_steps)

        def run(k0: Index, kn: int) -> tuple[Stmt, ...]:
            k = self.names.loop()
            return (For(k, kn, steps(_plus(k0, IVar(k)))),)

        if block is not None:
            k0, kn, first, last = block
            done = store
            if self.names.epilogue is not None:  # the last block's stores are final
                done = _choose(last, finish(self.names, store), store)
            return (*_choose(first, zero, reload), *run(k0, kn), *done)
        if not self.kblock:
            return (*zero, *run(IConst(0), self.p.k), *finish(self.names, store))
        inner = blocked(self.names, self.p.k, self.kblock, lambda k0, kn, _f, _l: run(k0, kn))
        return (*zero, *inner, *finish(self.names, store))


def _plus(base: Index, offset: Index) -> Index:
    if base == IConst(0):
        return offset
    if offset == IConst(0):
        return base
    return ir.IBin(ir.IntOp.ADD, base, offset)


def _choose(cond: Cond, then: tuple[Stmt, ...], other: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    if cond is True:
        return then
    if cond is False:
        return other
    return (ir.If(cond, then, other),)


def tile_of(step: Step, launch: Launch, names: Names, point: Layout) -> Tile:
    """A contraction's product and its tile at a tiled point (a pack's panel is the
    last input)."""
    p = product_of(step, launch, names)
    if p is None:
        raise LayoutError("this nest is no product of a row, a column and one summed axis")
    b, b_vector = p.b, p.b_vector
    if point.pack:
        panel = launch.inputs[-1]
        batch = tuple(IVar(v) for v, _ in p.batch)

        def b(k: Index, j: Index) -> Load:
            return Load(panel, (*batch, k, j))

        def b_vector(k: Index, j: Index, lanes: int) -> ir.VLoad:
            return ir.VLoad(panel, (*batch, k, j), lanes)

    rows, columns = point.tile or (1, 1)
    return Tile(p, names, rows, columns, point.lanes or 1, point.kblock or 0, b, b_vector)


def tiled(step: Step, launch: Launch, names: Names, point: Layout) -> tuple[Stmt, ...]:
    """The kernel body of a contraction at a tiled point (a pack's panel is the last input)."""
    tile = tile_of(step, launch, names, point)
    p = tile.p
    order = point.order or "IJ"
    keep = bool(tile.kblock) and not order.endswith("K")
    levels = order if keep else order.replace("K", "")
    body = _levels(tile, levels, {}, keep)
    for var, bound in reversed(p.batch):
        body = (For(var, bound, body),)
    return body


def _levels(
    tile: Tile, levels: str, at: dict[str, tuple[Index, int, Cond, Cond]], keep: bool
) -> tuple[Stmt, ...]:
    """The block loops in `levels` order (outermost first), then a leaf."""
    p = tile.p
    if not levels:
        i0, rows, _, _ = at["I"]
        j0, cols, _, _ = at["J"]
        block = at["K"] if keep else None
        return tile.leaf(i0, rows, j0, cols, block)
    axis, rest = levels[0], levels[1:]
    total, size = {"I": (p.m, tile.rows), "J": (p.n, tile.columns), "K": (p.k, tile.kblock)}[axis]

    def make(base: Index, n: int, first: Cond, last: Cond) -> tuple[Stmt, ...]:
        return _levels(tile, rest, at | {axis: (base, n, first, last)}, keep)

    return blocked(tile.names, total, size, make)


def with_pack_input(launch: Launch, panel: Buffer) -> Launch:
    """The contraction's launch reading the packed panel as its last input."""
    out = launch.output
    moved = Buffer(panel.index + 1, out.dtype, out.axes)
    return replace(launch, inputs=[*launch.inputs, panel], output=moved)


__all__ = [
    "CONTRACTIONS",
    "LayoutError",
    "Tile",
    "check_point",
    "nest_of",
    "operand_1",
    "pack_body",
    "panel_of",
    "product_of",
    "tile_of",
    "tiled",
    "with_pack_input",
]
