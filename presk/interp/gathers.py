"""Embeddings (`embed`, its adjoint `embed_vjp`, `one_hot`) and generated tensors
(`positions`, `causal_mask`).
"""

from __future__ import annotations

import gmpy2
import numpy as np

from presk.interp.elementary import _ADD, _need, _zero
from presk.interp.tensor import Arr, Axis, Kind, PrimError, Tensor, format_axes, obj_array


def _ids_array(ids: Tensor, rows: int) -> Arr:
    """ids as an int64 array, each checked to lie in [0, rows)."""
    _need(ids, Kind.IDX, "embedding ids")
    for v in ids.data.reshape(-1):
        if not 0 <= v < rows:
            raise PrimError(f"index {v} out of range for a table of {rows} rows")
    return ids.data.astype(np.int64)


def embed(table: Tensor, ids: Tensor) -> Tensor:
    """Gather rows: result[p, ...] = table[ids[p], ...]; axes ids.axes + table.axes[1:]."""
    _need(table, Kind.REAL, "embed")
    if table.rank == 0:
        raise PrimError("embed needs a table with a vocabulary axis")
    idx = _ids_array(ids, table.shape[0])
    data = np.array(obj_array(table.data[idx]), dtype=object)  # fancy indexing copies
    return Tensor(Kind.REAL, ids.axes + table.axes[1:], data)


def embed_vjp(ct: Tensor, ids: Tensor, vocab: int | Axis) -> Tensor:
    """The adjoint of `embed` with respect to the table (a scatter-add).

    `ct` has axes ids.axes + rest; the result has axes (vocab,) + rest (an int `vocab`
    means an unnamed axis of that size), starts at +0, and for each position p of ids in
    row-major order adds ct's row p into row ids[p] (so repeated ids accumulate in that
    order).
    """
    _need(ct, Kind.REAL, "embed_vjp")
    v_axis = vocab if isinstance(vocab, Axis) else Axis(None, vocab)
    if ct.shape[: ids.rank] != ids.shape:
        raise PrimError(
            f"embed_vjp: cotangent {format_axes(ct.axes)} does not start with "
            f"{format_axes(ids.axes)}"
        )
    idx = _ids_array(ids, v_axis.size).reshape(-1)
    rest = ct.axes[ids.rank :]
    rest_shape = tuple(a.size for a in rest)
    out = np.full((v_axis.size, *rest_shape), _zero(), dtype=object)
    ct_rows = ct.data.reshape((idx.shape[0], *rest_shape))
    for p in range(idx.shape[0]):
        row = int(idx[p])
        out[row, ...] = obj_array(_ADD(out[row, ...], ct_rows[p, ...]))
    return Tensor(Kind.REAL, (v_axis, *rest), out)


def one_hot(ids: Tensor) -> Tensor:
    """REAL with axes ids.axes + (Axis(None, bound),): 1 at each id, +0 elsewhere."""
    _need(ids, Kind.IDX, "one_hot")
    if ids.bound is None:
        raise TypeError("one_hot needs an idx tensor with a known bound")
    idx = _ids_array(ids, ids.bound).reshape(-1)
    out = np.full((idx.shape[0], ids.bound), _zero(), dtype=object)
    one = gmpy2.mpfr(1)
    for p in range(idx.shape[0]):
        out[p, int(idx[p])] = one
    return Tensor(
        Kind.REAL, (*ids.axes, Axis(None, ids.bound)), out.reshape((*ids.shape, ids.bound))
    )


def positions(name: str, size: int) -> Tensor:
    """IDX bounded by `size` over (Axis(name, size),): 0, 1, ..., size - 1."""
    data = np.empty(size, dtype=object)
    data[:] = list(range(size))
    return Tensor(Kind.IDX, (Axis(name, size),), data, size)


def causal_mask(name: str, size: int) -> Tensor:
    """BOOL over (Axis(name, T), Axis(name + "2", T)): true where column j <= row i."""
    data = np.empty((size, size), dtype=object)
    for i in range(size):
        for j in range(size):
            data[i, j] = j <= i
    return Tensor(Kind.BOOL, (Axis(name, size), Axis(name + "2", size)), data)
