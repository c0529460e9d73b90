"""Adjoint rules: one entry per differentiable primitive.

A rule receives the emitter, the forward instruction's operands as they are
in the function being built, the result `y`, the cotangent `ct`, and returns
one contribution per operand (None where the operand has no adjoint). Rules
emit ordinary PSK-Core instructions; the primitives that exist only for
adjoints (`sum_to`, `reduce_vjp`, `dot_vjp_l`, …) are evaluated by the
reference interpreter like any other. `sum_to` between equal types is
omitted: the cotangent already has the operand's shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from presk.core import ir
from presk.elab.ty import Type


class Emitter(Protocol):
    """What a rule may do: emit a primitive with a result type."""

    def prim(
        self,
        name: str,
        args: tuple[ir.Operand, ...],
        ty: Type,
        attrs: tuple[tuple[str, ir.AttrValue], ...] = (),
    ) -> ir.Operand: ...


@dataclass(frozen=True)
class Site:
    """A forward instruction seen by a rule."""

    prim: ir.Prim
    args: tuple[ir.Operand, ...]  # in the function being built
    arg_types: tuple[Type | None, ...]
    y: ir.Operand
    y_type: Type


Contribs = list[ir.Operand | None]
Rule = Callable[[Emitter, Site, ir.Operand], Contribs]


def _sum_to(e: Emitter, site: Site, value: ir.Operand, index: int) -> ir.Operand | None:
    """Reduce a contribution of the result's shape to operand `index`'s shape."""
    ty = site.arg_types[index]
    if ty is None:
        return None  # a literal operand has no adjoint
    if ty == site.y_type:
        return value
    return e.prim("sum_to", (value, site.args[index]), ty)


def _lit(value: int) -> ir.Lit:
    return ir.Lit(Fraction(value))


def _add(e: Emitter, s: Site, ct: ir.Operand) -> Contribs:
    return [_sum_to(e, s, ct, 0), _sum_to(e, s, ct, 1)]


def _sub(e: Emitter, s: Site, ct: ir.Operand) -> Contribs:
    negated = e.prim("neg", (ct,), s.y_type) if s.arg_types[1] is not None else ct
    return [_sum_to(e, s, ct, 0), _sum_to(e, s, negated, 1)]


def _mul(e: Emitter, s: Site, ct: ir.Operand) -> Contribs:
    a, b = s.args
    da = e.prim("mul", (ct, b), s.y_type) if s.arg_types[0] is not None else None
    db = e.prim("mul", (ct, a), s.y_type) if s.arg_types[1] is not None else None
    return [
        _sum_to(e, s, da, 0) if da is not None else None,
        _sum_to(e, s, db, 1) if db is not None else None,
    ]


def _div(e: Emitter, s: Site, ct: ir.Operand) -> Contribs:
    _a, b = s.args
    da = e.prim("div", (ct, b), s.y_type) if s.arg_types[0] is not None else None
    db = None
    if s.arg_types[1] is not None:
        # d(a/b)/db = −(a/b)/b = −y/b
        scaled = e.prim("mul", (ct, s.y), s.y_type)
        quotient = e.prim("div", (scaled, b), s.y_type)
        db = e.prim("neg", (quotient,), s.y_type)
    return [
        _sum_to(e, s, da, 0) if da is not None else None,
        _sum_to(e, s, db, 1) if db is not None else None,
    ]


def _pow(e: Emitter, s: Site, ct: ir.Operand) -> Contribs:
    a, b = s.args
    if isinstance(b, ir.Lit):
        if b.value == 0:
            return [None, None]  # a^0 is constant
        # d(a^n)/da = n·a^(n−1), with n exact; a^1 is a itself.
        lower = a if b.value == 2 else e.prim("pow", (a, ir.Lit(b.value - 1)), s.y_type)
        slope = e.prim("mul", (lower, b), s.y_type)
        return [_sum_to(e, s, e.prim("mul", (ct, slope), s.y_type), 0), None]
    da = db = None
    if s.arg_types[0] is not None:
        exponent = e.prim("sub", (b, _lit(1)), s.arg_types[1] or s.y_type)
        lower = e.prim("pow", (a, exponent), s.y_type)
        slope = e.prim("mul", (lower, b), s.y_type)
        da = _sum_to(e, s, e.prim("mul", (ct, slope), s.y_type), 0)
    if s.arg_types[1] is not None:
        # y·log a, taken as 0 where y = 0 (a zero base), where the product is 0·(−∞).
        ylog = e.prim("ylog", (s.y, a), s.y_type)
        db = _sum_to(e, s, e.prim("mul", (ct, ylog), s.y_type), 1)
    return [da, db]


def _unary(build: Callable[[Emitter, Site, ir.Operand], ir.Operand]) -> Rule:
    def rule(e: Emitter, s: Site, ct: ir.Operand) -> Contribs:
        return [build(e, s, ct)]

    return rule


def _times(e: Emitter, s: Site, ct: ir.Operand, factor: ir.Operand) -> ir.Operand:
    return e.prim("mul", (ct, factor), s.y_type)


RULES: dict[str, Rule] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "neg": _unary(lambda e, s, ct: e.prim("neg", (ct,), s.y_type)),
    "exp": _unary(lambda e, s, ct: _times(e, s, ct, s.y)),
    "log": _unary(lambda e, s, ct: e.prim("div", (ct, s.args[0]), s.y_type)),
    "sqrt": _unary(
        lambda e, s, ct: e.prim("div", (ct, e.prim("mul", (s.y, _lit(2)), s.y_type)), s.y_type)
    ),
    "tanh": _unary(
        lambda e, s, ct: _times(
            e,
            s,
            ct,
            e.prim("sub", (_lit(1), e.prim("mul", (s.y, s.y), s.y_type)), s.y_type),
        )
    ),
    "sin": _unary(lambda e, s, ct: _times(e, s, ct, e.prim("cos", (s.args[0],), s.y_type))),
    "cos": _unary(
        lambda e, s, ct: e.prim(
            "neg", (_times(e, s, ct, e.prim("sin", (s.args[0],), s.y_type)),), s.y_type
        )
    ),
    "erf": _unary(lambda e, s, ct: e.prim("erf_vjp", (ct, s.args[0]), s.y_type)),
    "gelu": _unary(lambda e, s, ct: e.prim("gelu_vjp", (ct, s.args[0]), s.y_type)),
    "relu": _unary(lambda e, s, ct: _times(e, s, ct, e.prim("heaviside", (s.args[0],), s.y_type))),
    "abs": _unary(lambda e, s, ct: _times(e, s, ct, e.prim("sign", (s.args[0],), s.y_type))),
    "sum": lambda e, s, ct: [_reduce(e, s, ct, "sum")],
    "mean": lambda e, s, ct: [_reduce(e, s, ct, "mean")],
    "max": lambda e, s, ct: [_reduce(e, s, ct, "max")],
    "dot": lambda e, s, ct: [
        e.prim("dot_vjp_l", (ct, s.args[1]), _ty(s, 0)) if s.arg_types[0] else None,
        e.prim("dot_vjp_r", (s.args[0], ct), _ty(s, 1)) if s.arg_types[1] else None,
    ],
    "ein": lambda e, s, ct: [
        e.prim("ein_vjp_l", (ct, s.args[1], s.args[0]), _ty(s, 0), s.prim.attrs)
        if s.arg_types[0]
        else None,
        e.prim("ein_vjp_r", (ct, s.args[0], s.args[1]), _ty(s, 1), s.prim.attrs)
        if s.arg_types[1]
        else None,
    ],
    "softmax": lambda e, s, ct: [
        e.prim("softmax_vjp", (ct, s.y), s.y_type, s.prim.attrs),
        None,
    ],
    "log_softmax": lambda e, s, ct: [e.prim("log_softmax_vjp", (ct, s.y), s.y_type, s.prim.attrs)],
    "cross_entropy": lambda e, s, ct: [
        e.prim("cross_entropy_vjp", (ct, s.args[0], s.args[1]), _ty(s, 0)),
        None,
    ],
    "embed": lambda e, s, ct: [e.prim("embed_vjp", (ct, s.args[1], s.args[0]), _ty(s, 0)), None],
    "merge": lambda e, s, ct: [_shape(e, s, ct)],
    "split": lambda e, s, ct: [_shape(e, s, ct)],
    "split_heads": lambda e, s, ct: [_shape(e, s, ct)],
    "merge_heads": lambda e, s, ct: [_shape(e, s, ct)],
    "dropout": lambda e, s, ct: [
        None,
        None,
        e.prim("dropout", (s.args[0], s.args[1], ct), s.y_type),
    ],
}


def _ty(s: Site, index: int) -> Type:
    ty = s.arg_types[index]
    assert ty is not None
    return ty


def _reduce(e: Emitter, s: Site, ct: ir.Operand, kind: str) -> ir.Operand:
    attrs = (("kind", kind), *s.prim.attrs)
    # sum and mean read only the operand's shape; max also compares with the result.
    args = (ct, s.args[0], s.y) if kind == "max" else (ct, s.args[0])
    return e.prim("reduce_vjp", args, _ty(s, 0), attrs)


def _shape(e: Emitter, s: Site, ct: ir.Operand) -> ir.Operand:
    """The inverse layout change, back to the operand's axes."""
    attrs = (("op", s.prim.name), *s.prim.attrs)
    return e.prim("shape_vjp", (ct, s.args[0]), _ty(s, 0), attrs)
