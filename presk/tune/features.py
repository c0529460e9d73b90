"""The static terms of one point of a nest, read off its kernels: what the model prices.

Everything is counted for one worker's share: the loop a kernel is split at
runs ceil(n / workers) of its n iterations, the loops around it in full.
A point's kernels (a pack's first) add up.

- Work W: one operation per loop iteration, at every level (the rule
  `overhead`; the innermost loops make nearly all of it). A tile of
  m_i × n_j accumulators thus does its m_i·n_j multiply-adds in one
  operation, which is what lanes and registers buy.
- Register loads and stores R: each Load, VLoad, Store and VStore executed
  counts one, a vector as one (the branch of an `if` with more of them is
  counted).
- Dependent steps S: each iteration of a loop of at least `CHAIN_TRIPS`
  iterations whose body (under an `if` in it too: the rule `chains`) reads
  what it writes (an accumulator, `v = v + a·b`, or an output element added to
  in place that the loop does not move) waits for the iteration before, an
  add's latency, once however many independent accumulators it updates: what
  a tile of one row and one vector is bound by, and a tile of six rows is not.
- Bytes from L2, L3 and memory, in whole 64-byte lines (the rule `lines`).
  The footprint of a loop is the lines its accesses touch while it runs
  once: per buffer and per pattern of an access (its coefficients on the
  loop variables), a box of runs along the variables bound at or inside
  the loop, cut to the buffer's size. The traffic a loop brings into a
  cache of capacity C is its footprint if that fits in C (each line is then
  fetched once and reused), else its trip count times its body's traffic,
  less the lines each iteration shares with the one before where two
  iterations fit in C.
  A footprint fits the L1d only if its sets hold it too (the rule `sets`): a
  pattern's lines count as many times over as the sets it falls into are
  fewer than all of them (rows 4 KiB apart all fall into one).
  Of the bytes past L2, the share of the lines of buffers larger than the L2
  that patterns walk across (their innermost moving loop steps past a line
  and past the run of their constant offsets) is strided (the rule
  `streams`): the prefetchers fetch ahead of a walk along lines, not across.
  A kernel whose whole footprint fits in C brings nothing: its data is
  still there from the call before, as it is when a kernel is timed, and
  mostly when the nest before it wrote its operands. So T(C) is what misses
  a cache of size C; bytes from L2 are T(L1d) − T(L2), from L3
  T(L2) − T(L3), from memory T(L3). L1d and L2 are a worker's own; the L3
  is shared by the workers on it.

The walk is over a kernel's outline (outline.py): read off a built kernel,
or for a tiled contraction point built from the point itself (tiled.py),
so that `presk plan` prices the ten thousand points of a GPT's gradient
in a few seconds.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import assert_never

from presk.kernel import ir
from presk.tune.machine import LINE_BYTES, Machine
from presk.tune.outline import (
    Body,
    Branch,
    Key,
    Leaf,
    Loop,
    Nested,
    Outline,
    Region,
    element_bytes,
    max_lanes,
    of_kernel,
)

RULES = "lines,overhead,sets,streams,scalar,chains,reuse"
# A chain of adds waits on itself only when it is long: the processor's reorder window
# (some 200 operations) runs the chains of a few short loops side by side, as it does
# those of a product over k = 4 (attention's scores, one head).
CHAIN_TRIPS = 16


@dataclass(frozen=True)
class Features:
    """One worker's share of a point: the model's terms and what it is grouped by."""

    work: float  # loop iterations
    loads: float  # register loads and stores
    l2: float  # bytes from L2
    l3: float  # bytes from L3
    mem: float  # bytes from memory
    group: str  # type, lanes and workers: `f32+lanes16+w2`
    launches: int  # kernels launched
    spawns: int  # of them, split over more than one worker
    ops: float  # arithmetic operations (the roofline's comparison)
    bytes: float  # the kernels' buffers, each read or written once (the roofline's Q)
    steps: float = 0.0  # loop iterations that wait for the one before (a profile without: 0)
    strided: float = 0.0  # bytes past L2 of patterns walked across lines (rule `streams`)

    def to_json(self) -> dict[str, object]:
        return {
            "work": self.work,
            "loads": self.loads,
            "l2": self.l2,
            "l3": self.l3,
            "mem": self.mem,
            "group": self.group,
            "launches": self.launches,
            "spawns": self.spawns,
            "ops": self.ops,
            "bytes": self.bytes,
            "steps": self.steps,
            "strided": self.strided,
        }


def features_of(doc: object) -> Features | None:
    """Features from a profile sample's object; None if it is not one."""
    if not isinstance(doc, dict):
        return None
    numbers = ("work", "loads", "l2", "l3", "mem", "ops", "bytes")
    if not all(isinstance(doc.get(k), int | float) for k in numbers):
        return None
    counts = ("launches", "spawns")
    if not isinstance(doc.get("group"), str) or not all(
        isinstance(doc.get(k), int) for k in counts
    ):
        return None
    return Features(
        float(doc["work"]),
        float(doc["loads"]),
        float(doc["l2"]),
        float(doc["l3"]),
        float(doc["mem"]),
        str(doc["group"]),
        int(doc["launches"]),
        int(doc["spawns"]),
        float(doc["ops"]),
        float(doc["bytes"]),
        *(
            float(doc[k]) if isinstance(doc.get(k), int | float) else 0.0
            for k in ("steps", "strided")
        ),
    )


@dataclass
class _Buf:
    elem: int  # bytes of an element
    lines: int  # lines of the whole buffer


@dataclass
class _Node:
    """A loop's (or the kernel's) accesses: per pattern, its constant offsets and width."""

    groups: dict[Key, tuple[set[float], int]]
    bounds: dict[str, int]  # the variables bound at or inside it


class _Walk:
    """One kernel's outline walked once: counts on the way down, traffic on the way up."""

    def __init__(
        self, kernel: Outline, workers: int, caps: tuple[int, int, int], ways: int = 0
    ) -> None:
        self.kernel, self.workers, self.caps = kernel, workers, caps
        # The L1d's sets and ways (0 ways: not known, no conflicts counted).
        self.ways = ways
        self.sets = max(1, caps[0] // (LINE_BYTES * ways)) if ways else 1
        self.work = 0.0
        self.loads = 0.0
        self.ops = 0.0
        self.steps = 0.0
        self.chained = False  # a statement of the loop being walked reads what it writes
        self.around: list[tuple[str, int]] = []  # the loops being walked, outermost first
        # Per pattern, its step along the innermost loop that moves it (rule `streams`).
        self.step: dict[Key, float] = {}
        self.buffers: dict[int, _Buf] = {}
        for b in kernel.buffers:
            self._buffer(b)

    def _buffer(self, b: ir.Buffer) -> _Buf:
        found = self.buffers.get(b.index)
        if found is None:
            elem = element_bytes(b)
            found = _Buf(elem, max(1, math.ceil(b.size * elem / LINE_BYTES)))
            self.buffers[b.index] = found
        return found

    def _leaf(self, node: _Node, leaf: Leaf, mult: float) -> None:
        """Statements without statements inside (or a condition): their accesses."""
        self.loads += leaf.loads * mult
        self.ops += leaf.ops * mult
        self.chained = self.chained or leaf.carried
        groups = node.groups
        for key, consts, width in leaf.groups:
            if key not in self.step:
                self.step[key] = _step(key[1], self.around)
            found = groups.get(key)
            if found is None:
                groups[key] = (set(consts), width)
            else:
                found[0].update(consts)
                if width > found[1]:
                    groups[key] = (found[0], width)

    def counts(self) -> tuple[float, float, float, float]:
        return self.work, self.loads, self.ops, self.steps

    def body(self, node: _Node, body: Body, mult: float, depth: int) -> tuple[float, float, float]:
        """Count `body` run `mult` times; its accesses go to `node`. Returns the traffic
        of one run of it past each cache, the loops in it counted."""
        t1 = t2 = t3 = 0.0
        for s in body.nested:
            a, b, c = self.nested(node, s, mult, depth)
            t1, t2, t3 = t1 + a, t2 + b, t3 + c
        direct = _Node({}, {})  # the accesses outside the loops of `body`
        self._leaf(direct, body.leaf, mult)
        if direct.groups:
            lines = self.lines(direct) * LINE_BYTES
            t1, t2, t3 = t1 + lines, t2 + lines, t3 + lines
            _merge(node, direct)
        return t1, t2, t3

    def nested(self, node: _Node, s: Nested, mult: float, depth: int) -> tuple[float, float, float]:
        match s:
            case Loop():
                return self.loop(node, s, mult, depth)
            case Branch(cond, then, other):
                self._leaf(node, cond, mult)
                saved = self.counts()
                a = self.body(node, then, mult, -1)
                taken = self.counts()
                self.work, self.loads, self.ops, self.steps = saved
                b = self.body(node, other, mult, -1)
                if taken[1] > self.loads:  # count the branch with more accesses only
                    self.work, self.loads, self.ops, self.steps = taken
                return max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2])
            case Region(buffer, inner):
                self._buffer(buffer)
                return self.body(node, inner, mult, -1)
            case _:
                assert_never(s)

    def loop(self, parent: _Node, s: Loop, mult: float, depth: int) -> tuple[float, float, float]:
        bound = s.bound
        if self.kernel.split and depth == self.kernel.split_depth:
            bound = math.ceil(bound / self.workers)  # one worker's share
        runs = mult * bound
        self.work += runs
        node = _Node({}, {s.var: bound})
        self.around.append((s.var, bound))
        # Whether a statement of this loop's body (under an `if` in it too, not in a loop
        # inside it) reads what it writes: each iteration then waits for the one before,
        # once however many independent accumulators it updates.
        around, self.chained = self.chained, False
        inner = self.body(node, s.body, runs, depth + 1 if depth >= 0 else -1)
        if self.chained and bound >= CHAIN_TRIPS:
            self.steps += runs
        self.chained = around
        self.around.pop()
        lines = self.lines(node) * LINE_BYTES
        l1 = self.l1_load(node, lines)
        # The lines an iteration shares with the one before (a row of a under a loop over
        # columns, a line of the output four columns wide) are still there for it where
        # two iterations fit: counted once, not once an iteration. An iteration brings at
        # least the loop's footprint's average growth (two half-line strips of columns
        # share their lines, the next two take new ones).
        shared, two, two_l1 = 0.0, 0.0, 0.0
        if bound > 1 and max(lines, l1) > min(self.caps):  # else the footprint is the traffic
            one, two = (self.lines(node, {s.var: n}) * LINE_BYTES for n in (1, 2))
            shared = max(0.0, one - max(two - one, (lines - one) / (bound - 1)))
            two_l1 = self.l1_load(node, two, {s.var: 2}, s.var)
        _merge(parent, node)
        a, b, c = (
            lines if fits <= cap else bound * t - (bound - 1) * min(shared, t) * (pair <= cap)
            for cap, t, fits, pair in zip(
                self.caps, inner, (l1, lines, lines), (two_l1, two, two), strict=True
            )
        )
        return a, b, c

    def l1_load(
        self,
        node: _Node,
        lines: float,
        bounds: dict[str, int] | None = None,
        stepped: str | None = None,
    ) -> float:
        """The bytes of L1d a footprint of `lines` bytes needs: more than its size where
        it falls into few of the cache's sets. The L1d is indexed by the low 12 bits of
        an address, so rows 4 KiB apart (a row-major operand 1 of 1024 floats read down
        its columns, unpacked) all land in one set, whose 12 ways hold 12 of them
        however small the footprint.

        Of two iterations of the loop over `stepped` (the rule `reuse`), only the lines
        both touch crowd their sets: a pattern that takes a new line each iteration is
        the first its set gives up, as the least recently used, so its lines count in
        the footprint's size (`lines`) but not in the crowding. (The default product
        reads twelve rows of a 4 KiB apart a step of K at a time, the twelve lines of
        one set each step, beside new lines of b's panel: priced as twelve ways too
        few, it measured at the unfused ceiling.)"""
        if not self.ways or lines > self.caps[0] or lines <= self.ways * LINE_BYTES:
            return lines
        per_buffer: dict[int, tuple[float, float]] = {}
        for index, coefs, dims, width in _patterns(node, bounds):
            if stepped is not None and abs(dict(coefs).get(stepped, 0.0)) >= LINE_BYTES:
                continue
            n = _box(dims, width)
            spread = self.sets / _sets(dims, width, self.sets)
            got = per_buffer.get(index, (0.0, 0.0))
            per_buffer[index] = (got[0] + n, got[1] + n * spread)
        out = 0.0
        for i, (n, weighted) in per_buffer.items():
            out += min(n, self.buffers[i].lines) * weighted / n if n else 0.0
        return max(lines, out * LINE_BYTES)

    def strided_share(self, node: _Node, far: int) -> float:
        """Of the lines of `node`'s patterns into buffers larger than `far` (each pattern's
        box over the whole kernel, its buffer's lines at most), the share of those that
        their innermost loop walks across lines (the rule `streams`): a step past the run
        their constant offsets cover, and past a line. The processor's prefetchers follow
        an address that moves a line at a time within a page, ahead of the loads and of a
        store's read for ownership; a walk down the columns of a row-major operand, a
        kilobyte a step, gets no such help and waits on each line."""
        every: dict[int, float] = {}
        across: dict[int, float] = {}
        for (index, coefs), (consts, width) in node.groups.items():
            if self.buffers[index].lines * LINE_BYTES <= far:
                continue
            n = _box(_dims(coefs, consts, node.bounds), width)
            every[index] = every.get(index, 0.0) + n
            if self.step.get((index, coefs), 0.0) > max(_run(consts, width), LINE_BYTES):
                across[index] = across.get(index, 0.0) + n
        total = sum(min(n, self.buffers[i].lines) for i, n in every.items())
        part = sum(min(n, self.buffers[i].lines) for i, n in across.items())
        return part / total if total else 0.0

    def lines(self, node: _Node, bounds: dict[str, int] | None = None) -> float:
        """The lines `node`'s accesses touch while it runs once (with `bounds` in place
        of some of its loops' trip counts)."""
        per_buffer: dict[int, float] = {}
        for index, _, dims, width in _patterns(node, bounds):
            n = _box(dims, width)
            per_buffer[index] = per_buffer.get(index, 0.0) + n
        return sum(min(n, self.buffers[i].lines) for i, n in per_buffer.items())


def _patterns(
    node: _Node, bounds: dict[str, int] | None
) -> Iterator[tuple[int, tuple[tuple[str, float], ...], tuple[tuple[float, int], ...], int]]:
    """Each access pattern of `node` as a box: its buffer, its coefficients on the
    loop variables, its (stride bytes, count) dimensions along the loops bound at or
    inside it (`bounds` in place of some trip counts) and its constant offsets, and its
    width in bytes."""
    within = node.bounds if bounds is None else node.bounds | bounds
    for (index, coefs), (consts, width) in node.groups.items():
        yield index, coefs, _dims(coefs, consts, within), width


def _dims(
    coefs: tuple[tuple[str, float], ...], consts: set[float], within: dict[str, int]
) -> tuple[tuple[float, int], ...]:
    """A pattern's box dimensions: its strides along the loops `within`, then its offsets."""
    dims = tuple((abs(c), within[v]) for v, c in coefs if v in within)
    if len(consts) > 1:
        dims += _offsets(tuple(sorted(consts)))
    return dims


@functools.lru_cache(maxsize=1 << 14)
def _offsets(ordered: tuple[float, ...]) -> tuple[tuple[float, int], ...]:
    """The constant offsets of a pattern's accesses as dimensions of a box: a grid of
    rows and columns (a tile of several rows of several vectors: its columns' gap, then
    its rows') where they form one, else one dimension of their smallest gap. As one
    dimension, a 12 × 32 tile's 24 stores counted as one contiguous run of 24 lines,
    and a walk down its rows found a fifth of the output's lines."""
    n = len(ordered)
    inner = ordered[1] - ordered[0]
    run = 1
    while run < n and ordered[run] - ordered[run - 1] == inner:
        run += 1
    if run == n:
        return ((inner, n),)
    outer = ordered[run] - ordered[0]
    rows = n // run
    if n % run == 0 and outer > (run - 1) * inner:
        grid = {ordered[0] + a * inner + b * outer for a in range(run) for b in range(rows)}
        if grid == set(ordered):
            return ((inner, run), (outer, rows))
    gaps = [b - a for a, b in itertools.pairwise(ordered)]
    return ((min(gaps), n),)


def _step(coefs: tuple[tuple[str, float], ...], around: list[tuple[str, int]]) -> float:
    """A pattern's step, in bytes, along the innermost loop around it that moves it (0:
    none does)."""
    moves = dict(coefs)
    for var, bound in reversed(around):
        if bound > 1 and moves.get(var):
            return abs(moves[var])
    return 0.0


def _run(consts: set[float], width: int) -> float:
    """The bytes a pattern's constant offsets cover without a gap, from the first."""
    ordered = sorted(consts)
    end = ordered[0] + width
    for c in ordered[1:]:
        if c > end:
            break
        end = max(end, c + width)
    return end - ordered[0]


# A model's few thousand distinct boxes are asked for hundreds of thousands of times.
@functools.lru_cache(maxsize=1 << 16)
def _box(dims: tuple[tuple[float, int], ...], width: int) -> float:
    """The lines of a box of accesses `width` bytes wide, along (stride bytes, count)
    dimensions: runs merge while a stride is within the run (or a line), the rest
    repeat the run; never more than the box's span."""
    run, blocks, span = float(width), 1.0, float(width)
    for stride, count in sorted(dims):
        if count <= 1 or stride == 0:
            continue
        extent = (count - 1) * stride
        if blocks == 1 and (stride <= run or stride < LINE_BYTES):
            run += extent
        else:
            blocks *= count
        span += extent
    return min(blocks * math.ceil(run / LINE_BYTES), math.ceil(span / LINE_BYTES))


@functools.lru_cache(maxsize=1 << 16)
def _sets(dims: tuple[tuple[float, int], ...], width: int, sets: int) -> int:
    """How many of a cache's `sets` a box of accesses (as `_box` takes it) falls into:
    its contiguous run takes consecutive sets, and each further dimension as many
    again as its stride's distinct positions among the sets (one, for a stride that
    is a multiple of the sets' span)."""
    run, spread = float(width), 1
    for stride, count in sorted(dims):
        if count <= 1 or stride == 0:
            continue
        if spread == 1 and (stride <= run or stride < LINE_BYTES):
            run += (count - 1) * stride
        elif stride % LINE_BYTES:
            spread *= count  # not a whole number of lines: spread over every set
        else:
            step = int(stride // LINE_BYTES)
            spread *= min(count, sets // math.gcd(sets, step))
    return max(1, min(sets, math.ceil(run / LINE_BYTES) * spread))


def _merge(parent: _Node, child: _Node) -> None:
    """The child's accesses joined to its parent's. A child is merged once it is
    walked, so the parent may take its sets over rather than copy them."""
    groups = parent.groups
    for key, (consts, width) in child.groups.items():
        found = groups.get(key)
        if found is None:
            groups[key] = (consts, width)
        else:
            found[0].update(consts)
            if width > found[1]:
                groups[key] = (found[0], width)
    parent.bounds.update(child.bounds)


def workers_of(kernel: ir.Kernel | Outline, threads: int) -> int:
    """The workers a kernel runs on: a plan's count, else the team's."""
    if not kernel.split:
        return 1
    return kernel.workers or threads


def kernel_terms(
    kernel: Outline, machine: Machine, threads: int
) -> tuple[float, float, float, float, float, float, float, float]:
    """W, R, the bytes from L2, L3 and memory, the operations, S and the strided bytes
    past L2 (at most all the bytes past L2) of one kernel."""
    workers = workers_of(kernel, threads)
    l3 = machine.l3 // max(1, min(workers, machine.l3_shared))
    caps = (machine.l1d, machine.l2, l3)
    walk = _Walk(kernel, workers, caps, machine.l1d_ways)
    top = _Node({}, {})
    inner = walk.body(top, kernel.body, 1.0, 0)
    total = walk.lines(top) * LINE_BYTES
    fits = (walk.l1_load(top, total), total, total)
    misses = [0.0 if f <= cap else t for cap, t, f in zip(caps, inner, fits, strict=True)]
    t1, t2, t3 = misses[0], min(misses[1], misses[0]), min(misses[2], misses[1], misses[0])
    strided = t2 * walk.strided_share(top, machine.l2) if t2 else 0.0
    return walk.work, walk.loads, t1 - t2, t2 - t3, t3, walk.ops, walk.steps, strided


def outline_features(
    kernels: tuple[Outline, ...], dtype: str, machine: Machine, threads: int
) -> Features:
    """The terms of a point's kernels (their outlines), added, and its group."""
    work = loads = l2 = l3 = mem = ops = steps = strided = 0.0
    lanes, workers, spawns = 1, 1, 0
    size = 0.0
    for k in kernels:
        w, r, b2, b3, bm, o, st, sd = kernel_terms(k, machine, threads)
        work, loads, l2, l3, mem, ops = work + w, loads + r, l2 + b2, l3 + b3, mem + bm, ops + o
        steps, strided = steps + st, strided + sd
        lanes = max(lanes, max_lanes(k.body))
        kw = workers_of(k, threads)
        workers = max(workers, kw)
        spawns += kw > 1
        size += sum(b.size * element_bytes(b) for b in k.buffers)
    group = f"{dtype}+lanes{lanes}+w{workers}"
    return Features(
        work, loads, l2, l3, mem, group, len(kernels), spawns, ops, size, steps, strided
    )


def features(
    kernels: tuple[ir.Kernel, ...], dtype: str, machine: Machine, threads: int
) -> Features:
    """The terms of a point's kernels, added, and its group."""
    return outline_features(tuple(of_kernel(k) for k in kernels), dtype, machine, threads)


__all__ = [
    "RULES",
    "Features",
    "features",
    "features_of",
    "kernel_terms",
    "outline_features",
    "workers_of",
]
