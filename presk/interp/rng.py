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

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
import numpy.typing as npt

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

_CHUNK_BLOCKS = 1 << 16  # bulk generation works in chunks to bound temporary memory

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
    if start < 0 or start + count > 1 << 64:
        raise ValueError("block index out of the 64-bit counter range")
    idx = np.arange(count, dtype=np.uint64) + np.uint64(start & MASK64)
    m32 = np.uint64(MASK32)
    s32 = np.uint64(32)
    # Words are kept in uint64 so that a 32x32 product never overflows.
    c0 = idx & m32
    c1 = idx >> s32
    c2 = np.zeros(count, dtype=np.uint64)
    c3 = np.zeros(count, dtype=np.uint64)
    m0, m1 = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1)
    k0, k1 = key.k0, key.k1
    for r in range(PHILOX_ROUNDS):
        if r:
            k0 = (k0 + PHILOX_W0) & MASK32
            k1 = (k1 + PHILOX_W1) & MASK32
        p0 = c0 * m0
        p1 = c2 * m1
        c0, c1, c2, c3 = (
            (p1 >> s32) ^ c1 ^ np.uint64(k0),
            p1 & m32,
            (p0 >> s32) ^ c3 ^ np.uint64(k1),
            p0 & m32,
        )
    return np.stack([c0, c1, c2, c3], axis=1)


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
    """n standard normal doubles by Box-Muller over u64 draws (2p, 2p+1) for pair p."""
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
                u1 = gmpy2.mul_2exp(gmpy2.mpfr(int(m[p]) + 1), -53)  # (0, 1], exact: log finite
                u2 = gmpy2.mul_2exp(gmpy2.mpfr(int(m[p + 1])), -53)  # [0, 1), exact
                r = gmpy2.sqrt(-2 * gmpy2.log(u1))
                s, c = gmpy2.sin_cos(two_pi * u2)
                # `+ 0.0` turns -0.0 (u1 == 1 gives r = 0) into +0.0.
                out.append(float(r * c) + 0.0)
                out.append(float(r * s) + 0.0)
    return out[:n]


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
        for m in (chunk >> np.uint64(11)).tolist():
            u = gmpy2.mul_2exp(gmpy2.mpfr(int(m)), -53)
            out.append(float(low + width * u) + 0.0)
    return out


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
    done = 0
    for chunk in _u64_chunks(key, n):
        out[done : done + len(chunk)] = chunk
        done += len(chunk)
    return out


def uniforms_array(key: Key, n: int) -> npt.NDArray[np.float64]:
    """`uniforms(key, n)` as a float64 array."""
    return (u64_array(key, n) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def randints_array(key: Key, n: int, bound: int) -> npt.NDArray[np.uint64]:
    """`randints(key, n, bound)` as a uint64 array: the high word of u64 * bound, vectorised."""
    _check_bound(bound)
    return _mulhi(u64_array(key, n), bound)


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


def normals_array(key: Key, n: int) -> npt.NDArray[np.float64]:
    """`normals(key, n)` as a float64 array."""
    return np.array(normals(key, n), dtype=np.float64)


def uniform_in_array(key: Key, n: int, low: Real, high: Real) -> npt.NDArray[np.float64]:
    """`uniform_in(key, n, low, high)` as a float64 array."""
    return np.array(uniform_in(key, n, low, high), dtype=np.float64)


def xavier_uniform_array(key: Key, n: int, fan_in: int, fan_out: int) -> npt.NDArray[np.float64]:
    """`xavier_uniform(key, n, fan_in, fan_out)` as a float64 array."""
    return np.array(xavier_uniform(key, n, fan_in, fan_out), dtype=np.float64)


def scaled_normals(key: Key, n: int, std: Real, bits: int = 256) -> list[float]:
    """n doubles RN(z * std) in MPFR, z = normals(key, n): the `normal(std=…)` initializer."""
    zs = normals(key, n, bits)
    with gmpy2.context(precision=bits):
        s = _mpfr(std)
        return [float(gmpy2.mpfr(z) * s) + 0.0 for z in zs]


def scaled_normals_array(key: Key, n: int, std: Real) -> npt.NDArray[np.float64]:
    """`scaled_normals(key, n, std)` as a float64 array."""
    return np.array(scaled_normals(key, n, std), dtype=np.float64)


def _mpfr(x: Real) -> Mpfr:
    """`x` in the current MPFR context (a Fraction through an exact rational)."""
    if isinstance(x, Fraction):
        return gmpy2.mpfr(gmpy2.mpq(x.numerator, x.denominator))
    return gmpy2.mpfr(x)
