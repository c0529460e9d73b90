"""Walking PSK-Core: the operands an op reads, what a result needs, ops with operands renamed."""

from __future__ import annotations

from presk.core import ir
from presk.diagnostics import CompilerBug


def operands(op: ir.Op) -> list[ir.Operand]:
    """The operands an op reads."""
    match op:
        case ir.Prim(_, args) | ir.Call(_, _, args) | ir.GradOf(_, _, args):
            return list(args)
        case ir.Fold(_, _, stacked, _, init, extra):
            return [stacked, init, *extra]
        case ir.FoldVjp(_, _, _, stacked, _, init, ct):
            return [stacked, init, ct]
        case ir.FoldFwd(_, _, stacked, _, init):
            return [stacked, init]
        case ir.FoldBwd(_, _, stacked, _, inputs, residuals, ct):
            return [stacked, inputs, residuals, ct]
        case ir.Field(tree) | ir.Slice(tree):
            return [tree]
        case ir.MakeTuple(items):
            return list(items)
        case ir.Get(tuple_):
            return [tuple_]
    raise CompilerBug(f"unknown op {op!r}")


def live(fn: ir.Function) -> set[int]:
    """The instructions whose values the result reads, directly or through others."""
    found: set[int] = set()
    if isinstance(fn.result, ir.Ref):
        found.add(fn.result.index)
    for instr in reversed(fn.body):
        if instr.index in found:
            for o in operands(instr.op):
                if isinstance(o, ir.Ref):
                    found.add(o.index)
    return found


def remap_operand(op: ir.Operand, m: dict[int, ir.Operand]) -> ir.Operand:
    return m[op.index] if isinstance(op, ir.Ref) else op


def remap(op: ir.Op, m: dict[int, ir.Operand]) -> ir.Op:
    """The op with its operands renamed through `m`."""

    def r(o: ir.Operand) -> ir.Operand:
        return remap_operand(o, m)

    match op:
        case ir.Prim(name, args, attrs):
            return ir.Prim(name, tuple(r(a) for a in args), attrs)
        case ir.Call(fn, dims, args):
            return ir.Call(fn, dims, tuple(r(a) for a in args))
        case ir.GradOf(fn, dims, args, wrt, value):
            return ir.GradOf(fn, dims, tuple(r(a) for a in args), wrt, value)
        case ir.Fold(fn, dims, stacked, count, init, extra):
            return ir.Fold(fn, dims, r(stacked), count, r(init), tuple(r(e) for e in extra))
        case ir.FoldVjp(fn, dims, forward, stacked, count, init, ct):
            return ir.FoldVjp(fn, dims, forward, r(stacked), count, r(init), r(ct))
        case ir.FoldFwd(fn, dims, stacked, count, init):
            return ir.FoldFwd(fn, dims, r(stacked), count, r(init))
        case ir.FoldBwd(fn, dims, stacked, count, inputs, residuals, ct):
            return ir.FoldBwd(fn, dims, r(stacked), count, r(inputs), r(residuals), r(ct))
        case ir.Field(tree, name):
            return ir.Field(r(tree), name)
        case ir.Slice(tree, index):
            return ir.Slice(r(tree), index)
        case ir.MakeTuple(items):
            return ir.MakeTuple(tuple(r(i) for i in items))
        case ir.Get(tuple_, index):
            return ir.Get(r(tuple_), index)
    raise CompilerBug(f"unknown op {op!r}")
