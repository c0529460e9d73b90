"""The host program's IR: C functions of launches, calls, folds, copies and swaps.

`presk.host.program.record` produces these nodes and `presk.cgen.host`
prints them; nothing here is C text. Every offset is resolved when a
function's recording ends: a buffer sits at `Alloc.offset` of its
function's frame, and a callee's frame begins at `Call.frame`, the end of
the caller's own buffers.

Pointers (`Ptr`) are a name — a parameter (`in0`, `out1`), a frame buffer
(`t3_ms`), one of two accumulators (`p4a`) — or a `Layer`, a view: layer
`index` of a stacked buffer, `stride` elements apart, never a copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from typing import assert_never

# ---------------------------------------------------------------- pointers


@dataclass(frozen=True, slots=True)
class LoopVar:
    """A fold's loop variable plus a constant (`l3`, or `l3 + 1`)."""

    name: str
    plus: int = 0


Index = int | LoopVar


@dataclass(frozen=True, slots=True)
class Layer:
    """Layer `index` of a stacked buffer at `base`: `base + index * stride` (a view)."""

    base: Ptr
    index: Index
    stride: int


Ptr = str | Layer
"""A pointer: a generated name, or a view of one."""


# ---------------------------------------------------------------- values


Axes = tuple[tuple[str | None, int], ...]


@dataclass(frozen=True, slots=True)
class HTensor:
    """A tensor at a pointer (a layout, before the recording places it, has `ptr` "")."""

    ptr: Ptr
    dtype: str
    axes: Axes
    # An argument's index tensor: its values lie in [0, bound). Only layouts carry it
    # (arguments are checked against it); it takes no part in equality or hashing.
    bound: int | None = field(default=None, compare=False)

    @property
    def size(self) -> int:
        n = 1
        for _, s in self.axes:
            n *= s
        return n


@dataclass(frozen=True, slots=True)
class HConst:
    """A number known when the program is printed (a literal, a hyperparameter)."""

    value: Fraction


@dataclass(frozen=True, slots=True)
class HKey:
    """A random key at a pointer (`const presk_key *`)."""

    ptr: Ptr


@dataclass(frozen=True, slots=True)
class HTree:
    """A parameter tree of host values."""

    items: tuple[tuple[str, HValue], ...]

    def get(self, name: str) -> HValue:
        for key, value in self.items:
            if key == name:
                return value
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class HPending:
    """An elementwise value computed inside its consumer's nest (a fusion group member)."""

    step_name: str
    attrs: tuple[tuple[str, object], ...]
    args: tuple[object, ...]  # HValues
    dtype: str
    axes: Axes


HValue = HTensor | HConst | HKey | HTree | HPending | tuple  # type: ignore[type-arg]


# ---------------------------------------------------------------- declarations


@dataclass(frozen=True, slots=True)
class Param:
    """A pointer parameter: `dtype` is a storage type, or None for a random key."""

    name: str
    dtype: str | None


@dataclass(frozen=True, slots=True)
class Alloc:
    """A buffer of the function's frame, `offset` bytes into it (a multiple of 64)."""

    name: str
    dtype: str
    offset: int


@dataclass(frozen=True, slots=True)
class Accumulators:
    """Two pointers used in turn by a fold (`first` starts at `at_first`), swapped per layer."""

    dtype: str
    first: str
    second: str
    at_first: str
    at_second: str


Local = Alloc | Accumulators


# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Site:
    """Where the statements that follow come from: a Core site, `fn/%N`, and its let's name."""

    where: str
    name: str | None


@dataclass(frozen=True, slots=True)
class Launch:
    """A kernel called on its buffers (inputs, then outputs).

    With `split`, the kernel's split loop (its outer loop, or the one at a
    plan's depth) of `split` iterations is shared among the OpenMP workers,
    each taking a contiguous part.
    """

    kernel: str
    args: tuple[Ptr, ...]
    split: int | None = None
    workers: int | None = None  # a plan's count (at most the team); None: the whole team


@dataclass(frozen=True, slots=True)
class Call:
    """A function instance called with its frame at `frame` bytes into the caller's."""

    callee: str
    frame: int
    args: tuple[Ptr, ...]  # inputs, then outputs


@dataclass(frozen=True, slots=True)
class Copy:
    """`size` bytes copied from `src` to `dst`."""

    dst: Ptr
    src: Ptr
    size: int


@dataclass(frozen=True, slots=True)
class Swap:
    """The two accumulators of a fold exchanged (after each layer)."""

    dtype: str
    first: str
    second: str


class Order(Enum):
    """Which layers a fold visits, in which order."""

    FORWARD = "every layer, first to last"
    ALL_BUT_LAST = "every layer but the last, first to last (the inputs kept for the way back)"
    BACKWARD = "every layer, last to first"


@dataclass(frozen=True, slots=True)
class Fold:
    """A loop over `layers` stacked layers, `var` naming the layer."""

    var: str
    layers: int
    order: Order
    body: tuple[Stmt, ...]


Stmt = Site | Launch | Call | Copy | Swap | Fold


# ---------------------------------------------------------------- functions


@dataclass(frozen=True, slots=True)
class Function:
    """A Presk function at concrete shapes and argument layouts: one C function.

    Its parameters are `frame`, `threads`, then `params` and `outputs`; its
    frame holds its own buffers (`frame` bytes) and, after them, the frame of
    whichever callee runs (`callee_frame` bytes at most).
    """

    c_name: str
    source: str  # the Presk function's name
    params: tuple[Param, ...]
    outputs: tuple[Param, ...]
    locals: tuple[Local, ...]
    body: tuple[Stmt, ...]
    frame: int  # bytes of its own buffers
    callee_frame: int  # the largest frame a call or loop of it needs
    calls: tuple[tuple[Function, int], ...]  # (callee, times called)
    result: HValue

    @property
    def frame_bytes(self) -> int:
        return self.frame + self.callee_frame

    @property
    def bytes_unreleased(self) -> int:
        """The arena a call would need if no callee's frame were ever reused."""
        return self.frame + sum(inst.bytes_unreleased * times for inst, times in self.calls)


def calls(body: tuple[Stmt, ...]) -> list[Call]:
    """Every call of a body, loops included."""
    out: list[Call] = []
    for s in body:
        if isinstance(s, Call):
            out.append(s)
        elif isinstance(s, Fold):
            out.extend(calls(s.body))
    return out


__all__ = [
    "Accumulators",
    "Alloc",
    "Axes",
    "Call",
    "Copy",
    "Fold",
    "Function",
    "HConst",
    "HKey",
    "HPending",
    "HTensor",
    "HTree",
    "HValue",
    "Index",
    "Launch",
    "Layer",
    "Local",
    "LoopVar",
    "Order",
    "Param",
    "Ptr",
    "Site",
    "Stmt",
    "Swap",
    "calls",
]


def executed(entry: Function) -> dict[tuple[str, str], int]:
    """What one call of `entry` executes, folds unrolled: (what, Presk function) → count.

    `what` is "launches", "copies" or "copied bytes", counted for the function
    whose body holds them, or "calls", counted for the function called.
    """
    by_name: dict[str, Function] = {}
    todo = [entry]
    while todo:
        fn = todo.pop()
        if fn.c_name not in by_name:
            by_name[fn.c_name] = fn
            todo.extend(callee for callee, _ in fn.calls)
    counts: dict[tuple[str, str], int] = {}

    def add(what: str, fn: Function, n: int) -> None:
        counts[what, fn.source] = counts.get((what, fn.source), 0) + n

    def walk(fn: Function, body: tuple[Stmt, ...], times: int) -> None:
        for stmt in body:
            match stmt:
                case Launch():
                    add("launches", fn, times)
                case Call(callee):
                    add("calls", by_name[callee], times)
                    walk(by_name[callee], by_name[callee].body, times)
                case Copy(_, _, size):
                    add("copies", fn, times)
                    add("copied bytes", fn, times * size)
                case Fold(_, layers, order, inner):
                    laps = layers - 1 if order is Order.ALL_BUT_LAST else layers
                    walk(fn, inner, times * laps)
                case Site() | Swap():
                    pass
                case _:
                    assert_never(stmt)

    walk(entry, entry.body, 1)
    return counts


def total(counts: dict[tuple[str, str], int], what: str) -> int:
    """The sum of one kind of `executed` count over every function."""
    return sum(n for (kind, _), n in counts.items() if kind == what)
