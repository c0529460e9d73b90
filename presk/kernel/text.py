"""The text form of PSK-Kernel, as `presk dump --stage kernel` prints it.

kernel dot (%0 : f32[batch: 4, 3], %1 : f32[3, 2]) -> %2 : f32[batch: 4, 2] {
  for i0 in 0..4 {
    %2[i0, i2] = (%2[i0, i2] + (s0 * %1[i1, i2]))
"""

from __future__ import annotations

from fractions import Fraction
from typing import assert_never

from presk.kernel import ir


def buffer_type(buffer: ir.Buffer) -> str:
    """`%2 : f32[batch: 4, 2]`."""
    axes = ", ".join(f"{name}: {size}" if name else str(size) for name, size in buffer.axes)
    return f"%{buffer.index} : {buffer.dtype}[{axes}]"


def index(expr: ir.Index) -> str:
    """An index expression, fully parenthesised."""
    match expr:
        case ir.IVar(name):
            return name
        case ir.IConst(value):
            return str(value)
        case ir.IBin(op, left, right):
            return f"({index(left)} {op} {index(right)})"
        case _:
            assert_never(expr)


def _const(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return repr(float(value))


def expr(e: ir.Expr | ir.Index | ir.Cmp) -> str:
    """An expression, fully parenthesised."""
    match e:
        case ir.Load(buffer, idx):
            return f"%{buffer.index}[{', '.join(index(i) for i in idx)}]"
        case ir.Var(name):
            return name
        case ir.Const(value):
            return _const(value)
        case ir.FromIndex(value):
            return f"real({expr(value)})"
        case ir.Bin(op, left, right):
            if op in (ir.BinOp.MAX, ir.BinOp.MIN):
                return f"{op}({expr(left)}, {expr(right)})"
            return f"({expr(left)} {op} {expr(right)})"
        case ir.Neg(operand):
            return f"(-{expr(operand)})"
        case ir.Fn(name, arg):
            return f"{name}({expr(arg)})"
        case ir.Cmp(op, left, right):
            return f"({expr(left)} {op} {expr(right)})"
        case ir.Select(cond, then, other):
            return f"({expr(cond)} ? {expr(then)} : {expr(other)})"
        case ir.IVar() | ir.IConst() | ir.IBin():
            return index(e)
        case _:
            assert_never(e)


def vector_lanes(v: ir.VExpr) -> int:
    """The lanes of a vector expression."""
    match v:
        case ir.VLoad(_, _, lanes) | ir.Splat(_, lanes) | ir.VVar(_, lanes):
            return lanes
        case ir.VBin(_, left, _):
            return vector_lanes(left)
        case _:
            assert_never(v)


def vexpr(v: ir.VExpr) -> str:
    """A vector expression: `<v>` marks a vector load, `splat` a broadcast scalar."""
    match v:
        case ir.VLoad(buffer, idx, lanes):
            return f"<v>%{buffer.index}[{', '.join(index(i) for i in idx)}..+{lanes}]"
        case ir.Splat(value, _):
            return f"splat({expr(value)})"
        case ir.VBin(op, left, right):
            return f"({vexpr(left)} {op} {vexpr(right)})"
        case ir.VVar(name):
            return name
        case _:
            assert_never(v)


def stmts(body: tuple[ir.Stmt, ...], depth: int) -> list[str]:
    pad = "  " * depth
    lines: list[str] = []
    for s in body:
        match s:
            case ir.For(var, bound, inner):
                lines.append(f"{pad}for {var} in 0..{bound} {{")
                lines.extend(stmts(inner, depth + 1))
                lines.append(f"{pad}}}")
            case ir.Let(name, value, _):
                lines.append(f"{pad}{name} = {expr(value)}")
            case ir.Store(buffer, idx, value):
                lines.append(
                    f"{pad}%{buffer.index}[{', '.join(index(i) for i in idx)}] = {expr(value)}"
                )
            case ir.If(cond, then, other):
                lines.append(f"{pad}if {expr(cond)} {{")
                lines.extend(stmts(then, depth + 1))
                if other:
                    lines.append(f"{pad}}} else {{")
                    lines.extend(stmts(other, depth + 1))
                lines.append(f"{pad}}}")
            case ir.Random(name, key, counter):
                lines.append(f"{pad}{name} = uniform(%{key.index}, {index(counter)})")
            case ir.VLet(name, value, _):
                lines.append(f"{pad}{name} <v= {vexpr(value)}")
            case ir.VStore(buffer, idx, value):
                where = ", ".join(index(i) for i in idx)
                lines.append(
                    f"{pad}%{buffer.index}[{where}..+{vector_lanes(value)}] <v= {vexpr(value)}"
                )
            case ir.Scratch(buffer, inner):
                lines.append(f"{pad}scratch {buffer_type(buffer)} {{")
                lines.extend(stmts(inner, depth + 1))
                lines.append(f"{pad}}}")
            case _:
                assert_never(s)
    return lines


def kernel_text(k: ir.Kernel) -> str:
    """A whole kernel."""
    inputs = ", ".join(buffer_type(b) for b in k.inputs)
    outputs = ", ".join(buffer_type(b) for b in k.outputs)
    head = "kernel split" if k.split else "kernel"
    if k.split and k.split_depth:
        head = f"kernel split@{k.split_depth}"
    lines = [f"{head} {k.name} ({inputs}) -> {outputs} {{"]
    lines.extend(stmts(k.body, 1))
    lines.append("}")
    return "\n".join(lines) + "\n"
