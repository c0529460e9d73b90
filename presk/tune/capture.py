"""The nests of an entry, captured from its shapes: what a plan lays out.

The host program is recorded at the entry's dims, as a build would, and
each site's launch is kept as it was first recorded (the Recorder's
`nests`); no kernel is compiled or run. `with_entry_inputs` adds what each
nest reads when the entry runs on its drawn inputs: a capturing build (Note
[Capture] in presk/cgen/host.py) copies every nest's inputs out at its first
launch, so `autotune` times and compares the points on the entry's own values
(indices that embed a real vocabulary, a mask that is causal) rather than on
draws of their types. A nest's layout space
(kernel/layout.py) depends on its kind, its type and, for a contraction,
its product's sizes and whether operand 1 is consecutive along J.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from presk.backends.native import CompiledEntry
from presk.cgen.host import ProfiledLaunch
from presk.dtypes import Dtype
from presk.host.program import Joinable
from presk.interp.reference import RunError
from presk.interp.synth import draw_inputs
from presk.kernel import ir
from presk.kernel.layout import Layout, Nest, Split, space
from presk.kernel.lower import Launch
from presk.kernel.lower.layouts import nest_of
from presk.machine import memory_bytes, size_text
from presk.pipeline import Request, run_back_end


@dataclass(frozen=True)
class Captured:
    """One nest of an entry: its site, its launch, its kernel's type and its shape."""

    site: str
    launch: Launch
    dtype: str
    nest: Nest
    # The site's nests at its other shapes (a function recorded at several), which a
    # plan's point lays out too.
    others: tuple[tuple[Launch, str], ...] = ()
    # Its inputs as the entry gives them (`with_entry_inputs`), else None: drawn.
    given: tuple[npt.NDArray[Any], ...] | None = None

    @property
    def operands(self) -> str:
        """The operands' shapes, as `presk plan` prints them: `[16, 2, 256, 4] []`."""
        shapes = [list(b.shape) for b in self.launch.inputs]
        return " ".join(str(s) for s in shapes)


@dataclass(frozen=True)
class Capture:
    """An entry's nests in the order they were recorded, and the time it took."""

    nests: tuple[Captured, ...]
    seconds: float
    # A product's site → the add its epilogue may do (kernel/lower/epilogue.py).
    epilogues: dict[str, Joinable] = field(default_factory=dict)


def capture(request: Request) -> Capture:
    """Record the entry (no kernel compiled or run) and keep each site's nest."""
    start = time.perf_counter()
    host = run_back_end(request, until="record").host
    assert host is not None
    nests = tuple(
        Captured(site, launch, dtype, nest_of(launch), tuple(rest))
        for site, ((launch, dtype), *rest) in host.nests.items()
    )
    return Capture(nests, time.perf_counter() - start, dict(host.epilogues))


def check_fits(nests: Iterable[Captured], what: str) -> None:
    """Refuse (E7001) nests whose buffers, inputs and outputs together, this machine
    cannot hold: `what` (a sweep, a calibration) draws them all at once, so they are
    counted before any is allocated."""
    buffers = [b for n in nests for b in (*n.launch.inputs, n.launch.output, *n.launch.outputs)]
    needed = sum(b.size * (8 if b.dtype == "key" else _numpy(b.dtype).itemsize) for b in buffers)
    available = memory_bytes()
    if needed > available:
        raise RunError(
            f"{what} holds the nests' inputs and outputs at once, {size_text(needed)}; "
            f"this machine has {size_text(available)}"
        )


class CaptureError(Exception):
    """The entry could not be run to capture its nests' inputs."""


def with_entry_inputs(request: Request, captured: Capture, seed: int = 0) -> Capture:
    """The nests with the inputs the entry gives them, on its inputs drawn from `seed`
    (as `presk run` and `bench` draw them): one capturing build, called once."""
    start = time.perf_counter()
    state = run_back_end(replace(request, profile=True, capture=True, threads=1))
    assert state.unit is not None and state.host is not None and state.library is not None
    assert state.layouts is not None
    compiled = CompiledEntry(
        state.unit, state.host, state.library, request.realization, 1, state.layouts
    )
    info = request.entry.info
    drawn = draw_inputs(info.params, request.dims, request.binding.prefix, seed)
    bound = compiled.bind(drawn)
    kernels = dict(state.host.kernels)
    ffi, lib = compiled.library.ffi, compiled.library.lib
    set_capture = getattr(lib, f"{compiled.unit.symbol}__capture")
    areas: dict[str, npt.NDArray[np.uint8]] = {}  # a nest's inputs, one after another
    for nest in captured.nests:
        if any(b.dtype == "key" for b in nest.launch.inputs):
            continue  # a draw's key: any key times alike
        i = _first_launch(nest, compiled.unit.profile, kernels, state.host.sites)
        if i is None:
            continue
        total = sum(b.size * _numpy(b.dtype).itemsize for b in nest.launch.inputs)
        areas[nest.site] = area = np.zeros(max(total, 1), dtype=np.uint8)
        set_capture(i, ffi.cast("char *", ffi.from_buffer(area)))
    if bound.invoke() != 0:
        raise CaptureError("the capturing build of the entry returned an error (its arena)")
    nests = []
    for nest in captured.nests:
        if nest.site not in areas:
            nests.append(nest)
            continue
        area, arrays, at = areas[nest.site], [], 0
        for b in nest.launch.inputs:
            dtype = _numpy(b.dtype)
            n = b.size * dtype.itemsize
            arrays.append(area[at : at + n].view(dtype).reshape(b.shape or (1,)))
            at += n
        nests.append(replace(nest, given=tuple(arrays)))
    seconds = captured.seconds + time.perf_counter() - start
    return Capture(tuple(nests), seconds, captured.epilogues)


def _numpy(dtype: str) -> np.dtype[Any]:
    return np.dtype(Dtype(dtype).numpy)


def _first_launch(
    nest: Captured,
    launches: tuple[ProfiledLaunch, ...],
    kernels: dict[str, ir.Kernel],
    sites: dict[str, list[str]],
) -> int | None:
    """The first launch of the nest's kernel at its site (the last site comment before a
    function's result is another's), or None if no launch matches its inputs."""
    shapes = [(b.dtype, b.shape) for b in nest.launch.inputs]
    fits = [
        launch
        for launch in launches
        if nest.site in sites.get(launch.kernel, [])
        and [(b.dtype, b.shape) for b in kernels[launch.kernel].inputs] == shapes
    ]
    here = [launch for launch in fits if launch.site == nest.site]
    chosen = (here or fits)[:1]
    return chosen[0].index if chosen else None


def splits_for(threads: int, depths: tuple[int, ...] = (0, 1, 2)) -> tuple[Split, ...]:
    """The splits a space tries: each depth over the machine's workers and half of them."""
    counts = sorted({threads, max(1, threads // 2)} - {1}) or [1]
    return tuple(Split(d, w) for d in depths for w in counts)


def points_of(nest: Captured, threads: int, size: str) -> list[Layout]:
    """A nest's points: `full` (every point), `small` (a daily subset), `calib`."""
    splits = splits_for(threads) if threads > 1 else ()
    return space(nest.nest, splits, full=size != "small")


__all__ = [
    "Capture",
    "CaptureError",
    "Captured",
    "capture",
    "check_fits",
    "points_of",
    "splits_for",
    "with_entry_inputs",
]
