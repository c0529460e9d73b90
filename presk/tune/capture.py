"""The nests of an entry, captured from its shapes: what a plan lays out.

The host program is recorded at the entry's dims, as a build would, and
each site's launch is kept as it was first recorded (the Recorder's
`nests`); no kernel is compiled or run. A nest's layout space
(kernel/layout.py) depends on its kind, its type and, for a contraction,
its product's sizes and whether operand 1 is consecutive along J.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from presk.kernel.layout import Layout, Nest, Split, space
from presk.kernel.lower import Launch
from presk.kernel.lower.layouts import nest_of
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
    # A product's site → the add's its epilogue may do (kernel/lower/epilogue.py).
    epilogues: dict[str, str] = field(default_factory=dict)


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


def splits_for(threads: int, depths: tuple[int, ...] = (0, 1, 2)) -> tuple[Split, ...]:
    """The splits a space tries: each depth over the machine's workers and half of them."""
    counts = sorted({threads, max(1, threads // 2)} - {1}) or [1]
    return tuple(Split(d, w) for d in depths for w in counts)


def points_of(nest: Captured, threads: int, size: str) -> list[Layout]:
    """A nest's points: `full` (every point), `small` (a daily subset), `calib`."""
    splits = splits_for(threads) if threads > 1 else ()
    return space(nest.nest, splits, full=size != "small")


__all__ = ["Capture", "Captured", "capture", "points_of", "splits_for"]
