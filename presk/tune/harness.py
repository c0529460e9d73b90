"""Points of a nest compiled side by side, run on the same inputs, timed and compared.

Every point of a nest's space is lowered to its kernels (a pack's kernel
first), split as it states, and printed as C with a wrapper that launches
them as the host program would (an OpenMP region over the split loop).
All the points of a nest are one translation unit, compiled once; each
runs on the same inputs, drawn once in each input's storage type, and its
output bytes are compared with point zero's. A point its nest cannot take
at these shapes (a split on a loop that is not parallel, say) is reported
as ill-formed with its reason, not run.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from presk.build.compile import build
from presk.build.load import Library, load
from presk.cgen.c_printer import C_STORAGE, kernel_c
from presk.cgen.program import runtime_text
from presk.dtypes import Dtype, f32_to_bf16
from presk.host.program import ALIGN, split_kernel
from presk.kernel import ir
from presk.kernel.layout import Layout
from presk.kernel.lower import LoweringError, lower
from presk.kernel.lower.dispatch import lower_pack
from presk.kernel.lower.layouts import LayoutError, check_point, panel_of, with_pack_input
from presk.sched.split import bound_at
from presk.tune.capture import Captured
from presk.tune.interp import run_kernels

# A point runs this long before it is timed: a core waking from idle, or its clock
# ramping up, takes milliseconds, and one warm-up call of a split point that follows
# a long one-worker point measured it at twice its time (the default of attention's
# scores: 614, 396, 249, 228, 221 µs over five calls).
WARM_S = 0.005


@dataclass(frozen=True)
class Lowered:
    """A point's kernels (the pack's first, if any), or why the nest cannot take it."""

    point: Layout
    kernels: tuple[ir.Kernel, ...] = ()
    panel: ir.Buffer | None = None
    refused: str | None = None


def lower_point(nest: Captured, point: Layout, threads: int) -> Lowered:
    """The kernels of `point` at the nest's shapes, checked as a plan's point is."""
    try:
        check_point(nest.nest, point)
        launch, kernels, panel = nest.launch, [], None
        if point.pack:
            panel = panel_of(launch)
            kernels.append(lower_pack(launch, nest.dtype))
            launch = with_pack_input(launch, panel)
        k = lower(launch, nest.dtype, True, point)
        kernels.append(split_kernel(k, point.split, threads, threads))
    except (LayoutError, LoweringError) as error:  # a form that cannot finish an epilogue
        return Lowered(point, refused=str(error))
    return Lowered(point, tuple(kernels), panel)


def _c_pointer(buffer: ir.Buffer) -> str:
    return "presk_key" if buffer.dtype == "key" else C_STORAGE[buffer.dtype]


def _call(k: ir.Kernel, name: str, args: list[str]) -> list[str]:
    """A kernel's launch inside a wrapper: a call, or an OpenMP region over its split."""
    if not k.split:
        return [f"    {name}({', '.join(args)});"]
    n = bound_at(k, k.split_depth)
    team = f"({k.workers} < threads ? {k.workers} : threads)" if k.workers else "threads"
    joined = ", ".join(args)
    return [
        "#ifdef _OPENMP",
        f"    #pragma omp parallel num_threads({team})",
        "    {",
        "        int64_t w = omp_get_num_threads(), t = omp_get_thread_num();",
        f"        {name}({joined}, {n} * t / w, {n} * (t + 1) / w);",
        "    }",
        "#else",
        f"    {name}({joined}, 0, {n});",
        "#endif",
    ]


def unit_text(nests: list[list[Lowered]]) -> tuple[str, str]:
    """The C text of every runnable point of every nest, and its cffi declarations
    (`presk_point_N_I`, point I of nest N)."""
    parts = [runtime_text(), "#ifdef _OPENMP\n#include <omp.h>\n#endif\n"]
    cdef: list[str] = []
    for n, points in enumerate(nests):
        for i, lowered in enumerate(points):
            if lowered.refused is not None:
                continue
            body: list[str] = []
            for j, k in enumerate(lowered.kernels):
                name = f"presk_p{n}_{i}_k{j}"
                parts.append(kernel_c(k, name))
                args = [
                    f"({'const ' if b in k.inputs else ''}{_c_pointer(b)} *)b[{b.index}]"
                    for b in (*k.inputs, *k.outputs)
                ]
                body += _call(k, name, args)
            wrapper = f"void presk_point_{n}_{i}(void **b, int threads)"
            parts.append(wrapper + " {\n    (void)threads;\n" + "\n".join(body) + "\n}\n")
            cdef.append(wrapper + ";")
    return "\n".join(parts), "\n".join(cdef)


def inputs_for(nest: Captured, seed: int = 0) -> list[npt.NDArray[Any]]:
    """One array per input buffer, in its storage type: those the entry gave the nest
    where they were captured (a copy), else normals for reals, 0 and 1 for indices and
    masks, random words for keys."""
    if nest.given is not None:
        return [array.copy() for array in nest.given]
    rng = np.random.default_rng(seed)
    out: list[npt.NDArray[Any]] = []
    for b in nest.launch.inputs:
        shape = b.shape or (1,)
        match b.dtype:
            case "f64" | "f32":
                out.append(rng.standard_normal(shape).astype(Dtype(b.dtype).numpy))
            case "bf16":
                out.append(f32_to_bf16(rng.standard_normal(shape).astype(np.float32)))
            case "key":
                out.append(rng.integers(0, 2**32, 2, dtype=np.uint32))
            case _:
                out.append(rng.integers(0, 2, shape).astype(Dtype(b.dtype).numpy))
    return out


@dataclass(frozen=True)
class Measured:
    """A point run: its output bytes' verdict against point zero's, and its times."""

    point: Layout
    refused: str | None
    same: bool | None  # None: not run
    times: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")


@dataclass
class Bench:
    """The points of one nest as a loaded library, with their inputs and outputs."""

    nest: Captured
    points: list[Lowered]
    library: Library
    inputs: list[npt.NDArray[Any]]
    number: int  # the nest's number in the library's symbols

    def run(self, i: int, threads: int) -> list[npt.NDArray[Any]]:
        """Point i once: its outputs (and its panel's scratch), fresh arrays."""
        outputs = self.fresh_outputs()
        self._invoke(i, [*self._with_panel(i), *outputs], threads)
        return outputs

    def interpret(self, i: int) -> list[npt.NDArray[Any]]:
        """Point i once on the kernel interpreter (interp.py): its outputs, fresh arrays."""
        outputs = self.fresh_outputs()
        arrays = [*self._with_panel(i), *outputs]
        # Flat views by buffer index, the order `_invoke` passes the pointers in.
        run_kernels(self.points[i].kernels, {n: a.reshape(-1) for n, a in enumerate(arrays)})
        return outputs

    def _with_panel(self, i: int) -> list[npt.NDArray[Any]]:
        """The inputs, then the scratch a pack fills (the kernels' buffer order)."""
        panel = self.points[i].panel
        if panel is None:
            return [*self.inputs]
        return [*self.inputs, _empty(panel.size or 1, Dtype(panel.dtype).numpy)]

    def _invoke(self, i: int, arrays: list[npt.NDArray[Any]], threads: int) -> None:
        ffi, lib = self.library.ffi, self.library.lib
        pointers = ffi.new("void *[]", [ffi.cast("void *", ffi.from_buffer(a)) for a in arrays])
        getattr(lib, f"presk_point_{self.number}_{i}")(pointers, threads)

    def fresh_outputs(self) -> list[npt.NDArray[Any]]:
        launch = self.nest.launch
        outs = launch.outputs or [launch.output]
        return [_nan_filled(b) for b in outs]

    def time(self, i: int, threads: int, repeat: int) -> tuple[float, ...]:
        """Point i timed `repeat` times after it has run for `WARM_S`, in seconds."""
        arrays = [*self._with_panel(i), *self.fresh_outputs()]
        start = time.perf_counter()
        self._invoke(i, arrays, threads)
        while time.perf_counter() - start < WARM_S:
            self._invoke(i, arrays, threads)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            self._invoke(i, arrays, threads)
            times.append(time.perf_counter() - start)
        return tuple(times)


def _empty(n: int, dtype: Any) -> npt.NDArray[Any]:
    """n elements from a 64-byte boundary, as the frame's arena places every buffer
    (NumPy's large arrays start 16 bytes past a page: a tile's vectors would straddle
    cache lines the native run's never do)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(n * itemsize + ALIGN, dtype=np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip : skip + n * itemsize].view(dtype)


def aligned(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A copy of `array` from a 64-byte boundary (see `_empty`)."""
    out = _empty(array.size, array.dtype).reshape(array.shape)
    out[...] = array
    return out


def _nan_filled(b: ir.Buffer) -> npt.NDArray[Any]:
    """An output array every kernel must overwrite: NaN (or all ones) until it does."""
    dtype = Dtype(b.dtype).numpy
    out = _empty(b.size or 1, dtype)
    if np.issubdtype(dtype, np.floating):
        out.fill(np.nan)
    else:
        out.fill(np.iinfo(out.dtype).max)  # for bf16's 16 bits, a NaN
    return out


def prepare(nest: Captured, points: list[Layout], threads: int, seed: int = 0) -> Bench:
    """Lower every point, compile them as one unit, load it, draw the inputs."""
    return prepare_all([(nest, points)], threads, seed)[0]


def prepare_all(
    nests: list[tuple[Captured, list[Layout]]], threads: int, seed: int = 0
) -> list[Bench]:
    """The points of several nests in one unit: one compilation for all of them."""
    lowered = [[lower_point(nest, p, threads) for p in points] for nest, points in nests]
    text, cdef = unit_text(lowered)
    library = load(build(text, openmp=threads > 1), cdef)
    return [
        Bench(nest, points, library, [aligned(x) for x in inputs_for(nest, seed)], n)
        for n, ((nest, _), points) in enumerate(zip(nests, lowered, strict=True))
    ]


def same_bytes(got: list[npt.NDArray[Any]], zero: list[npt.NDArray[Any]]) -> bool:
    """Whether a point's outputs are point zero's, byte for byte."""
    return all(a.tobytes() == b.tobytes() for a, b in zip(got, zero, strict=True))


def check(bench: Bench, threads: int, repeat: int = 0) -> list[Measured]:
    """Every point run (and timed `repeat` times), its bytes compared with point zero's."""
    zero = bench.run(0, 1)
    same: dict[int, bool] = {}
    for i, lowered in enumerate(bench.points):
        if lowered.refused is None:
            got = bench.run(i, threads)
            same[i] = same_bytes(got, zero)
    times: dict[int, tuple[float, ...]] = {}
    if repeat:
        # Two rounds, the second in reverse order, each point keeping its faster round: a
        # point timed just after a long one on fewer workers runs slow while the idle
        # core wakes (a split ein: 250 µs there, 150 elsewhere), and no point follows the
        # same neighbour in both orders.
        for i in [*same, *reversed(same)]:
            got_times = bench.time(i, threads, repeat)
            if i not in times or statistics.median(got_times) < statistics.median(times[i]):
                times[i] = got_times
    return [
        Measured(lowered.point, lowered.refused, None)
        if lowered.refused is not None
        else Measured(lowered.point, None, same[i], times.get(i, ()))
        for i, lowered in enumerate(bench.points)
    ]


__all__ = [
    "Bench",
    "Lowered",
    "Measured",
    "check",
    "inputs_for",
    "lower_point",
    "prepare",
    "prepare_all",
    "same_bytes",
]
