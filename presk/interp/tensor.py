"""Tensor values of the reference interpreter, and how they print.

Provides `Axis`, `Kind`, `Tensor` (the one value type every primitive of `prims` takes
and returns), `PrimError` (a run-time failure of the program, such as the log of a
negative number), and the printers `format_value`, `format_axes`, `format_number` and
`exact_decimal`.

Invariants:

* `Tensor.data` is a numpy array of dtype object whose shape is exactly the axis sizes; a
  scalar has axes () and a 0-d array. REAL elements are `gmpy2.mpfr`, IDX elements Python
  ints in [0, bound) when a bound is known, BOOL elements Python bools. A tensor is never
  mutated after construction (the dataclass is frozen; by convention nobody writes into
  `data`), so primitives may share element objects and array views freely.
* `format_number(x, d)` equals C's `printf("%.{d}g", x)` applied to the exact binary value
  of x, correctly rounded (to nearest, ties to even) to d significant decimal digits, except
  that both zeros print `0`. It never goes through a Python float, so 256-bit values print
  correctly.
* `exact_decimal(x)` is exact: `Fraction(exact_decimal(x)) == x` for every finite x.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
import numpy.typing as npt

__all__ = [
    "Arr",
    "Axis",
    "Kind",
    "PrimError",
    "Tensor",
    "exact_decimal",
    "exact_mpfr",
    "format_axes",
    "format_number",
    "format_value",
    "obj_array",
    "scalar",
    "to_mpfr",
]

Arr = npt.NDArray[Any]
"""An object-dtype numpy array of tensor elements."""


class PrimError(Exception):
    """A run-time failure of the program inside a primitive (not a compiler bug).

    Raised for the log or square root of a negative number, a division by zero, a fully
    masked softmax row, an index out of range, shapes that cannot broadcast, and the like.
    `message` is a complete sentence fragment suitable for a diagnostic.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Kind(enum.Enum):
    """The element kind of a tensor: real numbers, bounded indices, or booleans."""

    REAL = "real"
    IDX = "idx"
    BOOL = "bool"


@dataclass(frozen=True, slots=True)
class Axis:
    """One axis of a tensor: an optional name and a size."""

    name: str | None
    size: int

    def __str__(self) -> str:
        return f"{self.name}: {self.size}" if self.name is not None else str(self.size)


def obj_array(x: Any) -> Arr:
    """`x` as an object-dtype ndarray; a lone element becomes a 0-d array.

    Numpy ufuncs on object arrays return bare elements instead of 0-d arrays, and
    `np.asarray` would try to iterate an element that happens to be a sequence, so every
    primitive funnels results through here.
    """
    if isinstance(x, np.ndarray):
        return x if x.dtype == object else x.astype(object)
    out = np.empty((), dtype=object)
    out[()] = x
    return out


def to_mpfr(x: Any) -> Any:
    """`x` (mpfr, int, bool, float, Fraction, mpq or decimal string) as an mpfr, correctly
    rounded to the current gmpy2 context's precision."""
    if isinstance(x, Fraction):
        return gmpy2.mpfr(gmpy2.mpq(x.numerator, x.denominator))
    if isinstance(x, bool):
        return gmpy2.mpfr(int(x))
    return gmpy2.mpfr(x)


def _nested(data: Any, shape: tuple[int, ...]) -> Arr:
    """An object array of `shape` holding the leaves of nested sequences / array `data`."""
    if isinstance(data, np.ndarray):
        arr = data.astype(object)
    elif shape == ():
        arr = obj_array(data)
    else:
        # Build element by element so that leaves which numpy might treat as sequences
        # (or as numbers to coerce) are stored untouched.
        arr = np.empty(shape, dtype=object)
        flat: list[Any] = []

        def walk(d: Any, depth: int) -> None:
            if depth == len(shape):
                flat.append(d)
                return
            if len(d) != shape[depth]:
                raise ValueError(f"data does not match the shape {shape}")
            for item in d:
                walk(item, depth + 1)

        try:
            walk(data, 0)
        except TypeError as e:  # a leaf where a sequence was expected
            raise ValueError(f"data does not match the shape {shape}") from e
        view = arr.reshape(-1)
        for i, v in enumerate(flat):
            view[i] = v
    if arr.shape != shape:
        raise ValueError(f"data of shape {arr.shape} does not match the axes' shape {shape}")
    return arr


def _map_array(f: Callable[[Any], Any], arr: Arr) -> Arr:
    """A new object array of `f` applied to each element of `arr` (same shape)."""
    out = np.empty(arr.shape, dtype=object)
    flat_in = arr.reshape(-1)
    flat_out = out.reshape(-1)
    for i in range(flat_in.shape[0]):
        flat_out[i] = f(flat_in[i])
    return out


@dataclass(frozen=True, slots=True, eq=False)
class Tensor:
    """A tensor value: element kind, axes, elements, and the bound N of an `idx[N]`.

    Build one with `Tensor.real`, `Tensor.idx`, `Tensor.boolean` or `scalar`; the
    constructor checks that `data` is an object array shaped like `axes`. Equality (`==`)
    is exact: same kind, axes, bound and element values.
    """

    kind: Kind
    axes: tuple[Axis, ...]
    data: Arr
    bound: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.data, np.ndarray) or self.data.dtype != object:
            raise TypeError("Tensor.data must be a numpy array of dtype object")
        if self.data.shape != self.shape:
            raise ValueError(
                f"data of shape {self.data.shape} does not match axes {format_axes(self.axes)}"
            )
        if self.bound is not None and self.kind is not Kind.IDX:
            raise ValueError("only idx tensors carry a bound")

    # -- construction -------------------------------------------------------------

    @classmethod
    def real(cls, axes: Sequence[Axis], data: Any) -> Tensor:
        """A REAL tensor; each leaf of `data` (nested lists or an array) is converted with
        `to_mpfr`, i.e. correctly rounded to the current precision."""
        axes = tuple(axes)
        raw = _nested(data, tuple(a.size for a in axes))
        return cls(Kind.REAL, axes, _map_array(to_mpfr, raw))

    @classmethod
    def idx(cls, axes: Sequence[Axis], data: Any, bound: int | None) -> Tensor:
        """An IDX tensor of Python ints, each checked to lie in [0, bound)."""
        axes = tuple(axes)
        arr = _map_array(int, _nested(data, tuple(a.size for a in axes)))
        if bound is not None:
            for v in arr.reshape(-1):
                if not 0 <= v < bound:
                    raise PrimError(f"index {v} out of range for idx[{bound}]")
        return cls(Kind.IDX, axes, arr, bound)

    @classmethod
    def boolean(cls, axes: Sequence[Axis], data: Any) -> Tensor:
        """A BOOL tensor of Python bools."""
        axes = tuple(axes)
        return cls(Kind.BOOL, axes, _map_array(bool, _nested(data, tuple(a.size for a in axes))))

    @classmethod
    def zeros(cls, axes: Sequence[Axis]) -> Tensor:
        """A REAL tensor of +0 (one shared immutable mpfr zero)."""
        axes = tuple(axes)
        return cls(Kind.REAL, axes, np.full(tuple(a.size for a in axes), gmpy2.mpfr(0), object))

    @classmethod
    def scalar(cls, x: Any) -> Tensor:
        """A scalar: BOOL for a Python bool, otherwise REAL (see `to_mpfr`)."""
        return scalar(x)

    # -- inspection ---------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        """The axis sizes."""
        return tuple(a.size for a in self.axes)

    @property
    def names(self) -> tuple[str | None, ...]:
        """The axis names (None for unnamed axes)."""
        return tuple(a.name for a in self.axes)

    @property
    def rank(self) -> int:
        """The number of axes."""
        return len(self.axes)

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(self.data.size)

    def item(self) -> Any:
        """The single element of a scalar (or one-element) tensor."""
        if self.data.size != 1:
            raise ValueError(f"item() of a tensor with axes {format_axes(self.axes)}")
        return self.data.reshape(-1)[0]

    def tolist(self) -> Any:
        """The elements as nested Python lists (a bare element for a scalar)."""
        return self.data.tolist()

    def flat(self) -> list[Any]:
        """The elements in row-major order."""
        return list(self.data.reshape(-1))

    def map(self, f: Callable[[Any], Any], kind: Kind | None = None) -> Tensor:
        """A tensor with the same axes holding `f` of each element.

        The result keeps this tensor's kind and bound unless `kind` says otherwise (then
        the bound is dropped).
        """
        if kind is None or kind is self.kind:
            return Tensor(self.kind, self.axes, _map_array(f, self.data), self.bound)
        return Tensor(kind, self.axes, _map_array(f, self.data))

    def with_axes(self, axes: Sequence[Axis]) -> Tensor:
        """The same elements under new axes of the same sizes (relabelling only)."""
        axes = tuple(axes)
        if tuple(a.size for a in axes) != self.shape:
            raise ValueError(f"cannot relabel {format_axes(self.axes)} as {format_axes(axes)}")
        return Tensor(self.kind, axes, self.data, self.bound)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        return (
            self.kind is other.kind
            and self.axes == other.axes
            and self.bound == other.bound
            and all(x == y for x, y in zip(self.flat(), other.flat(), strict=True))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        bound = f"[{self.bound}]" if self.bound is not None else ""
        return f"<{self.kind.value}{bound} {format_value(self, 12)}>"


def scalar(x: Any) -> Tensor:
    """A scalar tensor: BOOL for a Python bool, otherwise REAL correctly rounded."""
    if isinstance(x, bool):
        return Tensor(Kind.BOOL, (), obj_array(x))
    return Tensor(Kind.REAL, (), obj_array(to_mpfr(x)))


# -- printing ----------------------------------------------------------------------


def format_axes(axes: Iterable[Axis]) -> str:
    """The bracketed axis list of a type or result line: `[batch: 4, 2]` (`[]` for none)."""
    return "[" + ", ".join(str(a) for a in axes) + "]"


def exact_mpfr(x: Any) -> Any:
    """`x` (mpfr, float or int) as an mpfr holding exactly its value.

    Unlike `to_mpfr` nothing is rounded to the context precision: a float keeps its 53
    bits, an int gets as many bits as it needs. Other inputs fall back to `to_mpfr`.
    """
    if isinstance(x, gmpy2.mpfr):
        return x
    if isinstance(x, float):
        return gmpy2.mpfr(x, 53)
    if isinstance(x, int):
        return gmpy2.mpfr(x, max(2, abs(x).bit_length()))
    return to_mpfr(x)


def _pow10_ge(n: int, d: int, k: int) -> bool:
    """Whether n / d >= 10**k (n, d > 0), in exact integer arithmetic."""
    scale: int = 10 ** abs(k)  # annotated: mypy types int ** int as Any
    return n * scale >= d if k < 0 else n >= d * scale


def _round_decimal(n: int, d: int, digits: int) -> tuple[str, int]:
    """n / d (n, d > 0) rounded to `digits` significant decimals, ties to even.

    Returns the digit string (exactly `digits` long) and the decimal exponent of its first
    digit, so the value is 0.D1D2... * 10**(exp + 1).
    """
    # An estimate of floor(log10(n / d)) from the bit lengths, off by at most one or two,
    # then corrected exactly.
    k = int((n.bit_length() - d.bit_length()) * 0.30102999566398120)
    while not _pow10_ge(n, d, k):
        k -= 1
    while _pow10_ge(n, d, k + 1):
        k += 1
    s = digits - 1 - k
    num, den = (n * 10**s, d) if s >= 0 else (n, d * 10**-s)
    q, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and q % 2 == 1):
        q += 1
    if q == 10**digits:  # rounding carried into a new leading digit (9.99 -> 10.0)
        q //= 10
        k += 1
    return str(q), k


# Past this binary exponent (2**65536 is about 10**19728) the exact integer ratio of a
# value is too large to compute with, so MPFR's own decimal conversion is used instead.
# Both are correctly rounded to nearest with ties to even, so they print the same text
# wherever both apply. See Note [Huge exponents].
HUGE_EXPONENT = 1 << 16


def _is_huge(x: Any) -> bool:
    """Whether a finite nonzero mpfr lies beyond 2**±HUGE_EXPONENT."""
    return bool(abs(gmpy2.get_exp(x)) > HUGE_EXPONENT)


def _mpfr_decimal(x: Any, digits: int) -> tuple[str, int]:
    """|x| rounded by MPFR to `digits` significant decimals (ties to even): the digit
    string and the decimal exponent of its first digit, as `_round_decimal` returns."""
    text = format(abs(x), f".{digits - 1}e")  # mpfr_asprintf, round to nearest
    mantissa, _, exponent = text.partition("e")
    return mantissa.replace(".", ""), int(exponent)


def format_number(x: Any, digits: int) -> str:
    """An mpfr printed like C's `%.{digits}g` of its exact value; zeros print `0`.

    Fixed notation when the rounded decimal exponent X satisfies -4 <= X < digits, else
    `d.ddde+XX` (at least two exponent digits); trailing zeros and a bare point are
    dropped; infinities print `inf`/`-inf` and NaN `nan`.
    """
    p = max(1, digits)
    x = exact_mpfr(x)
    if gmpy2.is_nan(x):
        return "nan"
    if gmpy2.is_infinite(x):
        return "-inf" if x < 0 else "inf"
    if gmpy2.is_zero(x):
        return "0"
    sign = "-" if x < 0 else ""
    if _is_huge(x):
        ds, e = _mpfr_decimal(x, p)
    else:
        num, den = x.as_integer_ratio()
        ds, e = _round_decimal(abs(int(num)), int(den), p)
    if -4 <= e < p:
        if e >= 0:
            whole, frac = ds[: e + 1], ds[e + 1 :]
        else:
            whole, frac = "0", "0" * (-e - 1) + ds
        frac = frac.rstrip("0")
        return sign + whole + ("." + frac if frac else "")
    frac = ds[1:].rstrip("0")
    return f"{sign}{ds[0]}{'.' + frac if frac else ''}e{'-' if e < 0 else '+'}{abs(e):02d}"


def exact_decimal(x: Any) -> str:
    """The exact decimal expansion of a binary mpfr, for JSON output.

    Plain notation (`-0.046875`, `1536`) while the leading digit's decimal exponent lies
    in [-6, 21); scientific (`1.52587890625e-05`-style, `d.ddd…e±N`) outside it, to avoid
    runs of zeros. Every finite binary value has a finite expansion, so nothing is
    rounded: `Fraction(exact_decimal(x)) == x`. Negative zero prints `-0`; infinities and
    NaN print `inf`, `-inf`, `nan` (not JSON numbers: callers must handle them).

    The one exception is a value beyond 2**±HUGE_EXPONENT, whose exact expansion would
    run to millions of digits: it prints the shortest digits MPFR guarantees to read back
    as the same value at its precision (`mpfr_get_str` with n = 0), in scientific form.
    """
    x = exact_mpfr(x)
    if gmpy2.is_nan(x):
        return "nan"
    if gmpy2.is_infinite(x):
        return "-inf" if x < 0 else "inf"
    if gmpy2.is_zero(x):
        return "-0" if gmpy2.is_signed(x) else "0"
    if _is_huge(x):
        mantissa, exp10, _ = x.digits(10, 0)
        sign = "-" if mantissa.startswith("-") else ""
        body = mantissa.lstrip("-").rstrip("0")
        e = exp10 - 1
        point = "." + body[1:] if body[1:] else ""
        return f"{sign}{body[0]}{point}e{'-' if e < 0 else '+'}{abs(e)}"
    num, den = x.as_integer_ratio()
    sign = "-" if num < 0 else ""
    j = int(den).bit_length() - 1  # den == 2**j
    # n / 2**j == n * 5**j / 10**j: the digits of n * 5**j with the point j places left.
    # GMP prints the product: Python's str() refuses integers of more than 4300 digits.
    digits: str = (gmpy2.mpz(abs(num)) * gmpy2.mpz(5) ** j).digits(10)
    e = len(digits) - 1 - j  # decimal exponent of the leading digit
    if -6 <= e < 21:
        if j == 0:
            return sign + digits
        digits = digits.rjust(j + 1, "0")
        return f"{sign}{digits[:-j]}.{digits[-j:]}"
    body = digits.rstrip("0")
    frac = body[1:]
    return f"{sign}{body[0]}{'.' + frac if frac else ''}e{'-' if e < 0 else '+'}{abs(e)}"


def _format_element(t: Tensor, v: Any, digits: int) -> str:
    if t.kind is Kind.REAL:
        return format_number(v, digits)
    if t.kind is Kind.BOOL:
        return "true" if v else "false"
    return str(int(v))


def format_value(t: Tensor, digits: int) -> str:
    """The value part of a result line: `[batch: 4, 2] [[0.896290523413, ...], ...]`.

    A scalar prints as its bare element (`3.47881`, `7`, `true`); otherwise the axis list
    (`format_axes`) then the elements as nested bracketed lists, `, `-separated, reals
    formatted by `format_number(·, digits)`.
    """
    if not t.axes:
        return _format_element(t, t.data[()], digits)

    def nest(arr: Arr) -> str:
        if arr.ndim == 1:
            return "[" + ", ".join(_format_element(t, v, digits) for v in arr) + "]"
        return "[" + ", ".join(nest(sub) for sub in arr) + "]"

    return format_axes(t.axes) + " " + nest(t.data)


# Note [Huge exponents]
#
# MPFR's exponent range (gmpy2's default is about 2**±2**30) lets a program reach values
# such as x^100000000, about 10**-30103000. The exact printers above divide the value's
# integer ratio by powers of ten; for such a value the ratio's denominator alone has a
# hundred million bits, and printing would not finish. Past HUGE_EXPONENT, `format_number`
# asks MPFR for the rounded digits instead (mpfr_asprintf, correctly rounded to nearest,
# ties to even: the same function as `_round_decimal`), and `exact_decimal` gives the
# digits that read back exactly, since the exact expansion has millions of digits.
