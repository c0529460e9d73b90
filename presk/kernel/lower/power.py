"""`pow` in a kernel: integer exponents by multiplication, others through exp and log.

An integer exponent n with |n| ≤ CHAIN_LIMIT is the chain `((x·x)·x)…` of
|n| − 1 multiplications, in that order (the form every kernel has had, whose
bits the tests and the conformance suite fix). A larger one is computed by
repeated squaring: O(log n) multiplications, each bound to a scalar so the
text stays linear in the number of bits. A negative exponent is 1 / x^|n|.
See Note [Large powers].
"""

from __future__ import annotations

from collections.abc import Callable

from presk.kernel.ir import Bin, BinOp, Const, Expr, Fn, Libm, Var
from presk.kernel.lower.base import ONE

# Up to this |n| the chain of multiplications, as before: the exponents in use (-2 to 3)
# keep their bits, and the C text nests at most 16 deep (clang refuses 256).
CHAIN_LIMIT = 16

# Past 2^64 every finite x other than 0 and ±1 has left the range of f64, f32 and bf16
# (see Note [Large powers]), so only the exponent's parity still matters.
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
    if magnitude <= CHAIN_LIMIT:
        result = base
        for _ in range(magnitude - 1):
            result = Bin(BinOp.MUL, result, base)
    else:
        result = _squarings(bind, base, magnitude)
    return Bin(BinOp.DIV, ONE, result) if n < 0 else result


def _squarings(bind: Bind, base: Expr, n: int) -> Var:
    """x^n by the binary method, most significant bit first: square, then times x on a 1."""
    if n > SATURATED:
        n = SATURATED + (n & 1)
    x = bind(base)
    result = x
    for bit in bin(n)[3:]:
        square = Bin(BinOp.MUL, result, result)
        result = bind(Bin(BinOp.MUL, square, x) if bit == "1" else square)
    return result


# Note [Large powers]
# ~~~~~~~~~~~~~~~~~~~
# The chain needs |n| − 1 multiplications and used to be built whatever n was:
# `x ^ 100000000` or `x ^ 2^64` never finished lowering. Repeated squaring needs
# at most 2·log2(n) roundings where the chain needs n − 1, and both have a
# relative error bound of about (n − 1)·u, so the reference (exact, then rounded
# once) agrees with either within the conformance bands; but the two round in
# different places, so small exponents keep the chain and its bits.
#
# An exponent above 2^64 is replaced by 2^64 or 2^64 + 1, of the same parity:
# |x|^(2^64) overflows for every |x| ≥ 1 + 2^-52 (the log is at least 2^12 >
# 710) and underflows to 0 for every |x| ≤ 1 − 2^-53 (at most −2^11 < −745); the
# computed squarings leave 1 as the exact ones do (near 1, the square of
# 1 − a·2^-53 is 1 − 2a·2^-53 + a²·2^-106, which rounds to 1 − 2a·2^-53 while a is
# small), so they overflow or underflow too: tests/unit/test_kernel_power.py runs
# the neighbours of 1 in every type. 0, ±1, ±inf and NaN give the same value for
# any exponent of the same parity. So a kernel has at most 65 squarings per power,
# however long the literal.
