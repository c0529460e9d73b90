"""`presk export --target c`: an entry as a standalone C program.

The export records the entry exactly as the native backend does (the same
kernels, the same host functions, the same arena) and writes that text to a
directory with a `main.c`, the runtime, the libm, a Makefile, a README for
this program, and `conformance/`: the inputs `presk run` would synthesize,
the native backend's outputs and the exact reference's. `make check`
compares the program's outputs with the native backend's byte for byte.

The inputs are drawn as host arrays (`draw_inputs`) and reach the native
backend as they are; only when the reference runs are they turned into
256-bit values. Whether it runs is `budget.decide`'s: above the budget of
estimated operations the export writes no `reference.psk.d`, and its
`check.sh` and README say the reference is absent.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import assert_never

import gmpy2
import numpy as np

from presk import __version__, resources
from presk.backends.native import CompiledEntry
from presk.cgen.program import Unit, _env
from presk.core import ir
from presk.dtypes import Dtype
from presk.elab.ty import Type
from presk.export.budget import Choice, decide, reference_ops
from presk.export.escape import make_comment, markdown, sh_comment, sh_word
from presk.host.program import HKey, HTensor
from presk.interp import rng
from presk.interp.reference import Tree, Value
from presk.interp.run import reference_interpreter
from presk.interp.synth import HostValue, to_reference
from presk.interp.tensor import Axis, Tensor
from presk.names import c_string

DTYPE_CODE = {str(d): d.code for d in Dtype}
C_TYPE = {str(d): d.c_type for d in Dtype}
RUNTIME_FILES = (
    "runtime/c/presk_rt.h",
    "runtime/c/presk_rng.h",
    "runtime/c/presk_rng.c",
    "runtime/c/presk_data.h",
    "runtime/c/presk_data.c",
    "libm/musl/presk_libm.h",
    "libm/musl/presk_libm.c",
)


class ExportError(Exception):
    """The export could not be written (one line for the user)."""


@dataclass
class ExportPlan:
    """What an export writes, computed before any file is touched.

    `notes` are lines the command prints to stderr before the summary (a skipped reference).
    """

    files: dict[str, str | bytes]
    summary: str
    notes: tuple[str, ...] = ()


def _leaf_path(path: str) -> str:
    return path.split(".", 1)[1] if "." in path else ""


def _data_file(type_text: str, leaves: list[tuple[str, str, tuple[int, ...], np.ndarray]]) -> bytes:
    """A one-sample .psk.d file's bytes (through the project's writer)."""
    from presk.data.format import DataFile, Leaf, write

    data = DataFile(
        type_text,
        1,
        [Leaf(path, dtype, shape) for path, dtype, shape, _ in leaves],
        [array.reshape((1, *shape)) for _, _, shape, array in leaves],
    )
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "file.psk.d"
        write(str(target), data)
        return target.read_bytes()


def _input_leaves(
    compiled: CompiledEntry, inputs: list[HostValue]
) -> list[tuple[str, str, tuple[int, ...], np.ndarray]]:
    """The entry's input buffers as the export's data file holds them (keys as i64[2])."""
    out: list[tuple[str, str, tuple[int, ...], np.ndarray]] = []
    buffers = compiled.buffers(inputs)
    for (field, _, leaf), value in zip(compiled.unit.inputs, buffers, strict=True):
        if isinstance(value, rng.Key):
            out.append((field, "i64", (2,), np.array([value.k0, value.k1], dtype=np.int64)))
            continue
        assert isinstance(leaf, HTensor)
        out.append((field, leaf.dtype, tuple(s for _, s in leaf.axes), value))
    return out


def _reference_leaves(result: Value) -> list[np.ndarray]:
    """The exact reference's result leaves, rounded once to f64 for the file."""
    out: list[np.ndarray] = []

    def tensor(leaf: Tensor) -> None:
        if leaf.kind.name != "REAL":
            out.append(np.array(leaf.data.tolist(), dtype=np.int64).reshape(leaf.shape))
        else:
            out.append(np.array([float(x) for x in leaf.data.reshape(-1)]).reshape(leaf.shape))

    def walk(v: Value) -> None:
        match v:
            case Tensor():
                tensor(v)
            case Tree():
                for _, leaf in v.leaves():
                    tensor(leaf)
            case tuple():
                for item in v:
                    walk(item)
            case Fraction():  # a real the reference kept exact: a result `= 3`
                out.append(np.array(float(v)))
            case rng.Key():
                raise ExportError("the entry returns a random key, which a C program cannot")
            case _:
                assert_never(v)

    walk(result)
    return out


@dataclass(frozen=True)
class CExport:
    """What `export --target c` writes: a compiled entry, its inputs and where it came from.

    `inputs` are drawn host values (`draw_inputs`) of the concrete `types`;
    `realize` names the realization as the user gave it (a type, or `@FILE`);
    `reference` says whether the exact reference runs (by default, by the budget).
    """

    compiled: CompiledEntry
    module: ir.Module
    entry_name: str
    entry_text: str
    source: str
    dims: dict[str, int]
    inputs: list[HostValue]
    types: list[Type]
    prefix: tuple[Axis, ...] | None
    input_type: str
    output_type: str
    realize: str
    threads: int
    directory: str
    reference: Choice = Choice.AUTO


def export_banner(source: str, entry_text: str, dims: dict[str, int], realize: str) -> str:
    """The first comment of every exported file (and of the native library it matches)."""
    at = ", ".join(f"{k} = {v}" for k, v in dims.items()) or "no dims"
    return f"{source}: entry {entry_text} at {at} in {realize}"


def plan_export(request: CExport) -> ExportPlan:
    """Run and print everything an export writes, before any file is touched."""
    compiled = request.compiled
    entry_text, source, dims = request.entry_text, request.source, request.dims
    inputs, input_type, output_type = request.inputs, request.input_type, request.output_type
    dtype, threads, directory = request.realize, request.threads, request.directory
    unit, host = compiled.unit, compiled.host
    native_out = [a.copy() for a in compiled.raw(inputs)]
    verdict = decide(lambda: reference_ops(host), request.reference, entry_text)
    reference = _reference(request) if verdict.run else None
    env = _env()
    banner_c = unit.banner
    symbol = unit.symbol
    arena_macro = arena_macro_of(unit)
    files: dict[str, str | bytes] = dict(entry_files(unit))
    bind_inputs: list[str] = []
    expected: list[dict[str, str]] = []
    bounds = compiled.input_bounds()
    for i, (field, _, leaf) in enumerate(unit.inputs):
        if isinstance(leaf, HKey):
            expected.append(expected_leaf(field, DTYPE_CODE["i64"], (2,), None))
            bind_inputs += [
                f"presk_key key{i};",
                f"key{i}.k[0] = (uint32_t)((const int64_t *)inputs.data[{i}])[0];",
                f"key{i}.k[1] = (uint32_t)((const int64_t *)inputs.data[{i}])[1];",
                f"in.{field} = &key{i};",
            ]
            continue
        assert isinstance(leaf, HTensor)
        sizes = tuple(s for _, s in leaf.axes)
        expected.append(expected_leaf(field, DTYPE_CODE[leaf.dtype], sizes, bounds[i]))
        bind_inputs.append(f"in.{field} = (const {C_TYPE[leaf.dtype]} *)inputs.data[{i}];")
    bind_outputs: list[str] = []
    write_outputs: list[str] = []
    free_outputs: list[str] = []
    leaf_lines: list[str] = []
    for i, (field, _, leaf) in enumerate(unit.outputs):
        ctype = C_TYPE[leaf.dtype]
        count = max(1, leaf.size)
        bind_outputs += [
            f"{ctype} *out{i} = calloc({count}u, sizeof({ctype}));",
            f'if (out{i} == NULL) {{ return fail("outputs", "out of memory"); }}',
            f"out.{field} = out{i};",
        ]
        dims_list = ", ".join(f"{s}u" for _, s in leaf.axes) or "0u"
        write_outputs.append(f"static uint64_t dims{i}[] = {{{dims_list}}};")
        path = _leaf_path(host.outputs[i][0])
        leaf_lines.append(
            f"{{{DTYPE_CODE[leaf.dtype]}u, {len(leaf.axes)}u, dims{i}, (char *){c_string(path)}}}"
        )
        free_outputs.append(f"free(out{i});")
    n_out = len(unit.outputs)
    write_outputs += [
        f"presk_leaf out_leaves[] = {{{', '.join(leaf_lines)}}};",
        f"void *out_data[] = {{{', '.join(f'out{i}' for i in range(n_out))}}};",
        f"result.type = (char *){c_string(output_type)};",
        "result.count = 1u;",
        f"result.nleaves = {n_out}u;",
        "result.leaves = out_leaves;",
        "result.data = out_data;",
    ]
    files["main.c"] = env.get_template("main.c.j2").render(
        banner=banner_c,
        symbol=symbol,
        input_leaves=len(unit.inputs),
        expected=expected,
        bind_inputs=bind_inputs,
        bind_outputs=bind_outputs,
        write_outputs=write_outputs,
        free_outputs=free_outputs,
        arena_macro=arena_macro,
        threads=threads,
    )
    openmp = "-fopenmp" if host.splits else ""
    files["Makefile"] = env.get_template("Makefile.j2").render(
        banner=make_comment(banner_c), openmp=openmp
    )
    files["conformance/check.sh"] = env.get_template("check.sh.j2").render(
        banner=sh_comment(banner_c), reference=reference is not None
    )
    in_lines = []
    for field, _, leaf in unit.inputs:
        if isinstance(leaf, HKey):
            in_lines.append(f"`{field}`: a random key (two 32-bit words, stored as i64[2])")
        else:
            shape = ", ".join(f"{n}: {s}" if n else str(s) for n, s in leaf.axes)
            in_lines.append(f"`{field}`: {leaf.dtype}[{shape}]")
    out_lines = [
        f"`{field}`: {leaf.dtype}["
        + ", ".join(f"{n}: {s}" if n else str(s) for n, s in leaf.axes)
        + "]"
        for field, _, leaf in unit.outputs
    ]
    threads_note = (
        "Split launches are OpenMP regions; `OMP_NUM_THREADS=1` or `make OPENMP=` "
        "give the same bits."
        if host.splits
        else "No launch is split among threads."
    )
    files["README.md"] = env.get_template("README.md.j2").render(
        title=markdown(f"{entry_text}, exported by presk"),
        summary=markdown(
            f"`{entry_text}` from `{source}`, at "
            + (", ".join(f"{k} = {v}" for k, v in dims.items()) or "fixed shapes")
            + f", in {dtype}: {host.launches} launches of {len(host.kernels)} kernels."
        ),
        version=__version__,
        source=markdown(source),
        entry_line=markdown(f"`{symbol}(arena, in, out)` returns {output_type}."),
        inputs=[markdown(line) for line in in_lines],
        outputs=[markdown(line) for line in out_lines],
        threads_note=threads_note,
        reference=reference is not None,
    )
    in_leaves = _input_leaves(compiled, inputs)
    files["conformance/inputs.psk.d"] = _data_file(
        input_type, [(field, dt, shape, arr) for field, dt, shape, arr in in_leaves]
    )
    out_leaves = [
        (_leaf_path(host.outputs[i][0]), leaf.dtype, tuple(s for _, s in leaf.axes), native_out[i])
        for i, (_, _, leaf) in enumerate(unit.outputs)
    ]
    files["conformance/native.psk.d"] = _data_file(output_type, out_leaves)
    if reference is not None:
        ref = _reference_leaves(reference)
        ref_leaves = [
            (path, "f64" if a.dtype == np.float64 else "i64", shape, a)
            for (path, _, shape, _), a in zip(out_leaves, ref, strict=True)
        ]
        files["conformance/reference.psk.d"] = _data_file(output_type, ref_leaves)
    functions = len(host.functions) - 1
    split = f"{host.dead} dead, " + (
        f"{host.splits} of them divided among up to {threads} threads"
        if host.splits
        else "on one thread"
    )
    summary = (
        f"presk export: `{entry_text}` at "
        + (", ".join(f"{k} = {v}" for k, v in dims.items()) or "its shapes")
        + f" in {dtype}: {host.launches} launches ({split}) of {len(host.kernels)} kernels, "
        f"{functions} function{'s' if functions != 1 else ''} besides the entry's and "
        f"{_plural(_loops(unit), 'loop')}, an arena of {unit.arena_bytes} bytes "
        f"({host.entry.bytes_unreleased} without reuse), into {directory}; "
        f"`make -C {sh_word(directory)} check` builds it and compares it with the native backend"
    )
    notes = () if verdict.note is None else (f"presk export: {verdict.note}",)
    return ExportPlan(files, summary, notes)


def _reference(request: CExport) -> Value:
    """The exact reference's result at 256 bits, on the drawn inputs made exact."""
    dims, prefix = request.dims, request.prefix
    with gmpy2.context(precision=256):
        values = [
            to_reference(value, ty, dims, prefix)
            for value, ty in zip(request.inputs, request.types, strict=True)
        ]
        return reference_interpreter(request.module).call(request.entry_name, dims, values)


def arena_macro_of(unit: Unit) -> str:
    """The macro of model.h that holds the bytes of arena one call needs."""
    return unit.symbol.upper() + "_ARENA_BYTES"


def entry_files(unit: Unit) -> dict[str, str]:
    """The entry's own files (model.h, model.c, kernels.c) and the runtime's, as printed."""
    env = _env()
    files = {
        "model.h": env.get_template("model.h.j2").render(
            banner=unit.banner,
            guard=unit.symbol.upper() + "_H",
            arena_macro=arena_macro_of(unit),
            arena_bytes=unit.arena_bytes,
            interface=unit.interface,
        ),
        "model.c": env.get_template("model.c.j2").render(
            banner=unit.banner, functions=unit.functions, entry=unit.entry
        ),
        "kernels.c": env.get_template("kernels.c.j2").render(
            banner=unit.banner, kernels=unit.kernels
        ),
    }
    for relative in RUNTIME_FILES:
        files[os.path.basename(relative)] = resources.read(relative)
    return files


def expected_leaf(
    path: str, code: int, shape: tuple[int, ...], bound: int | None
) -> dict[str, str]:
    """A row of the exported main.c's table of expected inputs: what leaf `path` must be
    in the inputs file (element type, rank, dims, and for an index leaf the bound its
    values lie below; -1 for none), with its shape as the error line prints it."""
    return {
        "path": c_string(path),
        "dtype": f"{code}u",
        "rank": f"{len(shape)}u",
        "dims": ", ".join(f"{s}u" for s in shape) or "0u",
        "shape": c_string("[" + ", ".join(str(s) for s in shape) + "]"),
        "bound": str(-1 if bound is None else bound),
    }


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _loops(unit: Unit) -> int:
    """Host loops (folds over stacked layers) in the printed functions."""
    return sum(f.count("for (int64_t l") for f in unit.functions)


__all__ = [
    "CExport",
    "ExportError",
    "ExportPlan",
    "arena_macro_of",
    "entry_files",
    "expected_leaf",
    "export_banner",
    "plan_export",
]
