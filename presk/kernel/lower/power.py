"""`pow` in a kernel: an integer exponent by multiplications or through exp and log.

By the size of an integer exponent n (see Note [Large powers]):

  |n| ≤ CHAIN_LIMIT      the chain `((x·x)·x)…` of |n| − 1 multiplications, the form
                         every kernel has had (the exponents in use, -2 to 3, keep
                         their bits); a negative n is 1 / x^|n|
  |n| ≤ SQUARING_LIMIT   repeated squaring: at most 2·log2|n| multiplications, each
                         bound to a scalar; a negative n is 1 / x^|n|
  larger                 exp(n·log|x|), negated for a negative x and an odd n

A non-integer exponent y is exp(y·log x), as before.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from presk.kernel.ir import Bin, BinOp, Cmp, CmpOp, Const, Expr, Fn, Libm, Neg, Select, Var
from presk.kernel.lower.base import ONE, ZERO

# Up to this |n| the chain of multiplications, as before (the C text nests at most 16 deep).
CHAIN_LIMIT = 16
# Up to this |n| repeated squaring, whose error grows as about 0.7·|n| roundings: here
# within the bands of f64 (2^-40) and f32 (2^-15) alike.
SQUARING_LIMIT = 256
# Past 2^64 every finite x but 0 and ±1 has left the range of every type (|n·log x| ≥ 2^11),
# so an exponent this large is replaced by one of the same parity that C can spell.
SATURATED = 1 << 64

Bind = Callable[[Expr], Var]


def power(bind: Bind, base: Expr, exponent: Expr) -> Expr:
    """base ^ exponent; `bind` names a value computed once per element, before its store."""
    if not (isinstance(exponent, Const) and exponent.value.denominator == 1):
        return Fn(Libm.EXP, Bin(BinOp.MUL, exponent, Fn(Libm.LOG, base)))
    n = int(exponent.value)
    if n == 0:
        return ONE
    magnitude = abs(n)
    if magnitude > SQUARING_LIMIT:
        return _exp_log(bind, base, n)
    if magnitude <= CHAIN_LIMIT:
        result: Expr = base
        for _ in range(magnitude - 1):
            result = Bin(BinOp.MUL, result, base)
    else:
        result = _squarings(bind, base, magnitude)
    return Bin(BinOp.DIV, ONE, result) if n < 0 else result


def _squarings(bind: Bind, base: Expr, n: int) -> Var:
    """x^n by the binary method, most significant bit first: square, then times x on a 1."""
    x = bind(base)
    result = x
    for bit in bin(n)[3:]:
        square = Bin(BinOp.MUL, result, result)
        result = bind(Bin(BinOp.MUL, square, x) if bit == "1" else square)
    return result


def _exp_log(bind: Bind, base: Expr, n: int) -> Expr:
    """|x|^n as exp(n·log|x|), with x's sign when n is odd."""
    if abs(n) > SATURATED:
        n = (SATURATED + (n & 1)) * (1 if n > 0 else -1)
    x = bind(base)
    negative = Cmp(CmpOp.LT, x, ZERO)
    size = Fn(
        Libm.EXP, Bin(BinOp.MUL, Const(Fraction(n)), Fn(Libm.LOG, Select(negative, Neg(x), x)))
    )
    if n % 2 == 0:
        return size
    magnitude = bind(size)
    return Select(negative, Neg(magnitude), magnitude)


# Note [Large powers]
# ~~~~~~~~~~~~~~~~~~~
# The chain used to be built whatever n was: `x ^ 100000000` or `x ^ 2^64` never
# finished lowering. Its bits are kept where it is short. Repeated squaring is
# O(log n) but amplifies its first roundings: measured against exact MPFR powers
# (x = 1 + t/n, |t| ≤ 3), its worst error is about 0.7·n units in the last place
# (12 u at n = 17, 700 u at n = 1000, 9000 u at n = 12345 in f64; 650 u at 1000 in
# f32), which leaves the conformance bands (8192 u in f64, 512 u in f32) past a few
# thousand. exp(n·log|x|) has an error of about |n·log x| + 2 units, and for a
# result in range |n·log x| is at most 745 (f64) or 104 (f32) whatever n is:
# measured, at most 970 u in f64 and 250 u in f32 for n from 17 to 2^64. So
# squaring serves up to 256 (≤ 180 u) and exp and log above. Edge values: x = ±1
# gives exp(0) = 1 with the parity's sign; 0 gives exp(−inf) = 0 (inf for n < 0, as
# 1/0 is in the chain); ±inf and NaN what x^n is. An exponent past 2^64 is
# replaced by 2^64 or 2^64 + 1 of the same sign and parity: |n·log|x|| ≥ 2^64·2^-53
# for every |x| ≠ 1, so the result saturates to 0 or inf either way, and the
# constant stays one that C can spell.
