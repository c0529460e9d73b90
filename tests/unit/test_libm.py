"""presk's own libm (libm/musl/presk_libm.c): accuracy and bit-reproducibility.

The library is compiled into a shared object exactly as every generated program
compiles it (cc -std=c11 -O2 -ffp-contract=off -fno-fast-math) and loaded with
cffi in ABI mode.  For each of the 12 functions, 20000 inputs (special values,
thresholds of the algorithms, random bit patterns = log-uniform magnitudes of
both signs, and values dense in the function's active range) are checked
against mpmath at 200 bits: the error must be at most 1 ulp of the result type.
The same inputs must give identical bits when compiled with -march=native.
The long version (10^6 inputs, MPFR oracle, bit-for-bit comparison with musl)
is libm/check_libm.py (`make libm-check`).
"""

from __future__ import annotations

import importlib.util
import math
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBM_DIR = ROOT / "libm"
N_INPUTS = 20_000
SEED = 20_240_601
MAX_ULP = 1.0


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


C = _load("presk_libm_check", LIBM_DIR / "check_libm.py")
CC = C.find_cc()

pytestmark = pytest.mark.skipif(
    CC is None, reason="no C compiler (cc, gcc or clang) on PATH: cannot build presk_libm.c"
)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("presk_libm"))


@pytest.fixture(scope="module")
def lib(build_dir: Path) -> Any:
    return C.PreskLibm(C.build_library(build_dir / "base", cc=CC))


@pytest.fixture(scope="module")
def inputs() -> dict[str, np.ndarray]:
    return {f: C.make_inputs(f, N_INPUTS, SEED) for f in C.ALL_FUNCS}


# --------------------------------------------------------------------------
# mpmath oracle
# --------------------------------------------------------------------------


def ulp_error_mpmath(name: str, x: float, y: float) -> float:
    """|y - f(x)| in ulps of the result format; f(x) by mpmath at 200 bits."""
    import mpmath

    prec, emin, fmax = C.FORMATS[C.dtype_of(name)]
    ex = C.special_exact(name, x)
    if ex is not None:
        if math.isnan(ex):
            return 0.0 if math.isnan(y) else math.inf
        return 0.0 if y == ex else math.inf
    fn = {
        "exp": mpmath.exp,
        "log": mpmath.log,
        "tanh": mpmath.tanh,
        "sin": mpmath.sin,
        "cos": mpmath.cos,
        "erf": mpmath.erf,
    }[C.base(name)]
    with mpmath.workprec(200):
        v = fn(mpmath.mpf(x))
        if math.isnan(y):
            return math.inf
        if math.isinf(y):
            # right only if the exact value rounds to infinity in the format
            emax = 1 - emin
            limit = mpmath.mpf(fmax) + mpmath.ldexp(1, emax - prec)
            return 0.0 if abs(v) >= limit and (v > 0) == (y > 0) else math.inf
        if v == 0:
            return 0.0 if y == 0 else math.inf
        _, e = mpmath.frexp(v)  # v = m 2^e, 1/2 <= |m| < 1
        ue = max(int(e) - 1, emin) - (prec - 1)
        return float(mpmath.ldexp(abs(mpmath.mpf(y) - v), -ue))


@pytest.mark.parametrize("name", C.ALL_FUNCS)
def test_within_one_ulp_of_mpmath(name: str, lib: Any, inputs: dict[str, np.ndarray]) -> None:
    x = inputs[name]
    y = lib(name, x)
    err = np.array([ulp_error_mpmath(name, float(a), float(b)) for a, b in zip(x, y, strict=True)])
    i = int(np.argmax(err))
    summary = (
        f"presk_{name}: max error {err[i]:.4f} ulp at x = {float(x[i])!r} "
        f"(presk {float(y[i])!r}) over {x.size} inputs; "
        f"{int(np.count_nonzero(err > 0.5))} above 0.5 ulp"
    )
    print(summary)
    assert err[i] <= MAX_ULP, summary


def test_same_bits_with_march_native(
    build_dir: Path, lib: Any, inputs: dict[str, np.ndarray]
) -> None:
    try:
        so = C.build_library(
            build_dir / "native", ["-march=native"], cc=CC, name="libpresk_libm_native.so"
        )
    except subprocess.CalledProcessError:
        pytest.skip(f"{CC} does not accept -march=native here")
    native = C.PreskLibm(so)
    diffs = {
        f: int(np.count_nonzero(~C.same_bits(lib(f, x), native(f, x)))) for f, x in inputs.items()
    }
    print("results differing with -march=native:", diffs)
    assert not any(diffs.values()), diffs


# --------------------------------------------------------------------------
# Special values: exact bits, as musl
# --------------------------------------------------------------------------

INF = math.inf
NAN = math.nan
SPECIAL: list[tuple[str, float, float]] = [
    ("exp", 0.0, 1.0),
    ("exp", -0.0, 1.0),
    ("exp", INF, INF),
    ("exp", -INF, 0.0),
    ("exp", 709.79, INF),
    ("exp", -745.14, 0.0),
    ("exp", -745.13, 5e-324),
    ("exp", 1e-300, 1.0),
    ("log", 1.0, 0.0),
    ("log", 0.0, -INF),
    ("log", -0.0, -INF),
    ("log", INF, INF),
    ("log", -1.0, NAN),
    ("log", -INF, NAN),
    ("log", 5e-324, -744.4400719213812),
    ("tanh", 0.0, 0.0),
    ("tanh", -0.0, -0.0),
    ("tanh", INF, 1.0),
    ("tanh", -INF, -1.0),
    ("tanh", 30.0, 1.0),
    ("tanh", -5e-324, -5e-324),
    ("tanh", -1e-300, -1e-300),
    ("sin", 0.0, 0.0),
    ("sin", -0.0, -0.0),
    ("sin", -5e-324, -5e-324),
    ("sin", INF, NAN),
    ("sin", -INF, NAN),
    ("cos", -0.0, 1.0),
    ("cos", INF, NAN),
    ("cos", 1e-300, 1.0),
    ("erf", 0.0, 0.0),
    ("erf", -0.0, -0.0),
    ("erf", INF, 1.0),
    ("erf", -INF, -1.0),
    ("erf", 7.0, 1.0),
    ("erf", -5e-324, -5e-324),
    ("erf", -1e-300, -1.1283791670955126e-300),
    ("expf", 0.0, 1.0),
    ("expf", INF, INF),
    ("expf", -INF, 0.0),
    ("expf", 89.0, INF),
    ("expf", -104.0, 0.0),
    ("logf", 1.0, 0.0),
    ("logf", 0.0, -INF),
    ("logf", -0.0, -INF),
    ("logf", -1.0, NAN),
    ("logf", INF, INF),
    ("tanhf", -0.0, -0.0),
    ("tanhf", INF, 1.0),
    ("tanhf", -INF, -1.0),
    ("sinf", -0.0, -0.0),
    ("sinf", INF, NAN),
    ("cosf", -0.0, 1.0),
    ("cosf", -INF, NAN),
    ("erff", -0.0, -0.0),
    ("erff", INF, 1.0),
    ("erff", -INF, -1.0),
    ("expf", NAN, NAN),
    ("logf", NAN, NAN),
    ("tanhf", NAN, NAN),
    ("sinf", NAN, NAN),
    ("cosf", NAN, NAN),
    ("erff", NAN, NAN),
    ("exp", NAN, NAN),
    ("log", NAN, NAN),
    ("tanh", NAN, NAN),
    ("sin", NAN, NAN),
    ("cos", NAN, NAN),
    ("erf", NAN, NAN),
]


@pytest.mark.parametrize(("name", "x", "want"), SPECIAL)
def test_special_values(name: str, x: float, want: float, lib: Any) -> None:
    dt = C.dtype_of(name)
    got = lib(name, np.array([x], dtype=dt))[0]
    if math.isnan(want):
        assert np.isnan(got), (name, x, got)
        return
    w = dt(want)
    assert got == w and np.signbit(got) == np.signbit(w), (name, x, float(got), float(w))


def test_nan_payload_propagates(lib: Any) -> None:
    """A quiet NaN input comes back unchanged (as with musl on x86-64)."""
    qd = np.array([0x7FF8000000000123, 0xFFF8000000000456], dtype=np.uint64).view(np.float64)
    qf = np.array([0x7FC00123, 0xFFC00456], dtype=np.uint32).view(np.float32)
    for f in C.DOUBLE_FUNCS:
        assert lib(f, qd).view(np.uint64).tolist() == qd.view(np.uint64).tolist(), f
    for f in C.FLOAT_FUNCS:
        assert lib(f, qf).view(np.uint32).tolist() == qf.view(np.uint32).tolist(), f


# --------------------------------------------------------------------------
# The source itself
# --------------------------------------------------------------------------


def test_tables_match_generator() -> None:
    gen = _load("presk_libm_gen_tables", LIBM_DIR / "gen_tables.py")
    text = gen.TARGET.read_text()
    assert gen.current_block(text) == gen.render(), "run: python libm/gen_tables.py --write"


def test_no_system_libm_symbols(build_dir: Path) -> None:
    """presk_libm.c must not call the host libm (or anything but memcpy)."""
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    obj = build_dir / "presk_libm.o"
    subprocess.run([CC, *C.CFLAGS, "-c", str(C.LIBM_C), "-o", str(obj)], check=True)
    out = subprocess.run([nm, "-u", str(obj)], capture_output=True, text=True, check=True)
    undefined = {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}
    assert undefined <= {"memcpy"}, undefined
    defined = subprocess.run(
        [nm, "-g", "--defined-only", str(obj)], capture_output=True, text=True, check=True
    ).stdout.split()
    exported = {s for s in defined if s.startswith("presk_")}
    # The 12 functions, and the lane forms of exp, log, tanh and erf (tests/test_libm_lanes.py).
    lanes = {f"presk_{f}{s}_lanes" for f in ("exp", "log", "tanh", "erf") for s in ("", "f")}
    assert exported == {f"presk_{f}" for f in C.ALL_FUNCS} | lanes, exported
