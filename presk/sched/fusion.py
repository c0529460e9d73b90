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


def _readers(fn: ir.Function) -> dict[int, list[ir.Instr | None]]:
    """Who reads each instruction's value, in order (None: the function's result)."""
    out: dict[int, list[ir.Instr | None]] = {}
    for instr in fn.body:
        for o in operands(instr.op):
            if isinstance(o, ir.Ref):
                out.setdefault(o.index, []).append(instr)
    if isinstance(fn.result, ir.Ref):
        out.setdefault(fn.result.index, []).append(None)
    return out


def _sole_reader(readers: dict[int, list[ir.Instr | None]], index: int) -> ir.Instr | None:
    """The one instruction that reads `index`, if exactly one reads it (the result is none)."""
    found = readers.get(index, [])
    return found[0] if len(found) == 1 else None


def members(fn: ir.Function) -> set[int]:
    """Indices of the instructions computed inside their consumer's nest."""
    readers = _readers(fn)
    out: set[int] = set()
    for instr in fn.body:
        op = instr.op
        if not (isinstance(op, ir.Prim) and op.name in FUSABLE):
            continue
        user = _sole_reader(readers, instr.index)
        if user is None:
            continue
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
    readers = _readers(fn)
    out: dict[int, int] = {}
    for instr in fn.body:
        op = instr.op
        if not (isinstance(op, ir.Prim) and op.name in PRODUCTS):
            continue
        add = _sole_reader(readers, instr.index)
        if add is None or add.index in fused or add.type != instr.type:
            continue
        if isinstance(add.op, ir.Prim) and add.op.name == "add":
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
