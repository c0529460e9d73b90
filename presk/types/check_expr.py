"""The checker's expressions: names, members, ascriptions, operators, primitives' results.

A layer of the checker (see presk/types/check_base.py). Every expression is typed and its
PSK-Core emitted at once (see Note [Checking emits Core] in presk/types/check.py).
"""

from __future__ import annotations

from presk.core import ir
from presk.diagnostics import Span
from presk.elab.presburger import Lin
from presk.elab.program import ConstError, lin_eval
from presk.elab.ty import (
    SCALAR,
    Elem,
    Hyper,
    Params,
    Tensor,
    TupleT,
    Type,
)
from presk.syntax import ast
from presk.types import prims as prim_rules
from presk.types import regularity as regs
from presk.types.check_fn import FnChecker
from presk.types.regularity import Deps, Reg
from presk.types.scope import member_type
from presk.types.shapes import ShapeError
from presk.types.values import (
    Denot,
    FnCtx,
    FnRef,
    ImportVal,
    LambdaVal,
    MethodVal,
    ModVal,
    PrimVal,
    Val,
)

_PRIMITIVES = prim_rules.RULES


class ExprChecker(FnChecker):
    """Expressions."""

    # ------------------------------------------------------------ expressions

    def value(self, ctx: FnCtx, denot: Denot, span: Span) -> Val:
        """A denotation that must be a runtime value."""
        if isinstance(denot, Val):
            return denot
        what = {
            ModVal: "a module",
            MethodVal: "a module function",
            FnRef: "a function",
            ImportVal: "an imported file",
            PrimVal: "a primitive",
            LambdaVal: "a function",
        }[type(denot)]
        raise self.fail("E2002", f"expected a value, found {what}", span, "not a value")

    def expr(self, ctx: FnCtx, node: ast.Expr) -> Denot:
        match node:
            case ast.Num(_, value):
                return Val(SCALAR, ir.Lit(value), {})
            case ast.Name(ident):
                return self.name(ctx, ident)
            case ast.Member(base, name):
                return self.member(ctx, node, self.expr(ctx, base), name)
            case ast.Call():
                return self.call(ctx, node)
            case ast.Binary():
                return self.binary(ctx, node)
            case ast.Neg(operand):
                val = self.real_operand(ctx, operand)
                if isinstance(val.operand, ir.Lit):
                    # A negative literal stays a literal: `x^-1` keeps an exact exponent.
                    return Val(SCALAR, ir.Lit(-val.operand.value), {})
                return self.emit_prim(ctx, "neg", val.ty, (val,), node.span)
            case ast.Ascribe(value, ty):
                return self.ascribe(ctx, node, value, ty)
            case ast.TupleExpr(items):
                vals = [self.value(ctx, self.expr(ctx, item), item.span) for item in items]
                tuple_ty = TupleT(tuple(v.ty for v in vals))
                op = ir.MakeTuple(tuple(v.operand for v in vals))
                return ctx.emit(None, tuple_ty, op, node.span, regs.merge(*(v.deps for v in vals)))
            case ast.Lambda():
                return LambdaVal(node, ctx)
            case ast.Ein():
                return prim_rules.ein(self, ctx, node)
            case ast.Grad():
                raise self.fail(
                    "E2012",
                    "`grad(f)` must be applied to an argument",
                    node.span,
                    "write `grad(f)(x)`",
                )
            case ast.Str() | ast.Stream():
                raise self.fail("E2002", "a string is not a value here", node.span, "unexpected")

    def name(self, ctx: FnCtx, ident: ast.Ident) -> Denot:
        name = ident.name
        if name in ctx.locals:
            return ctx.locals[name]
        info = ctx.info
        module = info.module
        file = info.file
        if module is not None and ctx.theta is not None:
            inst = ctx.theta.ty
            assert isinstance(inst, Params)
            if name in ctx.members:
                return ctx.members[name]
            for param in module.decl.params:
                if param.name.name == name:
                    ty = member_type(inst.inst, name)
                    assert ty is not None
                    val = ctx.emit(
                        name, ty, ir.Field(ctx.theta.operand, name), ident.span, ctx.theta.deps
                    )
                    ctx.members[name] = val
                    return val
            for use in module.decl.uses:
                if use.name.name == name:
                    sub = member_type(inst.inst, name)
                    assert isinstance(sub, Params)
                    return ModVal(sub.inst.module, sub.inst, self._theta_field(ctx, name, sub))
            for fn in module.decl.fns:
                if fn.name.name == name:
                    return MethodVal(ModVal(module, inst.inst, ctx.theta), name, ident)
        if name in file.fns:
            return FnRef(file, file.fns[name])
        if name in file.modules:
            return ModVal(file.modules[name], None)
        if name in file.imports:
            return ImportVal(file.imports[name])
        if name in file.consts:
            raise self.fail(
                "E2010",
                f"`{name}` is a constant, not a real",
                ident.span,
                "a constant is a number of the program's shape",
                help=f"inject it into ℝ with `({name} : ℝ)`",
            )
        if name in info.dims or name in file.dims:
            raise self.fail(
                "E2010",
                f"`{name}` is a dimension, not a real",
                ident.span,
                "a dimension is a size",
                help=f"inject it into ℝ with `({name} : ℝ)`",
            )
        if name in _PRIMITIVES:
            return PrimVal(name)
        raise self.fail(
            "E2001",
            f"unresolved name `{name}`",
            ident.span,
            "not a variable, parameter, module member or constant in scope",
        )

    def _theta_field(self, ctx: FnCtx, name: str, ty: Params) -> Val:
        assert ctx.theta is not None
        if name not in ctx.members:
            ctx.members[name] = ctx.emit(
                None, ty, ir.Field(ctx.theta.operand, name), None, ctx.theta.deps
            )
        return ctx.members[name]

    def member(self, ctx: FnCtx, node: ast.Member, base: Denot, name: ast.Ident) -> Denot:
        match base:
            case ImportVal(file):
                if name.name in file.fns:
                    return FnRef(file, file.fns[name.name])
                if name.name in file.modules:
                    return ModVal(file.modules[name.name], None)
                if name.name in file.consts:
                    raise self.fail(
                        "E2010",
                        f"`{name.name}` is a constant, not a real",
                        node.span,
                        "a constant is a number of the program's shape",
                        help=f"inject it into ℝ with `({_source_text(node)} : ℝ)`",
                    )
                raise self.fail(
                    "E2001",
                    f"unresolved name `{name.name}` in `{file.basename}`",
                    name.span,
                    "not a function, module or constant of that file",
                )
            case ModVal(module):
                if name.name == "init" or any(fn.name.name == name.name for fn in module.decl.fns):
                    return MethodVal(base, name.name, name)
                raise self.fail(
                    "E2001",
                    f"module `{module.name}` has no function `{name.name}`",
                    name.span,
                    "not a function of this module",
                )
            case Val(Params(inst)):
                ty = member_type(inst, name.name)
                if ty is None:
                    raise self.fail(
                        "E2001",
                        f"`params {inst}` has no member `{name.name}`",
                        name.span,
                        "not a parameter or sub-module",
                    )
                return ctx.emit(None, ty, ir.Field(base.operand, name.name), node.span, base.deps)
        raise self.fail(
            "E2001", f"no member `{name.name}` here", name.span, "this value has no members"
        )

    def ascribe(self, ctx: FnCtx, node: ast.Ascribe, value: ast.Expr, ty: ast.TypeSyn) -> Val:
        if not (isinstance(ty, ast.RealType) and not ty.axes):
            raise self.fail(
                "E2002", "only `(c : ℝ)` injections are supported", ty.span, "expected `ℝ`"
            )
        try:
            lin = lin_eval(
                ctx.info.file, value, lambda n: Lin.var(n) if n in ctx.info.dims else None
            )
        except ConstError:
            inner = self.value(ctx, self.expr(ctx, value), value.span)
            return self.to_real(ctx, inner, node.span)
        if lin.is_const:
            return Val(SCALAR, ir.Lit(lin.const), {})
        return ctx.emit(None, SCALAR, ir.Prim("dim", (), (("size", lin),)), node.span, {})

    def to_real(self, ctx: FnCtx, val: Val, span: Span) -> Val:
        """`real(v)`: a hyperparameter, indices or a mask as reals."""
        match val.ty:
            case Hyper():
                if isinstance(val.operand, ir.Lit):
                    return Val(SCALAR, val.operand, val.deps)
                return ctx.emit(None, SCALAR, ir.Prim("real", (val.operand,)), span, val.deps)
            case Tensor(Elem.REAL):
                return val
            case Tensor():
                ty = Tensor(Elem.REAL, val.ty.axes, val.ty.open)
                return ctx.emit(None, ty, ir.Prim("real", (val.operand,)), span, val.deps)
        raise self.fail("E2002", f"cannot make `{val.ty}` a real", span, "not a number")

    def real_operand(self, ctx: FnCtx, node: ast.Expr) -> Val:
        """An operand of real arithmetic: real tensors and literals only."""
        val = self.value(ctx, self.expr(ctx, node), node.span)
        match val.ty:
            case Tensor(Elem.REAL):
                return val
            case Tensor(Elem.IDX) | Tensor(Elem.BOOL):
                raise self.fail(
                    "E2009",
                    f"`{val.ty}` values used as reals",
                    node.span,
                    "indices and masks are not reals",
                    help="convert them explicitly with `real(…)`",
                )
            case Hyper():
                if isinstance(val.operand, ir.Lit):
                    return Val(SCALAR, val.operand, val.deps)
                raise self.fail(
                    "E2010",
                    f"hyperparameter of type `{val.ty}` used as a real",
                    node.span,
                    "a hyperparameter is a machine number",
                    help="inject it into ℝ with `real(…)`",
                )
        raise self.fail(
            "E2002", f"expected a real tensor, found `{val.ty}`", node.span, "not a real"
        )

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
    ) -> Val:
        if deps is not None:
            op = ir.Prim(name, tuple(a.operand for a in args), attrs)
            return ctx.emit(None, ty, op, span, deps)
        deps = regs.merge(*(a.deps for a in args))
        if reg != Reg.SMOOTH:
            deps = regs.at_least(deps, reg, (name, span))
        op = ir.Prim(name, tuple(a.operand for a in args), attrs)
        return ctx.emit(None, ty, op, span, deps)

    def binary(self, ctx: FnCtx, node: ast.Binary) -> Val:
        op = node.op
        names = {
            ast.BinOp.ADD: "add",
            ast.BinOp.SUB: "sub",
            ast.BinOp.MUL: "mul",
            ast.BinOp.DIV: "div",
            ast.BinOp.POW: "pow",
        }
        if op == ast.BinOp.DOT:
            a = self.real_operand(ctx, node.left)
            b = self.real_operand(ctx, node.right)
            assert isinstance(a.ty, Tensor) and isinstance(b.ty, Tensor)
            try:
                from presk.types.shapes import dot

                ty = dot(ctx.info.dim_ctx, a.ty, b.ty)
            except ShapeError as error:
                raise self.shape_fail(error, node.span) from None
            return self.emit_prim(ctx, "dot", ty, (a, b), node.span)
        if op == ast.BinOp.PIPE:
            raise self.fail(
                "E2008",
                "`|>` is not an operation on reals",
                node.span,
                "a pipeline belongs in a training run's `data` field",
            )
        if op not in names:
            raise self.fail(
                "E2008",
                f"`{op.value}` is not an operation on reals",
                node.span,
                "allowed in constants and assertions only",
            )
        a = self.real_operand(ctx, node.left)
        b = self.real_operand(ctx, node.right)
        assert isinstance(a.ty, Tensor) and isinstance(b.ty, Tensor)
        try:
            from presk.types.shapes import elementwise

            ty = elementwise(ctx.info.dim_ctx, a.ty, b.ty)
        except ShapeError as error:
            raise self.shape_fail(error, node.span) from None
        return self.emit_prim(ctx, names[op], ty, (a, b), node.span)


def _source_text(node: ast.Expr) -> str:
    return node.span.source.text[node.span.start : node.span.end]
