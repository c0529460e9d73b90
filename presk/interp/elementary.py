"""The scalar operations the primitives are built from, checked, and conversion to REAL.

Each checked operation (`_add` … `_min`, and their element-wise ufuncs `_ADD` … `_MIN`)
is one correctly rounded MPFR operation in the current gmpy2 context plus the check that
keeps NaN out (presk/interp/prims.py states the invariants). `real` converts a tensor or
a Python number to a REAL tensor.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np

from presk.interp.tensor import Kind, PrimError, Tensor, format_number, obj_array, to_mpfr

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
