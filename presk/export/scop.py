"""`presk export --target c --mode scop`: each nest of an entry alone, at point zero.

Point zero is the entry's default layout with one lane and one worker: the
kernels lowered with `tiles=False` and no OpenMP split. Each distinct kernel
becomes a C function of its own, named after the first site that launches
it (`nests/attend_5.c` for `attend/%5`), in the form
polyhedral tools read (presk/cgen/scop.py); `nests.json` says which are
static-control parts and, for the others, why not. A driver draws each
nest's inputs from the runtime's generator, runs it, and compares the FNV-1a
hash of every output with the one the native backend computed at export
time, on the same draws, through the native printer, build and cffi.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from presk import __version__, resources
from presk.build.compile import build
from presk.build.load import load, pointer
from presk.cgen.c_printer import C_STORAGE, _Printer, kernel_c, safe_comment
from presk.cgen.program import KEY_CDEF, _env, c_name, runtime_text
from presk.cgen.scop import nest_c, nest_prototype
from presk.dtypes import Dtype, f32_to_bf16
from presk.export.c import ExportPlan
from presk.export.escape import make_comment, make_word, markdown, sh_word
from presk.host.program import HostProgram
from presk.interp import rng
from presk.kernel import ir
from presk.kernel import scop as kscop

RUNTIME_FILES = (
    "runtime/c/presk_rt.h",
    "runtime/c/presk_rng.h",
    "runtime/c/presk_rng.c",
    "libm/musl/presk_libm.h",
    "libm/musl/presk_libm.c",
)
_DRAW_CODE = {"f64": "F64", "f32": "F32", "bf16": "BF16", "i64": "I64"}


@dataclass(frozen=True)
class Nest:
    """One kernel at point zero: named after the first site that launches it."""

    name: str
    kernel: ir.Kernel
    sites: tuple[str, ...]  # every site launching it, `fn/%N`
    reasons: tuple[str, ...]
    bounds: tuple[int, ...]  # per input: integers are drawn below this (0 for reals)

    @property
    def static_control(self) -> bool:
        return not self.reasons


def nests_of(host: HostProgram) -> list[Nest]:
    """The distinct kernels of an entry recorded at point zero, in order of first launch."""
    out: list[Nest] = []
    taken: set[str] = set()
    for kernel_name, kernel in host.kernels:
        sites = tuple(host.sites[kernel_name])
        function, _, index = sites[0].rpartition("/")
        base = name = f"{c_name(function)}_{index.lstrip('%')}"
        shape = 1
        while name in taken:  # one site at another shape (another instance of its function)
            shape += 1
            name = f"{base}_shape{shape}"
        taken.add(name)
        selected = kscop.to_selections(kernel)
        out.append(
            Nest(
                name,
                selected,
                sites,
                tuple(kscop.reasons(selected)),
                tuple(integer_bound(kernel, b) for b in kernel.inputs),
            )
        )
    return out


def integer_bound(kernel: ir.Kernel, buffer: ir.Buffer) -> int:
    """Draws for an integer input stay below what its uses allow.

    An integer read into an index (a gather, a target) must be below the
    extent it indexes, one compared with a loop variable below that loop's
    bound; any other (a mask) is drawn as 0 or 1.
    """
    if buffer.dtype != "i64":
        return 0
    bound: int | None = None
    scalars: dict[str, ir.Buffer] = {}
    loops: dict[str, int] = {}

    def limit(n: int) -> None:
        nonlocal bound
        bound = n if bound is None else min(bound, n)

    def indices(b: ir.Buffer, idx: tuple[ir.Index, ...]) -> None:
        for i, size in zip(idx, b.shape, strict=True):
            if isinstance(i, ir.IVar) and scalars.get(i.name) == buffer:
                limit(size)

    def expr(e: object) -> None:
        match e:
            case ir.Load(b, idx):
                indices(b, idx)
            case ir.Cmp(_, ir.IVar(v), ir.Load(b)) | ir.Cmp(_, ir.Load(b), ir.IVar(v)) if (
                b == buffer and v in loops
            ):
                limit(loops[v])
            case ir.Bin(_, left, right) | ir.Cmp(_, left, right):
                expr(left)
                expr(right)
            case ir.Neg(x) | ir.Fn(_, x) | ir.FromIndex(x):
                expr(x)
            case ir.Select(cond, then, other):
                expr(cond)
                expr(then)
                expr(other)

    def stmts(body: tuple[ir.Stmt, ...]) -> None:
        for s in body:
            match s:
                case ir.For(var, size, inner):
                    loops[var] = size
                    stmts(inner)
                case ir.Let(name, ir.Load(b), True) if b == buffer:
                    scalars[name] = b
                case ir.Let(_, value, _):
                    expr(value)
                case ir.Store(b, idx, value):
                    indices(b, idx)
                    expr(value)
                case ir.If(cond, then, other):
                    expr(cond)
                    stmts(then)
                    stmts(other)

    stmts(kernel.body)
    return 2 if bound is None else max(bound, 1)


def draw(nest: str, position: int, buffer: ir.Buffer, bound: int) -> npt.NDArray[Any] | rng.Key:
    """An input as the driver draws it (see `draw` in templates/c/scop/driver.c.j2)."""
    key = rng.key_for(0, f"nest/{nest}/in{position}")
    if buffer.dtype == "key":
        return key
    n = buffer.size
    if buffer.dtype == "i64":
        return np.array(rng.randints(key, n, bound), dtype=np.int64).reshape(buffer.shape)
    reals = 2.0 * np.array(rng.uniforms(key, n), dtype=np.float64) - 1.0
    if buffer.dtype == "f64":
        return reals.reshape(buffer.shape)
    singles = reals.astype(np.float32)
    if buffer.dtype == "f32":
        return singles.reshape(buffer.shape)
    return f32_to_bf16(singles).reshape(buffer.shape)


def native_hashes(nests: list[Nest]) -> list[list[int]]:
    """Each nest's outputs on the driver's draws, by the native backend: FNV-1a of the bytes."""
    pieces = [runtime_text()]
    cdefs = [
        KEY_CDEF,
        "uint64_t presk_fnv1a64(const void *data, size_t len);",
    ]
    for n, nest in enumerate(nests):
        printer = _Printer(nest.kernel)
        params = printer.params()
        names = ", ".join(
            printer.names[b.index] for b in (*nest.kernel.inputs, *nest.kernel.outputs)
        )
        pieces.append(kernel_c(nest.kernel, f"presk_k{n}"))
        pieces.append(f"void presk_nest{n}({params}) {{ presk_k{n}({names}); }}\n")
        cdefs.append(f"void presk_nest{n}({params.replace(' *restrict ', ' *')});")
    library = load(build("\n".join(pieces)), "\n".join(cdefs))
    ffi, lib = library.ffi, library.lib
    hashes = []
    for n, nest in enumerate(nests):
        args: list[Any] = []
        for position, (buffer, bound) in enumerate(
            zip(nest.kernel.inputs, nest.bounds, strict=True)
        ):
            value = draw(nest.name, position, buffer, bound)
            if isinstance(value, rng.Key):
                key = ffi.new("presk_key *")
                key.k[0], key.k[1] = value.k0, value.k1
                args.append(key)
                continue
            args.append(pointer(ffi, np.ascontiguousarray(value), C_STORAGE[buffer.dtype]))
        outputs = [
            np.zeros(max(b.size, 1), dtype=Dtype(b.dtype).numpy) for b in nest.kernel.outputs
        ]
        for b, array in zip(nest.kernel.outputs, outputs, strict=True):
            args.append(pointer(ffi, array, C_STORAGE[b.dtype], writable=True))
        getattr(lib, f"presk_nest{n}")(*args)
        hashes.append(
            [
                int(lib.presk_fnv1a64(ffi.from_buffer(a), b.size * a.itemsize))
                for b, a in zip(nest.kernel.outputs, outputs, strict=True)
            ]
        )
    return hashes


def _driver_nest(nest: Nest, hashes: list[int]) -> dict[str, object]:
    """The driver's lines for one nest: draws, outputs, the call, the comparison."""
    setup: list[str] = []
    names: list[str] = []
    for position, (buffer, bound) in enumerate(zip(nest.kernel.inputs, nest.bounds, strict=True)):
        name = f"in{position}"
        path = f"nest/{nest.name}/in{position}"
        if buffer.dtype == "key":
            setup.append(f'presk_key {name} = presk_key_for(0, "{path}");')
            names.append(f"&{name}")
            continue
        code = _DRAW_CODE[buffer.dtype]
        setup.append(f'void *{name} = draw({code}, {buffer.size}u, "{path}", {bound}u);')
        names.append(name)
    outs = []
    for position, buffer in enumerate(nest.kernel.outputs):
        name = f"out{position}"
        setup.append(f"void *{name} = zeros({buffer.size}u, sizeof({C_STORAGE[buffer.dtype]}));")
        names.append(name)
        outs.append((name, buffer))
    pointers = [n for n in names if not n.startswith("&")]
    setup.append(f"if ({' || '.join(f'{p} == NULL' for p in pointers)}) {{")
    setup.extend(f"    free({p});" for p in pointers)
    setup += ["    return -1;", "}"]
    compare = []
    for (name, buffer), expected in zip(outs, hashes, strict=True):
        size = f"{buffer.size}u * sizeof({C_STORAGE[buffer.dtype]})"
        compare += [
            f"if (presk_fnv1a64({name}, {size}) != UINT64_C(0x{expected:016x})) {{",
            f'    printf("{nest.name}: output {name[3:]} differs from the native backend\'s\\n");',
            "    same = 0;",
            "}",
        ]
    return {
        "name": nest.name,
        "setup": setup,
        "call": f"{nest.name}({', '.join(names)});",
        "compare": compare,
        "cleanup": [f"free({p});" for p in pointers],
    }


def plan_scop(
    host: HostProgram,
    entry_text: str,
    source: str,
    dims: dict[str, int],
    dtype: str,
    directory: str,
) -> ExportPlan:
    """Everything `--mode scop` writes for an entry recorded at point zero, before any
    file is touched."""
    nests = nests_of(host)
    hashes = native_hashes(nests)
    at = ", ".join(f"{k} = {v}" for k, v in dims.items())
    banner = (
        f"presk {__version__}: the nests of {entry_text} from {os.path.basename(source)}"
        f"{' at ' + at if at else ''} in {dtype}, at point zero"
    )
    banner_c = safe_comment(banner)
    env = _env()
    files: dict[str, str | bytes] = {}
    header = [f"/* {banner_c} */", "#ifndef PRESK_NESTS_H", "#define PRESK_NESTS_H", ""]
    header += ["#include <stdint.h>", "", '#include "presk_rt.h"', '#include "presk_rng.h"', ""]
    for nest in nests:
        header.append(nest_prototype(nest.kernel, nest.name) + ";")
        text = nest_c(nest.kernel, nest.name, nest.static_control)
        files[f"nests/{nest.name}.c"] = (
            f"/* {banner_c} */\n#include <math.h>\n#include <stdint.h>\n\n"
            '#include "../presk_rt.h"\n#include "../presk_rng.h"\n#include "../presk_libm.h"\n\n'
            + text
        )
    files["nests.h"] = "\n".join([*header, "", "#endif", ""])
    files["driver.c"] = env.get_template("scop/driver.c.j2").render(
        banner=banner_c, nests=[_driver_nest(n, h) for n, h in zip(nests, hashes, strict=True)]
    )
    files["Makefile"] = env.get_template("scop/Makefile.j2").render(
        banner=make_comment(banner),
        nest_files=" ".join(make_word(f"nests/{n.name}.c") for n in nests),
    )
    static = sum(n.static_control for n in nests)
    report = {
        "entry": entry_text,
        "source": source,
        "dims": dims,
        "realize": dtype,
        "point": "zero: default layout, one lane, one worker",
        "nests": [
            {
                "name": n.name,
                "file": f"nests/{n.name}.c",
                "kernel": n.kernel.name,
                "sites": list(n.sites),
                "inputs": [_describe(b) for b in n.kernel.inputs],
                "outputs": [_describe(b) for b in n.kernel.outputs],
                "static_control": n.static_control,
                "why": list(n.reasons)
                or ["literal bounds, affine accesses, data-dependent choices as selections"],
                "native_fnv1a64": [f"0x{h:016x}" for h in hs],
            }
            for n, hs in zip(nests, hashes, strict=True)
        ],
    }
    files["nests.json"] = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    files["README.md"] = env.get_template("scop/README.md.j2").render(
        entry=markdown(entry_text),
        source=markdown(source),
        dims=markdown(at or "its fixed shapes"),
        dtype=markdown(dtype),
        nests=[
            {
                "name": n.name,
                "kernel": markdown(n.kernel.name),
                "signature": markdown(
                    ", ".join(_describe(b) for b in n.kernel.inputs)
                    + " -> "
                    + ", ".join(_describe(b) for b in n.kernel.outputs)
                ),
                "reasons": [markdown(r) for r in n.reasons],
            }
            for n in nests
        ],
        version=__version__,
    )
    for relative in RUNTIME_FILES:
        files[os.path.basename(relative)] = resources.read(relative)
    sites = sum(len(n.sites) for n in nests)
    summary = (
        f"presk export: `{entry_text}`{' at ' + at if at else ''} in {dtype}: "
        f"{sites} nest{'s' if sites != 1 else ''} at {len(nests)} "
        f"shape{'s' if len(nests) != 1 else ''} "
        f"at point zero, a C function each, {static} of them static-control parts and "
        f"{len(nests) - static} not (`nests.json` says why), into {directory}; "
        f"`make -C {sh_word(directory)} check` builds them and compares each with the native "
        "backend"
    )
    return ExportPlan(files, summary)


def _describe(buffer: ir.Buffer) -> str:
    if buffer.dtype == "key":
        return "key"
    axes = ", ".join(f"{n}: {s}" if n else str(s) for n, s in buffer.axes)
    return f"{buffer.dtype}[{axes}]"
