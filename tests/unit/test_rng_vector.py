"""The vectorised real draws equal their MPFR definitions bit for bit (docs/rng.md §4.3)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
import pytest

from presk.interp import boxmuller, rng
from presk.interp.rng import Key, key_for

KEYS = [key_for(42, "theta/proj.w"), key_for(0, "input/x"), key_for(2**64 - 1, "theta/θ")]


def same_bits(a: np.ndarray[Any, Any], b: list[float]) -> bool:
    return a.dtype == np.float64 and a.tobytes() == np.array(b, dtype=np.float64).tobytes()


def test_vector_path_is_available_here() -> None:
    # Elsewhere every draw still has its bits, only slower; here the fast path must run.
    assert rng.VECTOR, "numpy's longdouble is not x87 extended precision on this machine"


@pytest.mark.parametrize("key", KEYS)
def test_normals_equal_the_mpfr_definition(key: Key) -> None:
    n = 100_001
    assert same_bits(rng.normals_array(key, n), rng.normals(key, n))


def test_normals_known_values_and_prefixes() -> None:
    k = KEYS[0]
    assert rng.normals_array(k, 3).tolist() == [
        0.1476777772029313,
        -1.241743218188582,
        -1.7291438717249072,
    ]
    assert rng.normals_array(k, 0).shape == (0,)
    assert rng.normals_array(k, 1001)[:1000].tobytes() == rng.normals_array(k, 1000).tobytes()


def crafted(monkeypatch: pytest.MonkeyPatch, words: list[int]) -> None:
    """Make every key's stream the u64 words `words`, repeated."""
    pattern = np.array(words, dtype=np.uint64)

    def fake(key: Key, start: int, stop: int) -> np.ndarray[Any, Any]:
        return np.resize(pattern, stop)[start:stop]

    def fake_chunks(key: Key, n: int) -> Any:
        yield np.resize(pattern, n)

    monkeypatch.setattr(rng, "_u64_range", fake)
    monkeypatch.setattr(rng, "_u64_chunks", fake_chunks)


def test_normals_at_the_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    # u1 at 1 and at its least; t on and next to every multiple of an eighth turn.
    m1s = [0, 1, 2**52, 2**53 - 2, 2**53 - 1]
    m2s = [j * 2**50 + d for j in range(8) for d in (-1, 0, 1)] + [1, 2**53 - 1]
    m2s = [m for m in m2s if 0 <= m < 2**53]
    words = [w for a in m1s for b in m2s for w in (a << 11, b << 11 | 0x7FF)]
    crafted(monkeypatch, words)
    n = len(words)
    got = rng.normals_array(Key(0, 0), n)
    assert same_bits(got, rng.normals(Key(0, 0), n))
    assert all(str(z) != "-0.0" for z in got.tolist())


def test_chunk_boundaries_and_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rng, "_CHUNK_BLOCKS", 7)
    k = KEYS[1]
    for n in (1, 13, 14, 15, 29, 301):
        assert same_bits(rng.normals_array(k, n), rng.normals(k, n))
        assert rng.u64_array(k, n).tolist() == rng.u64_stream(k, n)
    monkeypatch.setattr(rng, "_workers", lambda: 1)
    assert same_bits(rng.normals_array(k, 301), rng.normals(k, 301))


def test_without_extended_precision_the_mpfr_path_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rng, "VECTOR", False)
    k = KEYS[2]
    assert same_bits(rng.normals_array(k, 51), rng.normals(k, 51))
    assert same_bits(rng.uniform_in_array(k, 51, -1, 3), rng.uniform_in(k, 51, -1, 3))
    assert same_bits(rng.scaled_normals_array(k, 51, 0.5), rng.scaled_normals(k, 51, 0.5))


RANGES: list[tuple[Any, Any]] = [
    (-2.5, 0.5),
    (0, 1),
    (Fraction(-1, 3), Fraction(1, 3)),
    (3, 3),  # no width
    (5, -1e-3),  # a negative width
    (-1e-300, 1e-300),  # tiny, inside the safe range
    (-1e300, 2e300),
    (0, 2.0**-1000),  # outside it: the MPFR path
    (-1.5, float("inf")),
    (Fraction(-(10**400)), 1),
]


@pytest.mark.parametrize(("low", "high"), RANGES)
def test_uniform_in_equals_the_mpfr_definition(low: Any, high: Any) -> None:
    for key in KEYS[:2]:
        n = 50_000
        assert same_bits(rng.uniform_in_array(key, n, low, high), rng.uniform_in(key, n, low, high))


@pytest.mark.parametrize(("fan_in", "fan_out"), [(3, 5), (16, 48), (1, 0), (512, 2048), (7, 7)])
def test_xavier_equals_the_mpfr_definition(fan_in: int, fan_out: int) -> None:
    for key in KEYS:
        got = rng.xavier_uniform_array(key, 100_000, fan_in, fan_out)
        assert same_bits(got, rng.xavier_uniform(key, 100_000, fan_in, fan_out))
    assert rng.xavier_uniform_array(KEYS[0], 2, 3, 5).tolist() == [
        -0.07352425888557798,
        0.46564359969677505,
    ]
    with pytest.raises(ValueError):
        rng.xavier_uniform_array(KEYS[0], 2, 0, 0)


@pytest.mark.parametrize("std", [Fraction(1, 50), Fraction(3), 0, 1e-200, Fraction(1, 10**300), -2])
def test_scaled_normals_equal_the_mpfr_definition(std: Any) -> None:
    key = KEYS[0]
    assert same_bits(
        rng.scaled_normals_array(key, 60_000, std), rng.scaled_normals(key, 60_000, std)
    )


def test_integers_and_uniforms() -> None:
    for key in KEYS:
        assert rng.uniforms_array(key, 5000).tolist() == rng.uniforms(key, 5000)
        for bound in (1, 2, 7, 50257, 2**40 + 3, 2**63 + 12345, 2**64 - 1):
            assert rng.randints_array(key, 3000, bound).tolist() == rng.randints(key, 3000, bound)
    assert rng.randints_array(KEYS[0], 3, 50257).tolist() == [22995, 38639, 6415]
    with pytest.raises(ValueError):
        rng.randints_array(KEYS[0], 3, 0)


def exact(x: Any) -> Any:
    """A longdouble as an mpfr, exactly (at the caller's precision, >= 64)."""
    hi = float(x)
    return gmpy2.mpfr(hi) + gmpy2.mpfr(float(x - np.longdouble(hi)))


def ulps(got: Any, want: Any) -> float:
    """|got - want| in ulps of the 64-bit significand at `want`."""
    exponent, _ = gmpy2.frexp(want)
    return float(abs(exact(got) - want) / gmpy2.mul_2exp(gmpy2.mpfr(1), exponent - 64))


def test_libm_accuracy_assumed_by_the_bound() -> None:
    # The bound assumes logl, sinl and cosl within LIBM_ULPS ulps; measure a margin of 2.
    gen = np.random.default_rng(7)
    m = gen.integers(1, 2**53, 4000, dtype=np.uint64)
    u = m.astype(np.longdouble) * np.longdouble(2.0**-53)
    a = (m >> np.uint64(3)).astype(np.longdouble) * boxmuller.TWO_PI_53  # [0, pi/4)
    worst = 0.0
    with gmpy2.context(precision=256):
        for f, g, xs in ((np.log, gmpy2.log, u), (np.sin, gmpy2.sin, a), (np.cos, gmpy2.cos, a)):
            ys = f(xs)
            for x, y in zip(list(xs), list(ys), strict=True):
                want = g(exact(x))
                if not gmpy2.is_zero(want):
                    worst = max(worst, ulps(y, want))
    print(f"worst libm error {worst:.3f} ulps")
    assert worst <= boxmuller.LIBM_ULPS / 2
