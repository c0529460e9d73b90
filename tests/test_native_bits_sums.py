"""Column sums in lanes give the scalar form's bits.

A sum that keeps its operand's last axis — `sum(axis b, x)` over a leading
axis, and the gradient of a broadcast (`sum_to`, a bias's gradient) — runs
in vector lanes along that axis (presk/kernel/lower/reductions.py,
`column_sums`). Each lane is one output element adding its terms from 0 in
the scalar form's order, so point zero's bytes (`tiles=False`) must come
out in f64, f32 and bf16, on widths that exercise its blocks: narrower than
a vector (scalar), one vector, several, a whole block of eight and a tail,
with NaN, ±∞ and ±0 among the terms.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_native_bits import Case, _bits, _compile

from presk.kernel.text import kernel_text

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

SUMS = """dim B
dim N
fn sums(x : ℝ[b: B, t: 3, n: N], v : ℝ[n: N], w : ℝ[t: 3, n: N]) ->
    (ℝ[t: 3, n: N], ℝ[b: B, n: N], ℝ[n: N], ℝ[t: 3, n: N], ℝ[b: B, t: 3]) =
  (sum(axis b, x),
   sum(axis t, x),
   grad(λ v. sum((x + v) * x))(v),
   grad(λ w. sum((x + w) * x))(w),
   sum(axis n, x))
"""

B = 5
NAN = -np.nan  # inf − inf's NaN: one bit pattern, whatever order a sum meets it in


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _storage(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f64":
        return x.astype(np.float64)
    if dtype == "f32":
        return x.astype(np.float32)
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _inputs(n: int, dtype: str) -> list[Any]:
    rng = np.random.default_rng(n)
    x = rng.standard_normal((B, 3, n)) * 10.0 ** rng.integers(-30, 30, (B, 3, n))
    x[1, 0, 0] = NAN
    x[2, 1, -1] = np.inf
    x[:, 2, n // 2] = -0.0  # a column of −0: its sum is +0 (0 + −0)
    x[3, 0, n // 3] = -np.inf
    v = rng.standard_normal(n)
    w = rng.standard_normal((3, n))
    return [_storage(x, dtype), _storage(v, dtype), _storage(w, dtype)]


def _case(path: str, n: int, dtype: str) -> Case:
    return Case(path, "sums", {"B": B, "N": n}, {}, _inputs(n, dtype))


# 5: narrower than a vector; 8, 16: one vector of doubles, of floats; 40: vectors and a
# tail; 128: a block of eight float vectors; 300: blocks of one vector and a tail.
@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("n", [5, 8, 16, 40, 128, 300])
def test_column_sums_in_lanes_give_the_scalar_bits(tmp_path: Path, dtype: str, n: int) -> None:
    path = tmp_path / "sums.psk"
    path.write_text(SUMS, encoding="utf-8")
    case = _case(str(path), n, dtype)
    text = "\n".join(kernel_text(k) for _, k in _compile(case, dtype).host.kernels)
    zero = "\n".join(kernel_text(k) for _, k in _compile(case, dtype, tiles=False).host.kernels)
    lanes_width = 8 if dtype == "f64" else 16
    # The four sums that keep the last axis take lanes where a vector fits; `sum(axis n)` not.
    in_lanes = [k for k in text.split("\nkernel ") if "<v= splat(0)" in k]
    assert len(in_lanes) == (4 if n >= lanes_width else 0)
    assert "<v=" not in zero
    for i, (a, b) in enumerate(
        zip(_bits(case, dtype), _bits(case, dtype, tiles=False), strict=True)
    ):
        assert a == b, f"output {i} differs"
