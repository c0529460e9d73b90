"""`--unroll-stack`: every fold over a stack written as one call per layer.

A `fold F over θs × L from x` becomes L pairs `slice θs[l]` / `call F(·, x)`,
each call taking the previous one's result. Semantics are unchanged: the
fold is the same sequence of calls.
"""

from __future__ import annotations

from presk.core import ir
from presk.core.walk import remap
from presk.elab.presburger import Lin
from presk.elab.ty import Params

# The most layers a stack is written out as: a listing of one call per layer is for
# reading, and a count beyond this (`--const L=10^9`) would only fill memory.
MAX_LAYERS = 1 << 16


class UnrollError(Exception):
    """A stack too deep to write one call per layer (one line for the user)."""


def check_layers(count: int, what: str) -> None:
    """Refuse, before anything is built, a stack of more than MAX_LAYERS layers."""
    if count > MAX_LAYERS:
        raise UnrollError(
            f"{what}: a stack of {count} layers is not written one call per layer "
            f"(at most {MAX_LAYERS}); keep the fold"
        )


def _int_count(size: Lin) -> int | None:
    """A constant, whole layer count; None when it depends on a dimension."""
    if size.is_const and size.const.denominator == 1:
        return int(size.const)
    return None


def run(module: ir.Module) -> ir.Module:
    """The module with its folds unrolled (folds of a symbolic length are kept)."""
    return ir.Module(tuple(_function(fn) for fn in module.functions))


def _function(fn: ir.Function) -> ir.Function:
    if not any(isinstance(i.op, ir.Fold) for i in fn.body):
        return fn
    m: dict[int, ir.Operand] = {p.index: ir.Ref(p.index, p.name) for p in fn.params}
    body: list[ir.Instr] = []

    def emit(name: str | None, ty: object, op: ir.Op, span: object) -> ir.Ref:
        index = len(fn.params) + len(body)
        body.append(ir.Instr(index, name, ty, op, span))  # type: ignore[arg-type]
        return ir.Ref(index, name)

    for instr in fn.body:
        op = remap(instr.op, m)
        count = _int_count(op.count) if isinstance(op, ir.Fold) else None
        if isinstance(op, ir.Fold) and count is not None:
            check_layers(count, f"--unroll-stack, `{op.fn}` in `{fn.name}`")
            stacked_ty = _type_of(fn, body, op.stacked)
            assert isinstance(stacked_ty, Params)
            layer_ty = Params(stacked_ty.inst.unstacked())
            value: ir.Operand = op.init
            for layer in range(count):
                slice_ref = emit(None, layer_ty, ir.Slice(op.stacked, layer), instr.span)
                name = instr.name if layer == count - 1 else None
                value = emit(
                    name, instr.type, ir.Call(op.fn, op.dims, (slice_ref, value)), instr.span
                )
            m[instr.index] = value
        else:
            m[instr.index] = emit(instr.name, instr.type, op, instr.span)
    result = m[fn.result.index] if isinstance(fn.result, ir.Ref) else fn.result
    return ir.Function(
        fn.name, fn.dims, fn.params, fn.ret, fn.effects, tuple(body), result, fn.span
    )


def _type_of(fn: ir.Function, body: list[ir.Instr], op: ir.Operand) -> object:
    assert isinstance(op, ir.Ref)
    for p in fn.params:
        if p.index == op.index:
            return p.type
    for instr in body:
        if instr.index == op.index:
            return instr.type
    raise KeyError(op.index)
