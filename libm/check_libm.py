#!/usr/bin/env python3
"""Long accuracy and musl-equivalence check for libm/musl/presk_libm.c.

For each of the 12 functions (exp log tanh sin cos erf and their float forms):

1. 10^6 inputs (special values, thresholds, random bit patterns = log-uniform
   magnitudes of both signs over the whole format, and values concentrated in
   the interesting range of the function) are evaluated through presk_libm.c
   (compiled to a shared object and called through cffi over numpy buffers);
2. every result is compared with MPFR (gmpy2) evaluated at 200 bits and the
   error is measured in ulps of the result type; the maximum is printed;
3. if a musl toolchain is installed (Debian: apt-get install musl-tools), the
   same inputs go through libm/musl_harness.c built with musl-gcc, and the
   number of inputs whose result differs in any bit is printed.

Usage:  python libm/check_libm.py [--n 1000000] [--seed 1] [--jobs N]
                                  [--functions exp,sinf] [--no-musl]
Exit status 1 if some error exceeds --max-ulp (default 1.0) or some result
differs from musl (unless --allow-musl-diff).  `make libm-check` runs it.

The helpers here (build_library, make_inputs, ulp error) are also used by
tests/unit/test_libm.py, which runs a smaller version with mpmath as oracle.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SRC_DIR = HERE / "musl"
LIBM_C = SRC_DIR / "presk_libm.c"
HARNESS_C = HERE / "musl_harness.c"

DOUBLE_FUNCS = ("exp", "log", "tanh", "sin", "cos", "erf")
FLOAT_FUNCS = ("expf", "logf", "tanhf", "sinf", "cosf", "erff")
ALL_FUNCS = DOUBLE_FUNCS + FLOAT_FUNCS

# The flags every generated program uses for presk_libm.c (see docs/libm.md).
CFLAGS = ("-std=c11", "-O2", "-ffp-contract=off", "-fno-fast-math")

WRAPPER_C = """
#include <stddef.h>
#include "presk_libm.h"
#define VEC(name, T) \\
    void vec_##name(const T *x, T *y, size_t n) \\
    { for (size_t i = 0; i < n; i++) y[i] = presk_##name(x[i]); }
VEC(exp, double) VEC(log, double) VEC(tanh, double)
VEC(sin, double) VEC(cos, double) VEC(erf, double)
VEC(expf, float) VEC(logf, float) VEC(tanhf, float)
VEC(sinf, float) VEC(cosf, float) VEC(erff, float)
"""

# presk's tanh/tanhf do not follow musl, whose tanh is up to 2.1 ulp off (see
# docs/libm.md): differences from musl are expected there and do not fail.
MUSL_DEVIATES = frozenset({"tanh", "tanhf"})

CDEF = "\n".join(
    [f"void vec_{f}(const double *x, double *y, size_t n);" for f in DOUBLE_FUNCS]
    + [f"void vec_{f}(const float *x, float *y, size_t n);" for f in FLOAT_FUNCS]
    + [f"double presk_{f}(double);" for f in DOUBLE_FUNCS]
    + [f"float presk_{f}(float);" for f in FLOAT_FUNCS]
)


def base(name: str) -> str:
    """exp for exp and expf, erf for erf and erff, ..."""
    return name[:-1] if name in FLOAT_FUNCS else name


def dtype_of(name: str) -> type[np.floating[Any]]:
    return np.float32 if name in FLOAT_FUNCS else np.float64


# --------------------------------------------------------------------------
# Building and calling
# --------------------------------------------------------------------------


def find_cc() -> str | None:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


def build_library(
    outdir: Path,
    extra_flags: Sequence[str] = (),
    cc: str | None = None,
    name: str = "libpresk_libm_check.so",
    cflags: Sequence[str] = CFLAGS,
) -> Path:
    """Compile presk_libm.c plus an array wrapper into a shared object."""
    cc = cc or find_cc()
    if cc is None:
        raise RuntimeError("no C compiler found (cc, gcc, clang)")
    outdir.mkdir(parents=True, exist_ok=True)
    wrapper = outdir / "vec_wrapper.c"
    wrapper.write_text(WRAPPER_C)
    so = outdir / name
    cmd = [
        cc,
        *cflags,
        *extra_flags,
        "-fPIC",
        "-shared",
        f"-I{SRC_DIR}",
        str(LIBM_C),
        str(wrapper),
        "-o",
        str(so),
    ]
    if sys.platform.startswith("linux"):
        # Bind the wrapper's calls to this object's presk_* even when several
        # builds are loaded into one process.
        cmd.insert(-2, "-Wl,-Bsymbolic")
    subprocess.run(cmd, check=True)
    return so


class PreskLibm:
    """presk_libm.c through cffi (ABI mode), vectorized over numpy arrays."""

    def __init__(self, so: Path) -> None:
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF)
        self.lib = self.ffi.dlopen(str(so))

    def __call__(self, name: str, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=dtype_of(name))
        y = np.empty_like(x)
        ct = "double[]" if x.dtype == np.float64 else "float[]"
        getattr(self.lib, f"vec_{name}")(
            self.ffi.from_buffer(ct, x), self.ffi.from_buffer(ct, y, require_writable=True), x.size
        )
        return y


def build_variants(cc_list: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """Compiler/flag combinations that must all give the same bits."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for cc in cc_list:
        for opt in ("-O0", "-O2", "-O3"):
            for arch in ((), ("-march=native",)):
                out.append((cc, ("-std=c11", opt, "-ffp-contract=off", "-fno-fast-math", *arch)))
        # The file's own pragmas must keep contraction off even in GNU mode,
        # where GCC defaults to -ffp-contract=fast, and with clang's default.
        out.append((cc, ("-std=gnu11", "-O2", "-march=native")))
    return out


def compare_build_variants(
    tmp: Path, inputs: dict[str, np.ndarray], reference: dict[str, np.ndarray]
) -> list[tuple[str, int]]:
    """(description, number of differing results) for each build variant."""
    ccs = [c for c in ("gcc", "clang") if shutil.which(c)] or [c for c in [find_cc()] if c]
    rows = []
    for k, (cc, flags) in enumerate(build_variants(ccs)):
        desc = f"{cc} {' '.join(flags)}"
        try:
            so = build_library(
                tmp / f"variant{k}", cc=cc, cflags=flags, name=f"libpresk_libm_v{k}.so"
            )
        except subprocess.CalledProcessError:
            rows.append((desc + " (does not build)", -1))
            continue
        lib = PreskLibm(so)
        nd = sum(
            int(np.count_nonzero(~same_bits(lib(f, x), reference[f]))) for f, x in inputs.items()
        )
        rows.append((desc, nd))
    return rows


EXHAUSTIVE_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "presk_libm.h"
/* ulp of the float format at |v| (v a double) */
static double ulpf(double v)
{
    uint64_t u;
    int e;
    memcpy(&u, &v, 8);
    e = (int)((u >> 52) & 0x7ff) - 1023;
    if (e < -126)
        e = -126;
    u = (uint64_t)(e - 23 + 1023) << 52;
    memcpy(&v, &u, 8);
    return v;
}
static double dabs(double v) { return v < 0 ? -v : v; }
int main(int argc, char **argv)
{
    static const struct { const char *n; float (*f)(float); double (*d)(double); } F[] = {
        {"expf", presk_expf, presk_exp}, {"logf", presk_logf, presk_log},
        {"tanhf", presk_tanhf, presk_tanh}, {"sinf", presk_sinf, presk_sin},
        {"cosf", presk_cosf, presk_cos}, {"erff", presk_erff, presk_erf}};
    const double inf = 1e308 * 10, limit = 0x1.ffffffp127; /* FLT_MAX + half an ulp */
    uint64_t i, start, end, over_half = 0, over_one = 0, wrong = 0;
    uint32_t worst_x = 0;
    double worst = 0;
    int k;
    if (argc != 4)
        return 2;
    for (k = 0; k < 6 && strcmp(F[k].n, argv[1]); k++) {
    }
    if (k == 6)
        return 2;
    start = strtoull(argv[2], 0, 0);
    end = strtoull(argv[3], 0, 0);
    for (i = start; i < end; i++) {
        uint32_t b = (uint32_t)i;
        float x, yf;
        double yd, err;
        memcpy(&x, &b, 4);
        yf = F[k].f(x);
        yd = F[k].d((double)x);
        if (yd != yd)
            err = yf != yf ? 0 : inf;
        else if (yf != yf)
            err = inf;
        else if (dabs(yd) >= limit)
            err = (double)yf == (yd > 0 ? inf : -inf) ? 0 : inf;
        else if (dabs((double)yf) == inf)
            err = inf;
        else
            err = dabs((double)yf - yd) / ulpf(yd);
        over_half += err > 0.5;
        over_one += err > 1.0;
        wrong += err == inf;
        if (err > worst) {
            worst = err;
            worst_x = b;
        }
    }
    printf("%.17g %u %llu %llu %llu\n", worst, worst_x, (unsigned long long)over_half,
           (unsigned long long)over_one, (unsigned long long)wrong);
    return 0;
}
"""


def _run_exhaustive(args: tuple[str, str, int, int]) -> tuple[float, int, int, int, int]:
    exe, name, a, b = args
    out = subprocess.run(
        [exe, name, str(a), str(b)], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]), int(out[3]), int(out[4])


def exhaustive_float(tmp: Path, names: Sequence[str], jobs: int) -> None:
    """All 2^32 inputs of each float function against presk's double function.

    The double functions are within 0.96 ulp of double (checked against MPFR),
    so each float error is exact to within 2^-29 float ulp."""
    cc = find_cc()
    exe = tmp / "exhaustive"
    (tmp / "exhaustive.c").write_text(EXHAUSTIVE_C)
    subprocess.run(
        [cc, *CFLAGS, f"-I{SRC_DIR}", str(LIBM_C), str(tmp / "exhaustive.c"), "-o", str(exe)],
        check=True,
    )
    print(
        "exhaustive float check (all 2^32 inputs; reference: presk double function, "
        "error exact to +-2^-29 ulp):"
    )
    print(
        f"{'function':>9} {'max ulp':>9} {'at x':>26} {'> 0.5 ulp':>11} {'> 1 ulp':>8} "
        f"{'wrong special':>13}  seconds"
    )
    parts = 64
    step = 2**32 // parts
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for name in names:
            t0 = time.time()
            res = list(
                pool.map(
                    _run_exhaustive,
                    [(str(exe), name, i * step, (i + 1) * step) for i in range(parts)],
                )
            )
            worst, wx = max((r[0], r[1]) for r in res)
            xw = float(np.array([wx], dtype=np.uint32).view(np.float32)[0])
            print(
                f"{name:>9} {worst:9.4f} {xw!r:>26} {sum(r[2] for r in res):>11} "
                f"{sum(r[3] for r in res):>8} {sum(r[4] for r in res):>13}"
                f"  {time.time() - t0:7.1f}",
                flush=True,
            )


def build_musl_harness(outdir: Path) -> Path | None:
    """musl_harness.c built with musl-gcc, or None when musl is not installed."""
    musl_gcc = shutil.which("musl-gcc")
    if musl_gcc is None:
        return None
    exe = outdir / "musl_harness"
    subprocess.run(
        [musl_gcc, "-std=c11", "-O2", "-static", str(HARNESS_C), "-o", str(exe)], check=True
    )
    return exe


def musl_eval(exe: Path, name: str, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=dtype_of(name))
    out = subprocess.run([str(exe), name], input=x.tobytes(), capture_output=True, check=True)
    return np.frombuffer(out.stdout, dtype=dtype_of(name)).copy()


def musl_version() -> str:
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "musl"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a Debian package)"


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------


def _f64(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def _f32(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def _neighbours(values: Sequence[float], dt: type[np.floating[Any]], k: int = 2) -> list[float]:
    """Each value, rounded to dt, with its k nearest neighbours on each side."""
    out: list[float] = []
    for v in values:
        if not np.isfinite(dt(v)):
            continue
        c = dt(v)
        lo = hi = c
        out.append(float(c))
        with np.errstate(over="ignore"):
            for _ in range(k):
                lo = np.nextafter(lo, dt(-np.inf))
                hi = np.nextafter(hi, dt(np.inf))
                out += [float(lo), float(hi)]
    return out


H = float.fromhex

# Branch points of the algorithms (|x| thresholds, written as their bit
# patterns' high words where fdlibm tests high words).
THRESHOLDS: dict[str, list[float]] = {
    "exp": [
        H("0x1p-54"),
        512.0,
        1024.0,
        708.39641853226410622,
        709.782712893383973096,
        -708.39641853226410622,
        -709.782712893383973096,
        -745.13321910194110842,
        -745.1332191019412,
        -744.44007192138121,
        -737.0,
        0.5,
        1.0,
        math.log(2) / 256,
    ],
    "log": [
        1.0 - H("0x1p-4"),
        1.0 + H("0x1.09p-4"),
        1.0,
        H("0x1.6p-1"),
        H("0x1.6p0"),
        2.0,
        0.5,
        H("0x1p-1022"),
        math.e,
        10.0,
    ],
    "tanh": [0.5493061443340548, 0.2554128118829953, 20.0, H("0x1p-1022"), 0.1, 1.0, H("0x1p-28")],
    "sin": [
        math.pi / 4,
        math.pi / 2,
        math.pi,
        3 * math.pi / 2,
        2 * math.pi,
        5 * math.pi / 4,
        7 * math.pi / 4,
        9 * math.pi / 4,
        H("0x1p-26"),
        H("0x1.921fb54442d18p+20"),
        H("0x1p20") * math.pi,
        H("0x1p52"),
        H("0x1p1023"),
        6381956970095103.0 * 2.0**797,
        5.319372648326541e255,
        1e22,
        1e300,
        355.0,
        103993.0,
        2 * math.pi * 1e6,
    ],
    "erf": [0.84375, 1.25, 1 / 0.35, 6.0, H("0x1p-28"), 0.5, 2.0, 5.9, 28.0],
    "expf": [
        88.0,
        H("0x1.62e42ep6"),
        -H("0x1.9fe368p6"),
        88.72283935546875,
        -87.33654022216797,
        -103.97208404541016,
        H("0x1p-25"),
        1.0,
    ],
    "logf": [1.0, H("0x1.66p-1"), H("0x1.66p0"), H("0x1p-126"), 2.0, 0.5, math.e],
    "tanhf": [H("0x1.193ea8p-1"), H("0x1.058aefp-2"), 10.0, H("0x1p-126"), H("0x1p-12"), 1.0],
    "sinf": [
        math.pi / 4,
        3 * math.pi / 4,
        5 * math.pi / 4,
        7 * math.pi / 4,
        9 * math.pi / 4,
        math.pi / 2,
        math.pi,
        2 * math.pi,
        H("0x1p-12"),
        H("0x1.921fb6p28"),
        1e8,
        1e38,
        3.4028234663852886e38,
        H("0x1.99bc5cp27"),
        H("0x1.76b3e2p+42"),
    ],
    "erff": [0.84375, 1.25, 1 / 0.35, 6.0, H("0x1p-28"), 0.5, 2.0],
}
THRESHOLDS["cos"] = THRESHOLDS["sin"] + [H("0x1.6a09e667f3bcdp-27")]
THRESHOLDS["cosf"] = THRESHOLDS["sinf"]
THRESHOLDS["tanhf"] += [9.0, 0.5493061443340548]


def special_inputs(name: str) -> np.ndarray:
    """Signed zeros, subnormals, extremes, inf, NaNs, thresholds (both signs)."""
    dt = dtype_of(name)
    if dt is np.float64:
        fixed = [
            0.0,
            -0.0,
            _f64(1),
            _f64(2),
            _f64(0x000FFFFFFFFFFFFF),
            H("0x1p-1022"),
            H("0x1.fffffffffffffp-1023"),
            1.0,
            2.0,
            0.5,
            1.7976931348623157e308,
            math.inf,
            -math.inf,
            math.nan,
            _f64(0x7FF8000000000123),
            _f64(0xFFF8000000000000),
            _f64(0x7FF0000000000001),
        ]
    else:
        fixed = [
            0.0,
            -0.0,
            _f32(1),
            _f32(2),
            _f32(0x007FFFFF),
            H("0x1p-126"),
            1.0,
            2.0,
            0.5,
            3.4028234663852886e38,
            math.inf,
            -math.inf,
            math.nan,
            _f32(0x7FC00123),
            _f32(0xFFC00000),
            _f32(0x7F800001),
        ]
    vals = fixed + _neighbours(THRESHOLDS[name], dt)
    # Multiples of pi/2 are the hard cases of the argument reduction.
    if base(name) in ("sin", "cos"):
        top = 1e6 if dt is np.float64 else 1e4
        ks = np.unique(np.round(np.geomspace(1, top, 200)))
        vals += _neighbours([k * math.pi / 2 for k in ks], dt, 1)
    vals += [-v for v in vals]
    with np.errstate(over="ignore"):
        return np.array(vals, dtype=dt)


# Active range per function: (lo, hi) of |x| for the log-uniform part and the
# half-width / centre of the linear part.
RANGES: dict[str, tuple[float, float, float, float]] = {
    # name: (log-uniform |x| min, max, linear lo, linear hi)
    "exp": (H("0x1p-60"), 750.0, -746.0, 710.0),
    "log": (H("0x1p-1074"), 1.7976931348623157e308, 0.0, 4.0),
    "tanh": (H("0x1p-60"), 40.0, -3.0, 3.0),
    "sin": (H("0x1p-60"), 1.7976931348623157e308, -100.0, 100.0),
    "erf": (H("0x1p-60"), 10.0, -6.5, 6.5),
    "expf": (H("0x1p-30"), 110.0, -105.0, 89.0),
    "logf": (H("0x1p-149"), 3.4028234663852886e38, 0.0, 4.0),
    "tanhf": (H("0x1p-30"), 20.0, -3.0, 3.0),
    "sinf": (H("0x1p-30"), 3.4028234663852886e38, -100.0, 100.0),
    "erff": (H("0x1p-30"), 10.0, -6.5, 6.5),
}
RANGES["cos"] = RANGES["sin"]
RANGES["cosf"] = RANGES["sinf"]


def random_inputs(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    dt = dtype_of(name)
    lo, hi, a, b = RANGES[name]
    n_bits = n * 3 // 10
    n_log = n * 4 // 10
    n_lin = n - n_bits - n_log
    # Random bit patterns: log-uniform over every binade, both signs.
    if dt is np.float64:
        bits = rng.integers(0, 2**64, size=n_bits, dtype=np.uint64, endpoint=False)
        x_bits = bits.view(np.float64)
    else:
        bits32 = rng.integers(0, 2**32, size=n_bits, dtype=np.uint64).astype(np.uint32)
        x_bits = bits32.view(np.float32)
    x_bits = np.where(np.isfinite(x_bits), x_bits, dt(1.5))  # keep the count
    # Log-uniform magnitudes in the active range, both signs.
    mag = np.exp2(rng.uniform(math.log2(max(lo, 1e-300)), math.log2(hi), size=n_log))
    if lo < 1e-300:  # reach into the subnormals too
        mag[: n_log // 20] = np.exp2(rng.uniform(-1074, -1000, size=n_log // 20))
    sign = rng.choice([-1.0, 1.0], size=n_log)
    x_log = (mag * sign).astype(dt)
    x_lin = rng.uniform(a, b, size=n_lin).astype(dt)
    x = np.concatenate([x_bits.astype(dt), x_log, x_lin])
    if base(name) == "log":  # mostly the domain of log
        mask = rng.random(x.size) < 0.9
        x[mask] = np.abs(x[mask])
    return x


def make_inputs(name: str, n: int, seed: int = 1) -> np.ndarray:
    """n inputs for a function: all special values first, then random ones."""
    rng = np.random.default_rng([seed, ALL_FUNCS.index(name)])
    sp = special_inputs(name)
    rest = random_inputs(name, max(n - sp.size, 0), rng)
    return np.concatenate([sp, rest])[:n] if n >= sp.size else sp[:n]


# --------------------------------------------------------------------------
# Errors in ulps against an arbitrary-precision oracle
# --------------------------------------------------------------------------

# (precision, minimum normal exponent, largest finite value) of each format
FORMATS = {
    np.float64: (53, -1022, 1.7976931348623157e308),
    np.float32: (24, -126, 3.4028234663852886e38),
}


def special_exact(name: str, x: float) -> float | None:
    """The exact result for inputs where the oracle is not consulted."""
    f = base(name)
    if math.isnan(x):
        return math.nan
    if math.isinf(x):
        return {
            "exp": math.inf if x > 0 else 0.0,
            "log": math.inf if x > 0 else math.nan,
            "tanh": math.copysign(1.0, x),
            "sin": math.nan,
            "cos": math.nan,
            "erf": math.copysign(1.0, x),
        }[f]
    if f == "log" and x <= 0:
        return -math.inf if x == 0 else math.nan
    return None


def ulp_error_gmpy2(name: str, x: float, y: float) -> float:
    """|y - f(x)| in ulps of the result format, f(x) from MPFR at 200 bits.

    0 for an exactly right special result (NaN for NaN, inf for an overflowing
    exact value, ...), inf for a wrong one.  Runs in a worker process."""
    import gmpy2

    ctx = gmpy2.get_context()
    ctx.precision = 200
    prec, emin, fmax = FORMATS[dtype_of(name)]
    ex = special_exact(name, x)
    if ex is not None:
        if math.isnan(ex):
            return 0.0 if math.isnan(y) else math.inf
        return 0.0 if y == ex else math.inf
    fn = {
        "exp": gmpy2.exp,
        "log": gmpy2.log,
        "tanh": gmpy2.tanh,
        "sin": gmpy2.sin,
        "cos": gmpy2.cos,
        "erf": gmpy2.erf,
    }[base(name)]
    v = fn(gmpy2.mpfr(x))
    if math.isnan(y):
        return math.inf
    if math.isinf(y):
        # Right only when the exact value rounds to infinity in the format.
        emax = 1 - emin  # fmax = (2 - 2^(1-prec)) * 2^emax; half an ulp of it:
        limit = gmpy2.mpfr(fmax) + gmpy2.mul_2exp(gmpy2.mpfr(1), emax - prec)
        return 0.0 if abs(v) >= limit and (v > 0) == (y > 0) else math.inf
    if v == 0:
        return 0.0 if y == 0 else math.inf
    e = int(gmpy2.get_exp(v)) - 1  # v = m * 2^e with 1 <= |m| < 2
    ue = max(e, emin) - (prec - 1)
    return float(gmpy2.mul_2exp(abs(gmpy2.mpfr(y) - v), -ue))


def _errors_chunk(args: tuple[str, np.ndarray, np.ndarray]) -> np.ndarray:
    name, x, y = args
    return np.array([ulp_error_gmpy2(name, float(a), float(b)) for a, b in zip(x, y, strict=True)])


def ulp_errors(name: str, x: np.ndarray, y: np.ndarray, jobs: int = 1) -> np.ndarray:
    if jobs <= 1:
        return _errors_chunk((name, x, y))
    parts = max(jobs * 8, 1)
    chunks = [
        (name, a, b)
        for a, b in zip(np.array_split(x, parts), np.array_split(y, parts), strict=True)
    ]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return np.concatenate(list(pool.map(_errors_chunk, chunks)))


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    it = np.uint64 if a.dtype == np.float64 else np.uint32
    return np.asarray(a.view(it) == b.view(it))


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="accuracy and musl check of presk_libm.c")
    ap.add_argument("--n", type=int, default=1_000_000, help="inputs per function")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--functions", default=",".join(ALL_FUNCS))
    ap.add_argument("--no-musl", action="store_true", help="skip the comparison with musl")
    ap.add_argument("--max-ulp", type=float, default=1.0)
    ap.add_argument("--allow-musl-diff", action="store_true")
    ap.add_argument(
        "--no-variants",
        action="store_true",
        help="skip the gcc/clang x -O0/-O2/-O3 x -march=native bit-identity check",
    )
    ap.add_argument(
        "--exhaustive-float",
        action="store_true",
        help="also check every float input (slow: ~10 CPU-minutes per function)",
    )
    ap.add_argument(
        "--variant-n",
        type=int,
        default=100_000,
        help="inputs per function for the build-variant check",
    )
    args = ap.parse_args(argv)
    funcs = [f for f in args.functions.split(",") if f]
    for f in funcs:
        if f not in ALL_FUNCS:
            ap.error(f"unknown function {f}")

    tmp = Path(tempfile.mkdtemp(prefix="presk_libm_check_"))
    try:
        lib = PreskLibm(build_library(tmp))
        harness = None if args.no_musl else build_musl_harness(tmp)
        failed = False
        if not args.no_musl:
            if harness is None:
                print(
                    "musl-gcc not found: skipping the musl comparison "
                    "(Debian: apt-get install musl-tools)"
                )
            else:
                print(f"musl (Debian package) version: {musl_version()}")
        if not args.no_variants:
            print(
                "bit-identity of build variants (results differing from the reference "
                f"build `{find_cc()} {' '.join(CFLAGS)}`, over {args.variant_n} inputs "
                "per function):"
            )
            vin = {f: make_inputs(f, args.variant_n, args.seed) for f in funcs}
            ref = {f: lib(f, x) for f, x in vin.items()}
            for desc, nd in compare_build_variants(tmp, vin, ref):
                print(f"    {nd:>6}  {desc}")
                if nd != 0:
                    failed = True
        print(f"{args.n} inputs per function, seed {args.seed}, oracle MPFR 200 bits")
        print(
            f"{'function':>9} {'max ulp':>9} {'at x':>26} {'> 0.5 ulp':>10} "
            f"{'musl diff':>10}  seconds"
        )
        for name in funcs:
            t0 = time.time()
            x = make_inputs(name, args.n, args.seed)
            y = lib(name, x)
            err = ulp_errors(name, x, y, args.jobs)
            i = int(np.argmax(err))
            worst = float(err[i])
            over_half = int(np.count_nonzero(err > 0.5))
            diff_txt = "-"
            if harness is not None:
                ym = musl_eval(harness, name, x)
                nd = int(np.count_nonzero(~same_bits(y, ym)))
                diff_txt = str(nd)
                if name in MUSL_DEVIATES:
                    diff_txt += "*"
                elif nd and not args.allow_musl_diff:
                    failed = True
                    j = int(np.flatnonzero(~same_bits(y, ym))[0])
                    print(
                        f"    first musl difference: x={float(x[j])!r} presk={float(y[j])!r} "
                        f"musl={float(ym[j])!r}"
                    )
            if worst > args.max_ulp:
                failed = True
            print(
                f"{name:>9} {worst:9.4f} {float(x[i])!r:>26} {over_half:>10} {diff_txt:>10}"
                f"  {time.time() - t0:7.1f}",
                flush=True,
            )
        if harness is not None and any(f in MUSL_DEVIATES for f in funcs):
            print("* presk's own tanh algorithm (musl's is not within 1 ulp): differences expected")
        if args.exhaustive_float:
            exhaustive_float(tmp, [f for f in funcs if f in FLOAT_FUNCS], args.jobs)
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
