"""Elementwise primitives: arithmetic (`add` … `minimum`), the unary functions (`neg` …
`abs_`) and `dropout`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gmpy2
import numpy as np

from presk.interp.broadcast import align, expand
from presk.interp.elementary import (
    _ADD,
    _DIV,
    _MAX,
    _MIN,
    _MUL,
    _POW,
    _SUB,
    Number,
    _fmt,
    _mul,
    _need,
    _zero,
    real,
)
from presk.interp.tensor import Arr, Kind, PrimError, Tensor, exact_mpfr, obj_array


def _real_operand(v: Tensor | Number) -> Tensor:
    """A REAL tensor operand; a bare number becomes a correctly rounded REAL scalar."""
    if isinstance(v, Tensor):
        _need(v, Kind.REAL, "arithmetic")
        return v
    return real(v)


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
