"""Evaluation of the primitives that only adjoints use (presk/ad/rules.py).

Each follows the reference's conventions: one correctly rounded MPFR
operation per step, sums in increasing index order. Parameter-tree helpers
(`zeros_like`, `set_field`, `tree_add`) work structurally on trees and tuples.
"""

from __future__ import annotations

import math
from typing import Any

import gmpy2
import numpy as np

from presk.interp import prims
from presk.interp.tensor import Kind, PrimError, Tensor, obj_array
from presk.interp.tree import Tree


def _acc(terms: list[Any]) -> Any:
    """Sum in order, starting from the first term (the empty sum is +0)."""
    if not terms:
        return gmpy2.mpfr(0)
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def sum_to(ct: Tensor, like: Tensor) -> Tensor:
    return prims.sum_to(ct, like.axes)


def reduce_vjp(ct: Tensor, a: Tensor, y: Tensor | None, kind: str, axis: str | None) -> Tensor:
    """The cotangent of sum / mean / max spread back over the reduced axis (or all)."""
    if axis is None:
        index_list = list(range(a.rank))
        positions: list[int] = []
    else:
        i = prims.axis_index(a, axis)
        index_list = [i]
        positions = [j if j < i else j + 1 for j in range(ct.rank)]
    data = prims.expand(ct.data, positions, a.shape)
    count = math.prod(a.shape[j] for j in index_list)
    if kind == "sum":
        return Tensor(Kind.REAL, a.axes, obj_array(data))
    if kind == "mean":
        out = np.empty(a.shape, dtype=object)
        for idx in np.ndindex(*a.shape):
            out[idx] = data[idx] / count
        return Tensor(Kind.REAL, a.axes, out)
    # max: the cotangent goes to the first maximal element of each reduced group.
    assert y is not None
    reduced = prims.expand(y.data, positions, a.shape)
    out = np.empty(a.shape, dtype=object)
    taken: set[tuple[int, ...]] = set()
    zero = gmpy2.mpfr(0)
    for idx in np.ndindex(*a.shape):
        group = tuple(idx[j] for j in range(a.rank) if j not in index_list)
        if group not in taken and a.data[idx] == reduced[idx]:
            taken.add(group)
            out[idx] = data[idx]
        else:
            out[idx] = zero
    return Tensor(Kind.REAL, a.axes, out)


def ylog(y: Tensor, a: Tensor) -> Tensor:
    """y·log(a), with 0 where y = 0 (the limit along a power's graph)."""
    al = prims.align(y.axes, a.axes)
    a_data = prims.expand(a.data, al.b_pos, al.shape)
    y_data = prims.expand(y.data, al.a_pos, al.shape)
    out = np.empty(al.shape, dtype=object)
    zero = gmpy2.mpfr(0)
    for idx in np.ndindex(*al.shape):
        out[idx] = zero if y_data[idx] == 0 else y_data[idx] * gmpy2.log(a_data[idx])
    return Tensor(Kind.REAL, al.axes, out)


def heaviside(a: Tensor) -> Tensor:
    return a.map(lambda v: gmpy2.mpfr(1 if v > 0 else 0))


def sign(a: Tensor) -> Tensor:
    return a.map(lambda v: gmpy2.mpfr(1 if v > 0 else (-1 if v < 0 else 0)))


def erf_vjp(ct: Tensor, a: Tensor) -> Tensor:
    """ct · 2/√π · exp(−a²)."""
    c = 2 / gmpy2.sqrt(gmpy2.const_pi())

    def one(g: Any, x: Any) -> Any:
        return g * (c * gmpy2.exp(-(x * x)))

    return _zip(ct, a, one)


def gelu_vjp(ct: Tensor, a: Tensor) -> Tensor:
    """ct · (Φ(a) + a·φ(a)), Φ(a) = (1 + erf(a/√2))/2, φ(a) = exp(−a²/2)/√(2π)."""
    sqrt2 = gmpy2.sqrt(gmpy2.mpfr(2))
    sqrt_2pi = gmpy2.sqrt(2 * gmpy2.const_pi())

    def one(g: Any, x: Any) -> Any:
        cdf = (1 + gmpy2.erf(x / sqrt2)) / 2
        pdf = gmpy2.exp(-(x * x) / 2) / sqrt_2pi
        return g * (cdf + x * pdf)

    return _zip(ct, a, one)


def _zip(a: Tensor, b: Tensor, f: Any) -> Tensor:
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(*a.shape):
        out[idx] = f(a.data[idx], b.data[idx])
    return Tensor(Kind.REAL, a.axes, out)


def dot_vjp_l(ct: Tensor, b: Tensor) -> Tensor:
    """d(a·b)/da: ct contracted with b over b's trailing axes: ℝ[a[:-1]…, K]."""
    k = b.shape[0]
    rest = math.prod(b.shape[1:])
    lead = ct.axes[: ct.rank - (b.rank - 1)]
    rows = math.prod(axis.size for axis in lead)
    c2 = ct.data.reshape(rows, rest)
    b2 = b.data.reshape(k, rest)
    out = np.empty((rows, k), dtype=object)
    for p in range(rows):
        for j in range(k):
            out[p, j] = _acc([c2[p, r] * b2[j, r] for r in range(rest)])
    axes = (*lead, b.axes[0])
    return Tensor(Kind.REAL, axes, out.reshape(tuple(x.size for x in axes)))


def dot_vjp_r(a: Tensor, ct: Tensor) -> Tensor:
    """d(a·b)/db: a's leading axes summed as one K: ℝ[K, rest…]."""
    k = a.shape[-1]
    rows = math.prod(a.shape[:-1])
    rest_axes = ct.axes[a.rank - 1 :]
    rest = math.prod(axis.size for axis in rest_axes)
    a2 = a.data.reshape(rows, k)
    c2 = ct.data.reshape(rows, rest)
    out = np.empty((k, rest), dtype=object)
    for j in range(k):
        for r in range(rest):
            out[j, r] = _acc([a2[p, j] * c2[p, r] for p in range(rows)])
    axes = (a.axes[-1], *rest_axes)
    return Tensor(Kind.REAL, axes, out.reshape(tuple(x.size for x in axes)))


def _relabelled(b: Tensor, relabel: tuple[tuple[str, str], ...]) -> Tensor:
    for old, new in relabel:
        b = prims.rename_axis(b, old, new)
    return b


def ein_vjp_l(ct: Tensor, b: Tensor, a: Tensor, relabel: tuple[tuple[str, str], ...]) -> Tensor:
    """d ein(a * b) / da = ein[a's axes](ct * b′), b′ relabelled as in the forward pass."""
    names = [str(n) for n in a.names]
    return prims.ein(names, ct, _relabelled(b, relabel)).with_axes(a.axes)


def ein_vjp_r(ct: Tensor, a: Tensor, b: Tensor, relabel: tuple[tuple[str, str], ...]) -> Tensor:
    """d ein(a * b) / db = ein[b′'s axes](ct * a), then the relabelling undone."""
    b2 = _relabelled(b, relabel)
    names = [str(n) for n in b2.names]
    return prims.ein(names, ct, a).with_axes(b.axes)


def _row_op(y: Tensor, axis: str, per_row: Any, *others: Tensor) -> Tensor:
    i = prims.axis_index(y, axis)
    moved = [np.moveaxis(t.data, i, -1) for t in (y, *others)]
    out = np.empty(moved[0].shape, dtype=object)
    for idx in np.ndindex(*moved[0].shape[:-1]):
        out[idx] = per_row(*(m[idx] for m in moved))
    return Tensor(Kind.REAL, y.axes, np.moveaxis(out, -1, i))


def softmax_vjp(ct: Tensor, y: Tensor, axis: str) -> Tensor:
    """y · (ct − Σ ct·y) along the axis."""

    def row(yr: Any, cr: Any) -> Any:
        s = _acc([cr[j] * yr[j] for j in range(len(yr))])
        return np.array([yr[j] * (cr[j] - s) for j in range(len(yr))], dtype=object)

    return _row_op(y, axis, row, ct)


def log_softmax_vjp(ct: Tensor, y: Tensor, axis: str) -> Tensor:
    """ct − exp(y) · Σ ct along the axis."""

    def row(yr: Any, cr: Any) -> Any:
        s = _acc(list(cr))
        return np.array([cr[j] - gmpy2.exp(yr[j]) * s for j in range(len(yr))], dtype=object)

    return _row_op(y, axis, row, ct)


def cross_entropy_vjp(ct: Tensor, logits: Tensor, targets: Tensor) -> Tensor:
    """ct · (softmax(logits) − one_hot(targets)), per row."""
    p = prims.softmax(logits, logits.rank - 1)
    out = np.empty(logits.shape, dtype=object)
    for idx in np.ndindex(*logits.shape[:-1]):
        g, t = ct.data[idx], targets.data[idx]
        for j in range(logits.shape[-1]):
            q = p.data[(*idx, j)]
            out[(*idx, j)] = g * (q - 1 if j == t else q)
    return Tensor(Kind.REAL, logits.axes, out)


def embed_vjp(ct: Tensor, ids: Tensor, table: Tensor) -> Tensor:
    return prims.embed_vjp(ct, ids, table.axes[0]).with_axes(table.axes)


def shape_vjp(ct: Tensor, a: Tensor, op: str) -> Tensor:
    """The inverse layout change of merge / split / split_heads / merge_heads."""
    if op in ("merge", "split"):
        return Tensor(Kind.REAL, a.axes, ct.data.reshape(a.shape))
    if op == "split_heads":
        return prims.merge_heads(ct).with_axes(a.axes)
    if op == "merge_heads":
        heads = a.axes[-3]
        name = heads.name or "heads"
        return prims.split_heads(ct, name, heads.size).with_axes(a.axes)
    raise PrimError(f"no inverse for `{op}`")


def zeros_like(value: Any) -> Any:
    if isinstance(value, Tensor):
        return Tensor.zeros(value.axes)
    if isinstance(value, Tree):
        return Tree(tuple((k, zeros_like(v)) for k, v in value.items))
    if isinstance(value, tuple):
        return tuple(zeros_like(v) for v in value)
    raise PrimError(f"no zero for {type(value).__name__}")


def set_field(tree: Any, value: Any, name: str) -> Any:
    assert isinstance(tree, Tree)
    return Tree(tuple((k, value if k == name else v) for k, v in tree.items))


def tree_add(a: Any, b: Any) -> Any:
    if isinstance(a, Tensor):
        return prims.add(a, b)
    if isinstance(a, Tree):
        return Tree(tuple((k, tree_add(v, b[k])) for k, v in a.items))
    if isinstance(a, tuple):
        return tuple(tree_add(x, y) for x, y in zip(a, b, strict=True))
    raise PrimError(f"cannot add {type(a).__name__}")


def stack_layers(layers: list[Any], like: Any) -> Any:
    """Stack per-layer trees back along each leaf's leading layer axis (that of `like`)."""
    if isinstance(like, Tensor):
        data = np.stack([layer.data for layer in layers]) if layers else like.data
        return Tensor(Kind.REAL, like.axes, data)
    assert isinstance(like, Tree)
    return Tree(tuple((k, stack_layers([layer[k] for layer in layers], v)) for k, v in like.items))
