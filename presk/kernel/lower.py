"""Lowering: a primitive (or a fused group) at concrete shapes to a kernel.

`lower(group, dtype)` takes a `Launch` — the primitive instructions of one
fusion group with the concrete buffers they read and the buffer the root
writes — and returns a `Kernel`. The loop nests follow the reference
interpreter's semantics rule for rule: operands align by trailing position
when names agree, else by name; sums run in increasing index order (a dot in
the row-wise form, zeroing the output row then adding a[i, k]·b[k, j] for k
increasing); softmax, log_softmax and cross_entropy subtract the row
maximum; a masked softmax takes its maximum from the allowed positions and
gives 0 at the refused ones; argmax keeps the last maximum; embed gathers
and its adjoint scatter-adds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from presk.kernel import ir
from presk.kernel.ir import (
    Bin,
    Buffer,
    Cmp,
    Const,
    Expr,
    Fn,
    For,
    FromIndex,
    IBin,
    IConst,
    If,
    Index,
    IVar,
    Let,
    Load,
    Neg,
    Random,
    Select,
    Stmt,
    Store,
    Var,
)

# Constants rounded once to the arithmetic type (80 digits leave no ties).
SQRT2 = Fraction(
    "1.4142135623730950488016887242096980785696718753769480731766797379907324784621070"
)
TWO_OVER_SQRT_PI = Fraction(
    "1.1283791670955125738961589031215451716881012586579977136881714434212849368829869"
)
INV_SQRT_2PI = Fraction(
    "0.39894228040143267793994605993438186847585863116493465766592582967065792589930183"
)


class LoweringError(Exception):
    """A primitive this backend cannot lower (reported as not built yet)."""


ZERO = Const(Fraction(0))
ONE = Const(Fraction(1))


def c(value: int | Fraction) -> Const:
    return Const(Fraction(value))


# ---------------------------------------------------------------- elementwise expressions


def _gelu(x: Expr) -> Expr:
    cdf = Bin("/", Bin("+", ONE, Fn("erf", Bin("/", x, Const(SQRT2)))), c(2))
    return Bin("*", x, cdf)


def _gelu_slope(x: Expr) -> Expr:
    cdf = Bin("/", Bin("+", ONE, Fn("erf", Bin("/", x, Const(SQRT2)))), c(2))
    pdf = Bin("*", Fn("exp", Bin("/", Neg(Bin("*", x, x)), c(2))), Const(INV_SQRT_2PI))
    return Bin("+", cdf, Bin("*", x, pdf))


def _pow(base: Expr, exponent: Expr) -> Expr:
    if isinstance(exponent, Const) and exponent.value.denominator == 1:
        n = int(exponent.value)
        if n == 0:
            return ONE
        result = base
        for _ in range(abs(n) - 1):
            result = Bin("*", result, base)
        return Bin("/", ONE, result) if n < 0 else result
    return Fn("exp", Bin("*", exponent, Fn("log", base)))


ELEMENTWISE: dict[str, Callable[..., Expr]] = {
    "add": lambda a, b: Bin("+", a, b),
    "sub": lambda a, b: Bin("-", a, b),
    "mul": lambda a, b: Bin("*", a, b),
    "div": lambda a, b: Bin("/", a, b),
    "pow": _pow,
    "neg": Neg,
    "exp": lambda x: Fn("exp", x),
    "log": lambda x: Fn("log", x),
    "sqrt": lambda x: Fn("sqrt", x),
    "tanh": lambda x: Fn("tanh", x),
    "sin": lambda x: Fn("sin", x),
    "cos": lambda x: Fn("cos", x),
    "erf": lambda x: Fn("erf", x),
    "gelu": _gelu,
    "relu": lambda x: Select(Cmp(">", x, ZERO), x, ZERO),
    "abs": lambda x: Select(Cmp("<", x, ZERO), Neg(x), x),
    "heaviside": lambda x: Select(Cmp(">", x, ZERO), ONE, ZERO),
    "ylog": lambda y, a: Select(Cmp("==", y, ZERO), ZERO, Bin("*", y, Fn("log", a))),
    "sign": lambda x: Select(Cmp(">", x, ZERO), ONE, Select(Cmp("<", x, ZERO), c(-1), ZERO)),
    "erf_vjp": lambda g, x: Bin(
        "*", g, Bin("*", Const(TWO_OVER_SQRT_PI), Fn("exp", Neg(Bin("*", x, x))))
    ),
    "gelu_vjp": lambda g, x: Bin("*", g, _gelu_slope(x)),
    "real": lambda x: x,
}


# ---------------------------------------------------------------- building blocks


@dataclass
class Names:
    """Fresh loop variables i0, i1, … and scalars s0, s1, … per kernel."""

    loops: int = 0
    scalars: int = 0
    tiles: bool = True  # whether contractions may take their tiled forms

    def loop(self) -> str:
        self.loops += 1
        return f"i{self.loops - 1}"

    def scalar(self) -> str:
        self.scalars += 1
        return f"s{self.scalars - 1}"


def nest(sizes: list[int], names: list[str], body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """Loops over `sizes` (outermost first) around `body`."""
    for size, name in reversed(list(zip(sizes, names, strict=True))):
        body = (For(name, size, body),)
    return body


def align_positions(
    operand: tuple[tuple[str | None, int], ...], result: tuple[tuple[str | None, int], ...]
) -> list[int]:
    """For each axis of `operand`, the axis of `result` it aligns with (the reference's rule)."""
    offset = len(result) - len(operand)
    if offset < 0:
        raise LoweringError("an operand has more axes than the result")
    by_position = all(
        (a is None or r is None or a == r) and asize == rsize
        for (a, asize), (r, rsize) in zip(operand, result[offset:], strict=True)
    )
    if by_position:
        return [offset + i for i in range(len(operand))]
    names = [name for name, _ in result]
    positions = []
    for name, size in operand:
        if name is None or names.count(name) != 1 or result[names.index(name)][1] != size:
            raise LoweringError("operands do not align")
        positions.append(names.index(name))
    return positions


def load_aligned(
    buffer: Buffer, out_axes: tuple[tuple[str | None, int], ...], vars_: list[str]
) -> Load:
    positions = align_positions(buffer.axes, out_axes)
    return Load(buffer, tuple(IVar(vars_[p]) for p in positions))


def flat(vars_: list[str], sizes: list[int]) -> Index:
    """The row-major linear index of loop variables over `sizes`."""
    result: Index = IConst(0)
    for var, size in zip(vars_, sizes, strict=True):
        result = (
            IVar(var)
            if result == IConst(0)
            else IBin("+", IBin("*", result, IConst(size)), IVar(var))
        )
    return result


def axis_of(buffer: Buffer, name: str | None) -> int:
    names = [n for n, _ in buffer.axes]
    if name is None or names.count(name) != 1:
        raise LoweringError(f"no axis `{name}`")
    return names.index(name)


# ---------------------------------------------------------------- launches


@dataclass
class Step:
    """One primitive of a launch: its name, attributes and operands.

    An operand is a kernel input buffer, a constant, or the value of an
    earlier step of the same (fused) launch, by position.
    """

    name: str
    attrs: dict[str, object]
    operands: list[Buffer | Fraction | int]  # int: an earlier step
    axes: tuple[tuple[str | None, int], ...]  # the result's concrete axes


@dataclass
class Launch:
    """A fusion group: its steps in order, its inputs and the root's output buffer."""

    steps: list[Step]
    inputs: list[Buffer]
    output: Buffer
    outputs: list[Buffer] = field(default_factory=list)

    @property
    def name(self) -> str:
        if len(self.steps) == 1:
            return self.steps[0].name
        return f"fused {len(self.steps)} steps"


def lower(launch: Launch, dtype: str, tiles: bool | None = None) -> ir.Kernel:
    """The kernel of a launch; `tiles=False` gives point zero: row-wise dots, no lanes."""
    root = launch.steps[-1]
    outputs = tuple(launch.outputs) if launch.outputs else (launch.output,)
    if len(launch.steps) > 1 or root.name in ELEMENTWISE:
        body = _elementwise(launch)
    else:
        rule = NONELEMENTWISE.get(root.name)
        if rule is None:
            raise LoweringError(f"the primitive `{root.name}` has no native lowering yet")
        body = rule(root, launch, Names(tiles=TILES if tiles is None else tiles))
    return ir.Kernel(launch.name, dtype, tuple(launch.inputs), outputs, body)


def _elementwise(launch: Launch) -> tuple[Stmt, ...]:
    out = launch.output
    names = Names()
    vars_ = [names.loop() for _ in out.axes]
    values: list[Expr] = []
    for step in launch.steps:
        args: list[Expr] = []
        for operand in step.operands:
            if isinstance(operand, Buffer):
                load = load_aligned(operand, step.axes, _vars_for(step.axes, out.axes, vars_))
                args.append(FromIndex(load) if operand.dtype == "i64" else load)
            elif isinstance(operand, int):
                args.append(values[operand])
            else:
                args.append(Const(Fraction(operand)))
        if step.name == "dim":
            size = step.attrs["size"]
            assert isinstance(size, int)
            values.append(c(size))
            continue
        builder = ELEMENTWISE.get(step.name)
        if builder is None:
            raise LoweringError(f"`{step.name}` is not elementwise")
        values.append(builder(*args))
    store = Store(out, tuple(IVar(v) for v in vars_), values[-1])
    return nest(list(out.shape), vars_, (store,))


def _vars_for(
    axes: tuple[tuple[str | None, int], ...],
    out_axes: tuple[tuple[str | None, int], ...],
    out_vars: list[str],
) -> list[str]:
    """Loop variables of a step's axes inside the root's nest."""
    return [out_vars[p] for p in align_positions(axes, out_axes)]


# ---------------------------------------------------------------- reductions


def _reduce(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    (x,) = [o for o in step.operands if isinstance(o, Buffer)]
    out = launch.output
    kind = step.name
    axis = step.attrs.get("axis")
    reduced = list(range(len(x.axes))) if axis is None else [axis_of(x, str(axis))]
    vars_ = [names.loop() for _ in x.axes]
    kept = [v for i, v in enumerate(vars_) if i not in reduced]
    kept_sizes = [s for i, s in enumerate(x.shape) if i not in reduced]
    red_vars = [vars_[i] for i in reduced]
    red_sizes = [x.shape[i] for i in reduced]
    count = 1
    for s in red_sizes:
        count *= s
    acc = names.scalar()
    load = Load(x, tuple(IVar(v) for v in vars_))
    if kind == "max":
        first = Load(x, tuple(IConst(0) if i in reduced else IVar(v) for i, v in enumerate(vars_)))
        update: Stmt = Let(acc, Select(Cmp(">", load, Var(acc)), load, Var(acc)))
        init: Stmt = Let(acc, first)
    else:
        init = Let(acc, ZERO)
        update = Let(acc, Bin("+", Var(acc), load))
    inner = nest(red_sizes, red_vars, (update,))
    result: Expr = Var(acc)
    if kind == "mean":
        result = Bin("/", result, c(count))
    body = (init, *inner, Store(out, tuple(IVar(v) for v in kept), result))
    return nest(kept_sizes, kept, body)


# ---------------------------------------------------------------- contractions


LANES = 8  # output columns per tile of a blocked dot
# Tiled contraction forms; off, every dot is row-wise (a test compares the bits).
TILES = True

# The packed form: a [4, 2 vectors] register tile of 64-byte vectors (16 f32 or 8 f64
# lanes, one AVX-512 register), reading b from a KC × width panel copied into scratch.
VECTOR_BYTES = 64
PACK_ROWS = 4
PACK_VECTORS = 2
PANEL_BYTES = 32 * 1024  # the packed panel stays in L1 while every row block reads it
SUMS_BYTES = 16 * 1024  # bf16's running sums between blocks of K, a chunk of rows
ELEMENT_BYTES = {"f64": 8, "f32": 4}


def _dot(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    a, b = step.operands
    assert isinstance(a, Buffer) and isinstance(b, Buffer)
    out = launch.output
    # A batched product (activations [B, T, D] times a matrix) is one plain product over
    # B·T rows: both are row-major, so the same buffers read as matrices.
    flat_a, flat_out = _as_matrix(a), _as_matrix(out)
    packed = _packed_shape(flat_a, b, flat_out) if names.tiles else None
    if packed is not None:
        scratch = 1 + max(buf.index for buf in (*launch.inputs, out, *launch.outputs))
        return _dot_packed(flat_a, b, flat_out, names, scratch, packed)
    if names.tiles and out.dtype in ("f64", "f32") and len(b.axes) == 2 and b.shape[1] % LANES == 0:
        if len(a.axes) == 2 and a.shape[0] % 4 == 0 and b.shape[1] % (2 * LANES) == 0:
            return _dot_block(a, b, out, names, rows=4, vectors=2)
        return _dot_tiled(a, b, out, names)
    lead = [names.loop() for _ in a.axes[:-1]]
    k = names.loop()
    rest = [names.loop() for _ in b.axes[1:]]
    lead_sizes, rest_sizes = list(a.shape[:-1]), list(b.shape[1:])
    out_index = tuple(IVar(v) for v in lead + rest)
    if arith_accumulates_in_output(out):
        s0 = names.scalar()
        zero = nest(rest_sizes, rest, (Store(out, out_index, ZERO),))
        add = Store(
            out,
            out_index,
            Bin(
                "+",
                Load(out, out_index),
                Bin("*", Var(s0), Load(b, (IVar(k), *(IVar(v) for v in rest)))),
            ),
        )
        row = For(
            k,
            a.shape[-1],
            (
                Let(s0, Load(a, (*(IVar(v) for v in lead), IVar(k)))),
                *nest(rest_sizes, rest, (add,)),
            ),
        )
        return nest(lead_sizes, lead, (*zero, row))
    acc = names.scalar()
    term = Bin(
        "*",
        Load(a, (*(IVar(v) for v in lead), IVar(k))),
        Load(b, (IVar(k), *(IVar(v) for v in rest))),
    )
    body = (
        Let(acc, ZERO),
        For(k, a.shape[-1], (Let(acc, Bin("+", Var(acc), term)),)),
        Store(out, out_index, Var(acc)),
    )
    return nest(lead_sizes + rest_sizes, lead + rest, body)


def _dot_tiled(a: Buffer, b: Buffer, out: Buffer, names: Names) -> tuple[Stmt, ...]:
    """The [1, 8] tile: eight output columns in one vector accumulator across all of K.

    Each lane is one output column, summing its terms in increasing k from 0,
    exactly as the row-wise form does: the bits are the same.
    """
    lead = [names.loop() for _ in a.axes[:-1]]
    k, jb = names.loop(), names.loop()
    s0 = names.scalar()
    acc = "v0"
    column = IBin("*", IVar(jb), IConst(LANES))
    lead_index = tuple(IVar(v) for v in lead)
    term = ir.VBin("*", ir.Splat(Var(s0), LANES), ir.VLoad(b, (IVar(k), column), LANES))
    body = (
        ir.VLet(acc, ir.Splat(ZERO, LANES), LANES),
        For(
            k,
            a.shape[-1],
            (
                Let(s0, Load(a, (*lead_index, IVar(k)))),
                ir.VLet(acc, ir.VBin("+", ir.VVar(acc, LANES), term), LANES),
            ),
        ),
        ir.VStore(out, (*lead_index, column), ir.VVar(acc, LANES)),
    )
    return nest(list(a.shape[:-1]), lead, (For(jb, b.shape[1] // LANES, body),))


def _dot_block(
    a: Buffer, b: Buffer, out: Buffer, names: Names, rows: int, vectors: int
) -> tuple[Stmt, ...]:
    """A [rows, 8·vectors] tile of a plain matrix product: rows × vectors accumulators.

    Every accumulator lane is one output element summing its terms in
    increasing k from 0, so the tile computes the row-wise form's bits while
    each load of b serves `rows` rows and each load of a serves 8·vectors columns.
    """
    ib, jb, k = names.loop(), names.loop(), names.loop()
    width = LANES * vectors
    row = [IBin("+", IBin("*", IVar(ib), IConst(rows)), IConst(r)) for r in range(rows)]
    col = [IBin("+", IBin("*", IVar(jb), IConst(width)), IConst(c * LANES)) for c in range(vectors)]
    acc = [[f"v{r * vectors + c}" for c in range(vectors)] for r in range(rows)]
    b_vectors = [ir.VLoad(b, (IVar(k), col[c]), LANES) for c in range(vectors)]
    inner = _tile_step(names, acc, [Load(a, (row[r], IVar(k))) for r in range(rows)], b_vectors)
    zero: list[Stmt] = [
        ir.VLet(acc[r][c], ir.Splat(ZERO, LANES), LANES)
        for r in range(rows)
        for c in range(vectors)
    ]
    stores: list[Stmt] = [
        ir.VStore(out, (row[r], col[c]), ir.VVar(acc[r][c], LANES))
        for r in range(rows)
        for c in range(vectors)
    ]
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


def _as_matrix(buffer: Buffer) -> Buffer:
    """A buffer of two or more axes viewed as [rows, last axis] (the same row-major data)."""
    if len(buffer.axes) <= 2:
        return buffer
    rows = 1
    for size in buffer.shape[:-1]:
        rows *= size
    return Buffer(buffer.index, buffer.dtype, ((None, rows), buffer.axes[-1]))


def _packed_shape(a: Buffer, b: Buffer, out: Buffer) -> Packing | None:
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
    lanes = VECTOR_BYTES // size
    width = lanes * PACK_VECTORS
    (m, k), n = a.shape, b.shape[1]
    if m % PACK_ROWS or n % width:
        return None
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


def _dot_packed(
    a: Buffer, b: Buffer, out: Buffer, names: Names, scratch: int, packing: Packing
) -> tuple[Stmt, ...]:
    """A [4, 2·lanes] register tile reading b from a packed panel, K in blocks of `kc`.

    For each column panel (the outer, split loop), each block of K is copied
    into a `kc` × width scratch panel (bf16 widened to f32, exactly):
    consecutive in memory, where b's own rows lie a whole row apart (4 KiB at
    N = 1024 in f32, all in one cache set). Every row block then runs its tile
    over the block, its accumulators starting at 0 in the first block and at
    the sums the previous block stored (in the output, or for bf16 in an f32
    scratch): a stored and reloaded f32 or f64 is exact, so each lane still
    adds its terms one at a time in increasing k from 0 and a bf16 result is
    rounded once, at the end: the bits are the row-wise form's.
    """
    lanes, kc, mc = packing.lanes, packing.kc, packing.mc
    rows, vectors = PACK_ROWS, PACK_VECTORS
    width = lanes * vectors
    blocks = a.shape[1] // kc
    carried = out.dtype == "bf16" and blocks > 1  # sums between blocks in scratch
    jb = names.loop()
    mb = names.loop() if a.shape[0] > mc else None
    kb = names.loop() if blocks > 1 else None
    kp, ib, k = names.loop(), names.loop(), names.loop()
    arith = ir.arith(out.dtype)
    panel = Buffer(scratch, arith, ((None, kc), (None, width)))
    sums = Buffer(scratch + 1, arith, ((None, mc), (None, width)))

    def in_k(var: str) -> Index:
        """The position in K of step `var` of the current block."""
        return IVar(var) if kb is None else IBin("+", IBin("*", IVar(kb), IConst(kc)), IVar(var))

    tile_row = [IBin("+", IBin("*", IVar(ib), IConst(rows)), IConst(r)) for r in range(rows)]
    row = [r if mb is None else IBin("+", IBin("*", IVar(mb), IConst(mc)), r) for r in tile_row]
    col = [IBin("+", IBin("*", IVar(jb), IConst(width)), IConst(c * lanes)) for c in range(vectors)]
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
    start, finish = zero, final
    if kb is not None:
        start = (If(Cmp("==", IVar(kb), IConst(0)), zero, reload),)
    if carried and kb is not None:
        finish = (If(Cmp("==", IVar(kb), IConst(blocks - 1)), final, keep),)
    pack = For(
        kp,
        kc,
        tuple(
            ir.VStore(panel, (IVar(kp), IConst(c * lanes)), ir.VLoad(b, (in_k(kp), col[c]), lanes))
            for c in range(vectors)
        ),
    )
    b_vectors = [ir.VLoad(panel, (IVar(k), IConst(c * lanes)), lanes) for c in range(vectors)]
    step = _tile_step(names, acc, [Load(a, (row[r], in_k(k))) for r in range(rows)], b_vectors)
    body: tuple[Stmt, ...] = (pack, For(ib, mc // rows, (*start, For(k, kc, step), *finish)))
    if kb is not None:
        body = (For(kb, blocks, body),)
    if mb is not None:
        body = (For(mb, a.shape[0] // mc, body),)
    if carried:
        body = (ir.Scratch(sums, body),)
    return (For(jb, b.shape[1] // width, (ir.Scratch(panel, body),)),)


def _tile_step(
    names: Names, acc: list[list[str]], a_rows: list[Load], b_vectors: list[ir.VLoad]
) -> tuple[Stmt, ...]:
    """One step in k of a register tile: acc[r][c] += splat(a_rows[r]) * b_vectors[c]."""
    lanes = b_vectors[0].lanes
    loads = [f"w{c}" for c in range(len(b_vectors))]
    step: list[Stmt] = [ir.VLet(w, v, lanes) for w, v in zip(loads, b_vectors, strict=True)]
    for r, a_at in enumerate(a_rows):
        s = names.scalar()
        step.append(Let(s, a_at))
        for c, w in enumerate(loads):
            term = ir.VBin("*", ir.Splat(Var(s), lanes), ir.VVar(w, lanes))
            step.append(ir.VLet(acc[r][c], ir.VBin("+", ir.VVar(acc[r][c], lanes), term), lanes))
    return tuple(step)


def arith_accumulates_in_output(out: Buffer) -> bool:
    """f64 and f32 outputs hold their running sums; bf16 sums in an f32 scalar."""
    return out.dtype in ("f64", "f32")


def _contract(
    names: Names,
    out: Buffer,
    out_names: list[str],
    a: Buffer,
    a_names: list[str],
    b: Buffer,
    b_names: list[str],
) -> tuple[Stmt, ...]:
    """out[out_names] = Σ a[a_names]·b[b_names] over the names not in the output.

    The summed names enumerate row-major in their order in `a`, as the reference's ein.
    """
    sizes: dict[str, int] = {}
    for buf, ns in ((a, a_names), (b, b_names)):
        for n, (_, s) in zip(ns, buf.axes, strict=True):
            sizes[n] = s
    summed = [n for n in a_names if n not in out_names]
    var: dict[str, str] = {n: names.loop() for n in out_names + summed}
    acc = names.scalar()
    term = Bin(
        "*",
        Load(a, tuple(IVar(var[n]) for n in a_names)),
        Load(b, tuple(IVar(var[n]) for n in b_names)),
    )
    inner = nest(
        [sizes[n] for n in summed], [var[n] for n in summed], (Let(acc, Bin("+", Var(acc), term)),)
    )
    body = (Let(acc, ZERO), *inner, Store(out, tuple(IVar(var[n]) for n in out_names), Var(acc)))
    return nest([sizes[n] for n in out_names], [var[n] for n in out_names], body)


def _relabelled(buffer: Buffer, relabel: object) -> list[str]:
    names = [str(n) for n, _ in buffer.axes]
    for old, new in relabel or ():  # type: ignore[attr-defined]
        names = [new if n == old else n for n in names]
    return names


def _ein(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    a, b = step.operands
    assert isinstance(a, Buffer) and isinstance(b, Buffer)
    out_names = [str(n) for n in step.attrs["out"]]  # type: ignore[attr-defined]
    a_names = [str(n) for n, _ in a.axes]
    return _contract(
        names, launch.output, out_names, a, a_names, b, _relabelled(b, step.attrs.get("relabel"))
    )


def _ein_vjp_l(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, b, a = step.operands
    assert isinstance(ct, Buffer) and isinstance(b, Buffer) and isinstance(a, Buffer)
    ct_names = [str(n) for n in step.attrs["out"]]  # type: ignore[attr-defined]
    a_names = [str(n) for n, _ in a.axes]
    return _contract(
        names, launch.output, a_names, ct, ct_names, b, _relabelled(b, step.attrs.get("relabel"))
    )


def _ein_vjp_r(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, a, b = step.operands
    assert isinstance(ct, Buffer) and isinstance(b, Buffer) and isinstance(a, Buffer)
    ct_names = [str(n) for n in step.attrs["out"]]  # type: ignore[attr-defined]
    b_names = _relabelled(b, step.attrs.get("relabel"))
    a_names = [str(n) for n, _ in a.axes]
    return _contract(names, launch.output, b_names, ct, ct_names, a, a_names)


def _dot_vjp_l(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, b = step.operands
    assert isinstance(ct, Buffer) and isinstance(b, Buffer)
    out = launch.output
    lead = [f"l{i}" for i in range(len(out.axes) - 1)]
    rest = [f"r{i}" for i in range(len(b.axes) - 1)]
    return _contract(names, out, [*lead, "k"], ct, [*lead, *rest], b, ["k", *rest])


def _dot_vjp_r(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    a, ct = step.operands
    assert isinstance(ct, Buffer) and isinstance(a, Buffer)
    out = launch.output
    lead = [f"l{i}" for i in range(len(a.axes) - 1)]
    rest = [f"r{i}" for i in range(len(out.axes) - 1)]
    return _contract(names, out, ["k", *rest], a, [*lead, "k"], ct, [*lead, *rest])


# ---------------------------------------------------------------- row-wise primitives


def _rows(x: Buffer, axis: str | None, names: Names) -> tuple[list[str], list[int], str, int, int]:
    """Loop variables over every axis but `axis`, the row axis's variable and position."""
    position = len(x.axes) - 1 if axis is None else axis_of(x, axis)
    vars_ = [names.loop() for _ in x.axes]
    outer = [v for i, v in enumerate(vars_) if i != position]
    sizes = [s for i, s in enumerate(x.shape) if i != position]
    return outer, sizes, vars_[position], position, x.shape[position]


def _at(x: Buffer, outer: list[str], position: int, j: Index) -> tuple[Index, ...]:
    idx: list[Index] = [IVar(v) for v in outer]
    idx.insert(position, j)
    return tuple(idx)


def _softmax(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    x = step.operands[0]
    assert isinstance(x, Buffer)
    mask = step.operands[1] if len(step.operands) > 1 else None
    out = launch.output
    outer, sizes, j, pos, n = _rows(x, str(step.attrs["axis"]), names)
    m, s, e = names.scalar(), names.scalar(), names.scalar()
    at = _at(x, outer, pos, IVar(j))
    allowed: Cmp | None = None
    if isinstance(mask, Buffer):
        vars_all = list(outer)
        vars_all.insert(pos, j)
        allowed = Cmp("!=", load_aligned(mask, x.axes, vars_all), IConst(0))
    log = step.name == "log_softmax"
    if allowed is None:
        body: tuple[Stmt, ...] = (
            Let(m, Load(x, _at(x, outer, pos, IConst(0)))),
            For(j, n, (Let(m, Select(Cmp(">", Load(x, at), Var(m)), Load(x, at), Var(m))),)),
            Let(s, ZERO),
            For(j, n, (Let(s, Bin("+", Var(s), Fn("exp", Bin("-", Load(x, at), Var(m))))),)),
        )
        if log:
            value: Expr = Bin("-", Bin("-", Load(x, at), Var(m)), Fn("log", Var(s)))
        else:
            value = Bin("/", Fn("exp", Bin("-", Load(x, at), Var(m))), Var(s))
        body += (For(j, n, (Store(out, at, value),)),)
        return nest(sizes, outer, body)
    # The maximum starts at the first allowed position; refused positions give 0.
    seen = names.scalar()
    body = (
        Let(seen, ZERO),
        Let(m, ZERO),
        For(
            j,
            n,
            (
                If(
                    allowed,
                    (
                        Let(
                            m,
                            Select(
                                Cmp("==", Var(seen), ZERO),
                                Load(x, at),
                                Select(Cmp(">", Load(x, at), Var(m)), Load(x, at), Var(m)),
                            ),
                        ),
                        Let(seen, ONE),
                    ),
                ),
            ),
        ),
        Let(s, ZERO),
        For(
            j,
            n,
            (If(allowed, (Let(s, Bin("+", Var(s), Fn("exp", Bin("-", Load(x, at), Var(m))))),)),),
        ),
        For(
            j,
            n,
            (
                If(
                    allowed,
                    (
                        Let(e, Fn("exp", Bin("-", Load(x, at), Var(m)))),
                        Store(out, at, Bin("/", Var(e), Var(s))),
                    ),
                    (Store(out, at, ZERO),),
                ),
            ),
        ),
    )
    return nest(sizes, outer, body)


def _softmax_vjp(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, y = step.operands
    assert isinstance(ct, Buffer) and isinstance(y, Buffer)
    out = launch.output
    outer, sizes, j, pos, n = _rows(y, str(step.attrs["axis"]), names)
    s = names.scalar()
    at = _at(y, outer, pos, IVar(j))
    if step.name == "softmax_vjp":
        body: tuple[Stmt, ...] = (
            Let(s, ZERO),
            For(j, n, (Let(s, Bin("+", Var(s), Bin("*", Load(ct, at), Load(y, at)))),)),
            For(j, n, (Store(out, at, Bin("*", Load(y, at), Bin("-", Load(ct, at), Var(s)))),)),
        )
    else:
        body = (
            Let(s, ZERO),
            For(j, n, (Let(s, Bin("+", Var(s), Load(ct, at))),)),
            For(
                j,
                n,
                (Store(out, at, Bin("-", Load(ct, at), Bin("*", Fn("exp", Load(y, at)), Var(s)))),),
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
        For(j, n, (Let(m, Select(Cmp(">", Load(logits, at), Var(m)), Load(logits, at), Var(m))),)),
        Let(s, ZERO),
        For(j, n, (Let(s, Bin("+", Var(s), Fn("exp", Bin("-", Load(logits, at), Var(m))))),)),
    )


def _cross_entropy(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    logits, targets = step.operands
    assert isinstance(logits, Buffer) and isinstance(targets, Buffer)
    outer, sizes, j, pos, n = _rows(logits, None, names)
    m, s, tid = names.scalar(), names.scalar(), names.scalar()
    row = tuple(IVar(v) for v in outer)
    xt = Load(logits, _at(logits, outer, pos, IVar(tid)))
    loss = Bin("-", Fn("log", Var(s)), Bin("-", xt, Var(m)))
    body = (
        *_row_stats(logits, outer, pos, j, n, m, s),
        Let(tid, Load(targets, row), integer=True),
        Store(launch.output, row, loss),
    )
    return nest(sizes, outer, body)


def _cross_entropy_vjp(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """ct · (softmax(logits) − one_hot(targets)), row by row."""
    ct, logits, targets = step.operands
    assert isinstance(ct, Buffer) and isinstance(logits, Buffer) and isinstance(targets, Buffer)
    outer, sizes, j, pos, n = _rows(logits, None, names)
    m, s = names.scalar(), names.scalar()
    at = _at(logits, outer, pos, IVar(j))
    row = tuple(IVar(v) for v in outer)
    q = Bin("/", Fn("exp", Bin("-", Load(logits, at), Var(m))), Var(s))
    value = Bin(
        "*", Load(ct, row), Select(Cmp("==", IVar(j), Load(targets, row)), Bin("-", q, ONE), q)
    )
    body = (
        *_row_stats(logits, outer, pos, j, n, m, s),
        For(j, n, (Store(launch.output, at, value),)),
    )
    return nest(sizes, outer, body)


def _argmax(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
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
                    Cmp(">=", Load(x, at), Var(m)),
                    (Let(best, IVar(j), integer=True), Let(m, Load(x, at))),
                ),
            ),
        ),
        Store(launch.output, tuple(IVar(v) for v in outer), IVar(best)),
    )
    return nest(sizes, outer, body)


def _sample(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    key, logits = step.operands
    assert isinstance(key, Buffer) and isinstance(logits, Buffer)
    outer, sizes, j, pos, n = _rows(logits, None, names)
    m, s, u, acc, choice, done = (names.scalar() for _ in range(6))
    at = _at(logits, outer, pos, IVar(j))
    p = Bin("/", Fn("exp", Bin("-", Load(logits, at), Var(m))), Var(s))
    row = flat(outer, sizes) if outer else IConst(0)
    body = (
        Let(m, Load(logits, _at(logits, outer, pos, IConst(0)))),
        For(j, n, (Let(m, Select(Cmp(">", Load(logits, at), Var(m)), Load(logits, at), Var(m))),)),
        Let(s, ZERO),
        For(j, n, (Let(s, Bin("+", Var(s), Fn("exp", Bin("-", Load(logits, at), Var(m))))),)),
        Random(u, key, row),
        Let(acc, ZERO),
        Let(choice, IConst(n - 1), integer=True),
        Let(done, ZERO),
        For(
            j,
            n,
            (
                Let(acc, Bin("+", Var(acc), p)),
                If(
                    Cmp("==", Var(done), ZERO),
                    (
                        If(
                            Cmp("<", Var(u), Var(acc)),
                            (Let(choice, IVar(j), integer=True), Let(done, ONE)),
                        ),
                    ),
                ),
            ),
        ),
        Store(launch.output, tuple(IVar(v) for v in outer), IVar(choice)),
    )
    return nest(sizes, outer, body)


def _dropout(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    key, p, x = step.operands
    assert isinstance(key, Buffer) and isinstance(x, Buffer)
    rate = Const(Fraction(p)) if not isinstance(p, Buffer) else Load(p, ())
    out = launch.output
    vars_ = [names.loop() for _ in x.axes]
    u = names.scalar()
    at = tuple(IVar(v) for v in vars_)
    keep = Bin("/", Load(x, at), Bin("-", ONE, rate))
    body = (
        Random(u, key, flat(vars_, list(x.shape)) if vars_ else IConst(0)),
        Store(out, at, Select(Cmp(">=", Var(u), rate), keep, ZERO)),
    )
    return nest(list(x.shape), vars_, body)


# ---------------------------------------------------------------- gathers, masks, layouts


def _embed(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
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


def _embed_vjp(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
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
        Bin("+", Load(out, target), Load(ct, tuple(IVar(v) for v in id_vars + row_vars))),
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


def _one_hot(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    (ids,) = step.operands
    assert isinstance(ids, Buffer)
    out = launch.output
    vars_ = [names.loop() for _ in out.axes]
    value = Select(
        Cmp("==", IVar(vars_[-1]), Load(ids, tuple(IVar(v) for v in vars_[:-1]))), ONE, ZERO
    )
    return nest(list(out.shape), vars_, (Store(out, tuple(IVar(v) for v in vars_), value),))


def _causal_mask(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    out = launch.output
    i, j = names.loop(), names.loop()
    value = Select(Cmp("<=", IVar(j), IVar(i)), ONE, ZERO)
    return nest(list(out.shape), [i, j], (Store(out, (IVar(i), IVar(j)), value),))


def _positions(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    out = launch.output
    i = names.loop()
    return (For(i, out.shape[0], (Store(out, (IVar(i),), IVar(i)),)),)


def _copy(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """A layout change: out[i…] = x[f(i…)] where f maps the output's index to the input's."""
    x = step.operands[0]
    assert isinstance(x, Buffer)
    out = launch.output
    vars_ = [names.loop() for _ in out.axes]
    name = step.name if step.name != "shape_vjp" else f"{step.attrs['op']}_inverse"
    source = _layout(name, x, out, vars_)
    return nest(
        list(out.shape), vars_, (Store(out, tuple(IVar(v) for v in vars_), Load(x, source)),)
    )


def _layout(name: str, x: Buffer, out: Buffer, vars_: list[str]) -> tuple[Index, ...]:
    """The input index of output index `vars_` for each layout change."""
    if name in ("merge", "split", "merge_inverse", "split_inverse"):
        # Same row-major data, other axes: unflatten the output's linear index.
        linear = flat(vars_, list(out.shape))
        return _unflatten(linear, list(x.shape))
    if name in ("split_heads", "merge_heads_inverse"):
        # out[.., h, t, d] = x[.., t, h·hd + d]
        *lead, h, t, d = vars_
        hd = out.shape[-1]
        return (
            *(IVar(v) for v in lead),
            IVar(t),
            IBin("+", IBin("*", IVar(h), IConst(hd)), IVar(d)),
        )
    if name in ("merge_heads", "split_heads_inverse"):
        # out[.., t, h·hd + d] = x[.., h, t, d]
        *lead, t, e = vars_
        hd = x.shape[-1]
        return (
            *(IVar(v) for v in lead),
            IBin("/", IVar(e), IConst(hd)),
            IVar(t),
            IBin("%", IVar(e), IConst(hd)),
        )
    raise LoweringError(f"no layout rule for `{name}`")


def _unflatten(linear: Index, sizes: list[int]) -> tuple[Index, ...]:
    out: list[Index] = []
    stride = 1
    for size in reversed(sizes):
        out.insert(
            0,
            IBin("%", IBin("/", linear, IConst(stride)), IConst(size))
            if stride > 1
            else IBin("%", linear, IConst(size)),
        )
        stride *= size
    return tuple(out)


def _sum_to(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, like = step.operands
    assert isinstance(ct, Buffer) and isinstance(like, Buffer)
    out = launch.output
    positions = align_positions(like.axes, ct.axes)
    vars_ = [names.loop() for _ in ct.axes]
    kept = [vars_[p] for p in positions]
    summed = [v for i, v in enumerate(vars_) if i not in positions]
    summed_sizes = [ct.shape[i] for i in range(len(vars_)) if i not in positions]
    acc = names.scalar()
    inner = nest(
        summed_sizes,
        summed,
        (Let(acc, Bin("+", Var(acc), Load(ct, tuple(IVar(v) for v in vars_)))),),
    )
    body = (Let(acc, ZERO), *inner, Store(out, tuple(IVar(v) for v in kept), Var(acc)))
    return nest(list(out.shape), kept, body)


def _reduce_vjp(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, a = step.operands[:2]
    assert isinstance(ct, Buffer) and isinstance(a, Buffer)
    out = launch.output
    kind = step.attrs["kind"]
    axis = step.attrs.get("axis")
    reduced = list(range(len(a.axes))) if axis is None else [axis_of(a, str(axis))]
    vars_ = [names.loop() for _ in a.axes]
    ct_index = tuple(IVar(v) for i, v in enumerate(vars_) if i not in reduced)
    count = 1
    for i in reduced:
        count *= a.shape[i]
    g = Load(ct, ct_index)
    if kind == "sum":
        return nest(list(a.shape), vars_, (Store(out, tuple(IVar(v) for v in vars_), g),))
    if kind == "mean":
        return nest(
            list(a.shape),
            vars_,
            (Store(out, tuple(IVar(v) for v in vars_), Bin("/", g, c(count))),),
        )
    # max: the cotangent goes to the first maximal element of each group.
    y = step.operands[2]
    assert isinstance(y, Buffer)
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
                Cmp("==", Var(taken), ZERO),
                (
                    If(
                        Cmp("==", Load(a, at), Load(y, ct_index)),
                        (Store(out, at, g), Let(taken, ONE)),
                        (Store(out, at, ZERO),),
                    ),
                ),
                (Store(out, at, ZERO),),
            ),
        ),
    )
    return nest(kept_sizes, kept, (Let(taken, ZERO), *inner))


def _fill(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    out = launch.output
    vars_ = [names.loop() for _ in out.axes]
    return nest(list(out.shape), vars_, (Store(out, tuple(IVar(v) for v in vars_), ZERO),))


NONELEMENTWISE: dict[str, Callable[[Step, Launch, Names], tuple[Stmt, ...]]] = {
    "sum": _reduce,
    "mean": _reduce,
    "max": _reduce,
    "dot": _dot,
    "ein": _ein,
    "dot_vjp_l": _dot_vjp_l,
    "dot_vjp_r": _dot_vjp_r,
    "ein_vjp_l": _ein_vjp_l,
    "ein_vjp_r": _ein_vjp_r,
    "softmax": _softmax,
    "log_softmax": _softmax,
    "softmax_vjp": _softmax_vjp,
    "log_softmax_vjp": _softmax_vjp,
    "cross_entropy": _cross_entropy,
    "cross_entropy_vjp": _cross_entropy_vjp,
    "argmax": _argmax,
    "sample": _sample,
    "dropout": _dropout,
    "embed": _embed,
    "embed_vjp": _embed_vjp,
    "one_hot": _one_hot,
    "causal_mask": _causal_mask,
    "positions": _positions,
    "merge": _copy,
    "split": _copy,
    "split_heads": _copy,
    "merge_heads": _copy,
    "shape_vjp": _copy,
    "sum_to": _sum_to,
    "reduce_vjp": _reduce_vjp,
    "zeros_like": _fill,
}
