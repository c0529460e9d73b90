"""Shape operations: `merge`, `split`, `split_heads`, `merge_heads`, `permute`, `transpose`,
`rename_axis`, `sum_to`, `broadcast_like`. They move elements and never compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from presk.interp.broadcast import align, expand
from presk.interp.elementary import _need
from presk.interp.reductions import _sum_first, axis_index
from presk.interp.tensor import Arr, Axis, Kind, PrimError, Tensor, format_axes


def _reshaped(x: Tensor, axes: tuple[Axis, ...], data: Arr) -> Tensor:
    """x's kind and bound with new axes and data (a contiguous copy of data)."""
    return Tensor(x.kind, axes, np.array(data, dtype=object), x.bound)


def merge(x: Tensor, a: str | int, b: str | int) -> Tensor:
    """Join adjacent axes a then b into one unnamed axis of size |a|*|b| (row-major)."""
    i, j = axis_index(x, a), axis_index(x, b)
    if j != i + 1:
        raise PrimError(f"merge: {x.axes[i]} and {x.axes[j]} are not adjacent in that order")
    size = x.shape[i] * x.shape[j]
    axes = (*x.axes[:i], Axis(None, size), *x.axes[j + 1 :])
    return _reshaped(x, axes, x.data.reshape(tuple(ax.size for ax in axes)))


def split(x: Tensor, axis: str | int, parts: Sequence[Axis]) -> Tensor:
    """Split one axis into `parts` (row-major); their sizes must multiply to its size."""
    i = axis_index(x, axis)
    parts_t = tuple(parts)
    if math.prod(ax.size for ax in parts_t) != x.shape[i]:
        raise PrimError(f"split: {format_axes(parts_t)} does not multiply to {x.axes[i]}")
    axes = x.axes[:i] + parts_t + x.axes[i + 1 :]
    return _reshaped(x, axes, x.data.reshape(tuple(ax.size for ax in axes)))


def split_heads(x: Tensor, heads_name: str, heads: int) -> Tensor:
    """(..., seq, D) -> (..., heads_name: H, seq, hd: D/H) with
    out[.., h, t, d] = x[.., t, h*(D/H) + d]."""
    if x.rank < 2:
        raise PrimError(f"split_heads needs (..., seq, D), got {format_axes(x.axes)}")
    d_size = x.shape[-1]
    if heads <= 0 or d_size % heads:
        raise PrimError(f"split_heads: {x.axes[-1]} does not divide into {heads} heads")
    k = d_size // heads
    data = np.swapaxes(x.data.reshape((*x.shape[:-1], heads, k)), -2, -3)
    axes = (*x.axes[:-2], Axis(heads_name, heads), x.axes[-2], Axis("hd", k))
    return _reshaped(x, axes, data)


def merge_heads(x: Tensor) -> Tensor:
    """(..., heads: H, seq: T, hd: K) -> (..., seq: T, H*K): the inverse of split_heads
    (the merged axis is unnamed)."""
    if x.rank < 3:
        raise PrimError(f"merge_heads needs (..., heads, seq, hd), got {format_axes(x.axes)}")
    h, t, k = x.shape[-3:]
    data = np.swapaxes(x.data, -3, -2).reshape((*x.shape[:-3], t, h * k))
    return _reshaped(x, (*x.axes[:-3], x.axes[-2], Axis(None, h * k)), data)


def permute(x: Tensor, names: Sequence[str]) -> Tensor:
    """Reorder the axes so that their names read `names` (a permutation of x's names)."""
    names_t = tuple(names)
    if sorted(names_t) != sorted(n for n in x.names if n is not None) or len(names_t) != x.rank:
        raise PrimError(f"cannot permute {format_axes(x.axes)} to [{', '.join(names_t)}]")
    order = [axis_index(x, n) for n in names_t]
    return _reshaped(x, tuple(x.axes[i] for i in order), np.transpose(x.data, order))


def transpose(x: Tensor, names: Sequence[str] | None = None) -> Tensor:
    """`permute(x, names)`; without names, swap the last two axes."""
    if names is not None:
        return permute(x, names)
    if x.rank < 2:
        raise PrimError(f"transpose needs two axes, got {format_axes(x.axes)}")
    axes = (*x.axes[:-2], x.axes[-1], x.axes[-2])
    return _reshaped(x, axes, np.swapaxes(x.data, -1, -2))


def rename_axis(t: Tensor, old: str, new: str | None) -> Tensor:
    """The same tensor with the (unique) axis named `old` renamed `new`."""
    i = axis_index(t, old)
    axes = list(t.axes)
    axes[i] = Axis(new, axes[i].size)
    return t.with_axes(axes)


def sum_to(x: Tensor, target: Sequence[Axis]) -> Tensor:
    """Reduce x (say a cotangent over a broadcast result) to `target` (an operand's axes).

    Aligns `target` into x's axes by `align`, sums the axes of x that the target does not
    cover (sequentially, row-major over them in x's order), and lays the result out in
    the target's order and names.
    """
    _need(x, Kind.REAL, "sum_to")
    tgt = tuple(target)
    al = align(x.axes, tgt)
    if len(al.axes) != x.rank:
        raise PrimError(f"cannot reduce {format_axes(x.axes)} to {format_axes(tgt)}")
    kept = list(al.b_pos)
    summed = [i for i in range(x.rank) if i not in kept]
    arr = np.transpose(x.data, summed + kept)
    n_terms = math.prod(x.shape[i] for i in summed)
    res = _sum_first(arr.reshape((n_terms, *(a.size for a in tgt))))
    return Tensor(Kind.REAL, tgt, res)


def broadcast_like(x: Tensor, target: Sequence[Axis]) -> Tensor:
    """Repeat x over `target` (x aligned into it by `align`); the result has exactly the
    target's axes and x's kind."""
    tgt = tuple(target)
    al = align(x.axes, tgt)
    if len(al.axes) != len(tgt) or list(al.b_pos) != list(range(len(tgt))):
        raise PrimError(f"cannot broadcast {format_axes(x.axes)} to {format_axes(tgt)}")
    data = expand(x.data, al.a_pos, tuple(a.size for a in tgt))
    return _reshaped(x, tgt, data)
