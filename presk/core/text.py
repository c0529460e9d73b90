"""The text form of PSK-Core, as `presk dump --stage core` prints it.

One instruction per line: `%4 : ℝ[batch: B, 1] = sub ŷ, y`. A binding the
source named prints by its name; the others by their index.
"""

from __future__ import annotations

from fractions import Fraction

from presk.core import ir
from presk.elab.presburger import Lin


def _number(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    as_float = float(value)
    if Fraction(repr(as_float)) == value:
        return repr(as_float)
    return f"{value.numerator}/{value.denominator}"


def operand(op: ir.Operand) -> str:
    """An operand: a binding's name or `%N`, or a literal."""
    match op:
        case ir.Ref(index, name):
            return name if name else f"%{index}"
        case ir.Lit(value):
            return _number(value)


def _dims(dims: tuple[tuple[str, Lin], ...]) -> str:
    if not dims:
        return ""
    return "{" + ", ".join(f"{name} = {size}" for name, size in dims) + "}"


def _attr(value: ir.AttrValue) -> str:
    match value:
        case tuple() if value and isinstance(value[0], tuple):
            return ", ".join(f"{pair[0]}→{pair[1]}" for pair in value if isinstance(pair, tuple))
        case tuple():
            return ", ".join(str(v) for v in value)
    return str(value)


def op_text(op: ir.Op) -> str:
    """The right-hand side of an instruction."""
    match op:
        case ir.Prim("pow", (base, ir.Lit() as exponent)):
            return f"pow {operand(exponent)} {operand(base)}"
        case ir.Prim("ein", args, attrs):
            out = _attr(op.attr("out"))
            text = f"ein[{out}] " + ", ".join(operand(a) for a in args)
            relabel = op.attr("relabel")
            return text + (f" relabel {_attr(relabel)}" if relabel else "")
        case ir.Prim(name, args, attrs):
            parts = [name]
            rest = list(args)
            for key, value in attrs:
                if key == "axis":
                    parts.append(f"axis {value}")
                else:
                    parts.append(f"{key} {_attr(value)}")
            where = ""
            if name == "softmax" and len(rest) == 2:
                where = f" where {operand(rest.pop())}"
            if rest:
                parts.append(", ".join(operand(a) for a in rest))
            return " ".join(parts) + where
        case ir.Call(fn, dims, args):
            return f"call {fn}{_dims(dims)}(" + ", ".join(operand(a) for a in args) + ")"
        case ir.GradOf(fn, dims, args, wrt, value):
            head = "value_and_grad" if value else "grad"
            at = "" if wrt is None else f"[{wrt}]"
            return f"{head}{at} {fn}{_dims(dims)}(" + ", ".join(operand(a) for a in args) + ")"
        case ir.Fold(fn, dims, stacked, count, init, _):
            return f"fold {fn}{_dims(dims)} over {operand(stacked)} × {count} from {operand(init)}"
        case ir.FoldVjp(fn, dims, forward, stacked, count, init, ct):
            return (
                f"fold_vjp {fn}{_dims(dims)} of {forward} over {operand(stacked)} × {count} "
                f"from {operand(init)}, ct {operand(ct)}"
            )
        case ir.FoldFwd(fn, dims, stacked, count, init):
            over = f"over {operand(stacked)} × {count} from {operand(init)}"
            return f"fold_fwd {fn}{_dims(dims)} {over}"
        case ir.FoldBwd(fn, dims, stacked, count, inputs, residuals, ct):
            return (
                f"fold_bwd {fn}{_dims(dims)} over {operand(stacked)} × {count} inputs "
                f"{operand(inputs)} residuals {operand(residuals)}, ct {operand(ct)}"
            )
        case ir.Field(tree, name):
            return f"field {operand(tree)}.{name}"
        case ir.Slice(tree, index):
            return f"slice {operand(tree)}[{index}]"
        case ir.MakeTuple(items):
            return "tuple " + ", ".join(operand(item) for item in items)
        case ir.Get(tuple_, index):
            return f"get {operand(tuple_)}.{index}"


def instr_text(instr: ir.Instr) -> str:
    name = instr.name if instr.name else f"%{instr.index}"
    return f"{name} : {instr.type} = {op_text(instr.op)}"


def header(fn: ir.Function) -> str:
    """`fn name{dims}(params) -> T [uses E]`."""
    dims = "{" + " ".join(fn.dims) + "}" if fn.dims else ""
    params = ", ".join(
        f"{p.name} : {p.type}" + (f" = {_number(p.default)}" if p.default is not None else "")
        for p in fn.params
    )
    effects = f" uses {', '.join(fn.effects)}" if fn.effects else ""
    return f"fn {fn.name}{dims}({params}) -> {fn.ret}{effects}"


def function_text(fn: ir.Function) -> str:
    lines = [header(fn) + " {"]
    lines.extend("  " + instr_text(instr) for instr in fn.body)
    lines.append(f"  return {operand(fn.result)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def module_text(module: ir.Module) -> str:
    """Every function of a Core module."""
    return "".join(function_text(fn) for fn in module.functions)
