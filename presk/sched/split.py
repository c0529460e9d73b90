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
    (loop,) = kernel.body
    assert isinstance(loop, ir.For)
    return loop.bound


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
    stores = _stores(loop.body)
    return bool(stores) and all(
        s.buffer.index in outputs and any(_owns(i, loop.var, _width(s)) for i in s.index)
        for s in stores
    )


def _width(store: ir.Store | ir.VStore) -> int:
    """Elements a store writes along its last index (lanes for a vector store)."""
    if isinstance(store, ir.VStore):
        return vector_lanes(store.value)
    return 1


def _owns(index: ir.Index, var: str, width: int) -> bool:
    """Whether distinct values of `var` give disjoint elements along this index.

    True for `var` itself, and for `var * w + c` with 0 <= c and c + width <= w
    (a tile's column block): no two iterations of the loop write one element.
    """
    if index == ir.IVar(var):
        return True  # a scalar or vector store at a position only this iteration names
    match index:
        case ir.IBin(ir.IntOp.ADD, ir.IBin(ir.IntOp.MUL, ir.IVar(v), ir.IConst(w)), ir.IConst(c)):
            return v == var and c >= 0 and c + width <= w
    return False
