"""Contractions: `dot` (over the last axis of one operand and the first of the other) and `ein`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from presk.interp.broadcast import expand
from presk.interp.elementary import _ADD, _MUL, _need
from presk.interp.tensor import Arr, Axis, Kind, PrimError, Tensor, format_axes, obj_array


def dot(a: Tensor, b: Tensor) -> Tensor:
    """Contract a's last axis with b's first: result axes a[:-1] + b[1:].

    Each output element is acc = a[..,0]*b[0,..]; acc = acc + a[..,k]*b[k,..] for k
    increasing; every product and every addition rounded.
    """
    _need(a, Kind.REAL, "dot")
    _need(b, Kind.REAL, "dot")
    if a.rank == 0 or b.rank == 0:
        raise PrimError("dot needs an axis on each side")
    k_size = a.shape[-1]
    if b.shape[0] != k_size:
        raise PrimError(
            f"dot contracts {a.axes[-1]} with {b.axes[0]}: sizes differ "
            f"({format_axes(a.axes)} · {format_axes(b.axes)})"
        )
    axes = a.axes[:-1] + b.axes[1:]
    if k_size == 0:
        return Tensor.zeros(axes)
    acc: Arr | None = None
    for k in range(k_size):
        term = obj_array(_MUL.outer(a.data[..., k], b.data[k, ...]))
        acc = term if acc is None else obj_array(_ADD(acc, term))
    assert acc is not None
    return Tensor(Kind.REAL, axes, acc)


def ein(out: Sequence[str], a: Tensor, b: Tensor) -> Tensor:
    """General contraction `ein[out](a * b)`.

    Every axis of a and b is named (names distinct within each operand). The axes named
    in `out` form the result in that order; a name in both operands must have equal sizes
    there and is broadcast. Every other axis must occur in both operands and is summed:
    the summed axes enumerate row-major in their order in `a`, each term a[..]*b[..]
    rounded and the terms added sequentially as in `dot`.
    """
    _need(a, Kind.REAL, "ein")
    _need(b, Kind.REAL, "ein")
    outs = tuple(out)
    if len(set(outs)) != len(outs):
        raise PrimError(f"ein: repeated output axis in [{', '.join(outs)}]")
    sizes: dict[str, int] = {}
    for side, t in (("left", a), ("right", b)):
        names = t.names
        if any(n is None for n in names):
            raise PrimError(f"ein: every axis of the {side} operand must be named")
        if len(set(names)) != len(names):
            raise PrimError(f"ein: repeated axis name in the {side} operand")
        for ax in t.axes:
            assert ax.name is not None
            if sizes.setdefault(ax.name, ax.size) != ax.size:
                raise PrimError(
                    f"ein: axis {ax.name!r} has size {sizes[ax.name]} and size {ax.size}"
                )
    for n in outs:
        if n not in sizes:
            raise PrimError(f"ein: output axis {n!r} is in neither operand")
    a_names = [n for n in a.names if n is not None]
    b_names = [n for n in b.names if n is not None]
    summed = [n for n in a_names if n not in outs]
    for n in summed:
        if n not in b_names:
            raise PrimError(f"ein: axis {n!r} is in the left operand only and not in the output")
    for n in b_names:
        if n not in outs and n not in a_names:
            raise PrimError(f"ein: axis {n!r} is in the right operand only and not in the output")
    full = outs + tuple(summed)
    full_shape = tuple(sizes[n] for n in full)
    big_a = expand(a.data, [full.index(n) for n in a_names], full_shape)
    big_b = expand(b.data, [full.index(n) for n in b_names], full_shape)
    axes = tuple(Axis(n, sizes[n]) for n in outs)
    if not summed:
        return Tensor(Kind.REAL, axes, obj_array(_MUL(big_a, big_b)))
    acc: Arr | None = None
    for idx in np.ndindex(*full_shape[len(outs) :]):
        sel = (Ellipsis, *idx)
        term = obj_array(_MUL(big_a[sel], big_b[sel]))
        acc = term if acc is None else obj_array(_ADD(acc, term))
    if acc is None:  # a summed axis of size 0: the empty sum
        return Tensor.zeros(axes)
    return Tensor(Kind.REAL, axes, acc)
