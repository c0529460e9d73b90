"""The lane forms of presk's libm have the scalar functions' bits, lane for lane.

`presk_exp_lanes`, `presk_log_lanes`, `presk_tanh_lanes`, `presk_erf_lanes`
(8 doubles) and `presk_expf_lanes`, … `presk_erff_lanes` (16 floats) are
compiled with `libm/musl/presk_libm.c` as a generated program compiles it (the
flags of presk/build/compile.py, `-march=native` included), and once more
without `-march=native`, where the compiler splits the 64-byte vectors. Each
function gets 10⁶ inputs (libm/check_libm.py's: signed zeros, subnormals,
infinities, NaNs with payloads, each algorithm's thresholds and their
neighbours, the overflow and underflow limits, random bit patterns over every
binade and values dense in the active range), evaluated in three orders: as
generated, shuffled (a block mixes every path) and sorted (a block takes one
path, so the lane forms skip the others). Every result must equal the scalar
function's bit for bit.

Then whole entries (the MiniGPT gradient, chains of every lane function) are
compiled with the kernels' loops in blocks of lanes and with the plain loops
(presk/cgen/lanes.py), in f64, f32 and bf16: every output byte must agree.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any

import gmpy2
import numpy as np
import pytest

from presk.build.compile import FLAGS, MARCH_NATIVE_FLAG
from presk.cgen.c_printer import _Printer
from presk.host.realization import Realization
from presk.interp.run import reference_inputs
from presk.pipeline import compile_path, front_end

ROOT = Path(__file__).resolve().parents[1]
N_INPUTS = 1_000_000
DOUBLE = ("exp", "log", "tanh", "erf")
FLOAT = ("expf", "logf", "tanhf", "erff")
LANES = {"f64": 8, "f32": 16}


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


C = _load("presk_libm_check_lanes", ROOT / "libm" / "check_libm.py")
CC = C.find_cc()

pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler on PATH: cannot build the libm")

# Blocks of lanes over an array whose length is a multiple of the lane count.
LANES_C = """
#include <stddef.h>
#include "presk_libm.h"
#define BLOCKS(name, T, L) \\
    void blocks_##name(const T *x, T *y, size_t n) \\
    { for (size_t i = 0; i < n; i += L) presk_##name##_lanes(y + i, x + i); }
BLOCKS(exp, double, PRESK_LANES_F64) BLOCKS(log, double, PRESK_LANES_F64)
BLOCKS(tanh, double, PRESK_LANES_F64) BLOCKS(erf, double, PRESK_LANES_F64)
BLOCKS(expf, float, PRESK_LANES_F32) BLOCKS(logf, float, PRESK_LANES_F32)
BLOCKS(tanhf, float, PRESK_LANES_F32) BLOCKS(erff, float, PRESK_LANES_F32)
"""

CDEF = "\n".join(
    [C.CDEF]
    + [f"void blocks_{f}(const double *x, double *y, size_t n);" for f in DOUBLE]
    + [f"void blocks_{f}(const float *x, float *y, size_t n);" for f in FLOAT]
)


class _Lib:
    def __init__(self, so: Path) -> None:
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF)
        self.lib = self.ffi.dlopen(str(so))

    def call(self, symbol: str, x: np.ndarray) -> np.ndarray:
        y = np.empty_like(x)
        ct = "double[]" if x.dtype == np.float64 else "float[]"
        getattr(self.lib, symbol)(
            self.ffi.from_buffer(ct, x), self.ffi.from_buffer(ct, y, require_writable=True), x.size
        )
        return y


def _build(out: Path, march_native: bool) -> _Lib:
    out.mkdir(parents=True, exist_ok=True)
    (out / "scalar.c").write_text(C.WRAPPER_C)
    (out / "lanes.c").write_text(LANES_C)
    flags = [f for f in FLAGS if march_native or f != MARCH_NATIVE_FLAG]
    so = out / "libm_lanes.so"
    cmd = [CC, *flags, "-Wall", "-Wextra", f"-I{C.SRC_DIR}", str(C.LIBM_C)]
    cmd += [str(out / "scalar.c"), str(out / "lanes.c"), "-o", str(so)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    # The lane forms compile without a warning (no vector crosses a call).
    assert "warning" not in done.stderr, done.stderr
    return _Lib(so)


@pytest.fixture(scope="module", params=[True, False], ids=["march-native", "baseline"])
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> _Lib:
    return _build(tmp_path_factory.mktemp("libm_lanes"), request.param)


def _inputs(name: str) -> np.ndarray:
    x = C.make_inputs(name, N_INPUTS, seed=11)
    lanes = LANES["f64" if name in DOUBLE else "f32"]
    pad = -x.size % lanes
    return np.concatenate([x, np.zeros(pad, dtype=x.dtype)])


def _bits(x: np.ndarray) -> np.ndarray[Any, Any]:
    return x.view(np.uint64 if x.dtype == np.float64 else np.uint32)


@pytest.mark.parametrize("name", DOUBLE + FLOAT)
def test_lanes_have_the_scalar_bits(lib: _Lib, name: str) -> None:
    x = _inputs(name)
    want = _bits(lib.call(f"vec_{name}", x))
    order = np.random.default_rng(7).permutation(x.size)
    sorted_order = np.argsort(x, kind="stable")
    for label, perm in (("generated", None), ("shuffled", order), ("sorted", sorted_order)):
        xs = x if perm is None else x[perm]
        got = _bits(lib.call(f"blocks_{name}", xs))
        expect = want if perm is None else want[perm]
        bad = np.flatnonzero(got != expect)
        if bad.size:
            i = bad[0]
            raise AssertionError(
                f"{name} ({label}): {bad.size} lanes differ; first at x = {xs[i]!r} "
                f"(bits {int(_bits(xs)[i]):#x}): lanes {int(got[i]):#x}, scalar {int(expect[i]):#x}"
            )


def test_the_inputs_reach_every_path() -> None:
    """The inputs hold each function's edges, so the rare paths are exercised too."""
    for name in ("exp", "expf"):
        x = _inputs(name)
        assert np.isnan(x).any() and np.isinf(x).any() and (x == 0).any()
        big = 710.0 if name == "exp" else 89.0
        assert (np.abs(x[np.isfinite(x)]) > big).any()
        tiny = np.finfo(x.dtype).tiny
        assert ((x != 0) & (np.abs(x) < tiny)).any()  # subnormals
    erf = _inputs("erf")
    for lo, hi in (
        (0, 2**-28),
        (2**-28, 0.84375),
        (0.84375, 1.25),
        (1.25, 1 / 0.35),
        (3, 6),
        (6, 9),
    ):
        assert ((np.abs(erf) >= lo) & (np.abs(erf) < hi)).sum() > 1000, (lo, hi)


# ---------------------------------------------------------------- kernels in lanes

# Elementwise chains of every lane function (and one that is not: sin), at a length that
# leaves a tail after the last block of 8 doubles or 16 floats, and their gradients.
CHAINS = """dim N
fn chain(x : ℝ[r: 3, N], y : ℝ[r: 3, N]) -> ℝ[r: 3, N] =
  tanh(x) * erf(y) + log(exp(x) + 1.5) - exp(sin(y)) + gelu(x) * sin(x)
fn loss(x : ℝ[r: 3, N], y : ℝ[r: 3, N]) -> ℝ[] = sum(chain(x, y) * y)
fn loss_grad(x : ℝ[r: 3, N], y : ℝ[r: 3, N]) -> ℝ[r: 3, N] = grad(λ x. loss(x, y))(x)
"""


def _native_bits(path: str, entry: str, dims: dict[str, int], consts: dict[str, int], dtype: str):
    exact = {k: Fraction(v) for k, v in consts.items()}
    checked, _ = front_end(path, exact)
    info = checked.find(entry)
    assert info is not None
    with gmpy2.context(precision=53):
        inputs = reference_inputs(info, dims, None, 0)
    compiled, *_ = compile_path(path, entry, dims, Realization(dtype), 1, consts=exact)
    kernels = "\n".join(compiled.unit.kernels)
    return kernels, [a.tobytes() for a in compiled.raw(inputs)]


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(
    "program",
    [
        # softmax, the causal mask, gelu, cross-entropy and their adjoints; T = 20 leaves
        # a tail after a block of 16 (f32) and after two blocks of 8 (f64).
        ("tests/ad/minigpt_grad.psk", "loss_grad", {"B": 2, "T": 20}),
        ("chains.psk", "loss_grad", {"N": 37}),
        ("chains.psk", "chain", {"N": 37}),
    ],
    ids=["minigpt-grad", "chains-grad", "chains"],
)
def test_kernels_in_lanes_keep_their_bits(
    dtype: str, program: tuple[str, str, dict[str, int]], tmp_path: Path, monkeypatch: Any
) -> None:
    """The same entry printed with and without blocks of lanes gives the same bytes."""
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "cache"))
    path, entry, dims = program
    consts = {"V": 64, "D": 16, "H": 2, "L": 2} if "minigpt" in path else {}
    if path == "chains.psk":
        (tmp_path / path).write_text(CHAINS, encoding="utf-8")
        path = str(tmp_path / path)
    text, lanes = _native_bits(path, entry, dims, consts, dtype)
    suffix = "" if dtype == "f64" else "f"
    # The lane forms are used (so this compares two different programs) …
    for fn in ("exp", "erf") + (("tanh", "log") if "chain" in path else ()):
        assert f"presk_{fn}{suffix}_lanes(" in text, fn
    monkeypatch.setattr(_Printer, "lanes", False)
    plain_text, plain = _native_bits(path, entry, dims, consts, dtype)
    assert "_lanes(" not in plain_text
    # … and give every output byte of the plain loops.
    assert lanes == plain
