"""Contractions: dot, ein and their adjoints, in the row-wise form or a tiled one.

The row-wise form zeroes an output row, then adds a[i, k]·b[k, j] for k
increasing (f64 and f32 outputs hold the running sums; bf16 sums in an f32
scalar and is rounded once). `ein` and the adjoints are one contraction
rule: out[names] = Σ a·b over the names not in the output, which run
row-major in their order in the left operand, as the reference's ein.
With `Names.tiles`, a plain matrix product takes a tiled form of the same
bits (tiles.py), and so do the two adjoints of a product and an ein that is
a batched matrix product (adjoint_tiles.py).
"""

from __future__ import annotations

from presk.kernel.ir import (
    Bin,
    BinOp,
    Buffer,
    For,
    IVar,
    Let,
    Load,
    Stmt,
    Store,
    Var,
)
from presk.kernel.lower.adjoint_tiles import (
    ein_product,
    packed_product,
    vjp_l_product,
    vjp_r_product,
)
from presk.kernel.lower.base import ZERO, Launch, Names, Step, nest
from presk.kernel.lower.epilogue import finish, row_tail
from presk.kernel.lower.tiles import (
    as_matrix,
    column_lanes,
    dot_block,
    dot_packed,
    dot_tiled,
    packed_shape,
)


def dot(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    a, b = step.operands
    assert isinstance(a, Buffer) and isinstance(b, Buffer)
    out = launch.output
    # A batched product (activations [B, T, D] times a matrix) is one plain product over
    # B·T rows: both are row-major, so the same buffers read as matrices.
    flat_a, flat_out = as_matrix(a), as_matrix(out)
    packed = packed_shape(flat_a, b, flat_out, names.workers) if names.tiles else None
    if packed is not None:
        return dot_packed(flat_a, b, flat_out, names, _scratch(launch), packed)
    lanes = column_lanes(out.dtype) if out.dtype in ("f64", "f32") else 0
    if names.tiles and lanes and len(b.axes) == 2 and b.shape[1] % lanes == 0:
        if len(a.axes) == 2 and a.shape[0] % 4 == 0 and b.shape[1] % (2 * lanes) == 0:
            return dot_block(a, b, out, names, rows=4, vectors=2)
        return dot_tiled(a, b, out, names)
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
                BinOp.ADD,
                Load(out, out_index),
                Bin(BinOp.MUL, Var(s0), Load(b, (IVar(k), *(IVar(v) for v in rest)))),
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
        tail = row_tail(names, out, out_index)
        return nest(lead_sizes, lead, (*zero, row, *(nest(rest_sizes, rest, tail) if tail else ())))
    acc = names.scalar()
    term = Bin(
        BinOp.MUL,
        Load(a, (*(IVar(v) for v in lead), IVar(k))),
        Load(b, (IVar(k), *(IVar(v) for v in rest))),
    )
    body = (
        Let(acc, ZERO),
        For(k, a.shape[-1], (Let(acc, Bin(BinOp.ADD, Var(acc), term)),)),
        *finish(names, (Store(out, out_index, Var(acc)),)),
    )
    return nest(lead_sizes + rest_sizes, lead + rest, body)


def _scratch(launch: Launch) -> int:
    """The index of a kernel's first scratch buffer: after all of its own."""
    return 1 + max(buf.index for buf in (*launch.inputs, launch.output, *launch.outputs))


def _one_type(*buffers: Buffer) -> bool:
    return len({buf.dtype for buf in buffers}) == 1


def arith_accumulates_in_output(out: Buffer) -> bool:
    """f64 and f32 outputs hold their running sums; bf16 sums in an f32 scalar."""
    return out.dtype in ("f64", "f32")


def contract(
    names: Names,
    out: Buffer,
    out_names: list[str],
    a: Buffer,
    a_names: list[str],
    b: Buffer,
    b_names: list[str],
    scratch: int | None = None,
) -> tuple[Stmt, ...]:
    """out[out_names] = Σ a[a_names]·b[b_names] over the names not in the output.

    The summed names enumerate row-major in their order in `a`, as the reference's ein.
    Given a `scratch` index and `Names.tiles`, a batched matrix product takes the
    packed form (adjoint_tiles.py), with the same bits.
    """
    if scratch is not None and names.tiles and _one_type(out, a, b):
        product = ein_product(names, out, out_names, a, a_names, b, b_names)
        packed = None if product is None else packed_product(product, names, scratch)
        if packed is not None:
            return packed
    sizes: dict[str, int] = {}
    for buf, ns in ((a, a_names), (b, b_names)):
        for n, (_, s) in zip(ns, buf.axes, strict=True):
            sizes[n] = s
    summed = [n for n in a_names if n not in out_names]
    var: dict[str, str] = {n: names.loop() for n in out_names + summed}
    acc = names.scalar()
    term = Bin(
        BinOp.MUL,
        Load(a, tuple(IVar(var[n]) for n in a_names)),
        Load(b, tuple(IVar(var[n]) for n in b_names)),
    )
    inner = nest(
        [sizes[n] for n in summed],
        [var[n] for n in summed],
        (Let(acc, Bin(BinOp.ADD, Var(acc), term)),),
    )
    at = tuple(IVar(var[n]) for n in out_names)
    body = (Let(acc, ZERO), *inner, *finish(names, (Store(out, at, Var(acc)),)))
    return nest([sizes[n] for n in out_names], [var[n] for n in out_names], body)


def relabelled(buffer: Buffer, relabel: object) -> list[str]:
    """An operand's axis names after an `ein`'s relabelling (its `relabel` attribute)."""
    names = [str(n) for n, _ in buffer.axes]
    for old, new in relabel or ():  # type: ignore[attr-defined]
        names = [new if n == old else n for n in names]
    return names


def ein(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    a, b = step.operands
    assert isinstance(a, Buffer) and isinstance(b, Buffer)
    out_names = [str(n) for n in step.attrs["out"]]  # type: ignore[attr-defined]
    a_names = [str(n) for n, _ in a.axes]
    b_names = relabelled(b, step.attrs.get("relabel"))
    return contract(names, launch.output, out_names, a, a_names, b, b_names, _scratch(launch))


def ein_vjp_l(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, b, a = step.operands
    assert isinstance(ct, Buffer) and isinstance(b, Buffer) and isinstance(a, Buffer)
    ct_names = [str(n) for n in step.attrs["out"]]  # type: ignore[attr-defined]
    a_names = [str(n) for n, _ in a.axes]
    b_names = relabelled(b, step.attrs.get("relabel"))
    return contract(names, launch.output, a_names, ct, ct_names, b, b_names, _scratch(launch))


def ein_vjp_r(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, a, b = step.operands
    assert isinstance(ct, Buffer) and isinstance(b, Buffer) and isinstance(a, Buffer)
    ct_names = [str(n) for n in step.attrs["out"]]  # type: ignore[attr-defined]
    b_names = relabelled(b, step.attrs.get("relabel"))
    a_names = [str(n) for n, _ in a.axes]
    return contract(names, launch.output, b_names, ct, ct_names, a, a_names, _scratch(launch))


def dot_vjp_l(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    ct, b = step.operands
    assert isinstance(ct, Buffer) and isinstance(b, Buffer)
    out = launch.output
    if names.tiles and _one_type(ct, b, out):
        packed = packed_product(vjp_l_product(ct, b, out), names, _scratch(launch))
        if packed is not None:
            return packed
    lead = [f"l{i}" for i in range(len(out.axes) - 1)]
    rest = [f"r{i}" for i in range(len(b.axes) - 1)]
    return contract(names, out, [*lead, "k"], ct, [*lead, *rest], b, ["k", *rest])


def dot_vjp_r(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    a, ct = step.operands
    assert isinstance(ct, Buffer) and isinstance(a, Buffer)
    out = launch.output
    if names.tiles and _one_type(a, ct, out):
        packed = packed_product(vjp_r_product(a, ct, out), names, _scratch(launch))
        if packed is not None:
            return packed
    lead = [f"l{i}" for i in range(len(a.axes) - 1)]
    rest = [f"r{i}" for i in range(len(out.axes) - 1)]
    return contract(names, out, ["k", *rest], a, [*lead, "k"], ct, [*lead, *rest])
