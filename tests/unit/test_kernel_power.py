"""Integer powers in kernels: the chain for small exponents, squaring, then exp and log.

Any exponent lowers in milliseconds to a bounded kernel, and the native result
agrees with the exact power (MPFR) within the conformance bands.
"""

from __future__ import annotations

import shutil
import time
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from presk.host.realization import Realization
from presk.kernel import ir
from presk.kernel.ir import Buffer
from presk.kernel.lower import Launch, Step, lower
from presk.kernel.lower.power import CHAIN_LIMIT, SQUARING_LIMIT
from presk.kernel.text import kernel_text

BANDS = {"f64": (2.0**-40, 2.0**-50), "f32": (2.0**-15, 2.0**-20)}  # conformance/run.py


def _pow_kernel(n: int | Fraction, dtype: str = "f64") -> ir.Kernel:
    x, out = Buffer(0, dtype, (("a", 3),)), Buffer(1, dtype, (("a", 3),))
    return lower(Launch([Step("pow", {}, [x, Fraction(n)], out.axes)], [x], out), dtype)


def test_small_exponents_keep_the_chain_of_multiplications() -> None:
    assert "%1[i0] = ((%0[i0] * %0[i0]) * %0[i0])" in kernel_text(_pow_kernel(3))
    assert "%1[i0] = (1 / (%0[i0] * %0[i0]))" in kernel_text(_pow_kernel(-2))
    assert "%1[i0] = 1\n" in kernel_text(_pow_kernel(0))
    chain = kernel_text(_pow_kernel(CHAIN_LIMIT))
    assert chain.count("*") == CHAIN_LIMIT - 1 and " = s" not in chain


@pytest.mark.parametrize(
    "n", [17, 200, -255, SQUARING_LIMIT + 1, 10**8, -(10**8), 2**64, 2**64 + 1, 10**4000 + 1]
)
def test_every_exponent_lowers_at_once_to_a_short_kernel(n: int) -> None:
    start = time.perf_counter()
    text = kernel_text(_pow_kernel(n))
    assert time.perf_counter() - start < 0.5
    lines = text.count("\n")
    if abs(n) <= SQUARING_LIMIT:
        assert lines <= 2 * abs(n).bit_length() + 5  # one scalar per squaring step
    else:
        assert lines <= 7 and "exp(" in text and "log(" in text


def test_a_huge_exponent_keeps_its_parity() -> None:
    odd, even = kernel_text(_pow_kernel(10**4000 + 1)), kernel_text(_pow_kernel(10**4000))
    assert "? (-s1) : s1" in odd and "(-s1)" not in even
    assert str(2**64 + 1) in odd and str(2**64) in even


def _exact(x: float, n: int, dtype: str) -> float:
    """x^n exactly, rounded once to the realization's type."""
    with gmpy2.context(precision=400, emin=-(10**9), emax=10**9):
        value = float(gmpy2.mpfr(x) ** n) if n >= 0 else float(1 / gmpy2.mpfr(x) ** -n)
    return value if dtype == "f64" else float(np.float32(value))


def _within(got: float, want: float, dtype: str) -> bool:
    """conformance/run.py's test: |x − y| ≤ ε(|x| + a) + ε(|y| + a)."""
    eps, a = BANDS[dtype]
    if np.isinf(want) or np.isinf(got):
        return got == want
    return abs(got - want) <= eps * (abs(got) + a) + eps * (abs(want) + a)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("n", [17, 99, 255, 257, 12345, 10**8, -(10**8) - 1, 2**64 + 1])
def test_native_powers_are_within_the_bands(tmp_path, monkeypatch, dtype: str, n: int) -> None:
    from presk.pipeline import compile_path

    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "p.psk"
    src.write_text(f"fn f(x : ℝ[64]) -> ℝ[64] = x ^ {n}\n")
    compiled, *_ = compile_path(str(src), "f", {}, Realization(dtype))
    numpy_type = np.float64 if dtype == "f64" else np.float32
    rng = np.random.default_rng(abs(n) % 1000)
    # Results in range, either sign, and the neighbours of ±1 and 0 (they saturate).
    limit = 700 if dtype == "f64" else 85
    t = rng.uniform(-limit, limit, 58)
    x = np.exp(t / min(abs(n), 2**60)) * rng.choice([-1.0, 1.0], 58)
    one = np.nextafter(numpy_type(1), numpy_type(2))
    below = np.nextafter(numpy_type(1), numpy_type(0))
    x = np.concatenate([x, [one, below, -one, 1.0, -1.0, 0.0]]).astype(numpy_type)
    (got,) = compiled.raw([x])
    for xi, gi in zip(x, got, strict=True):
        want = _exact(float(xi), n, dtype)
        assert _within(float(gi), want, dtype), (float(xi), float(gi), want)
