"""The checker's calls: functions and methods, lambdas, folds over stacks, and `grad`.

A layer of the checker (see presk/types/check_base.py): arguments against parameters
(E2002), dimension inference (E2017), lambdas and their captures, and `grad`'s argument
and regularity (E2012, E3001).
"""

from __future__ import annotations

from presk.core import ir
from presk.diagnostics import Label, Span
from presk.elab.presburger import Lin
from presk.elab.ty import (
    SCALAR,
    Elem,
    Hyper,
    Instance,
    ModuleT,
    Params,
    Tensor,
    TupleT,
    Type,
)
from presk.syntax import ast
from presk.types import prims as prim_rules
from presk.types import regularity as regs
from presk.types.check_expr import ExprChecker
from presk.types.regularity import Deps, Reg
from presk.types.shapes import ShapeError, Unifier, same_type
from presk.types.values import (
    Abort,
    Denot,
    FnCtx,
    FnInfo,
    FnRef,
    LambdaVal,
    MethodVal,
    ModVal,
    PrimVal,
    Val,
)


class CallChecker(ExprChecker):
    """Calls."""

    # ------------------------------------------------------------ calls

    def call(self, ctx: FnCtx, node: ast.Call) -> Denot:
        if isinstance(node.func, ast.Grad):
            return self.grad(ctx, node, node.func)
        callee = self.expr(ctx, node.func)
        match callee:
            case PrimVal(name):
                return prim_rules.apply(self, ctx, name, node)
            case FnRef(file, decl):
                info = self.fn_info(file, None, decl)
                return self.call_fn(ctx, node, info, None, list(node.args))
            case MethodVal(owner, name):
                return self.call_method(ctx, node, owner, name)
            case LambdaVal():
                args = [self.positional(ctx, arg) for arg in node.args]
                applied = self.apply_lambda(ctx, node, callee, args, grad=False)
                assert isinstance(applied, Val)
                return applied
        raise self.fail("E2002", "this is not a function", node.func.span, "cannot be called")

    def positional(self, ctx: FnCtx, arg: ast.Arg) -> Val:
        if not isinstance(arg, ast.PosArg):
            raise self.fail("E2002", "expected a positional argument", arg.span, "here")
        return self.value(ctx, self.expr(ctx, arg.value), arg.span)

    def call_method(self, ctx: FnCtx, node: ast.Call, owner: ModVal, name: str) -> Val:
        module = owner.module
        args = list(node.args)
        if name == "init":
            if len(args) != 1:
                raise self.fail("E2002", "`init` takes a key", node.span, "expected one argument")
            key = self.positional(ctx, args[0])
            if owner.inst is None:
                raise self.fail(
                    "E2002",
                    f"`{module.name}.init` needs the module's dimensions",
                    node.span,
                    "use a module-typed argument or an instance",
                )
            ctx.info.effects.setdefault("Rand", node.span)
            dims = tuple(zip(module.dims, owner.inst.args, strict=True))
            op = ir.Call(f"{self.prefix(module.file)}{module.name}.init", dims, (key.operand,))
            return ctx.emit(None, Params(owner.inst), op, node.span, {})
        decl = next(fn for fn in module.decl.fns if fn.name.name == name)
        info = self.fn_info(module.file, module, decl)
        theta = owner.theta
        if owner.inst is not None and owner.inst.stack is not None:
            assert theta is not None
            return self.fold(ctx, node, info, owner.inst, theta, args)
        return self.call_fn(ctx, node, info, theta, args, owner.inst)

    def fold(
        self,
        ctx: FnCtx,
        node: ast.Call,
        info: FnInfo,
        inst: Instance,
        theta: Val,
        args: list[ast.Arg],
    ) -> Val:
        """`blocks.apply(x)` on a stack: the function applied layer after layer."""
        assert inst.stack is not None
        if len(args) != 1:
            raise self.fail(
                "E2002",
                "a stack's function takes exactly one argument",
                node.span,
                "the value threaded through the layers",
            )
        x = self.positional(ctx, args[0])
        layer = Val(Params(inst.unstacked()), theta.operand, theta.deps)
        result = self.call_fn(ctx, node, info, layer, args, inst.unstacked(), values=[layer, x])
        # The call emitted above is replaced by a fold; it checked the types.
        call = ctx.instrs.pop()
        ctx.next_index -= 1
        assert isinstance(call.op, ir.Call)
        try:
            same_type(ctx.info.dim_ctx, x.ty, result.ty)
        except ShapeError:
            raise self.fail(
                "E2015",
                f"`{info.name}` maps `{x.ty}` to `{result.ty}`: it cannot be stacked",
                node.span,
                "a stacked function must return its argument's type",
            ) from None
        op = ir.Fold(info.name, call.op.dims, theta.operand, inst.stack, x.operand)
        return ctx.emit(None, x.ty, op, node.span, result.deps)

    def call_fn(
        self,
        ctx: FnCtx,
        node: ast.Call,
        info: FnInfo,
        theta: Val | None,
        args: list[ast.Arg],
        inst: Instance | None = None,
        values: list[Val] | None = None,
    ) -> Val:
        """A call of a user function: match arguments, bind dims, compose regularity."""
        if info.state == "checking":
            raise self.fail(
                "E2014",
                f"`{info.name}` is called while it is being checked: recursion is not supported",
                node.span,
                "this call closes a cycle of calls",
            )
        self.check_fn(info)
        if info.state == "failed" or info.ret is None:
            raise Abort()
        params = info.all_params
        given: list[Denot | None] = [None] * len(params)
        start = 0
        if info.module is not None and theta is not None:
            given[0] = theta
            start = 1
        if values is not None:
            given = list(values)
        else:
            position = start
            for arg in args:
                match arg:
                    case ast.PosArg(value):
                        if position >= len(params):
                            raise self.fail(
                                "E2002",
                                f"`{info.name}` takes {_count(len(params) - start)}",
                                arg.span,
                                "one too many",
                            )
                        given[position] = self.expr(ctx, value)
                        position += 1
                    case ast.KwArg(name, value):
                        names = [p[0] for p in params]
                        if name.name not in names:
                            raise self.fail(
                                "E2002",
                                f"`{info.name}` has no parameter `{name.name}`",
                                name.span,
                                "unknown parameter",
                            )
                        given[names.index(name.name)] = self.expr(ctx, value)
                    case _:
                        raise self.fail(
                            "E2002", "unexpected argument form", arg.span, "not a value"
                        )
        spans: list[Span] = [node.span] * len(params)
        if values is None:
            names = [p[0] for p in params]
            position = start
            for arg in args:
                if isinstance(arg, ast.PosArg) and position < len(params):
                    spans[position] = arg.span
                    position += 1
                elif isinstance(arg, ast.KwArg) and arg.name.name in names:
                    spans[names.index(arg.name.name)] = arg.span
        vals: list[tuple[Type, Denot]] = []
        for index, ((pname, pty, default), got) in enumerate(zip(params, given, strict=True)):
            if got is None:
                if default is None:
                    raise self.fail(
                        "E2002",
                        f"missing argument `{pname}` of `{info.name}`",
                        node.span,
                        "this call omits it",
                    )
                got = Val(pty, ir.Lit(default), {})
            vals.append((pty, got))
            del index
        unifier = Unifier(ctx.info.dim_ctx, tuple(info.dims))
        arg_types: list[Type] = []
        for pty, got in vals:
            arg_types.append(self.arg_type(ctx, got, pty, node.span))
        for (pty, _), aty in zip(vals, arg_types, strict=True):
            unifier.bind(pty, aty)
        for (pty, _), aty, span in zip(vals, arg_types, spans, strict=True):
            try:
                unifier.check(pty, aty)
            except ShapeError as error:
                raise self.shape_fail(error, span) from None
        try:
            result_ty = unifier.result(info.ret)
            dims = tuple((d, unifier.size(Lin.var(d))) for d in info.dims)
        except ShapeError as error:
            raise self.shape_fail(error, node.span) from None
        operands: list[ir.Operand] = []
        deps_in: list[Deps] = []
        for (_, pty, _), (_, got) in zip(params, vals, strict=True):
            if isinstance(pty, ModuleT):
                continue
            assert isinstance(got, Val)
            operands.append(got.operand)
            deps_in.append(got.deps)
        for effect in info.effects:
            ctx.info.effects.setdefault(effect, node.span)
        deps = regs.through(info.regularity, deps_in, info.depends)
        return ctx.emit(None, result_ty, ir.Call(info.name, dims, tuple(operands)), node.span, deps)

    def arg_type(self, ctx: FnCtx, got: Denot, pty: Type, span: Span) -> Type:
        """The type an argument presents to a parameter of type `pty`."""
        if isinstance(got, ModVal):
            if got.inst is None:
                raise self.fail(
                    "E2002",
                    f"`{got.module.name}` needs its dimension arguments here",
                    span,
                    "write them as `{…}`",
                )
            return ModuleT(got.inst)
        if isinstance(got, Val):
            if isinstance(pty, Hyper) and isinstance(got.operand, ir.Lit):
                return pty
            return got.ty
        raise self.fail("E2002", "expected a value argument", span, "not a value")

    # ------------------------------------------------------------ lambdas and grad

    def apply_lambda(
        self, ctx: FnCtx, node: ast.Call, lam: LambdaVal, args: list[Val], grad: bool
    ) -> tuple[FnInfo, list[Val]] | Val:
        """Check a lambda at its argument types as a generated function and call it."""
        lnode = lam.node
        if len(args) != len(lnode.params):
            raise self.fail(
                "E2002",
                f"this lambda takes {_count(len(lnode.params))}, given {len(args)}",
                node.span,
                "argument count differs",
            )
        outer = lam.ctx
        top = outer
        while top.parent is not None:
            top = top.parent
        name = f"{outer.info.name}.lambda{top.lambda_count[0]}"
        top.lambda_count[0] += 1
        own = {p.name for p in lnode.params}
        captures: list[str] = []
        for ident in _free_names(lnode.body, own):
            if (
                ident in outer.locals
                and isinstance(outer.locals[ident], Val)
                and ident not in captures
            ):
                captures.append(ident)
            elif ident in outer.locals and isinstance(outer.locals[ident], ModVal):
                continue
        info = FnInfo(name, outer.info.file, outer.info.module, None, generated=True)
        info.dims = list(outer.info.dims)
        info.dim_ctx = outer.info.dim_ctx
        info.module_args = dict(outer.info.module_args)
        for cap in captures:
            val = outer.locals[cap]
            assert isinstance(val, Val)
            info.params.append((cap, val.ty, None))
        for param_ident, arg_val in zip(lnode.params, args, strict=True):
            info.params.append((param_ident.name, arg_val.ty, None))
        info.all_params = list(info.params)
        info.state = "checking"
        inner = FnCtx(info, parent=outer, lambda_count=top.lambda_count)
        inner.theta = outer.theta
        for key, value in outer.locals.items():
            if not isinstance(value, Val):
                inner.locals[key] = value
        self.bind_params(inner)
        inner.theta = None
        if outer.theta is not None:
            # A lambda inside a module sees the module's θ through a capture.
            raise self.fail(
                "E2016",
                "lambdas inside modules are not supported",
                lnode.span,
                "move this into a top-level function",
            )
        try:
            result = self.value(inner, self.expr(inner, lnode.body), lnode.body.span)
            self.finish(inner, result, lnode.body.span, None)
        except Abort:
            info.state = "failed"
            raise
        info.state = "done"
        outer.info.lambdas.append(info)
        for effect, span in info.effects.items():
            outer.info.effects.setdefault(effect, span)
        cap_vals = [outer.locals[c] for c in captures]
        all_args = [v for v in cap_vals if isinstance(v, Val)] + args
        if grad:
            return info, all_args
        deps = regs.through(info.regularity, [a.deps for a in all_args], info.depends)
        assert info.ret is not None
        dims = tuple((d, Lin.var(d)) for d in info.dims)
        op = ir.Call(info.name, dims, tuple(a.operand for a in all_args))
        return ctx.emit(None, info.ret, op, node.span, deps)

    def grad(self, ctx: FnCtx, node: ast.Call, g: ast.Grad) -> Val:
        """`grad(f)(x…)`: the gradient of scalar f in its last argument."""
        args = [self.positional(ctx, arg) for arg in node.args]
        func = self.expr(ctx, g.func)
        if isinstance(func, LambdaVal):
            applied = self.apply_lambda(ctx, node, func, args, grad=True)
            assert isinstance(applied, tuple)
            info, all_args = applied
            wrt = func.node.params[-1].name
        elif isinstance(func, FnRef):
            info = self.fn_info(func.file, None, func.decl)
            if info.state == "checking":
                raise self.fail(
                    "E2014",
                    f"`{info.name}` is differentiated while it is being checked: "
                    "recursion is not supported",
                    g.span,
                    "this `grad` closes a cycle",
                )
            self.check_fn(info)
            if info.state != "done":
                raise Abort()
            all_args = args
            if len(args) != len(info.params):
                raise self.fail(
                    "E2002",
                    f"`{info.name}` takes {_count(len(info.params))}",
                    node.span,
                    "argument count differs",
                )
            wrt = info.params[-1][0]
        else:
            raise self.fail(
                "E2012",
                "`grad` takes a function: a lambda or a function's name",
                g.func.span,
                "not a function",
            )
        assert info.ret is not None
        if info.ret != SCALAR:
            raise self.fail(
                "E2012",
                f"`grad` needs a scalar function; this one returns `{info.ret}`",
                g.span,
                "not ℝ[]",
            )
        wrt_ty = all_args[-1].ty
        if not _differentiable(wrt_ty):
            raise self.fail(
                "E2012",
                f"cannot differentiate with respect to a value of type `{wrt_ty}`",
                node.span,
                "not reals or a parameter tree",
            )
        if wrt not in info.depends:
            raise self.fail(
                "E3002",
                f"`grad` has no differentiable path: the result does not depend on `{wrt}`",
                g.span,
                f"`grad` here, with respect to `{wrt}`",
                help="differentiate a function of its argument; its gradient would be zero",
                note=f"in `{ctx.info.name}`",
            )
        reg, blame = info.regularity.get(wrt, (Reg.SMOOTH, None))
        if reg == Reg.DISC:
            secondary: tuple[Label, ...] = ()
            prim = "an index"
            if blame is not None:
                prim = f"`{blame[0]}`"
                secondary = (
                    Label(blame[1], f"`{blame[0]}` makes the result discontinuous in `{wrt}`"),
                )
            raise self.fail(
                "E3001",
                f"cannot differentiate through {prim}: "
                f"the function is discontinuous (Disc) in `{wrt}`",
                g.span,
                f"`grad` here, with respect to `{wrt}`",
                secondary=secondary,
                help="use `softmax` for a smooth surrogate, "
                "or an explicit straight-through relaxation",
                note=f"in `{ctx.info.name}`; `grad` requires the class C⁰⁺ or better",
            )
        deps = regs.through(info.regularity, [a.deps for a in all_args], info.depends)
        if reg != Reg.SMOOTH:
            deps = regs.at_least(deps, Reg.DISC, ("grad", g.span))
        dims = tuple((d, Lin.var(d)) for d in info.dims)
        op = ir.GradOf(info.name, dims, tuple(a.operand for a in all_args))
        return ctx.emit(None, wrt_ty, op, node.span, deps)


def _count(n: int) -> str:
    return f"{n} argument" + ("" if n == 1 else "s")


def _differentiable(ty: Type) -> bool:
    match ty:
        case Tensor(Elem.REAL):
            return True
        case Params():
            return True
        case TupleT(items):
            return all(_differentiable(item) for item in items)
    return False


def _free_names(node: object, bound: set[str]) -> list[str]:
    """Names used in an expression, in order of first use, minus those bound in it."""
    out: list[str] = []

    def visit(n: object, shadow: set[str]) -> None:
        match n:
            case ast.Name(ident):
                if ident.name not in shadow and ident.name not in out:
                    out.append(ident.name)
            case ast.Member(base):
                visit(base, shadow)
            case ast.Lambda(params, body):
                visit(body, shadow | {p.name for p in params})
            case ast.Call(func, args):
                visit(func, shadow)
                for arg in args:
                    if isinstance(arg, (ast.PosArg, ast.KwArg)):
                        visit(arg.value, shadow)
            case ast.Binary(_, left, right):
                visit(left, shadow)
                visit(right, shadow)
            case ast.Neg(operand) | ast.Ascribe(operand) | ast.Grad(operand) | ast.Ein(_, operand):
                visit(operand, shadow)
            case ast.TupleExpr(items):
                for item in items:
                    visit(item, shadow)

    visit(node, bound)
    return out
