"""Every primitive of the language, evaluated exactly on `Tensor` values.

Provides broadcasting (`align`, `expand`), elementwise arithmetic (`add` … `minimum`),
the unary functions (`neg` … `abs_`), reductions (`reduce_sum`, `reduce_mean`,
`reduce_max`), contractions (`dot`, `ein`), the softmax family (`softmax`, `log_softmax`,
`cross_entropy`, `argmax`, `sample`), embeddings (`embed`, `embed_vjp`, `one_hot`),
generated tensors (`positions`, `causal_mask`), `dropout`, shape operations (`merge`,
`split`, `split_heads`, `merge_heads`, `permute`, `transpose`, `rename_axis`, `sum_to`,
`broadcast_like`) and conversion (`real`).

Invariants (the native kernels reproduce them bit for bit, so they are semantics, not
implementation detail):

* Everything is computed in the CURRENT gmpy2 context; the caller sets the precision
  (`gmpy2.context(gmpy2.get_context(), precision=bits)`); nothing here changes it.
* Every elementary operation (+, -, *, /, exp, log, sqrt, tanh, sin, cos, erf, pow) is a
  single correctly rounded MPFR operation. Results that merely select an input (max, min,
  relu, abs, neg, gathers, shape operations) are that input unchanged.
* Every sum adds its terms sequentially in increasing index order, starting from the first
  term: acc = t0; acc = acc + t1; ... . Sums over several axes enumerate them row-major.
  An empty sum is +0.
* NaN never arises: an operation that would produce one (inf - inf, 0 * inf, log or sqrt
  of a negative number, a negative base to a non-integer power) raises `PrimError`, as do
  a division by zero and zero to a negative power. log(0) is -inf (allowed: it is the
  exact limit and only feeds further arithmetic that is itself checked).
* Broadcasting (`align`): the operand with fewer axes is aligned with the trailing axes of
  the other by position when at every aligned position the sizes are equal and the names
  are equal or at least one is None (the result takes the non-None name); otherwise, when
  every axis of the smaller operand is named, its names are distinct and each occurs
  exactly once in the larger operand with the same size, by name (the result is the larger
  operand's axes). Operands of equal rank align by position only. Size-1 axes are never
  stretched. Anything else raises `PrimError("cannot broadcast …")`.

Kind errors (a REAL primitive handed an IDX tensor, say) are compiler bugs, not program
failures, and raise `TypeError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np

from presk.interp.tensor import (
    Arr,
    Axis,
    Kind,
    PrimError,
    Tensor,
    exact_mpfr,
    format_axes,
    format_number,
    obj_array,
    to_mpfr,
)

__all__ = [
    "Alignment",
    "abs_",
    "add",
    "align",
    "argmax",
    "axis_index",
    "broadcast_like",
    "causal_mask",
    "cos",
    "cross_entropy",
    "div",
    "dot",
    "dropout",
    "ein",
    "embed",
    "embed_vjp",
    "erf",
    "exp",
    "expand",
    "gelu",
    "log",
    "log_softmax",
    "maximum",
    "merge",
    "merge_heads",
    "minimum",
    "mul",
    "neg",
    "one_hot",
    "permute",
    "positions",
    "pow_",
    "real",
    "reduce_max",
    "reduce_mean",
    "reduce_sum",
    "relu",
    "rename_axis",
    "sample",
    "sin",
    "softmax",
    "split",
    "split_heads",
    "sqrt",
    "sub",
    "sum_to",
    "tanh",
    "transpose",
]

Number = Any
"""A Python int, float, Fraction, decimal string or mpfr accepted where a REAL is."""


def _fmt(x: Any) -> str:
    """An element for an error message (12 significant digits)."""
    return format_number(x, 12)


def _zero() -> Any:
    # +0 is exact at every precision, so one needs no context.
    return gmpy2.mpfr(0)


def _need(t: Tensor, kind: Kind, what: str) -> None:
    if t.kind is not kind:
        raise TypeError(f"{what} expects a {kind.value} tensor, got {t.kind.value}")


def _real_operand(v: Tensor | Number) -> Tensor:
    """A REAL tensor operand; a bare number becomes a correctly rounded REAL scalar."""
    if isinstance(v, Tensor):
        _need(v, Kind.REAL, "arithmetic")
        return v
    return real(v)


# -- broadcasting ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Alignment:
    """The result of broadcasting two operands.

    `axes` are the result's axes; `a_pos[i]` (`b_pos[i]`) is the result position of the
    first (second) operand's axis i.
    """

    axes: tuple[Axis, ...]
    a_pos: tuple[int, ...]
    b_pos: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        """The result's sizes."""
        return tuple(a.size for a in self.axes)


def _align_small(
    small: tuple[Axis, ...], large: tuple[Axis, ...]
) -> tuple[tuple[Axis, ...], tuple[int, ...]] | None:
    """Align `small` (rank <= large's) into `large`; None if the rule refuses."""
    off = len(large) - len(small)
    merged = list(large)
    for i, s in enumerate(small):
        big = large[off + i]
        if s.size != big.size or (
            s.name is not None and big.name is not None and s.name != big.name
        ):
            break
        merged[off + i] = Axis(big.name if big.name is not None else s.name, big.size)
    else:
        return tuple(merged), tuple(range(off, len(large)))
    if off == 0:
        # Equal rank aligns by position only: a permutation by names is not broadcasting.
        return None
    names = [s.name for s in small]
    if any(n is None for n in names) or len(set(names)) != len(names):
        return None
    pos: list[int] = []
    for s in small:
        hits = [i for i, big in enumerate(large) if big.name == s.name]
        if len(hits) != 1 or large[hits[0]].size != s.size:
            return None
        pos.append(hits[0])
    return large, tuple(pos)


def align(a_axes: Sequence[Axis], b_axes: Sequence[Axis]) -> Alignment:
    """Broadcast two operands' axes by the language's rule (see the module docstring)."""
    a_t, b_t = tuple(a_axes), tuple(b_axes)
    swapped = len(a_t) > len(b_t)
    small, large = (b_t, a_t) if swapped else (a_t, b_t)
    found = _align_small(small, large)
    if found is None:
        raise PrimError(f"cannot broadcast {format_axes(a_t)} with {format_axes(b_t)}")
    axes, small_pos = found
    large_pos = tuple(range(len(large)))
    if swapped:
        return Alignment(axes, large_pos, small_pos)
    return Alignment(axes, small_pos, large_pos)


def expand(data: Arr, pos: Sequence[int], shape: Sequence[int]) -> Arr:
    """A read-only view of `data` laid out in a result of `shape`.

    Axis i of `data` lands at result position `pos[i]`; the other result positions repeat
    it. (A view: nothing is copied, and elements are shared, which is safe because they
    are immutable.)
    """
    order = sorted(range(len(pos)), key=lambda i: pos[i])
    arr = np.transpose(data, order)
    target = [1] * len(shape)
    for i in order:
        target[pos[i]] = data.shape[i]
    return np.broadcast_to(arr.reshape(target), tuple(shape))


# -- checked elementary operations ---------------------------------------------------
#
# Each is one correctly rounded MPFR operation plus the check that keeps NaN out.


def _add(x: Any, y: Any) -> Any:
    r = x + y
    if gmpy2.is_nan(r):
        raise PrimError(f"undefined addition ({_fmt(x)} + {_fmt(y)})")
    return r


def _sub(x: Any, y: Any) -> Any:
    r = x - y
    if gmpy2.is_nan(r):
        raise PrimError(f"undefined subtraction ({_fmt(x)} - {_fmt(y)})")
    return r


def _mul(x: Any, y: Any) -> Any:
    r = x * y
    if gmpy2.is_nan(r):
        raise PrimError(f"undefined multiplication ({_fmt(x)} * {_fmt(y)})")
    return r


def _div(x: Any, y: Any) -> Any:
    if gmpy2.is_zero(y):
        raise PrimError(f"division by zero ({_fmt(x)} / 0)")
    r = x / y
    if gmpy2.is_nan(r):
        raise PrimError(f"undefined division ({_fmt(x)} / {_fmt(y)})")
    return r


def _pow(x: Any, y: Any) -> Any:
    # y is an mpfr (real exponent) or a Python int (exact integer power, mpfr_pow_si/z).
    if gmpy2.is_zero(x) and y < 0:
        raise PrimError(f"zero raised to a negative power ({_fmt(y)})")
    r = x**y
    if gmpy2.is_nan(r):
        raise PrimError(
            f"power of a negative number ({_fmt(x)}) to a non-integer exponent ({_fmt(y)})"
        )
    return r


def _max(x: Any, y: Any) -> Any:
    # Ties (including -0 vs +0) keep the first operand: deterministic, as in the kernels.
    return y if y > x else x


def _min(x: Any, y: Any) -> Any:
    return y if y < x else x


_ADD = np.frompyfunc(_add, 2, 1)
_SUB = np.frompyfunc(_sub, 2, 1)
_MUL = np.frompyfunc(_mul, 2, 1)
_DIV = np.frompyfunc(_div, 2, 1)
_POW = np.frompyfunc(_pow, 2, 1)
_MAX = np.frompyfunc(_max, 2, 1)
_MIN = np.frompyfunc(_min, 2, 1)


def _binary(ufunc: Any, a: Tensor | Number, b: Tensor | Number) -> Tensor:
    ta, tb = _real_operand(a), _real_operand(b)
    al = align(ta.axes, tb.axes)
    out = ufunc(expand(ta.data, al.a_pos, al.shape), expand(tb.data, al.b_pos, al.shape))
    return Tensor(Kind.REAL, al.axes, obj_array(out))


def add(a: Tensor | Number, b: Tensor | Number) -> Tensor:
    """a + b, broadcast by `align`."""
    return _binary(_ADD, a, b)


def sub(a: Tensor | Number, b: Tensor | Number) -> Tensor:
    """a - b, broadcast by `align`."""
    return _binary(_SUB, a, b)


def mul(a: Tensor | Number, b: Tensor | Number) -> Tensor:
    """a * b, broadcast by `align`."""
    return _binary(_MUL, a, b)


def div(a: Tensor | Number, b: Tensor | Number) -> Tensor:
    """a / b, broadcast by `align`; a zero divisor raises `PrimError`."""
    return _binary(_DIV, a, b)


def pow_(a: Tensor | Number, b: Tensor | int | Number) -> Tensor:
    """a ** b: a REAL exponent uses mpfr_pow; a Python int or an IDX tensor exponent uses
    the exact integer power (one rounding either way)."""
    if isinstance(b, int) and not isinstance(b, bool):
        ta = _real_operand(a)
        return Tensor(Kind.REAL, ta.axes, obj_array(_POW(ta.data, b)))
    if isinstance(b, Tensor) and b.kind is Kind.IDX:
        ta = _real_operand(a)
        al = align(ta.axes, b.axes)
        out = _POW(expand(ta.data, al.a_pos, al.shape), expand(b.data, al.b_pos, al.shape))
        return Tensor(Kind.REAL, al.axes, obj_array(out))
    return _binary(_POW, a, b)


def maximum(a: Tensor | Number, b: Tensor | Number) -> Tensor:
    """Elementwise max; on a tie (also -0 vs +0) the element of `a`."""
    return _binary(_MAX, a, b)


def minimum(a: Tensor | Number, b: Tensor | Number) -> Tensor:
    """Elementwise min; on a tie (also -0 vs +0) the element of `a`."""
    return _binary(_MIN, a, b)


# -- unary functions -----------------------------------------------------------------


def _unary(f: Callable[[Any], Any], name: str, x: Tensor) -> Tensor:
    _need(x, Kind.REAL, name)

    def checked(v: Any) -> Any:
        r = f(v)
        if gmpy2.is_nan(r):
            raise PrimError(f"{name} of {_fmt(v)} is undefined")
        return r

    return x.map(checked)


def neg(x: Tensor) -> Tensor:
    """-x (exact)."""
    return _unary(lambda v: -v, "neg", x)


def exp(x: Tensor) -> Tensor:
    """e**x."""
    return _unary(gmpy2.exp, "exp", x)


def _log(v: Any) -> Any:
    if v < 0:
        raise PrimError(f"log of a negative number ({_fmt(v)})")
    return gmpy2.log(v)  # log(±0) = -inf, which is allowed


def log(x: Tensor) -> Tensor:
    """Natural log; PrimError for x < 0, -inf for x = ±0."""
    return _unary(_log, "log", x)


def _sqrt(v: Any) -> Any:
    if v < 0:
        raise PrimError(f"square root of a negative number ({_fmt(v)})")
    return gmpy2.sqrt(v)


def sqrt(x: Tensor) -> Tensor:
    """Square root; PrimError for x < 0 (sqrt(-0) = -0 as in IEEE 754)."""
    return _unary(_sqrt, "sqrt", x)


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return _unary(gmpy2.tanh, "tanh", x)


def sin(x: Tensor) -> Tensor:
    """Sine (radians)."""
    return _unary(gmpy2.sin, "sin", x)


def cos(x: Tensor) -> Tensor:
    """Cosine (radians)."""
    return _unary(gmpy2.cos, "cos", x)


def erf(x: Tensor) -> Tensor:
    """The error function."""
    return _unary(gmpy2.erf, "erf", x)


def gelu(x: Tensor) -> Tensor:
    """x * Φ(x), Φ(x) = (1 + erf(x / √2)) / 2, rounding each step in this order:
    s = √2; t = x / s; e = erf(t); p = 1 + e; h = p / 2; r = x * h."""
    sqrt2 = gmpy2.sqrt(2)  # computed here so that it is rounded to the caller's precision

    def one(v: Any) -> Any:
        h = (1 + gmpy2.erf(v / sqrt2)) / 2
        return _mul(v, h)

    return _unary(one, "gelu", x)


def relu(x: Tensor) -> Tensor:
    """max(x, 0): x where x > 0, otherwise +0 (so relu(-0) = +0)."""
    return _unary(lambda v: v if v > 0 else _zero(), "relu", x)


def abs_(x: Tensor) -> Tensor:
    """|x| (exact)."""
    return _unary(abs, "abs", x)


# -- reductions ----------------------------------------------------------------------


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


# -- contractions --------------------------------------------------------------------


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


# -- softmax family ------------------------------------------------------------------


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


# -- embeddings ------------------------------------------------------------------------


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


# -- dropout -------------------------------------------------------------------------


def dropout(uniforms: Sequence[Any] | Arr, p: Any, x: Tensor) -> Tensor:
    """Inverted dropout: keep x where u >= p, scaled as x / q with q = 1 - p (rounded
    once); +0 where dropped. One u per element of x, row-major, compared exactly.

    With the same uniforms and p it is its own adjoint: dropout(u, p, ct) is the
    cotangent of x.
    """
    _need(x, Kind.REAL, "dropout")
    pe = exact_mpfr(p)
    if not 0 <= pe < 1:
        raise PrimError(f"dropout probability {_fmt(pe)} outside [0, 1)")
    us = list(np.asarray(uniforms, dtype=object).reshape(-1))
    if len(us) != x.size:
        raise PrimError(f"dropout needs {x.size} uniforms, got {len(us)}")
    q = 1 - pe  # one correctly rounded subtraction in the current context
    flat = x.data.reshape(-1)
    out = np.empty(flat.shape[0], dtype=object)
    for k in range(flat.shape[0]):
        out[k] = flat[k] / q if exact_mpfr(us[k]) >= pe else _zero()
    return Tensor(Kind.REAL, x.axes, out.reshape(x.shape))


# -- shape operations ----------------------------------------------------------------


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


# -- conversion ----------------------------------------------------------------------


def real(t: Tensor | Number) -> Tensor:
    """A REAL tensor: IDX/BOOL elements converted (ints correctly rounded, exact unless
    beyond the precision), a REAL tensor unchanged, and a Python int, bool, float,
    Fraction, decimal string or mpfr as a correctly rounded REAL scalar."""
    if isinstance(t, Tensor):
        if t.kind is Kind.REAL:
            return t
        return t.map(lambda v: gmpy2.mpfr(int(v)), Kind.REAL)
    if not isinstance(t, Fraction | int | float | str | gmpy2.mpfr | gmpy2.mpq):
        raise TypeError(f"cannot convert {type(t).__name__} to a real")
    return Tensor(Kind.REAL, (), obj_array(to_mpfr(t)))
