"""Thread splits: which kernels run their outer loop over several workers.

A kernel is split when its body is one loop nest whose outermost loop is
parallel — every store indexes its output by that loop's variable first, so
no two iterations write the same element and none reads another's — and
when its work is large enough to pay for waking the workers. Each worker
takes a contiguous range [n·t/w, n·(t+1)/w) of that loop and computes
exactly what the single thread computes there: the bits do not depend on
the number of threads. A `Scratch` buffer declared inside the outer loop is
one iteration's own (undefined on entry, a local array of the worker's
function), so its stores are not the kernel's writes.
"""

from __future__ import annotations

from typing import assert_never

from presk.kernel import ir
from presk.kernel.text import vector_lanes

# Below this many innermost iterations a split costs more than it saves.
WORK_THRESHOLD = 1 << 15


def outer_bound(kernel: ir.Kernel) -> int:
    """The trip count of the kernel's outer loop."""
    return bound_at(kernel, 0)


def bound_at(kernel: ir.Kernel, depth: int) -> int:
    """The trip count of the loop at `depth` of a perfect nest."""
    loop = _loop_at(kernel.body, depth)
    assert isinstance(loop, ir.For)
    return loop.bound


def _loop_at(body: tuple[ir.Stmt, ...], depth: int) -> ir.For | int:
    """The loop at `depth` if the loops down to it are a perfect nest, else the depth
    where the nest stops being one."""
    for level in range(depth + 1):
        if len(body) != 1 or not isinstance(body[0], ir.For):
            return level
        loop = body[0]
        body = loop.body
    return loop


def split_reason(kernel: ir.Kernel, depth: int) -> str | None:
    """None if a plan may split the loop at `depth` among workers, else why not.

    The loops down to it must be a perfect nest, and it must be parallel:
    every store into an output and every load from one indexes some axis by
    its variable `v` (or by c·v + t, 0 <= t < c, a block of a tiled loop),
    so no two iterations touch one element. Then each worker computes its
    elements exactly as one worker would.
    """
    loop = _loop_at(kernel.body, depth)
    if isinstance(loop, int):
        return (
            f"a split at depth {depth}: the loops down to it are not a perfect nest "
            f"(depth {loop} holds something other than one loop)"
        )
    outputs = {b.index for b in kernel.outputs}
    bounds = ir.loop_bounds(kernel.body)
    accesses: list[ir.Store | ir.VStore | ir.Load | ir.VLoad] = list(_stores(loop.body))
    accesses += [a for a in _loads(loop.body) if a.buffer.index in outputs]
    for access in accesses:
        if access.buffer.index in outputs and not _owned(access, loop.var, bounds):
            return (
                f"a split at depth {depth}: loop {loop.var} is not parallel (two of its "
                "iterations reach one output element, as a loop over blocks of K or along "
                "a softmax's row does)"
            )
    if not accesses:
        return f"a split at depth {depth}: loop {loop.var} writes no output"
    return None


def _owned(
    access: ir.Store | ir.VStore | ir.Load | ir.VLoad, var: str, bounds: dict[str, int]
) -> bool:
    """Whether some index of the access gives each value of `var` its own elements; a
    vector's lanes run along the last index only."""
    lanes = 1
    if isinstance(access, ir.VLoad):
        lanes = access.lanes
    elif isinstance(access, ir.VStore):
        lanes = vector_lanes(access.value)
    last = len(access.index) - 1
    return any(
        _owns(index, var, lanes if position == last else 1, bounds)
        for position, index in enumerate(access.index)
    )


def _loads(node: object) -> list[ir.Load | ir.VLoad]:
    """Every load inside a statement or expression tree."""
    if isinstance(node, (ir.Load, ir.VLoad)):
        return [node]
    if isinstance(node, tuple):
        return [x for item in node for x in _loads(item)]
    if hasattr(node, "__dataclass_fields__"):
        return [x for name in node.__dataclass_fields__ for x in _loads(getattr(node, name))]
    return []


def _stores(
    body: tuple[ir.Stmt, ...], scratch: frozenset[int] = frozenset()
) -> list[ir.Store | ir.VStore]:
    """The stores of `body` into buffers other than the scratch buffers it declares."""
    out: list[ir.Store | ir.VStore] = []
    for s in body:
        match s:
            case ir.Store() | ir.VStore():
                if s.buffer.index not in scratch:
                    out.append(s)
            case ir.For(_, _, inner):
                out.extend(_stores(inner, scratch))
            case ir.If(_, then, other):
                out.extend(_stores(then, scratch))
                out.extend(_stores(other, scratch))
            case ir.Scratch(buffer, inner):
                out.extend(_stores(inner, scratch | {buffer.index}))
            case ir.Let() | ir.Random() | ir.VLet():
                pass  # scalars and vectors of one iteration
            case _:
                assert_never(s)
    return out


def _work(body: tuple[ir.Stmt, ...]) -> int:
    total = 0
    for s in body:
        match s:
            case ir.For(_, bound, inner):
                total += bound * max(1, _work(inner))
            case ir.If(_, then, other):
                total += max(_work(then), _work(other))
            case ir.Scratch(_, inner):
                total += _work(inner)
            case _:
                total += 1
    return total


def splittable(kernel: ir.Kernel) -> bool:
    """Whether the kernel's outer loop may be shared among workers."""
    if len(kernel.body) != 1 or not isinstance(kernel.body[0], ir.For):
        return False
    loop = kernel.body[0]
    if loop.bound < 2 or _work(kernel.body) < WORK_THRESHOLD:
        return False
    outputs = {b.index for b in kernel.outputs}
    bounds = ir.loop_bounds(kernel.body)
    stores = _stores(loop.body)
    return bool(stores) and all(
        s.buffer.index in outputs and _owned(s, loop.var, bounds) for s in stores
    )


def _owns(index: ir.Index, var: str, width: int, bounds: dict[str, int]) -> bool:
    """Whether distinct values of `var` give disjoint elements along this index.

    True for `var` itself, and for `var * w + e` where e does not name `var`
    and stays in [0, w - width] over the loops' bounds (a tile's column
    block, a row of a chunk of rows): no two iterations touch one element.
    """
    if index == ir.IVar(var):
        return True  # a scalar or vector store at a position only this iteration names
    match index:
        case ir.IBin(ir.IntOp.ADD, ir.IBin(ir.IntOp.MUL, ir.IVar(v), ir.IConst(w)), rest):
            span = _span(rest, bounds, var)
            return v == var and span is not None and span[0] >= 0 and span[1] + width <= w
        case ir.IBin(ir.IntOp.MUL, ir.IVar(v), ir.IConst(w)):
            return v == var and width <= w
    return False


def _span(index: ir.Index, bounds: dict[str, int], var: str) -> tuple[int, int] | None:
    """The least and greatest values of an index over the loops' bounds; None if it names
    `var` or is not a sum of multiples of loop variables and constants."""
    match index:
        case ir.IConst(value):
            return (value, value)
        case ir.IVar(name):
            return None if name == var or name not in bounds else (0, bounds[name] - 1)
        case ir.IBin(ir.IntOp.ADD, left, right):
            a, b = _span(left, bounds, var), _span(right, bounds, var)
            return None if a is None or b is None else (a[0] + b[0], a[1] + b[1])
        case ir.IBin(ir.IntOp.MUL, left, ir.IConst(c)) if c >= 0:
            a = _span(left, bounds, var)
            return None if a is None else (a[0] * c, a[1] * c)
    return None
