"""presk.build: cached compilation of one C unit, cffi loading, and numpy pointers.

Every test points PRESK_CACHE (or XDG_CACHE_HOME / HOME) into its own tmp_path, so the
real ~/.cache is never touched. Compiler invocations are counted through a wrapper
script given as PRESK_CC that logs its arguments and then runs the real compiler.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from presk.build import compile as bc
from presk.build import load as bl

REPO_ROOT = Path(__file__).resolve().parents[2]

ADD_C = "double presk_test_add(double a, double b) { return a + b; }\n"
ADD_CDEF = "double presk_test_add(double a, double b);"

DOT_C = textwrap.dedent(
    """\
    #include <stddef.h>
    double presk_test_dot(const double *x, const double *y, size_t n) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++) s += x[i] * y[i];
        return s;
    }
    double presk_test_sum(const double *x, size_t n) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++) s += x[i];
        return s;
    }
    void presk_test_scale(double *x, size_t n, double k) {
        for (size_t i = 0; i < n; i++) x[i] *= k;
    }
    """
)
DOT_CDEF = """
double presk_test_dot(const double *x, const double *y, size_t n);
double presk_test_sum(const double *x, size_t n);
void presk_test_scale(double *x, size_t n, double k);
"""

REAL_CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
pytestmark = pytest.mark.skipif(REAL_CC is None, reason="no C compiler (cc, gcc, clang)")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("PRESK_CACHE", str(root))
    monkeypatch.delenv("PRESK_CC", raising=False)
    return root


class CountingCC:
    """A PRESK_CC wrapper that appends its argv to a log, then runs the real compiler."""

    def __init__(self, tmp_path: Path, delay_s: float = 0.0) -> None:
        self.log = tmp_path / "cc.log"
        self.path = tmp_path / "counting-cc"
        sleep = f"sleep {delay_s}\n" if delay_s else ""
        self.path.write_text(f'#!/bin/sh\necho "$*" >> "{self.log}"\n{sleep}exec {REAL_CC} "$@"\n')
        self.path.chmod(self.path.stat().st_mode | stat.S_IEXEC)

    def calls(self) -> list[str]:
        """Every invocation (version and target queries included)."""
        return self.log.read_text().splitlines() if self.log.exists() else []

    def compiles(self) -> list[str]:
        """The invocations that compiled a unit."""
        return [c for c in self.calls() if "-shared" in c.split()]


def _files(root: Path) -> list[Path]:
    # The compiler identities kept under identity/ describe the compiler, not a unit, and
    # the root's marker says whose the root is.
    if not root.exists():
        return []
    marker = root / ".presk-cache"
    return sorted(
        p for p in root.rglob("*") if p.is_file() and "identity" not in p.parts and p != marker
    )


def _units(root: Path) -> list[Path]:
    return [
        p
        for p in root.rglob("*")
        if "identity" not in p.relative_to(root).parts and p != root / ".presk-cache"
    ]


def test_build_load_call(cache: Path) -> None:
    so = bc.build(ADD_C)
    assert so.name == "unit.so" and so.is_file()
    entry = so.parent
    assert entry.parent.parent == cache and entry.parent.name == entry.name[:2]
    assert (entry / "unit.c").read_text() == ADD_C
    lib = bl.load(so, ADD_CDEF)
    assert lib.lib.presk_test_add(1.5, 2.25) == 3.75
    assert bl.load(so, ADD_CDEF) is lib  # memoised: opened once


def test_second_build_is_a_hit(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cc = CountingCC(tmp_path)
    monkeypatch.setenv("PRESK_CC", str(cc.path))
    first = bc.build(ADD_C)
    assert len(cc.compiles()) == 1
    before = len(cc.calls())
    assert bc.build(ADD_C) == first
    # Identity is memoised and the entry is valid: the compiler is not started at all.
    assert len(cc.calls()) == before


def test_corrupted_source_forces_rebuild(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cc = CountingCC(tmp_path)
    monkeypatch.setenv("PRESK_CC", str(cc.path))
    so = bc.build(ADD_C)
    (so.parent / "unit.c").write_text(ADD_C + "/* tampered */\n")
    assert bc.build(ADD_C) == so
    assert len(cc.compiles()) == 2
    assert (so.parent / "unit.c").read_text() == ADD_C
    assert {p.name for p in so.parent.iterdir()} == {"unit.c", "unit.so", ".lock"}
    # A missing unit.so behind a valid unit.c is not a hit either.
    so.unlink()
    assert bc.build(ADD_C) == so and so.is_file()
    assert len(cc.compiles()) == 3


def test_syntax_error_raises_and_leaves_nothing(cache: Path) -> None:
    bad = "double presk_test_bad(double a) { return a + ; }\n"
    with pytest.raises(bc.BuildError) as info:
        bc.build(bad)
    msg = str(info.value)
    assert "-std=c11" in msg and "-ffp-contract=off" in msg  # the command line
    assert "unit.c" in msg and "error" in msg  # the compiler's own message
    assert info.value.command[-2] == "-o" and "error" in info.value.stderr
    assert _files(cache) == []
    key = bc.cache_key(bad, bc.flags(), bc.compiler_identity(bc.compiler()))
    assert not bc.entry_dir(key).exists()


def test_missing_compiler(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "no-such-cc"
    monkeypatch.setenv("PRESK_CC", str(missing))
    with pytest.raises(bc.BuildError) as info:
        bc.build(ADD_C)
    assert str(missing) in str(info.value)
    assert _files(cache) == []


def test_compiler_that_fails_to_compile_leaves_nothing(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Answers the identity queries like the real compiler but dies on a compile.
    fake = tmp_path / "half-cc"
    fake.write_text(
        '#!/bin/sh\ncase " $* " in\n'
        '  *" -shared "*) echo "half-cc: out of cheese" >&2; exit 3;;\n'
        f'esac\nexec {REAL_CC} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PRESK_CC", str(fake))
    with pytest.raises(bc.BuildError, match="out of cheese") as info:
        bc.build(ADD_C)
    assert "exit 3" in str(info.value)
    assert _files(cache) == [] and _units(cache) == []


def test_cache_dir_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRESK_CC", raising=False)
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "p"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert bc.cache_dir() == tmp_path / "p"
    monkeypatch.delenv("PRESK_CACHE")
    assert bc.cache_dir() == tmp_path / "x" / "presk"
    so = bc.build(ADD_C)
    assert so.is_relative_to(tmp_path / "x" / "presk")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # invalid per the XDG spec
    assert bc.cache_dir() == tmp_path / "h" / ".cache" / "presk"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert bc.cache_dir() == tmp_path / "h" / ".cache" / "presk"
    assert bc.build(ADD_C).is_relative_to(tmp_path / "h" / ".cache" / "presk")


def test_key_covers_flags_and_text(cache: Path) -> None:
    ident = bc.compiler_identity(bc.compiler())
    assert "march=" in ident and ident.splitlines() == [ident]
    base = bc.cache_key(ADD_C, bc.flags(), ident)
    assert bc.cache_key(ADD_C + " ", bc.flags(), ident) != base
    assert bc.cache_key(ADD_C, bc.flags(openmp=True), ident) != base
    assert bc.cache_key(ADD_C, bc.flags(march_native=False), ident) != base
    assert bc.cache_key(ADD_C, bc.flags(), ident + "x") != base
    assert bc.flags() == bc.FLAGS
    assert bc.flags(openmp=True) == (*bc.FLAGS, "-fopenmp")
    assert "-march=native" not in bc.flags(march_native=False)


def test_clang_identity_is_parsed(tmp_path: Path) -> None:
    # A stand-in speaking clang's dialect: no --help=target, a cc1 line under -###.
    fake = tmp_path / "fake-clang"
    fake.write_text(
        textwrap.dedent(
            """\
            #!/bin/sh
            case "$*" in
              --version) echo "clang version 99.0.0"; exit 0;;
              *--help=target*) echo "clang: error: unsupported option" >&2; exit 1;;
              *-###*) echo ' "/usr/bin/clang" "-cc1" "-target-cpu" "znver4"' \
                  '"-target-feature" "+avx2"' >&2; exit 0;;
            esac
            exit 1
            """
        )
    )
    fake.chmod(0o755)
    ident = bc.compiler_identity(str(fake))
    assert ident.startswith("clang version 99.0.0 | march=znver4 target-features=")


_CONCURRENT = """
import sys
from presk.build import compile as bc, load as bl
so = bc.build(sys.argv[1])
print(bl.load(so, "double presk_test_add(double a, double b);").lib.presk_test_add(2.0, 0.5))
"""


def test_concurrent_processes_build_once(cache: Path, tmp_path: Path) -> None:
    # The compiler sleeps, so the second process arrives while the first holds the lock.
    cc = CountingCC(tmp_path, delay_s=0.5)
    env = {**os.environ, "PRESK_CACHE": str(cache), "PRESK_CC": str(cc.path)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-c", _CONCURRENT, ADD_C]
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == "2.5"
    assert len(cc.compiles()) == 1
    entries = [d for d in cache.glob("*/*") if d.is_dir() and d.parent.name != "identity"]
    assert len(entries) == 1
    assert {p.name for p in entries[0].iterdir()} == {"unit.c", "unit.so", ".lock"}
    assert (entries[0] / "unit.c").read_text() == ADD_C


def test_concurrent_failures_leave_nothing(cache: Path, tmp_path: Path) -> None:
    # The waiter holds the lock file the first failure unlinks: it must start over on a
    # fresh lock rather than build into a removed directory.
    cc = CountingCC(tmp_path, delay_s=0.5)
    env = {**os.environ, "PRESK_CACHE": str(cache), "PRESK_CC": str(cc.path)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-c", _CONCURRENT, "double presk_test_add(double a) { return a + ; }"]
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 1 and "BuildError" in err and "unit.c" in err, err
    assert len(cc.compiles()) == 2
    assert _units(cache) == []


def test_stale_work_directory_is_cleared(cache: Path) -> None:
    so = bc.build(ADD_C)
    stale = so.parent / ".build-killed"
    stale.mkdir()
    (stale / "unit.c").write_text("half")
    (so.parent / "unit.c").unlink()  # as if the builder died before publishing unit.c
    assert bc.build(ADD_C) == so
    assert {p.name for p in so.parent.iterdir()} == {"unit.c", "unit.so", ".lock"}


def test_pointer_passes_float64(cache: Path) -> None:
    lib = bl.load(bc.build(DOT_C), DOT_CDEF)
    x = np.arange(1.0, 101.0)
    assert lib.lib.presk_test_sum(bl.pointer(lib.ffi, x, "double"), x.size) == 5050.0
    y = x.copy()
    lib.lib.presk_test_scale(bl.pointer(lib.ffi, y, "double", writable=True), y.size, 2.0)
    np.testing.assert_array_equal(y, 2.0 * x)  # C wrote the array's own memory


def test_pointer_rejects_bad_arrays(cache: Path) -> None:
    lib = bl.load(bc.build(DOT_C), DOT_CDEF)
    ffi = lib.ffi
    with pytest.raises(TypeError, match="dtype"):
        bl.pointer(ffi, np.zeros(4, dtype=np.float32), "double")
    with pytest.raises(TypeError, match="dtype"):
        bl.pointer(ffi, np.zeros(4, dtype=">f8"), "double")
    with pytest.raises(TypeError, match="contiguous"):
        bl.pointer(ffi, np.zeros(8)[::2], "double")
    with pytest.raises(TypeError, match="numpy array"):
        bl.pointer(ffi, [1.0, 2.0], "double")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unsupported"):
        bl.pointer(ffi, np.zeros(4, dtype=np.int32), "int32_t")
    ro = np.zeros(4)
    ro.flags.writeable = False
    bl.pointer(ffi, ro, "double")  # reading a read-only array is fine
    with pytest.raises(TypeError, match="read-only"):
        bl.pointer(ffi, ro, "double", writable=True)
    for ctype, dtype in [("float", np.float32), ("uint16_t", np.uint16), ("int64_t", np.int64)]:
        assert (
            ffi.sizeof(bl.pointer(ffi, np.zeros(3, dtype=dtype), ctype))
            == 3 * np.dtype(dtype).itemsize
        )


def test_march_native_does_not_change_bits(cache: Path) -> None:
    # Sequential IEEE arithmetic, each product and sum rounded once. A contracted (FMA) or
    # reassociated (vectorised) loop would differ in the last bits for these inputs.
    rng = np.random.default_rng(12345)
    x = rng.standard_normal(1000) * np.exp(rng.uniform(-20, 20, 1000))
    y = rng.standard_normal(1000)
    expected = 0.0
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        expected += a * b
    results = []
    for march_native in (True, False):
        so = bc.build(DOT_C, march_native=march_native)
        lib = bl.load(so, DOT_CDEF)
        px, py = bl.pointer(lib.ffi, x, "double"), bl.pointer(lib.ffi, y, "double")
        results.append(lib.lib.presk_test_dot(px, py, x.size))
    assert len({bc.build(DOT_C, march_native=m) for m in (True, False)}) == 2
    assert [r.hex() for r in results] == [expected.hex(), expected.hex()]
    # The inputs do discriminate: a 4-lane vectorised (reassociated) sum and an FMA-
    # contracted loop (exact a*b + s, rounded once, via Fraction) both land elsewhere.
    lanes = [0.0] * 4
    for i, (a, b) in enumerate(zip(x.tolist(), y.tolist(), strict=True)):
        lanes[i % 4] += a * b
    assert ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])).hex() != expected.hex()
    fused = 0.0
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        fused = float(Fraction(fused) + Fraction(a) * Fraction(b))
    assert fused.hex() != expected.hex()
