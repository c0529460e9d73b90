"""Counter-based random draws: Philox4x32-10 keyed by a user seed and a value's path.

Produces every random value of the system: parameter initialisations ("theta/<param>"),
synthesised inputs ("input/<arg>") and anything else named by a PATH string. A draw is a
pure function of (seed, path, index), so values never depend on evaluation order, and
runtime/c/presk_rng.c reproduces the integer and uniform streams bit for bit.

Invariants (specified in docs/rng.md, checked in tests/unit/test_rng.py):

* `philox` is Random123's Philox4x32-10 and matches its published known-answer vectors.
* `key_from_seed(s)` = `derive(Key(s mod 2**32, s >> 32), "presk")`; `derive(k, p)` runs one
  Philox block under k with counter (fnv_lo, fnv_hi, 0x7072736B, 0), fnv = FNV-1a-64 of p's
  UTF-8 bytes; the child key is the first two output words.
* Block i of a key's stream is philox((i mod 2**32, i >> 32, 0, 0), key); u32 word w is word
  w mod 4 of block w // 4; the j-th u64 is word 2j (low half) | word 2j+1 (high half).
* Every float produced is a correctly rounded (to nearest, ties to even) IEEE double of a
  value computed exactly or in MPFR at `bits` precision, so it is identical on every machine;
  a zero result is always +0.0.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
import numpy.typing as npt

from presk.interp import boxmuller

__all__ = [
    "Key",
    "derive",
    "fnv1a64",
    "key_for",
    "key_from_seed",
    "normals",
    "philox",
    "randbelow",
    "randints",
    "u32_stream",
    "u64",
    "u64_stream",
    "uniform53",
    "uniform_in",
    "uniforms",
    "xavier_uniform",
]

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF

PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9  # golden ratio
PHILOX_W1 = 0xBB67AE85  # sqrt(3) - 1
PHILOX_ROUNDS = 10

FNV64_OFFSET = 0xCBF29CE484222325
FNV64_PRIME = 0x100000001B3

DERIVE_TAG = 0x7072736B  # ASCII "prsk": counter word 2 of a derivation, never 0 like streams
SEED_PATH = "presk"

# Bulk generation works in chunks to bound temporary memory. At 2**14 blocks the arrays stay
# near the caches and malloc mostly reuses them: 10**7 normals page-fault 19k times, against
# 120k at 2**16, where freed temporaries go back to the system and fault in again.
_CHUNK_BLOCKS = 1 << 14

Real = int | float | Fraction
Mpfr = Any  # gmpy2 ships no type information


@dataclass(frozen=True, slots=True)
class Key:
    """A Philox4x32 key: two unsigned 32-bit words."""

    k0: int
    k1: int

    def __post_init__(self) -> None:
        if not (0 <= self.k0 <= MASK32 and 0 <= self.k1 <= MASK32):
            raise ValueError(f"key words must be uint32, got {self.k0:#x}, {self.k1:#x}")


def philox(ctr: tuple[int, int, int, int], key: Key) -> tuple[int, int, int, int]:
    """One Philox4x32-10 block: four uint32 counter words under `key` to four uint32 words."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key.k0, key.k1
    for r in range(PHILOX_ROUNDS):
        if r:  # the key is bumped between rounds, not before the first
            k0 = (k0 + PHILOX_W0) & MASK32
            k1 = (k1 + PHILOX_W1) & MASK32
        p0 = PHILOX_M0 * c0
        p1 = PHILOX_M1 * c2
        c0, c1, c2, c3 = (
            (p1 >> 32) ^ c1 ^ k0,
            p1 & MASK32,
            (p0 >> 32) ^ c3 ^ k1,
            p0 & MASK32,
        )
    return c0, c1, c2, c3


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a hash of `data`."""
    h = FNV64_OFFSET
    for b in data:
        h = ((h ^ b) * FNV64_PRIME) & MASK64
    return h


def derive(key: Key, path: str) -> Key:
    """The child key of `key` named by `path` (FNV-1a-64 of its UTF-8, one tagged Philox block)."""
    h = fnv1a64(path.encode("utf-8"))
    out = philox((h & MASK32, h >> 32, DERIVE_TAG, 0), key)
    return Key(out[0], out[1])


def key_from_seed(seed: int) -> Key:
    """The root key of a user seed in [0, 2**64)."""
    if not 0 <= seed <= MASK64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    # Deriving once more scrambles the raw words, so nearby seeds give unrelated keys.
    return derive(Key(seed & MASK32, seed >> 32), SEED_PATH)


def key_for(seed: int, path: str) -> Key:
    """The key of the value named `path` under user seed `seed`."""
    return derive(key_from_seed(seed), path)


# ---------------------------------------------------------------------------------------------
# Streams


def _blocks(key: Key, start: int, count: int) -> npt.NDArray[np.uint64]:
    """Blocks start..start+count-1 of `key`'s stream as a (count, 4) array of uint32 values."""
    return np.stack(_block_words(key, start, count), axis=1)


def _block_words(key: Key, start: int, count: int) -> list[npt.NDArray[np.uint64]]:
    """Words 0..3 of blocks start..start+count-1 of `key`'s stream, as four arrays."""
    if start < 0 or start + count > 1 << 64:
        raise ValueError("block index out of the 64-bit counter range")
    idx = np.arange(count, dtype=np.uint64) + np.uint64(start & MASK64)
    m32 = np.uint64(MASK32)
    s32 = np.uint64(32)
    # Words are kept in uint64 so that a 32x32 product never overflows. Every round is
    # written into the same six arrays (out=): fresh temporaries cost more than the
    # arithmetic at these sizes.
    c0 = idx & m32
    c1 = idx >> s32
    c2 = np.zeros(count, dtype=np.uint64)
    c3 = np.zeros(count, dtype=np.uint64)
    p0 = np.empty_like(c0)
    p1 = np.empty_like(c0)
    m0, m1 = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1)
    k0, k1 = key.k0, key.k1
    for r in range(PHILOX_ROUNDS):
        if r:
            k0 = (k0 + PHILOX_W0) & MASK32
            k1 = (k1 + PHILOX_W1) & MASK32
        np.multiply(c0, m0, out=p0)
        np.multiply(c2, m1, out=p1)
        # (c0, c1, c2, c3) = (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0)).
        np.right_shift(p1, s32, out=c0)
        c0 ^= c1
        c0 ^= np.uint64(k0)
        np.bitwise_and(p1, m32, out=c1)
        np.right_shift(p0, s32, out=c2)
        c2 ^= c3
        c2 ^= np.uint64(k1)
        np.bitwise_and(p0, m32, out=c3)
    return [c0, c1, c2, c3]


def _u64_chunks(key: Key, n: int) -> Iterator[npt.NDArray[np.uint64]]:
    """The first n u64 draws of `key`, as consecutive uint64 arrays."""
    done = 0
    while done < n:
        take = min(n - done, 2 * _CHUNK_BLOCKS)
        words = _blocks(key, done // 2, (take + 1) // 2).reshape(-1)
        yield (words[0::2] | (words[1::2] << np.uint64(32)))[:take]
        done += take


def u32_stream(key: Key, n: int) -> list[int]:
    """The first n uint32 words of `key`'s stream."""
    _check_count(n)
    out: list[int] = []
    for start in range(0, n, 4 * _CHUNK_BLOCKS):
        take = min(n - start, 4 * _CHUNK_BLOCKS)
        words = _blocks(key, start // 4, (take + 3) // 4).reshape(-1)[:take]
        out.extend(int(w) for w in words.tolist())
    return out


def u64_stream(key: Key, n: int) -> list[int]:
    """The first n uint64 draws of `key`'s stream."""
    _check_count(n)
    out: list[int] = []
    for chunk in _u64_chunks(key, n):
        out.extend(int(x) for x in chunk.tolist())
    return out


def u64(key: Key, j: int) -> int:
    """The j-th uint64 draw: stream words 2j (low half) and 2j+1 (high half)."""
    if not 0 <= j <= MASK64:
        raise ValueError(f"draw index must be in [0, 2**64), got {j}")
    # Words 2j and 2j+1 always lie in the same block, j // 2.
    block = philox((j // 2 & MASK32, j // 2 >> 32, 0, 0), key)
    half = 2 * (j % 2)
    return block[half] | (block[half + 1] << 32)


def uniform53(key: Key, j: int) -> int:
    """The top 53 bits of the j-th u64: the uniform double in [0, 1) is this times 2**-53."""
    return u64(key, j) >> 11


def uniforms(key: Key, n: int) -> list[float]:
    """The first n uniform doubles in [0, 1): uniform53(key, j) * 2**-53 (exact)."""
    _check_count(n)
    out: list[float] = []
    for chunk in _u64_chunks(key, n):
        # An integer below 2**53 converts to double exactly; the power-of-two scale is exact.
        out.extend(((chunk >> np.uint64(11)).astype(np.float64) * 2.0**-53).tolist())
    return out


def randbelow(key: Key, j: int, bound: int) -> int:
    """A uniform integer in [0, bound) from the j-th u64: (u64 * bound) >> 64, no rejection."""
    _check_bound(bound)
    return (u64(key, j) * bound) >> 64


def randints(key: Key, n: int, bound: int) -> list[int]:
    """The first n draws randbelow(key, j, bound), j = 0..n-1."""
    _check_bound(bound)
    return [(x * bound) >> 64 for x in u64_stream(key, n)]


# ---------------------------------------------------------------------------------------------
# Real-valued draws, computed in MPFR and rounded once to double


def normals(key: Key, n: int, bits: int = 256) -> list[float]:
    """n standard normal doubles by Box-Muller over u64 draws (2p, 2p+1) for pair p.

    The MPFR definition (the oracle of `normals_array`, which gives the same bits fast).
    """
    _check_count(n)
    _check_bits(bits)
    out: list[float] = []
    pairs = (n + 1) // 2
    # A fresh context: round to nearest, wide exponents, `bits` of precision; thread-local.
    with gmpy2.context(precision=bits):
        two_pi = 2 * gmpy2.const_pi()
        for chunk in _u64_chunks(key, 2 * pairs):
            m = (chunk >> np.uint64(11)).tolist()
            for p in range(0, len(m), 2):
                out.extend(_normal_pair(int(m[p]), int(m[p + 1]), two_pi))
    return out[:n]


def _normal_pair(m1: int, m2: int, two_pi: Mpfr) -> tuple[float, float]:
    """(z0, z1) of one pair from its two uniform53 draws, under the caller's MPFR context."""
    u1 = gmpy2.mul_2exp(gmpy2.mpfr(m1 + 1), -53)  # (0, 1], exact: log finite
    u2 = gmpy2.mul_2exp(gmpy2.mpfr(m2), -53)  # [0, 1), exact
    r = gmpy2.sqrt(-2 * gmpy2.log(u1))
    s, c = gmpy2.sin_cos(two_pi * u2)
    # `+ 0.0` turns -0.0 (u1 == 1 gives r = 0) into +0.0.
    return float(r * c) + 0.0, float(r * s) + 0.0


def uniform_in(key: Key, n: int, low: Real, high: Real, bits: int = 256) -> list[float]:
    """n doubles low + (high - low) * u, u = uniforms(key, n), in MPFR then rounded to double."""
    _check_count(n)
    _check_bits(bits)
    with gmpy2.context(precision=bits):
        return _affine(key, n, gmpy2.mpfr(low), gmpy2.mpfr(high))


def xavier_uniform(key: Key, n: int, fan_in: int, fan_out: int, bits: int = 256) -> list[float]:
    """n Xavier/Glorot uniform doubles in [-a, a), a = sqrt(6 / (fan_in + fan_out)) in MPFR."""
    _check_count(n)
    _check_bits(bits)
    if fan_in < 0 or fan_out < 0 or fan_in + fan_out == 0:
        raise ValueError(f"xavier_uniform needs fan_in + fan_out > 0, got {fan_in}, {fan_out}")
    with gmpy2.context(precision=bits):
        a = gmpy2.sqrt(gmpy2.mpfr(6) / (fan_in + fan_out))
        return _affine(key, n, -a, a)


def _affine(key: Key, n: int, low: Mpfr, high: Mpfr) -> list[float]:
    """low + (high - low) * u for the first n uniforms, under the caller's MPFR context."""
    width = high - low
    out: list[float] = []
    for chunk in _u64_chunks(key, n):
        out.extend(_affine_one(low, width, m) for m in (chunk >> np.uint64(11)).tolist())
    return out


def _affine_one(low: Mpfr, width: Mpfr, m: int) -> float:
    return float(low + width * gmpy2.mul_2exp(gmpy2.mpfr(int(m)), -53)) + 0.0


def _check_count(n: int) -> None:
    if n < 0:
        raise ValueError(f"draw count must be non-negative, got {n}")


def _check_bound(bound: int) -> None:
    # The C runtime takes a uint64 bound, so the same range is enforced here.
    if not 1 <= bound <= MASK64:
        raise ValueError(f"bound must be in [1, 2**64), got {bound}")


def _check_bits(bits: int) -> None:
    # 53 bits hold every u1, u2 exactly; fewer would change the draws' meaning.
    if bits < 53 or bits > gmpy2.get_max_precision():
        raise ValueError(f"bits must be in [53, {gmpy2.get_max_precision()}], got {bits}")


# ---------------------------------------------------------------------------------------------
# Array draws: the same values as numpy arrays


def u64_array(key: Key, n: int) -> npt.NDArray[np.uint64]:
    """The first n uint64 draws of `key`, as one array."""
    _check_count(n)
    out = np.empty(n, dtype=np.uint64)

    def fill(start: int, stop: int) -> None:
        out[start:stop] = _u64_range(key, start, stop)

    _chunked(n, fill)
    return out


def _u64_range(key: Key, start: int, stop: int) -> npt.NDArray[np.uint64]:
    """u64 draws start..stop-1 of `key` (start even)."""
    count = (stop - start + 1) // 2
    c0, c1, c2, c3 = _block_words(key, start // 2, count)
    # Block b holds draws 2b (words 0, 1) and 2b + 1 (words 2, 3).
    out = np.empty(2 * count, dtype=np.uint64)
    s32 = np.uint64(32)
    np.left_shift(c1, s32, out=out[0::2])
    out[0::2] |= c0
    np.left_shift(c3, s32, out=out[1::2])
    out[1::2] |= c2
    return out[: stop - start]


def _workers() -> int:
    try:
        return max(1, min(8, len(os.sched_getaffinity(0))))
    except (AttributeError, OSError):
        return max(1, min(8, os.cpu_count() or 1))


def _chunked(n: int, fill: Callable[[int, int], None]) -> None:
    """fill(start, stop) over [0, n) in even-sized chunks, on threads (numpy drops the GIL)."""
    step = 2 * _CHUNK_BLOCKS
    spans = [(start, min(n, start + step)) for start in range(0, n, step)]
    workers = _workers()
    if workers == 1 or len(spans) < 2:
        for start, stop in spans:
            fill(start, stop)
        return
    with ThreadPoolExecutor(workers) as pool:
        for done in [pool.submit(fill, start, stop) for start, stop in spans]:
            done.result()


def uniforms_array(key: Key, n: int) -> npt.NDArray[np.float64]:
    """`uniforms(key, n)` as a float64 array."""
    _check_count(n)
    out = np.empty(n, dtype=np.float64)

    def fill(start: int, stop: int) -> None:
        out[start:stop] = (_u64_range(key, start, stop) >> np.uint64(11)).astype(np.float64)
        out[start:stop] *= 2.0**-53

    _chunked(n, fill)
    return out


def randints_array(key: Key, n: int, bound: int) -> npt.NDArray[np.uint64]:
    """`randints(key, n, bound)` as a uint64 array: the high word of u64 * bound, vectorised."""
    _check_bound(bound)
    _check_count(n)
    out = np.empty(n, dtype=np.uint64)

    # Chunked like the draws themselves: _mulhi's eight temporaries stay cache-sized.
    def fill(start: int, stop: int) -> None:
        out[start:stop] = _mulhi(_u64_range(key, start, stop), bound)

    _chunked(n, fill)
    return out


def _mulhi(x: npt.NDArray[np.uint64], bound: int) -> npt.NDArray[np.uint64]:
    """floor(x * bound / 2**64) elementwise, by 32-bit halves (no 128-bit integers in numpy)."""
    m32, s32 = np.uint64(MASK32), np.uint64(32)
    xl, xh = x & m32, x >> s32
    bl, bh = np.uint64(bound & MASK32), np.uint64(bound >> 32)
    ll, lh, hl, hh = xl * bl, xl * bh, xh * bl, xh * bh
    # Every partial product is below 2**64 and `mid` below 3 * 2**32: nothing wraps.
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    high: npt.NDArray[np.uint64] = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    return high


def scaled_normals(key: Key, n: int, std: Real, bits: int = 256) -> list[float]:
    """n doubles RN(z * std) in MPFR, z = normals(key, n): the `normal(std=…)` initializer."""
    zs = normals(key, n, bits)
    with gmpy2.context(precision=bits):
        s = _mpfr(std)
        return [_scaled_one(z, s) for z in zs]


def _scaled_one(z: float, s: Mpfr) -> float:
    return float(gmpy2.mpfr(z) * s) + 0.0


def _mpfr(x: Real) -> Mpfr:
    """`x` in the current MPFR context (a Fraction through an exact rational)."""
    if isinstance(x, Fraction):
        return gmpy2.mpfr(gmpy2.mpq(x.numerator, x.denominator))
    return gmpy2.mpfr(x)


# ---------------------------------------------------------------------------------------------
# Real draws as arrays: the same bits as the MPFR definitions, vectorised (docs/rng.md §4.3)
#
# Each element is computed in x87 extended precision (64-bit significands) with a bound on
# its error; when the interval [approx - bound, approx + bound] rounds to one double, that
# double is the rounding of the exact value and of the MPFR value (both lie inside), and
# otherwise (rarely) the element is recomputed: normals by boxmuller's second stage first,
# then, if still undecided, by the MPFR definition itself.

_LD = np.longdouble
# The vector path needs the x87 format; elsewhere every element takes the MPFR path.
VECTOR = boxmuller.X87
UNIT = boxmuller.UNIT
_SAFE = 2.0**900  # parameters of magnitude in [1/_SAFE, _SAFE] (or 0) never over/underflow


def _longdouble(x: Mpfr) -> Any:
    """RN_64(x) as a longdouble, exactly (two doubles carry the 64 bits); |x| in the safe range."""
    y = gmpy2.mpfr(x, 64)
    hi = float(y)
    return _LD(hi) + _LD(float(y - hi))


def _safe(x: Mpfr) -> bool:
    return bool(gmpy2.is_zero(x) or (gmpy2.is_finite(x) and 1 / _SAFE <= abs(x) <= _SAFE))


def _rounded(approx: Any, bound: Any) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """The doubles of `approx` and where `approx ± bound` does not round to one double."""
    lo = (approx - bound).astype(np.float64)
    hi = (approx + bound).astype(np.float64)
    return lo + 0.0, lo != hi


def normals_array(key: Key, n: int) -> npt.NDArray[np.float64]:
    """`normals(key, n)` as a float64 array, bit for bit, vectorised."""
    _check_count(n)
    if not VECTOR:
        return np.array(normals(key, n), dtype=np.float64)
    pairs = (n + 1) // 2
    out = np.empty((pairs, 2), dtype=np.float64)  # row p: pair p's (z0, z1)
    undecided: list[tuple[npt.NDArray[Any], ...]] = []  # per chunk: pairs, m1, m2, bad0, bad1

    def fill(start: int, stop: int) -> None:
        m = _u64_range(key, start, stop) >> np.uint64(11)
        m1, m2 = m[0::2], m[1::2]
        z0, z1, bad0, bad1 = boxmuller.first(m1, m2)
        # Whole rows at once: writing each column strided into fresh memory costs ten times more.
        np.stack([z0, z1], axis=1, out=out[start // 2 : stop // 2])
        redo = np.flatnonzero(bad0 | bad1)
        undecided.append((start // 2 + redo, m1[redo], m2[redo], bad0[redo], bad1[redo]))

    _chunked(2 * pairs, fill)
    # The first stage's undecided pairs (about 1%) take the second stage in large batches,
    # not per chunk: on arrays of a hundred elements numpy's cost per call would dominate.
    # What the second leaves (about 2 in 10**6) takes the MPFR path.
    found = [np.concatenate(column) for column in zip(*undecided, strict=True)]
    step = 1 << 16
    with gmpy2.context(precision=256):
        two_pi = 2 * gmpy2.const_pi()
        for b in range(0, len(found[0]) if found else 0, step):
            p, m1, m2, bad0, bad1 = (column[b : b + step] for column in found)
            w0, w1, left0, left1 = boxmuller.second(m1, m2)
            for comp, w, left, bad in ((0, w0, left0, bad0), (1, w1, left1, bad1)):
                out[p[~left], comp] = w[~left]
                for i in np.flatnonzero(left & bad).tolist():
                    out[p[i], comp] = _normal_pair(int(m1[i]), int(m2[i]), two_pi)[comp]
    return out.reshape(-1)[:n]


def uniform_in_array(key: Key, n: int, low: Real, high: Real) -> npt.NDArray[np.float64]:
    """`uniform_in(key, n, low, high)` as a float64 array, bit for bit, vectorised."""
    _check_count(n)
    with gmpy2.context(precision=256):
        return _affine_array(key, n, gmpy2.mpfr(low), gmpy2.mpfr(high))


def xavier_uniform_array(key: Key, n: int, fan_in: int, fan_out: int) -> npt.NDArray[np.float64]:
    """`xavier_uniform(key, n, fan_in, fan_out)` as a float64 array, bit for bit, vectorised."""
    _check_count(n)
    if fan_in < 0 or fan_out < 0 or fan_in + fan_out == 0:
        raise ValueError(f"xavier_uniform needs fan_in + fan_out > 0, got {fan_in}, {fan_out}")
    with gmpy2.context(precision=256):
        a = gmpy2.sqrt(gmpy2.mpfr(6) / (fan_in + fan_out))
        return _affine_array(key, n, -a, a)


def _affine_array(key: Key, n: int, low: Mpfr, high: Mpfr) -> npt.NDArray[np.float64]:
    """`_affine` vectorised, under the caller's 256-bit MPFR context."""
    width = high - low
    if not (VECTOR and _safe(low) and _safe(high) and _safe(width)):
        return np.array(_affine(key, n, low, high), dtype=np.float64)
    # low = l1 + l2 and width = w1 + w2, w1 of 11 bits so that w1 * u (u of 53 bits) is
    # exact: the sum l1 + w1 * u, where low and width * u may cancel, is rounded once,
    # relative to its own size, and the rest is 2**-11 smaller.
    l1m = gmpy2.mpfr(low, 64)
    l1, l2 = _longdouble(l1m), _longdouble(low - l1m)
    w1m = gmpy2.mpfr(width, 11)
    w1 = _longdouble(w1m)
    w2 = _longdouble(width - w1m)
    floor = _LD(UNIT * (2.0**-8 * float(abs(width)) + 2.0**-40 * float(abs(low))))
    out = np.empty(n, dtype=np.float64)
    undecided: list[tuple[npt.NDArray[Any], npt.NDArray[np.uint64]]] = []  # (elements, m)

    def fill(start: int, stop: int) -> None:
        m = _u64_range(key, start, stop) >> np.uint64(11)
        u = m.astype(_LD) * _LD(2.0**-53)
        v = (l1 + w1 * u) + (l2 + w2 * u)
        out[start:stop], bad = _rounded(v, np.abs(v) * _LD(6 * UNIT) + floor)
        where = np.flatnonzero(bad)
        undecided.append((start + where, m[where]))

    _chunked(n, fill)
    # The undecided (about 0.3%) take boxmuller's affine second stage together, and what
    # it leaves the MPFR definition.
    if undecided:
        at, ms = (np.concatenate(column) for column in zip(*undecided, strict=True))
        values, left = boxmuller.affine(boxmuller.pair(low), boxmuller.pair(width), ms)
        out[at] = values
        for i in np.flatnonzero(left).tolist():
            out[at[i]] = _affine_one(low, width, int(ms[i]))
    return out


def scaled_normals_array(key: Key, n: int, std: Real) -> npt.NDArray[np.float64]:
    """`scaled_normals(key, n, std)` as a float64 array, bit for bit, vectorised."""
    zs = normals_array(key, n)
    with gmpy2.context(precision=256):
        s = _mpfr(std)
        if not (VECTOR and _safe(s)):
            return np.array([_scaled_one(z, s) for z in zs.tolist()], dtype=np.float64)
        s_pair = boxmuller.pair(s)
    retry: list[tuple[int, float]] = []  # (element, z) to take the MPFR path

    # In place over the normals: a second fresh array of this size costs its page faults.
    def fill(start: int, stop: int) -> None:
        scaled, bad = boxmuller.scale(zs[start:stop], s_pair)
        retry.extend((start + i, float(zs[start + i])) for i in np.flatnonzero(bad).tolist())
        zs[start:stop] = scaled

    _chunked(n, fill)
    with gmpy2.context(precision=256):
        for i, z in retry:
            zs[i] = _scaled_one(z, s)
    return zs
