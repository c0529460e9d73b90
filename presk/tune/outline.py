"""A kernel as the cost model sees it: its loops, and in each body its accesses counted.

The model (features.py) needs of a kernel only its loop structure and, for
the statements of each body that hold no statements, how many loads,
stores and operations they make and which memory they touch: per access
pattern (a buffer and its coefficients, in bytes, on the loop variables)
the set of constant offsets and the widest access. An `Outline` keeps just
that. One is read off a lowered kernel (`of_kernel`), or built straight from
a point's parameters where the lowering's shape is known (tune/tiled.py),
which is what lets `presk plan` price thousands of points without building
their kernels.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import assert_never

from presk.dtypes import Dtype
from presk.kernel import ir
from presk.kernel.text import vector_lanes

# An access pattern: its buffer, and its coefficients (bytes) on each loop variable.
Key = tuple[int, tuple[tuple[str, float], ...]]
# A pattern, its constant offsets (bytes) and its widest access (bytes).
Group = tuple[Key, frozenset[float], int]


@dataclass(frozen=True, slots=True)
class Leaf:
    """The statements of one body that hold no statements (or a branch's condition), together."""

    loads: int = 0  # register loads and stores
    ops: int = 0  # arithmetic operations (a random draw is one)
    groups: tuple[Group, ...] = ()
    count: int = 0  # statements (what a default split weighs, sched/split.py)
    lanes: int = 1  # the widest vector a statement names
    # Whether a statement reads what it writes (an accumulator `v = v + a·b`, or an output
    # element added to in place that the loop around does not move): each run of the
    # leaf then waits for the one before.
    carried: bool = False


@dataclass(frozen=True, slots=True)
class Loop:
    """`for var < bound`. An outline built from a point says which blocks the loop
    runs over (`batch`, `I`, `J`, `K` or `k`, one step of K); one read off a
    kernel leaves it empty."""

    var: str
    bound: int
    body: Body
    role: str = ""


@dataclass(frozen=True, slots=True)
class Branch:
    """An `if`: its condition's accesses, and the two branches."""

    cond: Leaf
    then: Body
    other: Body


@dataclass(frozen=True, slots=True)
class Region:
    """A scratch buffer's scope."""

    buffer: ir.Buffer
    body: Body


Nested = Loop | Branch | Region


@dataclass(frozen=True, slots=True)
class Body:
    """A body's statements without statements inside, and the ones with."""

    leaf: Leaf
    nested: tuple[Nested, ...] = ()


@dataclass(frozen=True, slots=True)
class Outline:
    """One kernel: its body, its buffers (inputs, then outputs) and its split."""

    body: Body
    buffers: tuple[ir.Buffer, ...]
    split: bool = False
    split_depth: int = 0
    workers: int = 0  # a plan's worker count (0: the team's)


# ---------------------------------------------------------------- accesses


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


@functools.lru_cache(maxsize=1 << 16)
def pattern(b: ir.Buffer, index: tuple[ir.Index, ...]) -> tuple[Key, float]:
    """An access's pattern and its constant offset, in bytes (shared by the points
    of a nest, whose kernels repeat the same accesses)."""
    elem = element_bytes(b)
    coefs: dict[str, float] = {}
    const = 0.0
    for e, stride in zip(index, _strides(b), strict=True):
        c, k = _affine(e)
        for v, x in c.items():
            coefs[v] = coefs.get(v, 0.0) + x * stride * elem
        const += k * stride * elem
    return (b.index, tuple(sorted((v, x) for v, x in coefs.items() if x))), const


def element_bytes(b: ir.Buffer) -> int:
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


def _accesses(
    s: ir.Stmt | ir.Cmp | ir.Load, var: str | None = None
) -> tuple[int, int, list[Access], bool]:
    """The accesses and operations of one statement without statements inside (or
    of a condition), and whether it reads what it writes where the loop around it
    (over `var`) comes back to it: a store in place to an element that `var` moves
    (a row divided by its sum) writes another element each iteration. Dispatched on
    the exact type: the hot loop of reading a kernel."""
    found: list[Access] = []
    ops = 0
    carried = False
    written: object = None  # the variable a Let writes, or a Store's (buffer, index)
    stack: list[object]
    if isinstance(s, ir.Store | ir.VStore):
        lanes = vector_lanes(s.value) if isinstance(s, ir.VStore) else 1
        key, const = pattern(s.buffer, s.index)
        if not any(v == var for v, _ in key[1]):
            written = (s.buffer.index, s.index)
        found.append((key, const, lanes * element_bytes(s.buffer)))
        stack = [s.value]
    elif isinstance(s, ir.Let | ir.VLet):
        written = s.name
        stack = [s.value]
    else:
        stack = [s]
    while stack:
        e = stack.pop()
        t = type(e)
        if t is ir.Load or t is ir.VLoad:
            assert isinstance(e, ir.Load | ir.VLoad)
            carried = carried or written == (e.buffer.index, e.index)
            key, const = pattern(e.buffer, e.index)
            width = (e.lanes if isinstance(e, ir.VLoad) else 1) * element_bytes(e.buffer)
            found.append((key, const, width))
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
        elif t is ir.Var or t is ir.VVar:
            assert isinstance(e, ir.Var | ir.VVar)
            carried = carried or written == e.name
        # constants and indices touch no memory
    return len(found), ops, found, carried


class Gather:
    """Leaves added up: loads and operations summed, each pattern's offsets joined."""

    def __init__(self, var: str | None = None) -> None:
        self.var = var  # the variable of the loop whose body this is (None: none)
        self.loads = self.ops = self.count = 0
        self.lanes = 1
        self.carried = False
        self.groups: dict[Key, tuple[set[float], int]] = {}

    def access(self, key: Key, consts: Iterable[float], width: int) -> None:
        found = self.groups.get(key)
        if found is None:
            self.groups[key] = (set(consts), width)
        else:
            found[0].update(consts)
            if width > found[1]:
                self.groups[key] = (found[0], width)

    def add(self, leaf: Leaf) -> None:
        self.loads += leaf.loads
        self.ops += leaf.ops
        self.count += leaf.count
        self.lanes = max(self.lanes, leaf.lanes)
        self.carried = self.carried or leaf.carried
        for key, consts, width in leaf.groups:
            self.access(key, consts, width)

    def stmt(self, s: ir.Stmt | ir.Cmp | ir.Load, count: int = 1, lanes: int = 1) -> None:
        loads, ops, found, carried = _accesses(s, self.var)
        self.loads += loads
        self.ops += ops
        self.carried = self.carried or carried
        self.count += count
        self.lanes = max(self.lanes, lanes)
        for key, const, width in found:
            self.access(key, (const,), width)

    def leaf(self) -> Leaf:
        groups = tuple((k, frozenset(c), w) for k, (c, w) in self.groups.items())
        return Leaf(self.loads, self.ops, groups, self.count, self.lanes, self.carried)


def body_of(stmts: tuple[ir.Stmt, ...], var: str | None = None) -> Body:
    """A kernel body's outline (the body of the loop over `var`, or of a branch or a
    scratch inside it: None, of no loop)."""
    leaf = Gather(var)
    nested: list[Nested] = []
    for s in stmts:
        match s:
            case ir.For(name, bound, inner):
                nested.append(Loop(name, bound, body_of(inner, name)))
            case ir.If(cond, then, other):
                test = Gather()
                test.stmt(cond, count=0)
                nested.append(Branch(test.leaf(), body_of(then, var), body_of(other, var)))
            case ir.Scratch(buffer, inner):
                nested.append(Region(buffer, body_of(inner, var)))
            case ir.Random():
                leaf.ops += 1
                leaf.count += 1
            case ir.VLet(_, _, lanes):
                leaf.stmt(s, lanes=lanes)
            case ir.VStore(_, _, value):
                leaf.stmt(s, lanes=vector_lanes(value))
            case ir.Let() | ir.Store():
                leaf.stmt(s)
            case _:
                assert_never(s)
    return Body(leaf.leaf(), tuple(nested))


def of_kernel(kernel: ir.Kernel) -> Outline:
    """A lowered kernel's outline."""
    return Outline(
        body_of(kernel.body),
        (*kernel.inputs, *kernel.outputs),
        kernel.split,
        kernel.split_depth,
        kernel.workers,
    )


def max_lanes(body: Body) -> int:
    """The widest vector a body names."""
    lanes = body.leaf.lanes
    for s in body.nested:
        match s:
            case Loop(_, _, inner) | Region(_, inner):
                lanes = max(lanes, max_lanes(inner))
            case Branch(_, then, other):
                lanes = max(lanes, max_lanes(then), max_lanes(other))
            case _:
                assert_never(s)
    return lanes


def work(body: Body) -> int:
    """A body's work as a default split weighs it (sched/split.py's rule): a loop
    its bound times its body's (at least one), an `if` its larger branch, any
    other statement one."""
    total = body.leaf.count
    for s in body.nested:
        match s:
            case Loop(_, bound, inner):
                total += bound * max(1, work(inner))
            case Branch(_, then, other):
                total += max(work(then), work(other))
            case Region(_, inner):
                total += work(inner)
            case _:
                assert_never(s)
    return total


__all__ = [
    "Body",
    "Branch",
    "Gather",
    "Group",
    "Key",
    "Leaf",
    "Loop",
    "Nested",
    "Outline",
    "Region",
    "body_of",
    "element_bytes",
    "max_lanes",
    "of_kernel",
    "pattern",
    "work",
]
