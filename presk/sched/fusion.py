"""Fusion groups: chains of elementwise primitives that share one loop nest.

A member of a group is an elementwise instruction with exactly one use, by
an elementwise instruction whose result has the member's type (so nothing
is recomputed under a broadcast), and which is not its function's result.
The group's root is the first instruction that is not a member; it is the
only one stored, and every member is computed in the root's arithmetic type.
"""

from __future__ import annotations

from presk.core import ir
from presk.core.walk import operands
from presk.kernel.lower import ELEMENTWISE

# `real` of indices is a load conversion, not worth a group of its own.
FUSABLE = frozenset(set(ELEMENTWISE) - {"real"})


def members(fn: ir.Function) -> set[int]:
    """Indices of the instructions computed inside their consumer's nest."""
    uses: dict[int, int] = {}
    consumer: dict[int, ir.Instr] = {}
    for instr in fn.body:
        for o in operands(instr.op):
            if isinstance(o, ir.Ref):
                uses[o.index] = uses.get(o.index, 0) + 1
                consumer[o.index] = instr
    if isinstance(fn.result, ir.Ref):
        uses[fn.result.index] = uses.get(fn.result.index, 0) + 1
    out: set[int] = set()
    for instr in fn.body:
        op = instr.op
        if not (isinstance(op, ir.Prim) and op.name in FUSABLE):
            continue
        if uses.get(instr.index) != 1 or instr.index not in consumer:
            continue
        user = consumer[instr.index]
        if isinstance(user.op, ir.Prim) and user.op.name in FUSABLE and user.type == instr.type:
            out.add(instr.index)
    return out


# The products a bias epilogue may finish (kernel/lower/epilogue.py).
PRODUCTS = frozenset(("dot", "ein", "dot_vjp_l", "dot_vjp_r", "ein_vjp_l", "ein_vjp_r"))


def epilogue_adds(fn: ir.Function, fused: set[int]) -> dict[int, int]:
    """For each product whose value one `add` alone reads, that add's index.

    The add must be a launch of its own (not a member of another group) and of
    the product's type, and the product not the function's result: then the
    product's kernel can finish with the add (where a plan states its epilogue).
    """
    uses: dict[int, list[ir.Instr]] = {}
    for instr in fn.body:
        for o in operands(instr.op):
            if isinstance(o, ir.Ref):
                uses.setdefault(o.index, []).append(instr)
    result = fn.result.index if isinstance(fn.result, ir.Ref) else None
    out: dict[int, int] = {}
    for instr in fn.body:
        op = instr.op
        readers = uses.get(instr.index, [])
        if not (isinstance(op, ir.Prim) and op.name in PRODUCTS) or instr.index == result:
            continue
        if len(readers) != 1:
            continue
        add = readers[0]
        if isinstance(add.op, ir.Prim) and add.op.name == "add" and add.index not in fused:
            if add.type == instr.type:
                out[instr.index] = add.index
    return out


def groups(fn: ir.Function) -> list[list[ir.Instr]]:
    """Every launch group of a function's primitives: members first, the root last."""
    fused = members(fn)
    by_index = {i.index: i for i in fn.body}
    out: list[list[ir.Instr]] = []
    for instr in fn.body:
        if not isinstance(instr.op, ir.Prim) or instr.index in fused:
            continue
        out.append(_collect(instr, fused, by_index))
    return out


def _collect(root: ir.Instr, fused: set[int], by_index: dict[int, ir.Instr]) -> list[ir.Instr]:
    """A root and the members it absorbs, producers first."""
    group: list[ir.Instr] = []

    def visit(i: ir.Instr) -> None:
        for o in operands(i.op):
            if isinstance(o, ir.Ref) and o.index in fused:
                visit(by_index[o.index])
        group.append(i)

    visit(root)
    return group


def sched_text(module: ir.Module) -> str:
    """`presk dump --stage sched`: each function's launch groups."""
    from presk.core.text import instr_text

    lines: list[str] = []
    for fn in module.functions:
        fn_groups = groups(fn)
        if not fn_groups:
            continue
        prims = sum(len(g) for g in fn_groups)
        lines.append(f"fn {fn.name}: {len(fn_groups)} launches, {prims} without fusion")
        for group in fn_groups:
            root = group[-1]
            site = f"{fn.name}/%{root.index}" + (f" ({root.name})" if root.name else "")
            label = "group" if len(group) > 1 else "launch"
            lines.append(f"  {label} {site}")
            lines.extend(f"    {instr_text(i)}" for i in group)
    return "\n".join(lines) + "\n"
