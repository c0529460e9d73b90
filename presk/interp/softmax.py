"""The softmax family along one axis: `softmax`, `log_softmax`, `cross_entropy`, `argmax`,
`sample`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gmpy2
import numpy as np

from presk.interp.broadcast import align, expand
from presk.interp.elementary import _fmt, _need, _sub, _zero
from presk.interp.reductions import _drop, axis_index
from presk.interp.tensor import Arr, Kind, PrimError, Tensor, exact_mpfr, format_axes


def _rows(data: Arr, i: int) -> Arr:
    """`data` with axis i moved last and the rest flattened: shape (rows, size_i)."""
    moved = np.moveaxis(data, i, -1)
    # The row count is explicit: `-1` cannot be inferred when the axis has size 0.
    return moved.reshape(int(np.prod(moved.shape[:-1])), data.shape[i])


def _unrows(rows: Arr, shape: tuple[int, ...], i: int) -> Arr:
    """The inverse of `_rows` for a (rows, size_i) array."""
    moved_shape = shape[:i] + shape[i + 1 :] + (shape[i],)
    return np.ascontiguousarray(np.moveaxis(rows.reshape(moved_shape), -1, i))


def _mask_rows(x: Tensor, i: int, mask: Tensor | None) -> Arr | None:
    if mask is None:
        return None
    _need(mask, Kind.BOOL, "softmax mask")
    al = align(x.axes, mask.axes)
    if len(al.axes) != x.rank:
        raise PrimError(
            f"mask {format_axes(mask.axes)} does not broadcast to {format_axes(x.axes)}"
        )
    return _rows(np.array(expand(mask.data, al.b_pos, x.shape)), i)


def _softmax_row(row: Arr, allowed: Arr | None) -> tuple[Any, list[Any], Any]:
    """m (max over allowed), e_j (0 where refused) and s (sequential sum over allowed)."""
    ok = [True] * len(row) if allowed is None else [bool(v) for v in allowed]
    m: Any = None
    for j, v in enumerate(row):
        if ok[j] and (m is None or v > m):
            m = v
    if m is None:
        raise PrimError("softmax row is fully masked")
    if gmpy2.is_infinite(m):
        raise PrimError(f"softmax of a row whose maximum is {_fmt(m)}")
    e = [gmpy2.exp(_sub(v, m)) if ok[j] else _zero() for j, v in enumerate(row)]
    s: Any = None
    for j in range(len(row)):
        if ok[j]:
            s = e[j] if s is None else s + e[j]
    return m, e, s


def softmax(x: Tensor, axis: str | int, mask: Tensor | None = None) -> Tensor:
    """Softmax along `axis`, optionally restricted by a BOOL `mask` (broadcast to x by
    `align`; true = allowed).

    Per row: m = max over allowed x_j; e_j = exp(x_j - m) (0 where refused); s = the sum
    of the allowed e_j in increasing j; y_j = e_j / s (0 where refused). A row with no
    allowed position raises `PrimError("softmax row is fully masked")`.
    """
    _need(x, Kind.REAL, "softmax")
    i = axis_index(x, axis)
    rows = _rows(x.data, i)
    masks = _mask_rows(x, i, mask)
    out = np.empty(rows.shape, dtype=object)
    for r in range(rows.shape[0]):
        allowed = None if masks is None else masks[r]
        _, e, s = _softmax_row(rows[r], allowed)
        for j, ej in enumerate(e):
            out[r, j] = _zero() if allowed is not None and not allowed[j] else ej / s
    return Tensor(Kind.REAL, x.axes, _unrows(out, x.shape, i))


def log_softmax(x: Tensor, axis: str | int, mask: Tensor | None = None) -> Tensor:
    """log softmax along `axis`: y_j = (x_j - m) - log(s), with m and s as in `softmax`
    (-inf where the mask refuses)."""
    _need(x, Kind.REAL, "log_softmax")
    i = axis_index(x, axis)
    rows = _rows(x.data, i)
    masks = _mask_rows(x, i, mask)
    out = np.empty(rows.shape, dtype=object)
    for r in range(rows.shape[0]):
        allowed = None if masks is None else masks[r]
        m, _, s = _softmax_row(rows[r], allowed)
        log_s = gmpy2.log(s)
        for j, v in enumerate(rows[r]):
            refused = allowed is not None and not allowed[j]
            out[r, j] = gmpy2.mpfr("-inf") if refused else (v - m) - log_s
    return Tensor(Kind.REAL, x.axes, _unrows(out, x.shape, i))


def _check_rest(what: str, x: Tensor, i: int, other: Tensor) -> None:
    """`other` must have x's axes minus axis i, in order (names equal or one None)."""
    rest = _drop(x.axes, i)
    same = len(rest) == other.rank and all(
        p.size == q.size and (p.name is None or q.name is None or p.name == q.name)
        for p, q in zip(rest, other.axes, strict=False)
    )
    if not same:
        raise PrimError(
            f"{what}: {format_axes(other.axes)} does not match {format_axes(rest)} "
            f"(the axes of {format_axes(x.axes)} without {x.axes[i]})"
        )


def cross_entropy(logits: Tensor, targets: Tensor, axis: str | int) -> Tensor:
    """Per-row cross entropy: loss = log(s) - (x_t - m), m and s as in `softmax`.

    `targets` is IDX with logits' axes minus `axis` (in order); the result is REAL over
    the targets' axes. A target outside [0, V) raises `PrimError`.
    """
    _need(logits, Kind.REAL, "cross_entropy")
    _need(targets, Kind.IDX, "cross_entropy targets")
    i = axis_index(logits, axis)
    _check_rest("cross_entropy targets", logits, i, targets)
    n_classes = logits.shape[i]
    rows = _rows(logits.data, i)
    tflat = targets.data.reshape(-1)
    out = np.empty(rows.shape[0], dtype=object)
    for r in range(rows.shape[0]):
        t = int(tflat[r])
        if not 0 <= t < n_classes:
            raise PrimError(f"target index {t} out of range for {n_classes} classes")
        m, _, s = _softmax_row(rows[r], None)
        out[r] = gmpy2.log(s) - (rows[r][t] - m)
    return Tensor(Kind.REAL, targets.axes, out.reshape(targets.shape))


def argmax(x: Tensor, axis: str | int) -> Tensor:
    """The index of the maximum along `axis` (the LAST among equal maxima), as an IDX
    tensor bounded by the axis size over the remaining axes."""
    _need(x, Kind.REAL, "argmax")
    i = axis_index(x, axis)
    size = x.shape[i]
    if size == 0:
        raise PrimError("argmax over an empty axis")
    rows = _rows(x.data, i)
    out = np.empty(rows.shape[0], dtype=object)
    for r in range(rows.shape[0]):
        best, m = 0, rows[r][0]
        for j in range(1, size):
            if rows[r][j] >= m:
                best, m = j, rows[r][j]
        out[r] = best
    rest = _drop(x.axes, i)
    return Tensor(Kind.IDX, rest, out.reshape(tuple(a.size for a in rest)), size)


def sample(uniforms: Sequence[Any] | Arr, logits: Tensor, axis: str | int) -> Tensor:
    """Draw one index per row of softmax(logits) along `axis`.

    `uniforms` holds one u in [0, 1) per row (rows row-major over logits' axes minus
    `axis`); u is compared exactly (a float is its exact binary value). With p =
    softmax(logits) and the running sums c_0 = p_0, c_j = c_{j-1} + p_j (each rounded),
    the draw is the smallest j with u < c_j, or, if rounding leaves none, the largest j
    with p_j > 0. The result is IDX bounded by the axis size.
    """
    p = softmax(logits, axis)
    i = axis_index(logits, axis)
    rows = _rows(p.data, i)
    us = list(np.asarray(uniforms, dtype=object).reshape(-1))
    if len(us) != rows.shape[0]:
        raise PrimError(f"sample needs {rows.shape[0]} uniforms, got {len(us)}")
    out = np.empty(rows.shape[0], dtype=object)
    for r in range(rows.shape[0]):
        u = exact_mpfr(us[r])
        if not 0 <= u < 1:
            raise PrimError(f"sample: uniform {_fmt(u)} outside [0, 1)")
        row = rows[r]
        choice: int | None = None
        c: Any = None
        for j, pj in enumerate(row):
            c = pj if c is None else c + pj
            if u < c:
                choice = j
                break
        if choice is None:
            choice = max(j for j, pj in enumerate(row) if pj > 0)
        out[r] = choice
    rest = _drop(logits.axes, i)
    return Tensor(Kind.IDX, rest, out.reshape(tuple(a.size for a in rest)), logits.shape[i])
