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


# 1 + 2**-53 puts every product near the midpoint above z when z's significand is near 1
# (a tie at a power of two), and 1 - 2**-54 near the one below: both stages' hard cases.
STDS = [Fraction(1, 50), Fraction(3), 0, 1e-200, Fraction(1, 10**300), -2]
STDS += [Fraction(2**53 + 1, 2**53), Fraction(2**54 - 1, 2**54), -(2.0**-899)]


@pytest.mark.parametrize("std", STDS)
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


# ---------------------------------------------------------------------------------------------
# The two stages of the normals (presk/interp/boxmuller.py), against MPFR


def mpfr_pair(m1: int, m2: int) -> tuple[float, float]:
    with gmpy2.context(precision=256):
        return rng._normal_pair(m1, m2, 2 * gmpy2.const_pi())


def uniform53_pairs(key: Key, pairs: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    m = rng.u64_array(key, 2 * pairs) >> np.uint64(11)
    return m[0::2], m[1::2]


def test_the_second_stage_decides_as_mpfr_where_the_first_could_not() -> None:
    undecided = left = 0
    for s in range(6):
        m1, m2 = uniform53_pairs(key_for(s, "stage/two"), 1 << 16)
        _, _, bad0, bad1 = boxmuller.first(m1, m2)
        redo = np.flatnonzero(bad0 | bad1)
        w0, w1, left0, left1 = boxmuller.second(m1[redo], m2[redo])
        for i, p in enumerate(redo.tolist()):
            want = mpfr_pair(int(m1[p]), int(m2[p]))
            for comp, (w, still, bad) in enumerate(((w0, left0, bad0), (w1, left1, bad1))):
                if not still[i]:
                    assert float(w[i]).hex() == want[comp].hex(), (int(m1[p]), int(m2[p]), comp)
                undecided += int(bad[p])
                left += int(bad[p] and still[i])
    # About 0.8% of the elements reach the second stage and 2 in 10**6 get past it.
    assert 4000 < undecided < 8000
    assert left <= 3


# Pairs whose component the second stage leaves undecided (its value is within 2**-72 of a
# midpoint between doubles), found by searching key_for(s, "hard") streams.
HARD = [
    (2702554989851378, 5970695877029148, 0),
    (5514952591430692, 3395038547648453, 0),
    (2117336669958630, 6723724817612346, 0),
    (5104597356714968, 6272850738894557, 1),
    (8305794113368753, 1356884749899881, 1),
    (3382377186814232, 4291739999655067, 1),
]


def test_pairs_past_both_stages_take_the_mpfr_path(monkeypatch: pytest.MonkeyPatch) -> None:
    m1 = np.array([h[0] for h in HARD], dtype=np.uint64)
    m2 = np.array([h[1] for h in HARD], dtype=np.uint64)
    _, _, left0, left1 = boxmuller.second(m1, m2)
    assert [bool((left0, left1)[comp][i]) for i, (_, _, comp) in enumerate(HARD)] == [True] * 6
    words = [w for a, b, _ in HARD for w in (a << 11 | 0x5A5, b << 11)]
    crafted(monkeypatch, words)
    assert same_bits(rng.normals_array(Key(0, 0), len(words)), rng.normals(Key(0, 0), len(words)))


def test_normals_of_a_large_count_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two million and one normals against the MPFR definition: every element the first
    # stage leaves undecided or decides by a margin under its bound again (a bound twice
    # as wide picks them out), and a random sample of the others.
    key, n = key_for(7, "input/large"), 2_000_001
    got = rng.normals_array(key, n)
    m1, m2 = uniform53_pairs(key, (n + 1) // 2)
    monkeypatch.setattr(boxmuller, "_FIRST_ULPS", 2 * boxmuller._FIRST_ULPS)
    _, _, bad0, bad1 = boxmuller.first(m1, m2)
    hard = np.flatnonzero(np.stack([bad0, bad1], axis=1).reshape(-1)[:n])
    sample = np.random.default_rng(3).integers(0, n, 10_000)
    for i in sorted(set(hard.tolist()) | set(sample.tolist()) | {0, n - 1}):
        want = mpfr_pair(int(m1[i // 2]), int(m2[i // 2]))[i % 2]
        assert float(got[i]).hex() == want.hex(), i
    assert len(hard) > 25_000


def exact_pair(x: tuple[Any, Any], i: int) -> Any:
    return exact(x[0][i]) + exact(x[1][i])


def test_second_stage_errors_within_the_derived_bounds() -> None:
    # The bounds of Note [The second stage's bound], per part, measured at 320 bits on
    # random draws and on the edges: u1 near 1 and near 2**-53, log-table bucket ends,
    # and arguments next to the sine table's points and at the ends of [0, pi/4].
    gen = np.random.default_rng(11)
    n = 3000
    m1 = gen.integers(0, 2**53, n, dtype=np.uint64)
    m1[:40] = np.uint64(2**53 - 41) + np.arange(40, dtype=np.uint64)
    m1[40:80] = np.arange(40, dtype=np.uint64)
    # u1 = (j + 1/2) 2**-10 and one step below: f = 2 u1 at a bucket end of the log table.
    ends = (np.arange(384, 768, 4, dtype=np.uint64) * np.uint64(2) + np.uint64(1)) << np.uint64(42)
    m1[80 : 80 + len(ends)] = ends
    m1[180 : 180 + len(ends)] = ends - np.uint64(1)
    x = gen.integers(1, 2**50 + 1, n, dtype=np.uint64)
    # a = j / 128 (d near 0) and a = (j + 1/2) / 128 (d near +-2**-8).
    for start, offset in ((0, 0.0), (100, 0.5)):
        turns = (np.arange(1, 101) + offset) / 128 / (2 * np.pi) * 2**53
        x[start : start + 100] = np.minimum(turns, 2**50).astype(np.uint64)
    x[200:210] = np.array([1, 2, 3, 2**50, 2**50 - 1, 2**49, 5, 7, 2**20, 2**40], dtype=np.uint64)
    y = boxmuller._log(m1)
    r = boxmuller._sqrt_neg2(y)
    sin_a, cos_a = boxmuller._sin_cos(x)
    worst = dict.fromkeys(("log", "r", "sin", "cos", "z"), 0.0)
    with gmpy2.context(precision=320):
        two_pi = 2 * gmpy2.mpfr(gmpy2.const_pi(precision=256), 256)
        for i in range(n):
            log_u1 = gmpy2.log(gmpy2.mul_2exp(gmpy2.mpfr(int(m1[i]) + 1), -53))
            a = two_pi * int(x[i]) / 2**53
            z_hi, z_lo = boxmuller._mul(r, sin_a)
            parts = (
                ("log", exact_pair(y, i), log_u1),
                ("r", exact_pair(r, i), gmpy2.sqrt(-2 * log_u1)),
                ("sin", exact_pair(sin_a, i), gmpy2.sin(a)),
                ("cos", exact_pair(cos_a, i), gmpy2.cos(a)),
                ("z", exact(z_hi[i]) + exact(z_lo[i]), gmpy2.sqrt(-2 * log_u1) * gmpy2.sin(a)),
            )
            for name, got, want in parts:
                if not gmpy2.is_zero(want):
                    worst[name] = max(worst[name], float(abs(got / want - 1)))
    print({k: round(float(np.log2(v)), 1) if v else None for k, v in worst.items()})
    bounds = {"log": -79.6, "r": -80.5, "sin": -78.8, "cos": -86.6, "z": -78.38}
    for name, bound in bounds.items():
        assert worst[name] <= 2.0**bound, name


def test_log_table_reduction_constants() -> None:
    # The Note's R = max |f g - 1| over each bucket of f, and max |r| / |log u1| where e = 0.
    g = boxmuller._tables()["g"]
    r_max = ratio = Fraction(0)
    for i, gi in enumerate(g.tolist()):
        j = i + 384
        gq = Fraction(*exact(gi).as_integer_ratio())
        assert gmpy2.mpfr(exact(gi), 11) == exact(gi), "g has 11 bits"
        lo = max(Fraction(2 * j - 1, 1024), Fraction(3, 4))
        hi = min(Fraction(2 * j + 1, 1024), Fraction(3, 2))
        r = max(abs(lo * gq - 1), abs(hi * gq - 1))
        r_max = max(r_max, r)
        if hi <= 1 and j != 512:
            with gmpy2.context(precision=128):
                least = abs(gmpy2.log(gmpy2.mpq(hi.numerator, hi.denominator)))
            ratio = max(ratio, r / Fraction(*least.as_integer_ratio()))
    assert float(r_max) <= 2.0**-9.26
    assert float(ratio) <= 1.006


def test_scale_leaves_ties_and_decides_the_rest() -> None:
    # z (1 + 2**-53) is a tie exactly when z is a power of two, and (1 + 2**-52) (1 +- 2**-53)
    # lies 2**-105 from a midpoint: those must stay undecided (z (1 - 2**-53) is a double
    # there); all else rounds as MPFR does.
    zs = np.array([1.0, 2.0, -0.5, 2.0**-70, 1.5, -3.0, 1 + 2.0**-52, 0.0], dtype=np.float64)
    cases = {
        Fraction(2**53 + 1, 2**53): [1, 1, 1, 1, 0, 0, 1, 0],
        Fraction(2**53 - 1, 2**53): [0, 0, 0, 0, 0, 0, 1, 0],
        Fraction(7, 3): [0] * 8,
    }
    for std, hard in cases.items():
        with gmpy2.context(precision=256):
            s = rng._mpfr(std)
            got, left = boxmuller.scale(zs, boxmuller.pair(s))
            want = [rng._scaled_one(float(z), s) for z in zs.tolist()]
        assert left.tolist() == [bool(h) for h in hard], std
        for g, still, w in zip(got.tolist(), left.tolist(), want, strict=True):
            if not still:
                assert g.hex() == w.hex(), std


def test_scaled_ties_take_the_mpfr_path(monkeypatch: pytest.MonkeyPatch) -> None:
    zs = np.array([1.0, -2.0, 1 + 2.0**-52, 0.75, 2.0**-60, 1.0], dtype=np.float64)
    monkeypatch.setattr(rng, "normals_array", lambda key, n: zs[:n].copy())
    monkeypatch.setattr(rng, "normals", lambda key, n, bits=256: zs[:n].tolist())
    for std in (Fraction(2**53 + 1, 2**53), Fraction(2**53 - 1, 2**53)):
        got = rng.scaled_normals_array(KEYS[0], len(zs), std)
        assert same_bits(got, rng.scaled_normals(KEYS[0], len(zs), std))


@pytest.mark.parametrize(("low", "high"), RANGES[:7])
def test_affine_second_stage_decides_as_mpfr(low: Any, high: Any) -> None:
    # Random draws and draws where low + width u cancels to a few bits (u near -low/width):
    # every element the second stage decides is MPFR's, and every one it leaves lies within
    # its margin of a midpoint (with short parameters many are exact ties).
    gen = np.random.default_rng(5)
    with gmpy2.context(precision=256):
        lo, width = rng._mpfr(low), rng._mpfr(high) - rng._mpfr(low)
        m = gen.integers(0, 2**53, 4000, dtype=np.uint64)
        if not gmpy2.is_zero(width):
            centre = int(gmpy2.rint(-lo / width * 2**53))
            near = [centre + d for d in range(-300, 300) if 0 <= centre + d < 2**53]
            m = np.concatenate([m, np.array(near, dtype=np.uint64)])
        got, left = boxmuller.affine(boxmuller.pair(lo), boxmuller.pair(width), m)
        for g, still, mi in zip(got.tolist(), left.tolist(), m.tolist(), strict=True):
            want = rng._affine_one(lo, width, int(mi))
            if not still:
                assert g.hex() == want.hex(), (low, high, mi)
                continue
            wu = width * gmpy2.mul_2exp(gmpy2.mpfr(int(mi)), -53)
            v = lo + wu
            if gmpy2.is_zero(v):
                continue  # an exact zero is left to MPFR too (for its sign)
            mids = [
                (gmpy2.mpfr(want) + gmpy2.mpfr(np.nextafter(want, t))) / 2 for t in (-1e309, 1e309)
            ]
            slack = 2.0**-71 * abs(v) + 2.0**-119 * (abs(lo) + abs(wu))
            assert min(abs(v - mid) for mid in mids) <= slack, (low, high, mi)
