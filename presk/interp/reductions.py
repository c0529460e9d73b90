"""Reductions along one axis or all (`reduce_sum`, `reduce_mean`, `reduce_max`), and
`axis_index`, which finds an axis by name or position for every primitive that takes one.
"""

from __future__ import annotations

import numpy as np

from presk.interp.elementary import _ADD, _DIV, _MAX, _need, _zero
from presk.interp.tensor import Arr, Axis, Kind, PrimError, Tensor, format_axes, obj_array


def axis_index(t: Tensor, axis: str | int) -> int:
    """The position of `axis` in t: a name that must occur exactly once, or an index
    (negative counts from the end)."""
    if isinstance(axis, int):
        if not -t.rank <= axis < t.rank:
            raise PrimError(f"axis {axis} out of range for {format_axes(t.axes)}")
        return axis % t.rank
    hits = [i for i, a in enumerate(t.axes) if a.name == axis]
    if len(hits) != 1:
        how = "no axis" if not hits else "more than one axis"
        raise PrimError(f"{how} named {axis!r} in {format_axes(t.axes)}")
    return hits[0]


def _sum_first(arr: Arr) -> Arr:
    """The sequential sum over the first axis of `arr`: acc = arr[0]; acc = acc + arr[k]."""
    if arr.shape[0] == 0:
        return np.full(arr.shape[1:], _zero(), dtype=object)
    acc = np.array(arr[0, ...], dtype=object)  # a copy: the result must not alias x
    for k in range(1, arr.shape[0]):
        acc = obj_array(_ADD(acc, arr[k, ...]))
    return acc


def _drop(axes: tuple[Axis, ...], i: int) -> tuple[Axis, ...]:
    return axes[:i] + axes[i + 1 :]


def reduce_sum(x: Tensor, axis: str | int | None = None) -> Tensor:
    """The sum over one axis (dropped from the result) or, for None, over all elements in
    row-major order (a scalar); terms added sequentially in increasing index order."""
    _need(x, Kind.REAL, "sum")
    if axis is None:
        return Tensor(Kind.REAL, (), _sum_first(x.data.reshape(-1)))
    i = axis_index(x, axis)
    return Tensor(Kind.REAL, _drop(x.axes, i), _sum_first(np.moveaxis(x.data, i, 0)))


def reduce_mean(x: Tensor, axis: str | int | None = None) -> Tensor:
    """`reduce_sum` divided by the number of terms (one more rounding)."""
    s = reduce_sum(x, axis)
    n = x.size if axis is None else x.shape[axis_index(x, axis)]
    if n == 0:
        raise PrimError("mean over no elements")
    return Tensor(Kind.REAL, s.axes, obj_array(_DIV(s.data, n)))


def reduce_max(x: Tensor, axis: str | int | None = None) -> Tensor:
    """The maximum over one axis or over everything; ties keep the first (exact)."""
    _need(x, Kind.REAL, "max")
    arr = x.data.reshape(-1) if axis is None else np.moveaxis(x.data, axis_index(x, axis), 0)
    if arr.shape[0] == 0:
        raise PrimError("max over no elements")
    acc = np.array(arr[0, ...], dtype=object)
    for k in range(1, arr.shape[0]):
        acc = obj_array(_MAX(acc, arr[k, ...]))
    axes = () if axis is None else _drop(x.axes, axis_index(x, axis))
    return Tensor(Kind.REAL, axes, acc)
