"""Softmax and cross-entropy rows in lanes give the scalar passes' bits.

The lanes' form (presk/kernel/lower/row_lanes.py: the maximum by lanes, each
exponential once, kept while the sum adds it in increasing order, then
divided in vector registers) must give point zero's bytes (`tiles=False`,
the three scalar passes) in f64, f32 and bf16, on rows that exercise its
edges: one element, shorter than a block, exactly a block, blocks and a
tail; NaN first or later, ±∞, a maximum of ±0, every element −∞, exp
underflowing; masks that refuse every position, all but the first or the
last, a random half, and the causal mask.

Every NaN here is the one x86-64 makes (sign set, quiet): C leaves to the
compiler which operand's payload `a + b` keeps when both are NaNs, so two
different NaNs meeting in a sum could give either in any build (with or
without lanes), while one NaN gives the same bits whatever the order.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from presk.cgen.lanes import LANE_BYTES, LANES
from presk.host.realization import Realization
from presk.kernel.layout import Layout
from presk.kernel.lower import row_lanes
from presk.kernel.text import kernel_text
from presk.machine import vector_unit
from presk.pipeline import compile_path

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

ROWS = """dim R
dim N
fn rows(x : ℝ[r: R, n: N], m : bool[r: R, n: N], w : ℝ[r: R, n: N], t : idx[N][r: R],
        sq : ℝ[b: 2, n: N, n2: N]) ->
    (ℝ[r: R, n: N], ℝ[b: 2, n: N, n2: N], ℝ[r: R, n: N], ℝ[r: R, n: N],
     ℝ[r: R], ℝ[r: R, n: N], ℝ[r: R, n: N]) =
  (softmax(axis n, x, where = m),
   softmax(axis n2, sq, where = causal_mask(n: N)),
   softmax(axis n, x),
   log_softmax(axis n, x),
   cross_entropy(x, t),
   grad(λ x. mean(cross_entropy(x, t)))(x),
   grad(λ x. sum(softmax(axis n, x, where = m) * w))(x))
"""

R = 12
NAN = -np.nan  # 0xfff8000000000000: inf − inf's NaN, so every NaN has one bit pattern
STORAGE = {"f64": np.float64, "f32": np.float32}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _values(n: int, rng: np.random.Generator) -> np.ndarray:
    """R rows of length n, each an edge of the lanes' maximum or sum (as doubles)."""
    x = rng.standard_normal((R, n))
    x[1, 0] = NAN  # NaN where the scalar maximum starts
    x[2, -1], x[2, n // 2] = NAN, np.inf  # NaN later, +∞
    x[3] = np.where(rng.random(n) < 0.5, 0.0, -0.0)  # a maximum of ±0, ties
    x[4] = -np.inf
    x[5, :: max(n // 3, 1)] = np.inf
    x[6] = rng.uniform(-2000, 2000, n)  # most exponentials underflow
    x[7] = 1.25  # every element the maximum
    x[8] = -rng.random(n) - 1
    x[8, n // 2] = -0.0  # the maximum is −0 among negatives
    x[9] *= 1e-40  # subnormal in f32
    return x


def _storage(x: np.ndarray, dtype: str) -> np.ndarray:
    """`x` in the buffers' storage type (bf16: its upper 16 bits, NaN kept quiet)."""
    if dtype in STORAGE:
        return x.astype(STORAGE[dtype])
    bits = x.astype(np.float32).view(np.uint32)
    return (bits >> 16).astype(np.uint16)


def _masks(n: int, rng: np.random.Generator) -> np.ndarray:
    m = rng.random((R, n)) < 0.5
    m[0] = False  # every position refused
    m[1] = True
    m[2, :] = False
    m[2, 0] = True  # the first alone
    m[3, :] = False
    m[3, -1] = True  # the last alone
    m[7] = True
    return m


def _inputs(n: int, dtype: str) -> list[Any]:
    rng = np.random.default_rng(n)
    x = _storage(_values(n, rng), dtype)
    w = _storage(rng.standard_normal((R, n)), dtype)
    sq = _storage(rng.standard_normal((2, n, n)), dtype)
    sq[1, n // 2] = _storage(np.full(n, NAN), dtype)
    t = rng.integers(0, n, R)
    return [x, _masks(n, rng).astype(np.int64), w, t.astype(np.int64), sq]


def _bits(path: str, n: int, dtype: str, tiles: bool) -> tuple[list[bytes], str]:
    compiled, *_ = compile_path(
        path, "rows", {"R": R, "N": n}, Realization(dtype), 1, banner="rows", tiles=tiles
    )
    text = "\n".join(kernel_text(k) for _, k in compiled.host.kernels)
    return [a.tobytes() for a in compiled.raw(_inputs(n, dtype))], text


# 1: one element; 5: shorter than a block; 8, 16: a block of doubles, of floats;
# 37: blocks and a tail; 300: many blocks, a causal mask refusing most of them.
@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("n", [1, 5, 8, 16, 37, 300])
def test_rows_in_lanes_give_the_scalar_bits(tmp_path: Path, dtype: str, n: int) -> None:
    path = tmp_path / "rows.psk"
    path.write_text(ROWS, encoding="utf-8")
    lanes, text = _bits(str(path), n, dtype, tiles=True)
    scalar, zero = _bits(str(path), n, dtype, tiles=False)
    # Two different programs: the lanes' scratch maxima (and bf16's kept row) …
    assert "scratch" in text and "scratch" not in zero
    for name in ("softmax", "log_softmax", "cross_entropy", "cross_entropy_vjp"):
        assert f"kernel {name} (" in text, name
    # … and every output byte equal.
    for i, (a, b) in enumerate(zip(lanes, scalar, strict=True)):
        assert a == b, f"output {i} differs"


def test_a_long_bf16_row_computes_each_exponential_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ROW_SCRATCH elements a bf16 row keeps no f32 row; the bits are the same."""
    path = tmp_path / "rows.psk"
    path.write_text(ROWS, encoding="utf-8")
    monkeypatch.setattr(row_lanes, "ROW_SCRATCH", 16)
    lanes, text = _bits(str(path), 37, "bf16", tiles=True)
    assert "f32[37]" not in text
    scalar, _ = _bits(str(path), 37, "bf16", tiles=False)
    assert lanes == scalar


# Rows of a three-axis softmax: their sums are taken eight rows at a time (softmax.py,
# `_interleaved`) along the row axis's neighbour, masked or not, the row axis last or not.
ROWS3 = """dim R
dim N
fn rows3(x : ℝ[b: 2, r: R, n: N], m : bool[b: 2, r: R, n: N]) ->
    (ℝ[b: 2, r: R, n: N], ℝ[b: 2, r: R, n: N], ℝ[b: 2, r: R, n: N], ℝ[b: 2, r: R, n: N]) =
  (softmax(axis n, x, where = m), softmax(axis n, x),
   softmax(axis r, x, where = m), softmax(axis r, x))
"""


def _bits3(
    path: str, n: int, dtype: str, tiles: bool, passes: int = 3, threads: int = 1
) -> tuple[list[bytes], str, str]:
    layouts = {f"rows3/%{i}": Layout(passes=passes) for i in (2, 3, 4, 5)}
    compiled, *_ = compile_path(
        path,
        "rows3",
        {"R": R, "N": n},
        Realization(dtype),
        threads,
        banner="rows3",
        tiles=tiles,
        layouts=layouts if passes != 3 else None,
    )
    rng = np.random.default_rng(n)
    x = np.stack([_values(n, rng), _values(n, rng)[::-1]])
    m = np.stack([_masks(n, rng), _masks(n, rng)[::-1]]).astype(np.int64)
    text = "\n".join(kernel_text(k) for _, k in compiled.host.kernels)
    outputs = compiled.raw([_storage(x, dtype), m])
    return [a.tobytes() for a in outputs], text, "\n".join(compiled.unit.kernels)


# 5: fewer rows than a block along r (12 = a block and a tail of 4 along n's rows);
# 8: one block; 37: blocks and a tail.
@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("n", [5, 8, 37])
def test_rows_summed_eight_at_a_time_give_the_scalar_bits(
    tmp_path: Path, dtype: str, n: int
) -> None:
    path = tmp_path / "rows3.psk"
    path.write_text(ROWS3, encoding="utf-8")
    lanes, text, _ = _bits3(str(path), n, dtype, tiles=True)
    scalar, *_ = _bits3(str(path), n, dtype, tiles=False)
    # Eight sums side by side: one loop adds into eight scalars.
    assert re.search(r"(s\d+ = \(s\d+ \+ %\d+\[[^\n]*\n\s*){8}", text)
    for i, (a, b) in enumerate(zip(lanes, scalar, strict=True)):
        assert a == b, f"output {i} differs"


# Two passes (a layout plan's `passes: 2`) take the sums of eight rows side by side too,
# each exponential stored as its row's sum adds it; on one worker and split over two.
@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("n", [5, 8, 37])
@pytest.mark.parametrize("threads", [1, 2])
def test_two_passes_eight_rows_at_a_time_give_the_scalar_bits(
    tmp_path: Path, dtype: str, n: int, threads: int
) -> None:
    path = tmp_path / "rows3.psk"
    path.write_text(ROWS3, encoding="utf-8")
    two, text, c_text = _bits3(str(path), n, dtype, tiles=True, passes=2, threads=threads)
    scalar, *_ = _bits3(str(path), n, dtype, tiles=False)
    # One loop computes eight rows' exponentials, stores each and adds it to its row's sum
    # (the unmasked softmax: e = exp(x − m); out = e; s = s + e, eight times over).
    step = r"\s*(s\d+) = exp\([^\n]*\n\s*%\d+\[[^\n]*\] = \1\n\s*s\d+ = \(s\d+ \+ \1\)\n"
    assert re.search(f"(?:{step}){{8}}", text)
    # Where the exponentials are taken a block of lanes at a time, a masked row's block
    # whose lanes the mask all refuses skips its call (the masks refuse whole blocks).
    if vector_unit().bytes >= LANE_BYTES and n >= LANES[dtype]:
        assert len(re.findall(r"if \(presk_lv\d+_any\) presk_exp", c_text)) >= 8
    for i, (a, b) in enumerate(zip(two, scalar, strict=True)):
        assert a == b, f"output {i} differs"
