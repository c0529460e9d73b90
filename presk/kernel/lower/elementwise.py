"""Elementwise lowering: one loop nest over the root's axes, one store per element.

The steps of a fusion group are computed in order inside that nest, each
from the values of the steps before it, as one expression; operands align
with the root by trailing position when names agree, else by name (the
reference's rule). A step may bind scalars before the store (a large
power's squarings, presk/kernel/lower/power.py). `dropout` is here too: a
draw and a selection per element.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from presk.kernel.ir import (
    Bin,
    BinOp,
    Buffer,
    Cmp,
    CmpOp,
    Const,
    Expr,
    Fn,
    FromIndex,
    IConst,
    IVar,
    Let,
    Libm,
    Load,
    Neg,
    Random,
    Select,
    Stmt,
    Store,
    Var,
)
from presk.kernel.lower.base import (
    ONE,
    ZERO,
    Axes,
    Launch,
    LoweringError,
    Names,
    PrimName,
    Step,
    align_positions,
    c,
    flat,
    load_aligned,
    nest,
)
from presk.kernel.lower.power import power

# Constants rounded once to the arithmetic type (80 digits leave no ties).
SQRT2 = Fraction(
    "1.4142135623730950488016887242096980785696718753769480731766797379907324784621070"
)
TWO_OVER_SQRT_PI = Fraction(
    "1.1283791670955125738961589031215451716881012586579977136881714434212849368829869"
)
INV_SQRT_2PI = Fraction(
    "0.39894228040143267793994605993438186847585863116493465766592582967065792589930183"
)

# A builder: the element's value from a binder of scalars (power.Bind) and its operands.
Builder = Callable[..., Expr]


def _binary(op: BinOp) -> Builder:
    return lambda _bind, left, right: Bin(op, left, right)


def _libm(fn: Libm) -> Builder:
    return lambda _bind, x: Fn(fn, x)


def _pure(build: Callable[..., Expr]) -> Builder:
    """A builder that binds nothing."""
    return lambda _bind, *operands: build(*operands)


def _cdf(x: Expr) -> Expr:
    """Φ(x) = (1 + erf(x / √2)) / 2."""
    return Bin(BinOp.DIV, Bin(BinOp.ADD, ONE, Fn(Libm.ERF, Bin(BinOp.DIV, x, Const(SQRT2)))), c(2))


def _gelu(x: Expr) -> Expr:
    return Bin(BinOp.MUL, x, _cdf(x))


def _gelu_slope(x: Expr) -> Expr:
    """Φ(x) + x·φ(x)."""
    pdf = Bin(
        BinOp.MUL,
        Fn(Libm.EXP, Bin(BinOp.DIV, Neg(Bin(BinOp.MUL, x, x)), c(2))),
        Const(INV_SQRT_2PI),
    )
    return Bin(BinOp.ADD, _cdf(x), Bin(BinOp.MUL, x, pdf))


def _erf_vjp(g: Expr, x: Expr) -> Expr:
    """g · 2/√π · exp(−x²)."""
    slope = Bin(BinOp.MUL, Const(TWO_OVER_SQRT_PI), Fn(Libm.EXP, Neg(Bin(BinOp.MUL, x, x))))
    return Bin(BinOp.MUL, g, slope)


def _sign(x: Expr) -> Expr:
    negative = Select(Cmp(CmpOp.LT, x, ZERO), c(-1), ZERO)
    return Select(Cmp(CmpOp.GT, x, ZERO), ONE, negative)


def _ylog(y: Expr, a: Expr) -> Expr:
    """y·log(a), with 0 where y = 0."""
    return Select(Cmp(CmpOp.EQ, y, ZERO), ZERO, Bin(BinOp.MUL, y, Fn(Libm.LOG, a)))


ELEMENTWISE: dict[PrimName, Builder] = {
    PrimName.ADD: _binary(BinOp.ADD),
    PrimName.SUB: _binary(BinOp.SUB),
    PrimName.MUL: _binary(BinOp.MUL),
    PrimName.DIV: _binary(BinOp.DIV),
    PrimName.POW: power,
    PrimName.NEG: _pure(Neg),
    PrimName.EXP: _libm(Libm.EXP),
    PrimName.LOG: _libm(Libm.LOG),
    PrimName.SQRT: _libm(Libm.SQRT),
    PrimName.TANH: _libm(Libm.TANH),
    PrimName.SIN: _libm(Libm.SIN),
    PrimName.COS: _libm(Libm.COS),
    PrimName.ERF: _libm(Libm.ERF),
    PrimName.GELU: _pure(_gelu),
    PrimName.RELU: _pure(lambda x: Select(Cmp(CmpOp.GT, x, ZERO), x, ZERO)),
    PrimName.ABS: _pure(lambda x: Select(Cmp(CmpOp.LT, x, ZERO), Neg(x), x)),
    PrimName.HEAVISIDE: _pure(lambda x: Select(Cmp(CmpOp.GT, x, ZERO), ONE, ZERO)),
    PrimName.YLOG: _pure(_ylog),
    PrimName.SIGN: _pure(_sign),
    PrimName.ERF_VJP: _pure(_erf_vjp),
    PrimName.GELU_VJP: _pure(lambda g, x: Bin(BinOp.MUL, g, _gelu_slope(x))),
    PrimName.REAL: _pure(lambda x: x),
}


def elementwise(launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """The nest of a fusion group (or of one elementwise primitive)."""
    out = launch.output
    vars_ = [names.loop() for _ in out.axes]
    lets: list[Stmt] = []

    def bind(value: Expr) -> Var:
        name = names.scalar()
        lets.append(Let(name, value))
        return Var(name)

    values: list[Expr] = []
    for step in launch.steps:
        args: list[Expr] = []
        for operand in step.operands:
            if isinstance(operand, Buffer):
                load = load_aligned(operand, step.axes, _vars_for(step.axes, out.axes, vars_))
                args.append(FromIndex(load) if operand.dtype == "i64" else load)
            elif isinstance(operand, int):
                args.append(values[operand])
            else:
                args.append(Const(Fraction(operand)))
        values.append(_builder(step.name)(bind, *args))
    store = Store(out, tuple(IVar(v) for v in vars_), values[-1])
    return nest(list(out.shape), vars_, (*lets, store))


def _builder(name: str) -> Builder:
    try:
        return ELEMENTWISE[PrimName(name)]
    except (ValueError, KeyError):
        raise LoweringError(f"`{name}` is not elementwise") from None


def _vars_for(axes: Axes, out_axes: Axes, out_vars: list[str]) -> list[str]:
    """Loop variables of a step's axes inside the root's nest."""
    return [out_vars[p] for p in align_positions(axes, out_axes)]


def dropout(step: Step, launch: Launch, names: Names) -> tuple[Stmt, ...]:
    """x / (1 − p) where the element's draw is at least p, else 0."""
    key, p, x = step.operands
    assert isinstance(key, Buffer) and isinstance(x, Buffer)
    rate = Const(Fraction(p)) if not isinstance(p, Buffer) else Load(p, ())
    out = launch.output
    vars_ = [names.loop() for _ in x.axes]
    u = names.scalar()
    at = tuple(IVar(v) for v in vars_)
    keep = Bin(BinOp.DIV, Load(x, at), Bin(BinOp.SUB, ONE, rate))
    body = (
        Random(u, key, flat(vars_, list(x.shape)) if vars_ else IConst(0)),
        Store(out, at, Select(Cmp(CmpOp.GE, Var(u), rate), keep, ZERO)),
    )
    return nest(list(x.shape), vars_, body)
