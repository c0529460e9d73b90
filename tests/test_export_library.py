"""`presk export --mode library`: a C library whose calls give the native backend's bits.

A C program links the static library, Python's ctypes loads the shared one; both
are fed the inputs `draw_inputs` gives and must write the outputs
`CompiledEntry.raw` gives on them, byte for byte. Only the API is visible, so two
presk libraries (each with its own runtime) link into one program, and several
entries of one program share one library.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import REPO_ROOT, run_presk

from presk.backends.native import CompiledEntry
from presk.host.program import HKey
from presk.host.realization import parse
from presk.interp import rng
from presk.interp.synth import draw_inputs
from presk.pipeline import compile_path

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("objcopy") is None, reason="no C toolchain"
)

COMPILERS = [cc for cc in ("gcc", "clang") if shutil.which(cc)]
LINEAR = ("tutorial/01_linear.psk", "Linear{3, 2}.apply", {"batch": 4})
SAMPLE = ("tutorial/05_sample.psk", "pick", {"B": 3})
NORM = ("tutorial/02_norm.psk", "RMSNorm{8}.apply", {"batch": 3})


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def export(
    out: Path,
    source: str,
    entries: list[str],
    dims: dict[str, int],
    realize: str = "f64",
    *extra: str,
) -> str:
    flags = [a for e in entries for a in ("--entry", e)]
    flags += [a for k, v in dims.items() for a in ("--dim", f"{k}={v}")]
    code, stdout, err = run_presk(
        "export", source, "--mode", "library", *flags, "--realize", realize, *extra, "-o", str(out)
    )
    assert (code, err) == (0, ""), err
    return stdout


def export_one(out: Path, program: tuple[str, str, dict[str, int]], *extra: str) -> str:
    source, entry, dims = program
    return export(out, source, [entry], dims, "f64", *extra)


def make(directory: Path, cc: str = "cc", *targets: str) -> None:
    done = subprocess.run(
        ["make", "-s", "-C", str(directory), f"CC={cc}", *targets], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr


def native(
    source: str, entry: str, dims: dict[str, int], realize: str, threads: int = 1
) -> tuple[CompiledEntry, list[Any], list[np.ndarray]]:
    """The entry compiled as the native backend runs it, drawn inputs, its outputs on them."""
    compiled, _, chosen, binding = compile_path(
        str(REPO_ROOT / source), entry, dims, parse(realize), threads
    )
    inputs = draw_inputs(chosen.info.params, binding.dims, binding.prefix, 0)
    return compiled, compiled.buffers(inputs), [a.copy() for a in compiled.raw(inputs)]


def raw_bytes(value: Any) -> bytes:
    if isinstance(value, rng.Key):
        return np.array([value.k0, value.k1], dtype=np.uint32).tobytes()
    return bytes(np.ascontiguousarray(value).tobytes())


def c_call(prefix: str, name: str, compiled: CompiledEntry, tag: str) -> str:
    """C text calling `prefix`'s entry on in_<tag><i>.bin, writing out_<tag><i>.bin."""
    unit = compiled.unit
    lines = [f"{{ {prefix}_in in; {prefix}_out out; memset(&in, 0, sizeof in);"]
    for i, (field, _, leaf) in enumerate(unit.inputs):
        if isinstance(leaf, HKey):
            lines.append(f'in.{field} = load("in_{tag}{i}.bin", sizeof({name}_key));')
        else:
            size = leaf.size * np.dtype(_NP[leaf.dtype]).itemsize
            lines.append(f'in.{field} = load("in_{tag}{i}.bin", {size}u);')
    for field, _, leaf in unit.outputs:
        lines.append(f"out.{field} = calloc({max(1, leaf.size)}u, 8u);")
    lines += [
        f"{name}_ctx *ctx = {name}_create();",
        f"if (ctx == NULL || {prefix}_call(ctx, &in, &out) != 0) {{ return 1; }}",
        f"{name}_destroy(ctx);",
    ]
    for i, (field, _, leaf) in enumerate(unit.outputs):
        size = leaf.size * np.dtype(_NP[leaf.dtype]).itemsize
        lines.append(f'save("out_{tag}{i}.bin", out.{field}, {size}u);')
    return "\n".join(lines) + " }"


_NP = {"f64": np.float64, "f32": np.float32, "bf16": np.uint16, "i64": np.int64}

C_MAIN = """#include <stdio.h>
#include <stdlib.h>
#include <string.h>
{includes}
static void *load(const char *path, size_t bytes) {{
    FILE *f = fopen(path, "rb");
    void *p = malloc(bytes ? bytes : 1u);
    if (f == NULL || p == NULL || fread(p, 1, bytes, f) != bytes) {{ exit(3); }}
    fclose(f);
    return p;
}}
static void save(const char *path, const void *p, size_t bytes) {{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(p, 1, bytes, f) != bytes) {{ exit(4); }}
    fclose(f);
}}
int main(void) {{
{calls}
    return 0;
}}
"""


def write_inputs(directory: Path, tag: str, buffers: list[Any]) -> None:
    for i, value in enumerate(buffers):
        (directory / f"in_{tag}{i}.bin").write_bytes(raw_bytes(value))


def run_program(directory: Path, cc: str, c_text: str, link: list[str]) -> None:
    (directory / "prog.c").write_text(c_text)
    build = subprocess.run(
        [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "prog.c", "-o", "prog", *link, "-lm"],
        cwd=directory, capture_output=True, text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    ran = subprocess.run(["./prog"], cwd=directory, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


def shared_call(
    library: Path, prefix: str, name: str, compiled: CompiledEntry, buffers: list[Any]
) -> list[np.ndarray]:
    """The entry called through ctypes on the shared library."""
    lib = ctypes.CDLL(str(library))
    unit = compiled.unit

    class In(ctypes.Structure):
        _fields_ = [(f, ctypes.c_void_p) for f, _, _ in unit.inputs] or [("unused", ctypes.c_char)]

    class Out(ctypes.Structure):
        _fields_ = [(f, ctypes.c_void_p) for f, _, _ in unit.outputs]

    keep: list[Any] = []
    c_in = In()
    for (field, _, _), value in zip(unit.inputs, buffers, strict=True):
        if isinstance(value, rng.Key):
            buffer: Any = (ctypes.c_uint32 * 2)(value.k0, value.k1)
            keep.append(buffer)
            setattr(c_in, field, ctypes.addressof(buffer))
        else:
            keep.append(value)
            setattr(c_in, field, value.ctypes.data)
    outs = [
        np.zeros(tuple(s for _, s in leaf.axes), _NP[leaf.dtype]) for _, _, leaf in unit.outputs
    ]
    c_out = Out(*(a.ctypes.data for a in outs))
    getattr(lib, f"{name}_create").restype = ctypes.c_void_p
    getattr(lib, f"{name}_version").restype = ctypes.c_char_p
    call = getattr(lib, f"{prefix}_call")
    call.argtypes = [ctypes.c_void_p, ctypes.POINTER(In), ctypes.POINTER(Out)]
    ctx = getattr(lib, f"{name}_create")()
    assert ctx
    assert call(ctx, ctypes.byref(c_in), ctypes.byref(c_out)) == 0
    assert call(None, ctypes.byref(c_in), ctypes.byref(c_out)) != 0
    getattr(lib, f"{name}_destroy").argtypes = [ctypes.c_void_p]
    getattr(lib, f"{name}_destroy")(ctx)
    from presk import __version__

    assert getattr(lib, f"{name}_version")() == __version__.encode()
    return outs


def same_bits(directory: Path, tag: str, expected: list[np.ndarray]) -> None:
    for i, array in enumerate(expected):
        assert (directory / f"out_{tag}{i}.bin").read_bytes() == array.tobytes(), f"output {i}"


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize(
    ("program", "realize"), [(LINEAR, "f64"), (SAMPLE, "f32"), (NORM, "bf16")], ids=str
)
def test_static_and_shared_give_the_native_bits(
    tmp_path: Path, cc: str, program: tuple[str, str, dict[str, int]], realize: str
) -> None:
    source, entry, dims = program
    out = tmp_path / "lib"
    export(out, source, [entry], dims, realize, "--name", "m")
    make(out, cc)
    compiled, buffers, expected = native(source, entry, dims, realize)
    write_inputs(out, "a", buffers)
    main = C_MAIN.format(includes='#include "m.h"', calls=c_call("m", "m", compiled, "a"))
    run_program(out, cc, main, ["-I.", "libm.a"])
    same_bits(out, "a", expected)
    got = shared_call(out / "libm.so", "m", "m", compiled, buffers)
    for a, b in zip(got, expected, strict=True):
        assert a.tobytes() == b.tobytes()


def test_only_the_api_is_visible(tmp_path: Path) -> None:
    out = tmp_path / "lib"
    stdout = export_one(out, SAMPLE)
    assert stdout.startswith("presk export: library `psk_05_sample` of 1 entry (pick)")
    make(out)
    api = {"create", "destroy", "call", "arena_bytes", "version", "realization"}
    dynamic = subprocess.run(
        ["nm", "-D", "--defined-only", str(out / "libpsk_05_sample.so")],
        capture_output=True, text=True, check=True,
    ).stdout.split()[2::3]  # fmt: skip
    assert {s.removeprefix("psk_05_sample_") for s in dynamic} == api
    static = subprocess.run(
        ["nm", "-g", "--defined-only", str(out / "libpsk_05_sample.a")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    defined = [line.split()[2] for line in static.splitlines() if len(line.split()) == 3]
    assert {s.removeprefix("psk_05_sample_") for s in defined} == api
    header = (out / "psk_05_sample.h").read_text()
    assert "const psk_05_sample_key *key; /* a random key */" in header
    assert "const float *logits; /* f32[batch: 3, vocab: 8] */" not in header  # f64 here
    assert "const double *logits; /* f64[batch: 3, vocab: 8] */" in header
    assert '#define psk_05_sample_REALIZATION "f64"' in header
    assert "presk_" not in header.split("*/", 1)[1]


def test_two_libraries_link_into_one_program(tmp_path: Path) -> None:
    lin, norm = tmp_path / "lin", tmp_path / "norm"
    export_one(lin, LINEAR, "--name", "lin")
    export_one(norm, NORM, "--name", "norm")
    make(lin)
    make(norm)
    work = tmp_path / "prog"
    work.mkdir()
    calls, expected = [], {}
    for tag, (source, entry, dims), name in (("l", LINEAR, "lin"), ("n", NORM, "norm")):
        compiled, buffers, expected[tag] = native(source, entry, dims, "f64")
        write_inputs(work, tag, buffers)
        calls.append(c_call(name, name, compiled, tag))
    main = C_MAIN.format(includes='#include "lin.h"\n#include "norm.h"', calls="\n".join(calls))
    run_program(work, "cc", main, [f"-I{lin}", f"-I{norm}", str(lin / "liblin.a"),
                                   str(norm / "libnorm.a")])  # fmt: skip
    for tag in expected:
        same_bits(work, tag, expected[tag])
    # The shared ones too, in one process: each keeps its own runtime.
    for path in (work / "out_l0.bin", work / "out_n0.bin"):
        path.unlink()
    run_program(work, "cc", main, [f"-I{lin}", f"-I{norm}", f"-L{lin}", f"-L{norm}", "-llin",
                                   "-lnorm", f"-Wl,-rpath,{lin}:{norm}"])  # fmt: skip
    for tag in expected:
        same_bits(work, tag, expected[tag])


def test_two_entries_in_one_library(tmp_path: Path) -> None:
    source, dims = "tests/examples/mlp/mlp.psk", {"D": 4, "B": 3}
    out = tmp_path / "lib"
    stdout = export(out, source, ["mse", "mse_grad"], dims, "f32", "--name", "mlp")
    assert "library `mlp` of 2 entries (mse, mse_grad)" in stdout
    make(out)
    header = (out / "mlp.h").read_text()
    for name in ("mlp_mse_call", "mlp_mse_grad_call", "mlp_mse_arena_bytes", "} mlp_mse_grad_in;"):
        assert name in header
    calls, expected, compiled = [], {}, {}
    for tag, entry in (("a", "mse"), ("b", "mse_grad")):
        compiled[tag], buffers, expected[tag] = native(source, entry, dims, "f32")
        write_inputs(out, tag, buffers)
        calls.append(c_call(f"mlp_{entry}", "mlp", compiled[tag], tag))
    main = C_MAIN.format(includes='#include "mlp.h"', calls="\n".join(calls))
    run_program(out, "cc", main, ["-I.", "libmlp.a"])
    for tag in expected:
        same_bits(out, tag, expected[tag])
    buffers = native(source, "mse_grad", dims, "f32")[1]
    got = shared_call(out / "libmlp.so", "mlp_mse_grad", "mlp", compiled["b"], buffers)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in expected["b"]]
    lib = ctypes.CDLL(str(out / "libmlp.so"))
    lib.mlp_arena_bytes.restype = ctypes.c_size_t
    lib.mlp_mse_arena_bytes.restype = ctypes.c_size_t
    lib.mlp_mse_grad_arena_bytes.restype = ctypes.c_size_t
    assert lib.mlp_arena_bytes() == max(lib.mlp_mse_arena_bytes(), lib.mlp_mse_grad_arena_bytes())


def test_a_plan_lays_out_the_sites_of_several_entries(tmp_path: Path) -> None:
    """Each entry takes the plan's points at its own sites (the loss's forward product, the
    gradient's weight product), and keeps the native backend's bits."""
    source, dims = "tests/examples/mlp/mlp.psk", {"D": 4, "B": 3}
    plan = tmp_path / "plan.json"
    layout = {"MLP.apply/%3": {"tile": [2, 4]}, "MLP.apply.bwd[θ]/%11": {"tile": [1, 1]}}
    plan.write_text(json.dumps({"realization": "f32", "layout": layout}), encoding="utf-8")
    out, plain = tmp_path / "lib", tmp_path / "plain"
    export(out, source, ["mse", "mse_grad"], dims, "f32", "--name", "mlp", "--plan", f"@{plan}")
    export(plain, source, ["mse", "mse_grad"], dims, "f32", "--name", "mlp")
    for kernels in ("mlp_kernels0.c", "mlp_kernels1.c"):  # each entry laid out by its share
        assert (out / kernels).read_text() != (plain / kernels).read_text(), kernels
    make(out)
    calls, expected = [], {}
    for tag, entry in (("a", "mse"), ("b", "mse_grad")):
        compiled, buffers, expected[tag] = native(source, entry, dims, "f32")
        write_inputs(out, tag, buffers)
        calls.append(c_call(f"mlp_{entry}", "mlp", compiled, tag))
    main = C_MAIN.format(includes='#include "mlp.h"', calls="\n".join(calls))
    run_program(out, "cc", main, ["-I.", "libmlp.a"])
    for tag in expected:
        same_bits(out, tag, expected[tag])


def test_a_plan_site_of_no_entry_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"layout": {"nowhere/%9": {}}}), encoding="utf-8")
    out = tmp_path / "lib"
    code, stdout, err = run_presk(
        "export", "tests/examples/mlp/mlp.psk", "--mode", "library", "--entry", "mse",
        "--entry", "mse_grad", "--dim", "D=4", "--dim", "B=3", "--plan", f"@{plan}",
        "-o", str(out),
    )  # fmt: skip
    assert (code, stdout) == (1, "") and err.count("\n") == 1, err
    assert "names `nowhere/%9`, which is no nest of `mse` or `mse_grad` at these dims" in err
    assert not out.exists()


def test_one_function_at_two_type_arguments(tmp_path: Path) -> None:
    """Both instances have one native symbol: the library renames each entry's own."""
    source, dims = LINEAR[0], {"batch": 2}
    entries = ["Linear{3, 2}.apply", "Linear{4, 2}.apply"]
    out = tmp_path / "lib"
    export(out, source, entries, dims, "f64", "--name", "lin")
    make(out)
    calls, expected = [], {}
    for tag, entry in zip("ab", entries, strict=True):
        compiled, buffers, expected[tag] = native(source, entry, dims, "f64")
        write_inputs(out, tag, buffers)
        prefix = "lin_" + entry.replace("{", "_").replace(", ", "_").replace("}.", "_")
        calls.append(c_call(prefix, "lin", compiled, tag))
    main = C_MAIN.format(includes='#include "lin.h"', calls="\n".join(calls))
    run_program(out, "cc", main, ["-I.", "liblin.a"])
    for tag in expected:
        same_bits(out, tag, expected[tag])


def test_split_launches_build_with_openmp(tmp_path: Path) -> None:
    source, entry, dims = "tutorial/03_attention.psk", "attend", {"B": 4, "T": 32}
    out = tmp_path / "lib"
    export(out, source, [entry], dims, "f32", "--threads", "2", "--name", "att")
    assert "OPENMP ?= -fopenmp" in (out / "Makefile").read_text()
    make(out)
    compiled, buffers, expected = native(source, entry, dims, "f32", threads=2)
    assert compiled.host.splits
    write_inputs(out, "a", buffers)
    main = C_MAIN.format(includes='#include "att.h"', calls=c_call("att", "att", compiled, "a"))
    run_program(out, "cc", main, ["-I.", "libatt.a", "-fopenmp"])
    same_bits(out, "a", expected)


def test_readme_example_builds_and_runs(tmp_path: Path) -> None:
    out = tmp_path / "lib"
    export_one(out, SAMPLE)
    make(out)
    readme = (out / "README.md").read_text()
    example = readme.split("```c\n", 1)[1].split("```", 1)[0]
    assert 15 <= len(example.splitlines()) <= 30
    for cc in COMPILERS:
        run_program(out, cc, example, ["-I.", "libpsk_05_sample.a"])


@pytest.mark.parametrize(
    ("flags", "code", "message"),
    [
        (["--entry", "pick", "--name", "9lives"], 2, "--name '9lives': expected a C identifier"),
        (["--entry", "pick", "--name", "presk_x"], 2, "expected a C identifier"),
        (["--entry", "pick", "--entry", "pick"], 1, "the same C names"),
        (["--entry", "pick", "--dim", "Q=2"], 2, "--dim Q: `pick` has no dimension `Q`"),
    ],
)
def test_refused(tmp_path: Path, flags: list[str], code: int, message: str) -> None:
    out = tmp_path / "lib"
    got, stdout, err = run_presk(
        "export", "tutorial/05_sample.psk", "--mode", "library", "--dim", "B=3", *flags,
        "-o", str(out),
    )  # fmt: skip
    assert (got, stdout) == (code, "")
    assert err.startswith("presk export: ") and message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_program_mode_takes_one_entry(tmp_path: Path) -> None:
    out = tmp_path / "e"
    for flags, message in (
        (["--entry", "pick", "--entry", "pick"], "several entries need --mode library"),
        (["--entry", "pick", "--name", "x"], "--name names a library"),
    ):
        got, _, err = run_presk(
            "export", "tutorial/05_sample.psk", "--dim", "B=3", *flags, "-o", str(out)
        )
        assert got == 2 and message in err, err
    assert not out.exists()
