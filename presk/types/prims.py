"""Typing rules of the primitives, one function per primitive, in one table.

Each rule receives the checker, the function context and the call node,
checks the arguments, and emits one PSK-Core `Prim` instruction with the
result type, the static attributes the interpreter needs (axis names,
relabellings) and the regularity class the primitive imposes. `RULES` maps
every primitive name to its rule; `DIFFERENTIABLE` lists those with an
adjoint (a test checks both tables against each other).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from presk.core import ir
from presk.diagnostics import Label, Span
from presk.elab.presburger import Lin, NonLinear
from presk.elab.program import ConstError, lin_eval
from presk.elab.ty import SCALAR, Axis, Elem, Hyper, KeyT, Tensor, Type
from presk.syntax import ast
from presk.types import regularity as regs
from presk.types.regularity import Deps, Reg
from presk.types.shapes import ShapeError, broadcast
from presk.types.values import Abort, Denot, FnCtx, Val


class Checker(Protocol):
    """What the rules need of the checker (presk/types/check.py), which imports this
    module: a protocol rather than the class keeps the import graph free of cycles."""

    def fail(
        self,
        code: str,
        message: str,
        span: Span,
        label: str,
        *,
        secondary: tuple[Label, ...] = (),
        help: str | None = None,
        note: str | None = None,
    ) -> Abort: ...

    def shape_fail(self, error: ShapeError, span: Span) -> Abort: ...

    def expr(self, ctx: FnCtx, node: ast.Expr) -> Denot: ...

    def value(self, ctx: FnCtx, denot: Denot, span: Span) -> Val: ...

    def to_real(self, ctx: FnCtx, val: Val, span: Span) -> Val: ...

    def real_operand(self, ctx: FnCtx, node: ast.Expr) -> Val: ...

    def emit_prim(
        self,
        ctx: FnCtx,
        name: str,
        ty: Type,
        args: tuple[Val, ...],
        span: Span,
        attrs: tuple[tuple[str, ir.AttrValue], ...] = (),
        reg: Reg = Reg.SMOOTH,
        deps: Deps | None = None,
    ) -> Val: ...


@dataclass
class Args:
    """A primitive call's arguments sorted by form."""

    positional: list[tuple[Val, ast.Expr]]
    axes: list[ast.Ident]
    keywords: dict[str, tuple[ast.Expr, ast.KwArg]]
    dims: list[tuple[str, Lin, ast.DimArg]]


Rule = Callable[[Checker, FnCtx, str, ast.Call, Args], Val]


def apply(checker: Checker, ctx: FnCtx, name: str, node: ast.Call) -> Val:
    """Type and emit a primitive call."""
    positional: list[tuple[Val, ast.Expr]] = []
    axes: list[ast.Ident] = []
    keywords: dict[str, tuple[ast.Expr, ast.KwArg]] = {}
    dims: list[tuple[str, Lin, ast.DimArg]] = []
    for arg in node.args:
        match arg:
            case ast.PosArg(value):
                val = checker.value(ctx, checker.expr(ctx, value), value.span)
                positional.append((val, value))
            case ast.AxisArg(ident):
                axes.append(ident)
            case ast.KwArg(ident, value):
                keywords[ident.name] = (value, arg)
            case ast.DimArg(ident, size):
                dims.append((ident.name, _dim_size(checker, ctx, size), arg))
    return RULES[name](checker, ctx, name, node, Args(positional, axes, keywords, dims))


def _dim_size(checker: Checker, ctx: FnCtx, size: ast.Expr) -> Lin:
    info = ctx.info
    try:
        return lin_eval(
            info.file, size, lambda n: Lin.var(n) if n in info.dims or n in info.file.dims else None
        )
    except ConstError as error:
        raise checker.fail(error.code, error.message, error.span, error.label) from None


def _arity(checker: Checker, name: str, node: ast.Call, args: Args, count: int) -> None:
    if len(args.positional) != count:
        raise checker.fail(
            "E2002",
            f"`{name}` takes {count} argument{'s' if count != 1 else ''}, "
            f"given {len(args.positional)}",
            node.span,
            "wrong number of arguments",
        )


def _real(checker: Checker, val: Val, expr: ast.Expr) -> Tensor:
    ty = val.ty
    if isinstance(ty, Tensor) and ty.elem == Elem.REAL:
        return ty
    if isinstance(ty, Tensor):
        raise checker.fail(
            "E2009",
            f"`{ty}` values used as reals",
            expr.span,
            "indices and masks are not reals",
            help="convert them explicitly with `real(…)`",
        )
    raise checker.fail(
        "E2002", f"expected a real tensor, found `{ty}`", expr.span, "not a real tensor"
    )


def _axis_index(checker: Checker, ty: Tensor, ident: ast.Ident) -> int:
    matches = [i for i, axis in enumerate(ty.axes) if axis.name == ident.name]
    if len(matches) != 1:
        raise checker.fail(
            "E2007",
            f"`{ty}` has no axis named `{ident.name}`",
            ident.span,
            "no such axis" if not matches else "this name is ambiguous",
        )
    return matches[0]


def _one_axis(checker: Checker, name: str, node: ast.Call, args: Args) -> ast.Ident | None:
    if len(args.axes) > 1:
        raise checker.fail(
            "E2002", f"`{name}` takes at most one `axis`", node.span, "too many axes"
        )
    return args.axes[0] if args.axes else None


# ---------------------------------------------------------------- elementwise


def _unary(reg: Reg) -> Rule:
    def rule(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
        _arity(checker, name, node, args, 1)
        val, expr = args.positional[0]
        ty = _real(checker, val, expr)
        return checker.emit_prim(ctx, name, ty, (val,), node.span, reg=reg)

    return rule


def _reduce(reg: Reg) -> Rule:
    def rule(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
        _arity(checker, name, node, args, 1)
        val, expr = args.positional[0]
        ty = _real(checker, val, expr)
        axis = _one_axis(checker, name, node, args)
        if axis is None:
            return checker.emit_prim(ctx, name, SCALAR, (val,), node.span, reg=reg)
        index = _axis_index(checker, ty, axis)
        out = Tensor(Elem.REAL, ty.axes[:index] + ty.axes[index + 1 :], ty.open)
        return checker.emit_prim(ctx, name, out, (val,), node.span, (("axis", axis.name),), reg=reg)

    return rule


def _softmax(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 1)
    val, expr = args.positional[0]
    ty = _real(checker, val, expr)
    axis = _one_axis(checker, name, node, args)
    if axis is None:
        if not ty.axes:
            raise checker.fail("E2007", f"`{name}` needs an axis", node.span, "a scalar has none")
        axis_name = ty.axes[-1].name
        if axis_name is None:
            raise checker.fail(
                "E2007", f"`{name}` needs `axis NAME`", node.span, "say which axis to normalise"
            )
    else:
        _axis_index(checker, ty, axis)
        axis_name = axis.name
    operands: tuple[Val, ...] = (val,)
    attrs: tuple[tuple[str, ir.AttrValue], ...] = (("axis", axis_name),)
    for key in args.keywords:
        if key != "where" or name != "softmax":
            raise checker.fail(
                "E2002", f"`{name}` has no argument `{key}`", args.keywords[key][1].span, "unknown"
            )
    if "where" in args.keywords:
        mexpr = args.keywords["where"][0]
        mask = checker.value(ctx, checker.expr(ctx, mexpr), mexpr.span)
        if not (isinstance(mask.ty, Tensor) and mask.ty.elem == Elem.BOOL):
            raise checker.fail(
                "E2002", f"`where` takes a mask, found `{mask.ty}`", mexpr.span, "not a bool tensor"
            )
        try:
            axes = broadcast(ctx.info.dim_ctx, ty, mask.ty)
        except ShapeError as error:
            raise checker.shape_fail(error, mexpr.span) from None
        if len(axes) != len(ty.axes):
            raise checker.fail(
                "E2003",
                f"the mask `{mask.ty}` has axes that `{ty}` lacks",
                mexpr.span,
                "the mask must broadcast to the scores",
            )
        operands = (val, mask)
    return checker.emit_prim(ctx, name, ty, operands, node.span, attrs)


def _cross_entropy(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 2)
    (logits, lexpr), (targets, texpr) = args.positional
    lty = _real(checker, logits, lexpr)
    tty = targets.ty
    if not (isinstance(tty, Tensor) and tty.elem == Elem.IDX):
        raise checker.fail(
            "E2002",
            f"`cross_entropy` takes indices as targets, found `{tty}`",
            texpr.span,
            "not idx",
        )
    if not lty.axes:
        raise checker.fail("E2007", "logits need a class axis", lexpr.span, "a scalar has none")
    classes = lty.axes[-1]
    rest = Tensor(Elem.IDX, lty.axes[:-1], lty.open, classes.size)
    try:
        from presk.types.shapes import same_type

        same_type(ctx.info.dim_ctx, rest, tty)
    except ShapeError as error:
        raise checker.fail(
            "E2002",
            f"targets `{tty}` do not match logits `{lty}`",
            texpr.span,
            f"expected `{rest}`",
            note=error.label,
        ) from None
    out = Tensor(Elem.REAL, lty.axes[:-1], lty.open)
    return checker.emit_prim(ctx, name, out, (logits, targets), node.span)


def _single_dim(checker: Checker, name: str, node: ast.Call, args: Args) -> tuple[str, Lin]:
    if len(args.dims) != 1 or args.positional:
        raise checker.fail(
            "E2002", f"`{name}` takes one named size, as in `{name}(seq: T)`", node.span, "here"
        )
    dim_name, size, _ = args.dims[0]
    return dim_name, size


def _causal_mask(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    axis, size = _single_dim(checker, name, node, args)
    ty = Tensor(Elem.BOOL, (Axis(axis, size), Axis(axis + "2", size)))
    return checker.emit_prim(ctx, name, ty, (), node.span, (("axis", axis), ("size", size)))


def _positions(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    axis, size = _single_dim(checker, name, node, args)
    ty = Tensor(Elem.IDX, (Axis(axis, size),), False, size)
    return checker.emit_prim(ctx, name, ty, (), node.span, (("axis", axis), ("size", size)))


def _idx(checker: Checker, val: Val, expr: ast.Expr, what: str) -> Tensor:
    if isinstance(val.ty, Tensor) and val.ty.elem == Elem.IDX:
        return val.ty
    raise checker.fail("E2002", f"{what} must be indices, found `{val.ty}`", expr.span, "not idx")


def _embed(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 2)
    (table, texpr), (ids, iexpr) = args.positional
    tty = _real(checker, table, texpr)
    ity = _idx(checker, ids, iexpr, "`embed`'s second argument")
    if tty.open or not tty.axes:
        raise checker.fail("E2002", "`embed` needs a table `ℝ[N, …]`", texpr.span, "not a table")
    assert ity.bound is not None
    try:
        ctx.info.dim_ctx.require_equal(tty.axes[0].size, ity.bound)
    except ShapeError as error:
        raise checker.shape_fail(error, node.span) from None
    out = Tensor(Elem.REAL, ity.axes + tty.axes[1:], ity.open)
    return checker.emit_prim(ctx, name, out, (table, ids), node.span)


def _one_hot(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 1)
    ids, iexpr = args.positional[0]
    ity = _idx(checker, ids, iexpr, "`one_hot`'s argument")
    assert ity.bound is not None
    out = Tensor(Elem.REAL, (*ity.axes, Axis(None, ity.bound)), ity.open)
    return checker.emit_prim(ctx, name, out, (ids,), node.span)


def _argmax(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 1)
    val, expr = args.positional[0]
    ty = _real(checker, val, expr)
    axis = _one_axis(checker, name, node, args)
    if not ty.axes:
        raise checker.fail("E2007", "`argmax` needs an axis", node.span, "a scalar has none")
    index = len(ty.axes) - 1 if axis is None else _axis_index(checker, ty, axis)
    out = Tensor(Elem.IDX, ty.axes[:index] + ty.axes[index + 1 :], ty.open, ty.axes[index].size)
    attrs = (("axis", ty.axes[index].name),) if axis is not None else ()
    return checker.emit_prim(ctx, name, out, (val,), node.span, attrs, reg=Reg.DISC)


def _key(checker: Checker, val: Val, expr: ast.Expr) -> None:
    if not isinstance(val.ty, KeyT):
        raise checker.fail("E2002", f"expected a key, found `{val.ty}`", expr.span, "not a key")


def _sample(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 2)
    (key, kexpr), (logits, lexpr) = args.positional
    _key(checker, key, kexpr)
    ty = _real(checker, logits, lexpr)
    if not ty.axes:
        raise checker.fail("E2007", "logits need a class axis", lexpr.span, "a scalar has none")
    out = Tensor(Elem.IDX, ty.axes[:-1], ty.open, ty.axes[-1].size)
    ctx.info.effects.setdefault("Rand", node.span)
    return checker.emit_prim(ctx, name, out, (key, logits), node.span, reg=Reg.DISC)


def _dropout(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 3)
    (key, kexpr), (p, pexpr), (x, xexpr) = args.positional
    _key(checker, key, kexpr)
    if not (isinstance(p.ty, Hyper) or p.ty == SCALAR):
        raise checker.fail(
            "E2002", f"the rate must be a number, found `{p.ty}`", pexpr.span, "not a rate"
        )
    ty = _real(checker, x, xexpr)
    ctx.info.effects.setdefault("Rand", node.span)
    # The rate moves the mask: the result is discontinuous in it.
    deps = regs.merge(x.deps, regs.at_least(p.deps, Reg.DISC, (name, node.span)))
    return checker.emit_prim(ctx, name, ty, (key, p, x), node.span, deps=deps)


def _real_rule(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 1)
    val, _expr = args.positional[0]
    return checker.to_real(ctx, val, node.span)


def _mul_sizes(checker: Checker, a: Lin, b: Lin, span: ast.Call) -> Lin:
    try:
        return a * b
    except NonLinear:
        raise checker.fail(
            "E1008", f"the size {a}·{b} is not linear", span.span, "one size must be a constant"
        ) from None


def _merge(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 1)
    if len(args.axes) != 2:
        raise checker.fail(
            "E2002", "`merge` takes two axes: `merge(axis a, axis b, x)`", node.span, "here"
        )
    val, expr = args.positional[0]
    ty = _real(checker, val, expr)
    i = _axis_index(checker, ty, args.axes[0])
    j = _axis_index(checker, ty, args.axes[1])
    if j != i + 1:
        raise checker.fail(
            "E2007",
            "`merge` joins adjacent axes, the first before the second",
            node.span,
            "not adjacent",
        )
    size = _mul_sizes(checker, ty.axes[i].size, ty.axes[j].size, node)
    out = Tensor(Elem.REAL, ty.axes[:i] + (Axis(None, size),) + ty.axes[j + 1 :], ty.open)
    attrs = (("axes", (args.axes[0].name, args.axes[1].name)),)
    return checker.emit_prim(ctx, name, out, (val,), node.span, attrs)


def _split(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 1)
    if len(args.axes) != 1 or len(args.dims) < 2:
        raise checker.fail(
            "E2002",
            "`split` takes an axis and two named sizes: `split(axis a, x, b: N, c: M)`",
            node.span,
            "here",
        )
    val, expr = args.positional[0]
    ty = _real(checker, val, expr)
    i = _axis_index(checker, ty, args.axes[0])
    parts = tuple(Axis(n, size) for n, size, _ in args.dims)
    total = parts[0].size
    for part in parts[1:]:
        total = _mul_sizes(checker, total, part.size, node)
    try:
        ctx.info.dim_ctx.require_equal(total, ty.axes[i].size)
    except ShapeError as error:
        raise checker.shape_fail(error, node.span) from None
    out = Tensor(Elem.REAL, ty.axes[:i] + parts + ty.axes[i + 1 :], ty.open)
    attrs = (("axis", args.axes[0].name), ("parts", tuple(n for n, _, _ in args.dims)))
    return checker.emit_prim(ctx, name, out, (val,), node.span, attrs)


def _split_heads(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 1)
    if len(args.dims) != 1:
        raise checker.fail(
            "E2002",
            "`split_heads` takes the heads as `split_heads(x, heads: H)`",
            node.span,
            "here",
        )
    val, expr = args.positional[0]
    ty = _real(checker, val, expr)
    heads_name, heads, _ = args.dims[0]
    if len(ty.axes) < 2 or not heads.is_const or heads.const <= 0:
        raise checker.fail(
            "E2007",
            "`split_heads` needs `ℝ[…, seq, D]` and a constant number of heads",
            node.span,
            "here",
        )
    width = ty.axes[-1].size
    hd = width * (1 / heads.const)
    try:
        ctx.info.dim_ctx.require_equal(hd * heads.const, width)
    except ShapeError as error:
        raise checker.shape_fail(error, node.span) from None
    if not hd.is_const or hd.const.denominator != 1:
        if any(c.denominator != 1 for _, c in hd.coeffs) or hd.const.denominator != 1:
            raise checker.fail(
                "E2006",
                f"{width} is not divisible by {heads}",
                node.span,
                "the width must split evenly into heads",
            )
    axes = ty.axes[:-2] + (Axis(heads_name, heads), ty.axes[-2], Axis("hd", hd))
    out = Tensor(Elem.REAL, axes, ty.open)
    return checker.emit_prim(ctx, name, out, (val,), node.span, (("heads", heads_name),))


def _merge_heads(checker: Checker, ctx: FnCtx, name: str, node: ast.Call, args: Args) -> Val:
    _arity(checker, name, node, args, 1)
    val, expr = args.positional[0]
    ty = _real(checker, val, expr)
    if len(ty.axes) < 3:
        raise checker.fail(
            "E2007", "`merge_heads` needs `ℝ[…, heads, seq, hd]`", node.span, "too few axes"
        )
    heads, seq, hd = ty.axes[-3:]
    size = _mul_sizes(checker, heads.size, hd.size, node)
    out = Tensor(Elem.REAL, ty.axes[:-3] + (seq, Axis(None, size)), ty.open)
    return checker.emit_prim(ctx, name, out, (val,), node.span)


def ein(checker: Checker, ctx: FnCtx, node: ast.Ein) -> Val:
    """`ein[out](a * b)`: named contraction, with the right operand's relabelling."""
    body = node.body
    if not (isinstance(body, ast.Binary) and body.op == ast.BinOp.MUL):
        raise checker.fail(
            "E2007", "`ein` contracts a product: `ein[…](a * b)`", body.span, "expected `a * b`"
        )
    a = checker.real_operand(ctx, body.left)
    b = checker.real_operand(ctx, body.right)
    assert isinstance(a.ty, Tensor) and isinstance(b.ty, Tensor)
    aty, bty = a.ty, b.ty
    for ty, side in ((aty, body.left), (bty, body.right)):
        if ty.open or any(axis.name is None for axis in ty.axes):
            raise checker.fail(
                "E2007",
                f"`ein` needs named axes, found `{ty}`",
                side.span,
                "every axis must be named and the prefix closed",
            )
    out = [ident.name for ident in node.out]
    a_names = [axis.name for axis in aty.axes]
    b_names = [axis.name for axis in bty.axes]
    relabel: list[tuple[str, str]] = []
    # See Note [ein relabelling].
    for index, target in enumerate(out + [n for n in a_names if n not in out]):
        assert target is not None
        if target in b_names or (target in a_names and target in out):
            continue
        base = target.rstrip("0123456789")
        candidates = [base] if base and base != target else []
        if index > 0 and index < len(out):
            candidates.append(out[index - 1])
        for old in candidates:
            if old in a_names and old in b_names and all(old != r[0] for r in relabel):
                relabel.append((old, target))
                b_names = [target if n == old else n for n in b_names]
                break
    b_axes = tuple(Axis(n, axis.size) for n, axis in zip(b_names, bty.axes, strict=True))
    a_map = {axis.name: axis for axis in aty.axes}
    b_map = {axis.name: axis for axis in b_axes}
    result: list[Axis] = []
    dim_ctx = ctx.info.dim_ctx
    try:
        for ident in node.out:
            name = ident.name
            if name in a_map and name in b_map:
                dim_ctx.require_equal(a_map[name].size, b_map[name].size)
            axis = a_map.get(name) or b_map.get(name)
            if axis is None:
                raise checker.fail(
                    "E2007",
                    f"output axis `{name}` is in neither operand",
                    ident.span,
                    "no operand has this axis",
                )
            result.append(axis)
        for left_name, left_axis in a_map.items():
            if left_name in out:
                continue
            if left_name not in b_map:
                raise checker.fail(
                    "E2007",
                    f"axis `{left_name}` of the left operand is neither kept nor contracted",
                    body.left.span,
                    "list it in the output or give the right operand one",
                )
            dim_ctx.require_equal(left_axis.size, b_map[left_name].size)
        for right_name in b_map:
            if right_name not in out and right_name not in a_map:
                raise checker.fail(
                    "E2007",
                    f"axis `{right_name}` of the right operand is neither kept nor contracted",
                    body.right.span,
                    "list it in the output or give the left operand one",
                )
    except ShapeError as error:
        raise checker.shape_fail(error, node.span) from None
    ty = Tensor(Elem.REAL, tuple(result))
    attrs: tuple[tuple[str, ir.AttrValue], ...] = (("out", tuple(out)), ("relabel", tuple(relabel)))
    return checker.emit_prim(ctx, "ein", ty, (a, b), node.span, attrs)


RULES: dict[str, Rule] = {
    "exp": _unary(Reg.SMOOTH),
    "log": _unary(Reg.SMOOTH),
    "sqrt": _unary(Reg.SMOOTH),
    "tanh": _unary(Reg.SMOOTH),
    "sin": _unary(Reg.SMOOTH),
    "cos": _unary(Reg.SMOOTH),
    "erf": _unary(Reg.SMOOTH),
    "gelu": _unary(Reg.SMOOTH),
    "relu": _unary(Reg.LIPSCHITZ),
    "abs": _unary(Reg.LIPSCHITZ),
    "sum": _reduce(Reg.SMOOTH),
    "mean": _reduce(Reg.SMOOTH),
    "max": _reduce(Reg.LIPSCHITZ),
    "softmax": _softmax,
    "log_softmax": _softmax,
    "cross_entropy": _cross_entropy,
    "causal_mask": _causal_mask,
    "positions": _positions,
    "embed": _embed,
    "one_hot": _one_hot,
    "argmax": _argmax,
    "sample": _sample,
    "dropout": _dropout,
    "real": _real_rule,
    "merge": _merge,
    "split": _split,
    "split_heads": _split_heads,
    "merge_heads": _merge_heads,
}

# Primitives with an adjoint (for the differentiation stage). The others are
# Disc (argmax, sample), produce indices or masks, or take no real input.
DIFFERENTIABLE = frozenset(
    set(RULES) - {"argmax", "sample", "causal_mask", "positions", "one_hot", "real"}
)


# Note [ein relabelling]
# ~~~~~~~~~~~~~~~~~~~~~~
# In `ein[batch, heads, seq, seq2](q * k)` both operands have an axis `seq`,
# and the output asks for `seq2`, which neither has: the right operand's
# `seq` is the one that becomes `seq2` (queries along `seq`, keys along
# `seq2`). In `ein[batch, heads, seq, hd](a * v)`, `a` has `seq2` and `v`
# does not: `v`'s `seq` becomes `seq2`, and the sum runs over it. The rule:
# a name N wanted by the output or left dangling on the left operand, that
# the right operand lacks, is taken by renaming the right operand's axis
# whose name is N without its trailing digits (or the output name just
# before N), provided both operands have that axis. Sizes must then agree.
