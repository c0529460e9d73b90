"""Box-Muller normals on arrays, decided bit for bit against their MPFR definition.

Takes pairs of uniform53 draws (m1, m2) as uint64 arrays and gives, for each component, the
double that `rng.normals` (docs/rng.md §4.2, MPFR at 256 bits) gives, together with a mask of
the elements not decided here, which the caller recomputes in MPFR. Two stages, both in x87
extended precision (`np.longdouble`, 64-bit significand, unit roundoff u = 2**-64):

* `first`: plain long double, the C library's logl, sinl and cosl, one relative error bound
  for every element (docs/rng.md §4.3). About 1% of the elements stay undecided.
* `second`, for those: the same formula in doubled long double (a value is hi + lo, about
  128 bits), using only +, -, *, / and sqrt, which IEEE 754 rounds correctly, and tables
  rounded from MPFR; nothing of the C library. Its bound is derived in Note [The second
  stage's bound]; about 2 elements in 10**6 stay undecided after it.

`scale` does the same for `normal(std=…)`: RN53(z * std) for normals z, in two stages, and
`affine` is the second stage of the affine uniforms (rng.py holds their first).

Both need numpy's longdouble to be the x87 format in 16 bytes (`X87`); the caller checks.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import gmpy2
import numpy as np
import numpy.typing as npt

__all__ = ["UNIT", "X87", "affine", "first", "pair", "scale", "second"]

_LD = np.longdouble
# A 64-bit significand, stored in the low 8 of 16 bytes (1.5 has it 0xC000000000000000).
X87 = (
    np.finfo(_LD).nmant == 63
    and np.dtype(_LD).itemsize == 16
    and int(np.array([1.5], dtype=_LD).view(np.uint64)[0]) == 0xC000000000000000
)
UNIT = 2.0**-64  # unit roundoff of a 64-bit significand: |RN(x) - x| <= UNIT * |x|
# Assumed worst error of the C library's logl, sinl and cosl in ulps of the result (glibc
# documents at most 1 for x86 long double; tests/unit/test_rng_vector.py measures it).
LIBM_ULPS = 2
# The relative error of z = r * trig is at most (3 L + 4.3) u plus second-order terms
# (docs/rng.md §4.3); E u with E = 3 L + 6 covers them with a margin.
_FIRST_ULPS = 3 * LIBM_ULPS + 6
# The second stage's relative error is below 2**-78.3 (Note [The second stage's bound]); the
# decision uses 2**-72, a margin of 80 against a slip in that count.
_SECOND_BOUND = 2.0**-72

U64 = npt.NDArray[np.uint64]
Bools = npt.NDArray[np.bool_]
Doubles = npt.NDArray[np.float64]
Ld = Any  # a longdouble array or scalar; numpy's stubs type their arithmetic loosely
Pair = tuple[Ld, Ld]  # a doubled long double: hi + lo, |lo| <= u |hi|

_Q = np.uint64(1 << 51)  # a quarter turn in units of u2's 2**-53
_EIGHTH = np.uint64(1 << 50)
_SCALE = _LD(2.0**-53)


def _ld(x: Any) -> Any:
    """An mpfr of at most 64 significant bits as a longdouble, exactly (two doubles carry it)."""
    hi = float(x)
    return _LD(hi) + _LD(float(x - hi))


def pair(x: Any) -> tuple[Any, Any]:
    """x (an mpfr of at most 256 bits) as hi + lo: hi = RN64(x), lo = RN64(x - hi)."""
    with gmpy2.context(precision=256):  # x - hi is exact at x's precision
        hi = gmpy2.mpfr(x, 64)
        return _ld(hi), _ld(gmpy2.mpfr(x - hi, 64))


def _two_pi() -> Any:
    with gmpy2.context(precision=256):
        return 2 * gmpy2.const_pi()


_TWO_PI_HI, _TWO_PI_LO = pair(_two_pi())
TWO_PI_53 = _TWO_PI_HI * _SCALE  # RN64(2 pi) 2**-53: exact, a power-of-two scaling


# ---------------------------------------------------------------------------------------------
# Reduction of t = 2 pi m2 2**-53, shared by both stages


def _reduce(m2: U64) -> tuple[U64, U64, Bools, U64]:
    """Quadrant q, position k in it, whether past its eighth, and x in [0, 2**50]."""
    # t is reduced exactly on the integer m2: the distance x (at most an eighth turn) to the
    # quadrant's nearer end is all that sin and cos see, so their arguments lie in
    # [0, pi/4], where both are well conditioned (no zero of cos nearby).
    q = m2 >> np.uint64(51)
    k = m2 & (_Q - np.uint64(1))
    flip = k > _EIGHTH
    x = np.where(flip, _Q - k, k)
    return q, k, flip, x


def _orient(q: U64, flip: Bools) -> tuple[Bools, Bools, Bools]:
    """Whether (cos t, sin t) is (sin a, cos a) swapped, and whether each is negated."""
    # Within the quadrant (sin, cos) = (s, c), or (c, s) past the eighth; the quadrant then
    # rotates: cos t = cos a, -sin a, -cos a, sin a and sin t = sin a, cos a, -sin a, -cos a.
    swap = flip ^ (q & np.uint64(1)).astype(np.bool_)
    return swap, (q == 1) | (q == 2), q >= 2


# ---------------------------------------------------------------------------------------------
# The first stage


def first(m1: U64, m2: U64) -> tuple[Doubles, Doubles, Bools, Bools]:
    """z0, z1 and where each is undecided, for pairs of uniform53 draws, in long double."""
    # In place where it reads as well: each fresh array is memory that malloc may hand
    # back to the system and fault in again on the next chunk.
    r = (m1 + np.uint64(1)).astype(_LD)
    r *= _SCALE  # u1, exact: at most 54 bits
    np.log(r, out=r)
    r *= -2
    np.sqrt(r, out=r)
    q, k, flip, x = _reduce(m2)
    a = x.astype(_LD)
    a *= TWO_PI_53
    # r sin a and r cos a are rounded to doubles first: the swaps and negations that give
    # z0 = r cos t and z1 = r sin t commute with rounding and cost less on doubles.
    trig = np.sin(a)
    trig *= r
    zs, bad_s = _nearest(trig, _FIRST_ULPS)
    np.cos(a, out=trig)
    trig *= r
    zc, bad_c = _nearest(trig, _FIRST_ULPS)
    swap, negate0, negate1 = _orient(q, flip)
    z0 = np.where(swap, zs, zc)
    z1 = np.where(swap, zc, zs)
    np.negative(z0, out=z0, where=negate0)
    np.negative(z1, out=z1, where=negate1)
    # At k == 0 one of sin t, cos t is an exact zero here but, with pi rounded, a tiny
    # non-zero in MPFR: those pairs take the MPFR path.
    on_axis = k == 0
    bad0 = np.where(swap, bad_s, bad_c) | on_axis
    bad1 = np.where(swap, bad_c, bad_s) | on_axis
    # `+ 0.0` turns -0.0 (u1 == 1 gives r = 0, then negated) into +0.0.
    return z0 + 0.0, z1 + 0.0, bad0, bad1


def _nearest(z: Ld, ulps: int) -> tuple[Doubles, Bools]:
    """RN53(z), and where a bound of `ulps` u |z| around z may reach a midpoint."""
    # The x87 format keeps the 64-bit significand (integer bit included) in the low 8 of
    # each element's 16 bytes. The midpoints between doubles in z's binade are where its
    # low 11 bits read 1024, and the bound ulps * u |z| is below ulps (top + 1) / 32 units
    # in the last place, `top` being the significand's 5 leading bits: a distance of at
    # least that (in those units) leaves no midpoint within the bound.
    sig = np.ascontiguousarray(z).view(np.uint64)[0::2]
    dist = np.abs((sig & np.uint64(0x7FF)).astype(np.int64) - 1024)
    reach = ulps * ((sig >> np.uint64(59)).astype(np.int64) + 1)
    return z.astype(np.float64), (dist << 5) < reach


# ---------------------------------------------------------------------------------------------
# Scaled normals: RN53(RN256(z std)) for doubles z


def scale(z: Doubles, std: Pair) -> tuple[Doubles, Bools]:
    """RN53(z * std) for std = hi + lo (its 256-bit value to u**2), and where undecided."""
    # First z * hi in long double: two roundings of half an ulp (std's and the product's),
    # so 2u covers them. The undecided (about 0.2%) are redone: z hi exactly by two_prod,
    # z lo and the sum each rounded, within 4u**2 in all, far inside the 2**-72 margin.
    p = z.astype(_LD)
    p *= std[0]
    out, bad = _nearest(p, 2)
    redo = np.flatnonzero(bad)
    if redo.size:
        zr = z[redo].astype(_LD)
        ph, pl = _two_prod(zr, std[0])
        p2 = _fast_two_sum(ph, pl + zr * std[1])
        exact, left = _decide(p2, np.abs(p2[0]) * _LD(_SECOND_BOUND))
        out[redo] = np.where(left, out[redo], exact)
        bad[redo] = left
    return out + 0.0, bad


# ---------------------------------------------------------------------------------------------
# Affine uniforms: the second stage of RN53(RN256(low + RN256(width u)))


def affine(low: Pair, width: Pair, m: U64) -> tuple[Doubles, Bools]:
    """low + width u, u = m 2**-53, for low and width as hi + lo, and where undecided."""
    # width u = two_prod(width hi, u) + width lo u, then the sum with low by two_sum: each
    # step errs by a few u**2 of |low| + |width u| (MPFR's two roundings by 2**-255 of it),
    # not of the result, which may cancel; so the margin has 2**-120 of |low| + |width u|
    # (over 30 times those errors) beside the usual 2**-72 of the result.
    u = m.astype(_LD) * _SCALE
    ph, pe = _two_prod(width[0], u)
    v = _add(low, _fast_two_sum(ph, pe + width[1] * u))
    margin = np.abs(v[0]) * _LD(_SECOND_BOUND) + (abs(low[0]) + np.abs(ph)) * _LD(2.0**-120)
    return _decide(v, margin)


# ---------------------------------------------------------------------------------------------
# Error-free transformations on long doubles (exact barring overflow and underflow, which
# cannot occur here: every magnitude lies in [2**-1100, 2**1000], the format's in 2**+-16382)


def _two_sum(a: Ld, b: Ld) -> Pair:
    """s + e = a + b exactly, s = RN(a + b) (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a: Ld, b: Ld) -> Pair:
    """s + e = a + b exactly, s = RN(a + b), when |a| >= |b| or a == 0 (Dekker)."""
    s = a + b
    return s, b - (s - a)


_SPLITTER = _LD(2**32 + 1)  # Veltkamp's constant for a 64-bit significand


def _two_prod(a: Ld, b: Ld) -> Pair:
    """p + e = a * b exactly, p = RN(a * b) (Dekker, 32-bit halves; there is no FMA)."""
    p = a * b
    ca, cb = _SPLITTER * a, _SPLITTER * b
    ah, bh = ca - (ca - a), cb - (cb - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _mul(x: Pair, y: Pair) -> Pair:
    """x * y to a relative error below 3 u**2 (the lo * lo term dropped)."""
    p, e = _two_prod(x[0], y[0])
    return _fast_two_sum(p, e + (x[0] * y[1] + x[1] * y[0]))


def _add(x: Pair, y: Pair) -> Pair:
    """x + y; the error is at most 3 u**2 (|x| + |y|)."""
    s, e = _two_sum(x[0], y[0])
    return _fast_two_sum(s, e + (x[1] + y[1]))


# ---------------------------------------------------------------------------------------------
# Tables, rounded from MPFR at 256 bits once, on first use

_LOG_STEP = 9  # log's table is indexed by f rounded to 2**-9, f in [0.75, 1.5)
_TRIG_STEP = 7  # sin's and cos's by a rounded to 2**-7, a in [0, pi/4]
_LOG_BITS = 11  # g = 1/c to 11 bits: f (53 bits) times g is exact in 64


@cache
def _tables() -> dict[str, Any]:
    with gmpy2.context(precision=256):
        ln2 = gmpy2.log(2)
        ln2_hi = gmpy2.mpfr(ln2, 58)  # e * ln2_hi is exact for |e| <= 63
        # Entry i is for c = (i + 384) 2**-9, f in [0.75, 1.5) rounding to 384..768.
        gs = [gmpy2.mpfr(gmpy2.mpfr(1 << _LOG_STEP) / j, _LOG_BITS) for j in range(384, 769)]
        logs = [pair(-gmpy2.log(g)) for g in gs]
        angles = [gmpy2.mpfr(j) / (1 << _TRIG_STEP) for j in range(102)]
        sines = [pair(gmpy2.sin(t)) for t in angles]
        cosines = [pair(gmpy2.cos(t)) for t in angles]
        return {
            "ln2": (_ld(ln2_hi), _ld(gmpy2.mpfr(ln2 - ln2_hi, 64))),
            "g": np.array([_ld(g) for g in gs], dtype=_LD),
            "log_g": tuple(np.array(col, dtype=_LD) for col in zip(*logs, strict=True)),
            "sin": tuple(np.array(col, dtype=_LD) for col in zip(*sines, strict=True)),
            "cos": tuple(np.array(col, dtype=_LD) for col in zip(*cosines, strict=True)),
            # Taylor coefficients, each rounded to 64 bits.
            "log1p": [_ld(gmpy2.mpfr((-1) ** (k + 1) / gmpy2.mpfr(k), 64)) for k in range(3, 11)],
            "sin_poly": [
                _ld(gmpy2.mpfr((-1) ** k / gmpy2.fac(2 * k + 1), 64)) for k in range(1, 5)
            ],
            "cos_poly": [_ld(gmpy2.mpfr((-1) ** k / gmpy2.fac(2 * k), 64)) for k in range(2, 6)],
        }


def _horner(coefficients: list[Any], x: Ld) -> Ld:
    """c0 + c1 x + c2 x**2 + ... in long double."""
    acc = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        acc = acc * x + c
    return acc


# ---------------------------------------------------------------------------------------------
# The second stage


def _log(m1: U64) -> Pair:
    """log(u1), u1 = (m1 + 1) 2**-53, as a doubled long double."""
    t = _tables()
    u1 = (m1 + np.uint64(1)).astype(_LD) * _SCALE
    # u1 = 2**e f, f in [0.75, 1.5): near u1 = 1, e = 0 and nothing cancels against e ln 2.
    mant, ex = np.frexp(u1)
    big = mant >= 0.75
    f = np.where(big, mant, 2 * mant)
    e = np.where(big, ex, ex - 1).astype(_LD)
    j = np.rint(f * (1 << _LOG_STEP)).astype(np.intp) - 384
    # f g is exact (53 + 11 bits) and within 2**-9 of 1, so r = f g - 1 is exact (Sterbenz).
    r = f * t["g"][j] - 1
    # log1p(r) = r - r**2 / 2 + r**3 P(r): the first two exactly, the rest in long double.
    p, pe = _two_prod(r, r)
    s, se = _two_sum(r, -p / 2)
    tail = se + (-pe / 2 + (r * p) * _horner(t["log1p"], r))
    # log u1 = e ln 2 + log(1/g) + log1p(r); e ln2_hi is exact.
    ln2_hi, ln2_lo = t["ln2"]
    log_g_hi, log_g_lo = (col[j] for col in t["log_g"])
    y, y1 = _two_sum(e * ln2_hi, log_g_hi)
    y, y2 = _two_sum(y, s)
    return _fast_two_sum(y, ((y1 + y2) + (log_g_lo + e * ln2_lo)) + tail)


def _sqrt_neg2(y: Pair) -> Pair:
    """sqrt(-2 y) for y <= 0: one Newton step on the long double square root, exact residual."""
    wh, wl = -2 * y[0], -2 * y[1]
    s = np.sqrt(wh)
    p, pe = _two_prod(s, s)
    residual = ((wh - p) - pe) + wl  # wh - p is exact: p is within 3u of wh
    correction = np.divide(residual, 2 * s, out=np.zeros_like(s), where=s > 0)
    return _fast_two_sum(s, correction)


def _sin_cos(x: U64) -> tuple[Pair, Pair]:
    """sin a and cos a of a = 2 pi x 2**-53 (2 pi at 256 bits), x in [1, 2**50]."""
    t = _tables()
    xl = x.astype(_LD)
    a, ae = _two_prod(xl, TWO_PI_53)
    a_lo = ae + xl * (_TWO_PI_LO * _SCALE)
    # a = j 2**-7 + d, |d| <= 2**-8; a - j 2**-7 is exact (Sterbenz, or j = 0).
    jf = np.rint(a * (1 << _TRIG_STEP))
    j = jf.astype(np.intp)
    d, dl = _two_sum(a - jf / (1 << _TRIG_STEP), a_lo)
    dd = d * d
    sin_d = _fast_two_sum(d, dl + d * (dd * _horner(t["sin_poly"], dd)))
    # cos d = 1 - d**2 / 2 + d**4 R(d**2), with d**2 = p + pe + 2 d dl (+ dl**2, negligible).
    p, pe = _two_prod(d, d)
    ch, cl = _fast_two_sum(_LD(1), -p / 2)
    cos_d = _fast_two_sum(ch, cl + ((-pe / 2 - d * dl) + (dd * dd) * _horner(t["cos_poly"], dd)))
    sin_j = tuple(col[j] for col in t["sin"])
    cos_j = tuple(col[j] for col in t["cos"])
    sin_a = _add(_mul(sin_j, cos_d), _mul(cos_j, sin_d))
    minus = _mul(sin_j, sin_d)
    cos_a = _add(_mul(cos_j, cos_d), (-minus[0], -minus[1]))
    return sin_a, cos_a


def second(m1: U64, m2: U64) -> tuple[Doubles, Doubles, Bools, Bools]:
    """z0, z1 and where each is undecided, in doubled long double (few elements)."""
    r = _sqrt_neg2(_log(m1))
    q, k, flip, x = _reduce(m2)
    sin_a, cos_a = _sin_cos(np.maximum(x, np.uint64(1)))  # x = 0 pairs stay undecided below
    swap, negate0, negate1 = _orient(q, flip)
    cos_t = (np.where(swap, sin_a[0], cos_a[0]), np.where(swap, sin_a[1], cos_a[1]))
    sin_t = (np.where(swap, cos_a[0], sin_a[0]), np.where(swap, cos_a[1], sin_a[1]))
    z0, z1 = _mul(r, cos_t), _mul(r, sin_t)
    d0, bad0 = _decide(z0, np.abs(z0[0]) * _LD(_SECOND_BOUND))
    d1, bad1 = _decide(z1, np.abs(z1[0]) * _LD(_SECOND_BOUND))
    # Negation commutes with rounding to nearest, ties to even.
    np.negative(d0, out=d0, where=negate0)
    np.negative(d1, out=d1, where=negate1)
    on_axis = k == 0
    return d0, d1, bad0 | on_axis, bad1 | on_axis


def _decide(z: Pair, margin: Ld) -> tuple[Doubles, Bools]:
    """RN53 of the exact value, known to within `margin` of z, where that decides it."""
    zh, zl = z
    d = zh.astype(np.float64)
    up = np.nextafter(d, np.inf)
    down = np.nextafter(d, -np.inf)
    # The midpoints on either side of d are exact in 64 bits; zh lies between them, and
    # zh - mid is exact (Sterbenz), so only the addition of zl is rounded.
    above = (zh - (d.astype(_LD) + up) / 2) + zl
    below = (zh - (d.astype(_LD) + down) / 2) + zl
    # See Note [The second stage's bound] for why the margins used are wide enough.
    out = np.where(above > margin, up, np.where(below < -margin, down, d))
    undecided = ~((above > margin) | (below < -margin) | ((above < -margin) & (below > margin)))
    return out + 0.0, undecided | (zh == 0)


# Note [The second stage's bound]
# u = 2**-64. The primitives: +, -, *, / of long doubles round to nearest (x87, 64-bit
# precision); rint, frexp, scaling by 2 and negation are exact; sqrt need only be within
# an ulp (x87's fsqrt is correctly rounded), as a Newton step follows it. two_sum, fast_two_sum and
# two_prod (Dekker's product with Veltkamp's split at 2**32 + 1, valid in radix 2 for any
# precision) are exact, as nothing over- or underflows. A table entry or constant hi + lo is
# within u**2 of its 256-bit value.
#
# log. u1 = 2**e f exactly, e in [-53, 0], f in [0.75, 1.5); j = rint(512 f), g = 1/(j/512)
# rounded to 11 bits, so f g (53 + 11 bits) and r = f g - 1 (Sterbenz) are exact, and
# |r| <= R = 2**-9.26 over the table (a unit test recomputes R exactly). log1p(r) is
# r - r**2/2, exact as s + se, plus r**3 P(r) with P's Taylor terms through r**7:
#   truncation <= |r| R**10 / 10.9 < 2**-93 |r|;
#   r**3 P in long double: Horner over 8 terms (14.5u, coefficients included), r**2, r r**2
#   and the product (3u), so 17.6u of |r**3 P| <= 0.334 R**2 |r|, and two more roundings
#   in the tail of magnitude < 0.34 R**2 |r|: together 6.6u R**2 |r| < 2**-79.7 |r|.
# e ln2_hi is exact (58 bits, |e| < 64); e ln2_lo, log(1/g)'s lo and the sums of the tails
# add at most 2**-120 (|e ln 2| + |log g|), and both terms are exactly 0 when e = 0 and
# j = 512 (g = 1). Elsewhere |log u1| >= 2**-10 and |r| / |log u1| <= 1.006 (the same
# test), so the relative error of log u1 is eps_y <= 1.006 * 2**-79.7 + 2**-110 < 2**-79.6.
#
# sqrt. w = -2 y exactly; s = sqrt(wh), s**2 = p + pe exactly and wh - p is exact
# (Sterbenz), so the residual w - s**2 is known to u**2 and one Newton step leaves
# (3u)**2 / 8: the relative error of r is eps_y / 2 + 2**-120 < 2**-80.5.
#
# sin, cos. a = x (2 pi hi + 2 pi lo) 2**-53 to 4u**2 relative (two_prod, one rounded
# product of the lo part); j = rint(128 a), d = a - j/128 exactly (Sterbenz for j >= 1)
# as d + dl, |d| <= 2**-8. sin d = d + d**3 Q(d**2), Q through d**9 (truncation
# < 2**-105 |d|); d**3 Q in long double errs by 12.5u of |d**3 Q| <= 2**-18.58 |d| (d vs
# d + dl, d**2, Horner over 4 terms, two products), the rounding of dl + d**3 Q by u of it:
# in all < 2**-78.83 |sin d|. cos d = 1 - d**2/2 (exact as p, pe, d dl) + d**4 R(d**2):
# within 2**-95. sin a = S_j cos d + C_j sin d, cos a = C_j cos d - S_j sin d, each
# product and sum within 3u**2 of its operands. For j = 0 (S = 0, C = 1, exactly)
# sin a = sin d. For j >= 1, sin a >= sin(2**-8) >= |sin d| and the two terms sum to at
# most 3 sin a, so sin a errs by < 2**-78.83 + 2**-94 + 2**-120 relative: < 2**-78.8.
# cos a >= 0.707 errs by < 2**-86.6. The argument's own error moves both by < 2**-125.
#
# z = r * (+-sin a or +-cos a) (exact swaps and negations) within 3u**2 more, so
# |z_hi + z_lo - z| <= (2**-80.5 + 2**-78.8 + 2**-100) |z| < 2**-78.38 |z_hi|, where z is
# the value of the formula with 2 pi at 256 bits; MPFR's z_256 is within 2**-190 |z| of
# it (docs/rng.md §4.3), so within 2**-78.3 |z_hi| of z_hi + z_lo too.
#
# The decision. d = RN53(z_hi); the midpoints m between d and its neighbours are exact in
# 64 bits and z_hi - m is exact (Sterbenz), so `above` and `below` are z_hi + z_lo - m
# rounded once (within u of themselves). If `above` exceeds the margin 2**-72 |z_hi| (or
# `below` is under minus it), the exact and MPFR values lie strictly past that midpoint and
# short of the next one (an ulp of d away, far beyond z_lo and the bound), so both round to
# that neighbour of d; if `above` is under minus the margin and `below` over it, both round
# to d. A value within the margin of a midpoint (a tie included) is left to MPFR.
