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
- Bytes from L2, L3 and memory, in whole 64-byte lines (the rule `lines`).
  The footprint of a loop is the lines its accesses touch while it runs
  once: per buffer and per pattern of an access (its coefficients on the
  loop variables), a box of runs along the variables bound at or inside
  the loop, cut to the buffer's size. The traffic a loop brings into a
  cache of capacity C is its footprint if that fits in C (each line is then
  fetched once and reused), else its trip count times its body's traffic.
  A kernel whose whole footprint fits in C brings nothing: its data is
  still there from the call before, as it is when a kernel is timed, and
  mostly when the nest before it wrote its operands. So T(C) is what misses
  a cache of size C; bytes from L2 are T(L1d) − T(L2), from L3
  T(L2) − T(L3), from memory T(L3). L1d and L2 are a worker's own; the L3
  is shared by the workers on it.

Pure Python over the IR, a few hundred node visits a kernel: `presk plan`
costs a thousand points in a fraction of a second.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import assert_never

from presk.dtypes import Dtype
from presk.kernel import ir
from presk.tune.machine import LINE_BYTES, Machine

RULES = "lines,overhead"

# An access pattern: its buffer, and its coefficients (bytes) on each loop variable.
Key = tuple[int, tuple[tuple[str, float], ...]]


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
    )


# ---------------------------------------------------------------- affine indices


def _affine(e: ir.Index) -> tuple[dict[str, float], float]:
    """An index as coefficients on loop variables and a constant. Division divides
    them (an approximation: footprints are cut to the buffer anyway), and a
    remainder is taken as its operand, at most the buffer."""
    match e:
        case ir.IVar(name):
            return {name: 1.0}, 0.0
        case ir.IConst(value):
            return {}, float(value)
        case ir.IBin(op, left, right):
            lc, lk = _affine(left)
            rc, rk = _affine(right)
            match op:
                case ir.IntOp.ADD:
                    out = dict(lc)
                    for v, c in rc.items():
                        out[v] = out.get(v, 0.0) + c
                    return out, lk + rk
                case ir.IntOp.MUL:
                    if not rc:
                        return {v: c * rk for v, c in lc.items()}, lk * rk
                    if not lc:
                        return {v: c * lk for v, c in rc.items()}, lk * rk
                    return {**lc, **rc}, lk * rk  # a product of variables: not affine
                case ir.IntOp.DIV:
                    d = rk if not rc and rk else 1.0
                    return {v: c / d for v, c in lc.items()}, lk / d
                case ir.IntOp.MOD:
                    return lc, lk
                case _:
                    assert_never(op)
        case _:
            assert_never(e)


@dataclass
class _Buf:
    elem: int  # bytes of an element
    lines: int  # lines of the whole buffer


@dataclass
class _Node:
    """A loop's (or the kernel's) accesses: per pattern, its constant offsets and width."""

    groups: dict[Key, tuple[set[float], int]]
    bounds: dict[str, int]  # the variables bound at or inside it


@functools.lru_cache(maxsize=1 << 16)
def _pattern(b: ir.Buffer, index: tuple[ir.Index, ...], elem: int) -> tuple[Key, float]:
    """An access's pattern and its constant offset, in bytes (shared by the points
    of a nest, whose kernels repeat the same accesses)."""
    coefs: dict[str, float] = {}
    const = 0.0
    for e, stride in zip(index, _strides(b), strict=True):
        c, k = _affine(e)
        for v, x in c.items():
            coefs[v] = coefs.get(v, 0.0) + x * stride * elem
        const += k * stride * elem
    return (b.index, tuple(sorted((v, x) for v, x in coefs.items() if x))), const


def _elem(b: ir.Buffer) -> int:
    """Bytes of one element (a key is two 32-bit words)."""
    return _ELEM.get(b.dtype, 8)


_ELEM = {str(d): d.size for d in Dtype}


def _strides(b: ir.Buffer) -> list[int]:
    out, step = [], 1
    for size in reversed(b.shape):
        out.append(step)
        step *= size
    return out[::-1]


Access = tuple[Key, float, int]  # a pattern, its offset and its width, in bytes


def _leaf(s: ir.Stmt | ir.Cmp | ir.Load) -> tuple[int, int, list[Access]]:
    """The accesses and operations of one statement without statements inside (or
    of a condition). Dispatched on the exact type: this is the model's hot loop."""
    found: list[Access] = []
    ops = 0
    stack: list[object]
    if isinstance(s, ir.Store | ir.VStore):
        lanes = _lanes(s.value) if isinstance(s, ir.VStore) else 1
        elem = _elem(s.buffer)
        key, const = _pattern(s.buffer, s.index, elem)
        found.append((key, const, lanes * elem))
        stack = [s.value]
    elif isinstance(s, ir.Let | ir.VLet):
        stack = [s.value]
    else:
        stack = [s]
    while stack:
        e = stack.pop()
        t = type(e)
        if t is ir.Load or t is ir.VLoad:
            assert isinstance(e, ir.Load | ir.VLoad)
            elem = _elem(e.buffer)
            key, const = _pattern(e.buffer, e.index, elem)
            found.append((key, const, (e.lanes if isinstance(e, ir.VLoad) else 1) * elem))
        elif t is ir.Bin or t is ir.VBin:
            assert isinstance(e, ir.Bin | ir.VBin)
            ops += 1
            stack += (e.left, e.right)
        elif t is ir.Cmp:
            assert isinstance(e, ir.Cmp)
            stack += (e.left, e.right)
        elif t is ir.Neg:
            assert isinstance(e, ir.Neg)
            ops += 1
            stack.append(e.operand)
        elif t is ir.Fn:
            assert isinstance(e, ir.Fn)
            ops += 1
            stack.append(e.arg)
        elif t is ir.Select:
            assert isinstance(e, ir.Select)
            stack += (e.cond, e.then, e.other)
        elif t is ir.FromIndex or t is ir.Splat:
            assert isinstance(e, ir.FromIndex | ir.Splat)
            stack.append(e.value)
        # variables, constants and indices touch no memory
    return len(found), ops, found


class _Walk:
    """One kernel walked once: counts on the way down, traffic on the way up."""

    def __init__(self, kernel: ir.Kernel, workers: int, caps: tuple[int, int, int]) -> None:
        self.kernel, self.workers, self.caps = kernel, workers, caps
        self.work = 0.0
        self.loads = 0.0
        self.ops = 0.0
        self.buffers: dict[int, _Buf] = {}
        for b in (*kernel.inputs, *kernel.outputs):
            self._buffer(b)

    def _buffer(self, b: ir.Buffer) -> _Buf:
        found = self.buffers.get(b.index)
        if found is None:
            elem = _elem(b)
            found = _Buf(elem, max(1, math.ceil(b.size * elem / LINE_BYTES)))
            self.buffers[b.index] = found
        return found

    def _leaf(self, node: _Node, s: ir.Stmt | ir.Cmp | ir.Load, mult: float) -> None:
        """A statement without statements inside (or a condition): its accesses."""
        loads, ops, accesses = _leaf(s)
        self.loads += loads * mult
        self.ops += ops * mult
        groups = node.groups
        for key, const, width in accesses:
            found = groups.get(key)
            if found is None:
                groups[key] = ({const}, width)
            else:
                found[0].add(const)
                if width > found[1]:
                    groups[key] = (found[0], width)

    def counts(self) -> tuple[float, float, float]:
        return self.work, self.loads, self.ops

    def body(
        self, node: _Node, stmts: tuple[ir.Stmt, ...], mult: float, depth: int
    ) -> tuple[float, float, float]:
        """Count `stmts` run `mult` times; their accesses go to `node`. Returns the
        traffic of one run of them past each cache, the loops among them counted."""
        t1 = t2 = t3 = 0.0
        direct = _Node({}, {})  # the accesses outside the loops among `stmts`
        for s in stmts:
            if isinstance(s, ir.Let | ir.Store | ir.VLet | ir.VStore):
                self._leaf(direct, s, mult)
                continue
            a, b, c = self.stmt(node, s, mult, depth)
            t1, t2, t3 = t1 + a, t2 + b, t3 + c
        if direct.groups:
            lines = self.lines(direct) * LINE_BYTES
            t1, t2, t3 = t1 + lines, t2 + lines, t3 + lines
            _merge(node, direct)
        return t1, t2, t3

    def stmt(self, node: _Node, s: ir.Stmt, mult: float, depth: int) -> tuple[float, float, float]:
        match s:
            case ir.For():
                return self.loop(node, s, mult, depth)
            case ir.Let() | ir.Store() | ir.VLet() | ir.VStore():
                self._leaf(node, s, mult)
            case ir.If(cond, then, other):
                self._leaf(node, cond, mult)
                saved = self.counts()
                a = self.body(node, then, mult, -1)
                taken = self.counts()
                self.work, self.loads, self.ops = saved
                b = self.body(node, other, mult, -1)
                if taken[1] > self.loads:  # count the branch with more accesses only
                    self.work, self.loads, self.ops = taken
                return max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2])
            case ir.Random(_, _, _):
                self.ops += mult
            case ir.Scratch(buffer, body):
                self._buffer(buffer)
                return self.body(node, body, mult, -1)
            case _:
                assert_never(s)
        return 0.0, 0.0, 0.0

    def loop(self, parent: _Node, s: ir.For, mult: float, depth: int) -> tuple[float, float, float]:
        bound = s.bound
        if self.kernel.split and depth == self.kernel.split_depth:
            bound = math.ceil(bound / self.workers)  # one worker's share
        runs = mult * bound
        self.work += runs
        node = _Node({}, {s.var: bound})
        inner = self.body(node, s.body, runs, depth + 1 if depth >= 0 else -1)
        lines = self.lines(node) * LINE_BYTES
        _merge(parent, node)
        a, b, c = (
            lines if lines <= cap else bound * t for cap, t in zip(self.caps, inner, strict=True)
        )
        return a, b, c

    def lines(self, node: _Node) -> float:
        """The lines `node`'s accesses touch while it runs once."""
        per_buffer: dict[int, float] = {}
        for (index, coefs), (consts, width) in node.groups.items():
            dims = [(abs(c), node.bounds[v]) for v, c in coefs if v in node.bounds]
            if len(consts) > 1:
                ordered = sorted(consts)
                gaps = [b - a for a, b in itertools.pairwise(ordered)]
                dims.append((min(gaps), len(ordered)))
            n = _box(dims, width)
            per_buffer[index] = per_buffer.get(index, 0.0) + n
        return sum(min(n, self.buffers[i].lines) for i, n in per_buffer.items())


def _lanes(v: ir.VExpr) -> int:
    match v:
        case ir.VLoad(_, _, lanes) | ir.Splat(_, lanes) | ir.VVar(_, lanes):
            return lanes
        case ir.VBin(_, left, _):
            return _lanes(left)
        case _:
            assert_never(v)


def _box(dims: list[tuple[float, int]], width: int) -> float:
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


def _merge(parent: _Node, child: _Node) -> None:
    for key, (consts, width) in child.groups.items():
        mine, w = parent.groups.get(key, (set(), 0))
        parent.groups[key] = (mine | consts, max(w, width))
    parent.bounds.update(child.bounds)


def _max_lanes(stmts: tuple[ir.Stmt, ...]) -> int:
    lanes = 1
    for s in stmts:
        match s:
            case ir.For(_, _, body) | ir.Scratch(_, body):
                lanes = max(lanes, _max_lanes(body))
            case ir.If(_, then, other):
                lanes = max(lanes, _max_lanes(then), _max_lanes(other))
            case ir.VLet(_, _, n):
                lanes = max(lanes, n)
            case ir.VStore(_, _, value):
                lanes = max(lanes, _lanes(value))
            case ir.Let() | ir.Store() | ir.Random():
                pass
            case _:
                assert_never(s)
    return lanes


def workers_of(kernel: ir.Kernel, threads: int) -> int:
    """The workers a kernel runs on: a plan's count, else the team's."""
    if not kernel.split:
        return 1
    return kernel.workers or threads


def kernel_terms(
    kernel: ir.Kernel, machine: Machine, threads: int
) -> tuple[float, float, float, float, float, float]:
    """W, R, the bytes from L2, L3 and memory, and the operations of one kernel."""
    workers = workers_of(kernel, threads)
    l3 = machine.l3 // max(1, min(workers, machine.l3_shared))
    caps = (machine.l1d, machine.l2, l3)
    walk = _Walk(kernel, workers, caps)
    top = _Node({}, {})
    inner = walk.body(top, kernel.body, 1.0, 0)
    total = walk.lines(top) * LINE_BYTES
    misses = [0.0 if total <= cap else t for cap, t in zip(caps, inner, strict=True)]
    t1, t2, t3 = misses[0], min(misses[1], misses[0]), min(misses[2], misses[1], misses[0])
    return walk.work, walk.loads, t1 - t2, t2 - t3, t3, walk.ops


def features(
    kernels: tuple[ir.Kernel, ...], dtype: str, machine: Machine, threads: int
) -> Features:
    """The terms of a point's kernels, added, and its group."""
    work = loads = l2 = l3 = mem = ops = 0.0
    lanes, workers, spawns = 1, 1, 0
    size = 0.0
    for k in kernels:
        w, r, b2, b3, bm, o = kernel_terms(k, machine, threads)
        work, loads, l2, l3, mem, ops = work + w, loads + r, l2 + b2, l3 + b3, mem + bm, ops + o
        lanes = max(lanes, _max_lanes(k.body))
        kw = workers_of(k, threads)
        workers = max(workers, kw)
        spawns += kw > 1
        size += sum(b.size * _elem(b) for b in (*k.inputs, *k.outputs))
    group = f"{dtype}+lanes{lanes}+w{workers}"
    return Features(work, loads, l2, l3, mem, group, len(kernels), spawns, ops, size)


__all__ = ["RULES", "Features", "features", "features_of", "kernel_terms", "workers_of"]
