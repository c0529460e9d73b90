"""The checker's functions: signatures (W0001), bodies, declared results (E2011), effects.

A layer of the checker (see presk/types/check_base.py): module instances and their `use`
cycles, each function's signature with its dimensions and implicit dimensions, then its
body, its result against the declared type, and its effects against `uses`.
"""

from __future__ import annotations

from fractions import Fraction

from presk.core import ir
from presk.diagnostics import Label, Span
from presk.elab.presburger import Lin
from presk.elab.program import ConstError, FileEnv, ModuleInfo, lin_eval, lookup_const
from presk.elab.ty import (
    Elem,
    Instance,
    KeyT,
    ModuleT,
    Params,
    Tensor,
    TupleT,
)
from presk.syntax import ast
from presk.types.check_base import CheckerBase
from presk.types.regularity import Deps, Reg
from presk.types.scope import TypeScope, find_module, resolve
from presk.types.shapes import DimContext, ShapeError, same_type
from presk.types.values import (
    Abort,
    FnCtx,
    FnInfo,
    ModVal,
    Val,
)


class FnChecker(CheckerBase):
    """Signatures and bodies of functions."""

    def note_module_instances(self, module: ModuleInfo) -> None:
        """Check a module's declarations; record the instances its `use`s name.

        Every parameter type and `use` is resolved here, whether or not a
        function reaches it, and a module that contains itself is refused.
        """
        from presk.types.scope import resolve_module

        scope = TypeScope(module.file, {d: Lin.var(d) for d in module.dims})
        for param in module.decl.params:
            try:
                resolve(scope, param.type)
            except ConstError as error:
                self.report(error.code, error.message, error.span, error.label)
        cycle = _module_cycle(module, [])
        if cycle is not None:
            use = cycle
            self.report(
                "E1011",
                f"module `{module.name}` contains itself",
                use.span,
                "this `use` leads back to the module",
            )
            return
        for use in module.decl.uses:
            target = use.target.inner if isinstance(use.target, ast.StackType) else use.target
            try:
                inst = resolve_module(scope, target)
            except ConstError as error:
                self.report(error.code, error.message, error.span, error.label)
                continue
            if inst not in self.instances:
                self.instances.append(inst)

    # ------------------------------------------------------------ signatures

    def fn_info(self, file: FileEnv, module: ModuleInfo | None, decl: ast.FnDecl) -> FnInfo:
        """The (memoised) info of a declared function, its signature resolved."""
        key = (id(decl), "")
        if key in self.infos:
            return self.infos[key]
        name = f"{module.name}.{decl.name.name}" if module else decl.name.name
        info = FnInfo(self.prefix(file) + name, file, module, decl)
        self.infos[key] = info
        self.sign(info)
        return info

    def sign(self, info: FnInfo) -> None:
        decl = info.decl
        assert decl is not None
        dims: dict[str, Lin] = {}
        if info.module is not None:
            for d in info.module.dims:
                dims[d] = Lin.var(d)
                info.dims.append(d)
        for ident in decl.dims:
            dims[ident.name] = Lin.var(ident.name)
            info.dims.append(ident.name)
        warned: list[str] = []

        def implicit(name: str, span: Span) -> Lin | None:
            if lookup_const(info.file, ast.Name(ast.Ident(name, span), span)) is not None:
                return None
            if name not in warned:
                warned.append(name)
                self.report(
                    "W0001",
                    f"implicit dimension `{name}`",
                    span,
                    "not declared; taken as a dimension of this function",
                    help=f"declare it with `dim {name}` at file level "
                    f"or as a type parameter `{{{name} : dim}}`",
                )
                info.dims.append(name)
            return Lin.var(name)

        scope = TypeScope(info.file, dims, info.module_args, implicit)
        used_file_dims: list[str] = []
        original_dim = scope.dim

        def dim(name: str, span: Span) -> Lin | None:
            if name not in dims and name in info.file.dims and name not in used_file_dims:
                used_file_dims.append(name)
            return original_dim(name, span)

        scope.dim = dim  # type: ignore[method-assign]
        if info.module is not None:
            theta = Params(Instance(info.module, tuple(Lin.var(d) for d in info.module.dims)))
            info.params.append(("θ", theta, None))
            info.all_params.append(("θ", theta, None))
        try:
            for param in decl.params:
                ty = resolve(scope, param.type)
                default = None
                if param.default is not None:
                    default = self.const_expr(info.file, param.default)
                if isinstance(ty, ModuleT):
                    info.module_args[param.name.name] = ty
                else:
                    info.params.append((param.name.name, ty, default))
                info.all_params.append((param.name.name, ty, default))
            if decl.ret is not None:
                info.ret = resolve(scope, decl.ret)
        except ConstError as error:
            self.report(error.code, error.message, error.span, error.label)
            info.state = "failed"
            return
        for name in used_file_dims:
            if name not in info.dims:
                info.dims.append(name)
        info.declared_effects = tuple(e.name for e in decl.effects)
        for effect in decl.effects:
            if effect.name != "Rand":
                self.report(
                    "E4002",
                    f"unknown effect `{effect.name}`",
                    effect.span,
                    "the only effect is `Rand`",
                )
        self.set_dim_ctx(info)
        info.state = "signed"

    def set_dim_ctx(self, info: FnInfo) -> None:
        bounds = {
            name: int(bound) for name, bound in info.file.dim_bounds.items() if name in info.dims
        }
        info.dim_ctx = DimContext(list(info.dims), bounds)

    def const_expr(self, file: FileEnv, expr: ast.Expr) -> Fraction:
        lin = lin_eval(file, expr, lambda name: None)
        if not lin.is_const:
            raise ConstError("E2013", "not a constant", expr.span, "expected a number here")
        return lin.const

    def init_info(self, module: ModuleInfo) -> FnInfo:
        """`M.init(key) -> params M uses Rand`, generated for every module."""
        name = f"{self.prefix(module.file)}{module.name}.init"
        info = FnInfo(name, module.file, module, None, generated=True)
        info.dims = list(module.dims)
        inst = Instance(module, tuple(Lin.var(d) for d in module.dims))
        info.params = [("key", KeyT(), None)]
        info.all_params = list(info.params)
        info.ret = Params(inst)
        info.declared_effects = ("Rand",)
        info.regularity = {"key": (Reg.SMOOTH, None)}
        info.effects = {"Rand": module.decl.name.span}
        key = ir.Param(0, "key", KeyT())
        body = (ir.Instr(1, None, Params(inst), ir.Prim("init", (ir.Ref(0, "key"),)), None),)
        info.core = ir.Function(
            info.name, tuple(info.dims), (key,), Params(inst), ("Rand",), body, ir.Ref(1), None
        )
        info.state = "done"
        return info

    # ------------------------------------------------------------ bodies

    def check_fn(self, info: FnInfo) -> None:
        """Check a function's body once (on demand: callers check callees first)."""
        if info.state != "signed":
            return
        decl = info.decl
        assert decl is not None
        info.state = "checking"
        ctx = FnCtx(info)
        self.bind_params(ctx)
        try:
            result = self.check_body(ctx, decl.body)
            self.finish(ctx, result, decl.body.result.span, decl)
            info.state = "done"
        except Abort:
            info.state = "failed"
        except ConstError as error:
            # A declaration this body reaches (a `use`, a parameter's type) is broken.
            self.report(error.code, error.message, error.span, error.label)
            info.state = "failed"

    def bind_params(self, ctx: FnCtx) -> None:
        info = ctx.info
        for name, module_ty in info.module_args.items():
            ctx.locals[name] = ModVal(module_ty.inst.module, module_ty.inst)
        for name, ty, _default in info.params:
            index = ctx.next_index
            ctx.next_index += 1
            deps: Deps = {}
            if not isinstance(ty, KeyT):
                reg = Reg.DISC if isinstance(ty, Tensor) and ty.elem != Elem.REAL else Reg.SMOOTH
                deps = {name: (reg, None)}
            val = Val(ty, ir.Ref(index, name), deps)
            if name == "θ" and info.module is not None:
                ctx.theta = val
            else:
                ctx.locals[name] = val

    def check_body(self, ctx: FnCtx, body: ast.Body) -> Val:
        for let in body.lets:
            value = self.value(ctx, self.expr(ctx, let.value), let.value.span)
            match let.pattern:
                case ast.Ident(name):
                    named = ctx.name_last(value, name)
                    ctx.locals[name] = named or value
                    ctx.info.lets.append((name, value.ty))
                case ast.TuplePattern(names):
                    if not isinstance(value.ty, TupleT) or len(value.ty.items) != len(names):
                        raise self.fail(
                            "E2002",
                            f"cannot destructure `{value.ty}` into {len(names)} names",
                            let.value.span,
                            f"this has type `{value.ty}`",
                        )
                    for index, (ident, item_ty) in enumerate(
                        zip(names, value.ty.items, strict=True)
                    ):
                        part = ctx.emit(
                            ident.name,
                            item_ty,
                            ir.Get(value.operand, index),
                            ident.span,
                            value.deps,
                        )
                        ctx.locals[ident.name] = part
                        ctx.info.lets.append((ident.name, item_ty))
        return self.value(ctx, self.expr(ctx, body.result), body.result.span)

    def finish(self, ctx: FnCtx, result: Val, result_span: Span, decl: ast.FnDecl | None) -> None:
        """Return type, effects and regularity of a checked body; build its Core."""
        info = ctx.info
        if info.ret is not None and decl is not None:
            try:
                same_type(info.dim_ctx, info.ret, result.ty)
            except ShapeError as error:
                if error.code == "E2006":
                    self.report(error.code, error.message, result_span, error.label)
                raise self.fail(
                    "E2011",
                    f"`{info.short}` returns `{result.ty}` but is declared `-> {info.ret}`",
                    result_span,
                    f"this body has type `{result.ty}`",
                    secondary=(Label(decl.span, f"declared `{info.ret}`"),),
                ) from None
        else:
            info.ret = result.ty
        if decl is not None:
            for effect, span in info.effects.items():
                if effect not in info.declared_effects:
                    raise self.fail(
                        "E4001",
                        f"`{info.short}` uses the effect `{effect}` without declaring it",
                        span,
                        f"this uses `{effect}`",
                        secondary=(Label(decl.span, "declared without `uses`"),),
                        help=f"add `uses {effect}` to the signature of `{info.short}`",
                    )
        info.depends = set(result.deps)
        for name, ty, _ in info.params:
            if isinstance(ty, Tensor) and ty.elem != Elem.REAL:
                info.regularity[name] = (Reg.DISC, None)
            elif isinstance(ty, KeyT):
                info.regularity[name] = (Reg.SMOOTH, None)
            else:
                info.regularity[name] = result.deps.get(name, (Reg.SMOOTH, None))
        params = tuple(
            ir.Param(index, name, ty, default)
            for index, (name, ty, default) in enumerate(info.params)
        )
        effects = tuple(sorted(info.effects))
        info.core = ir.Function(
            info.name,
            tuple(info.dims),
            params,
            info.ret if info.ret is not None else result.ty,
            effects,
            tuple(ctx.instrs),
            result.operand,
            decl.span if decl else None,
        )


def _module_cycle(module: ModuleInfo, path: list[ModuleInfo]) -> ast.UseDecl | None:
    """The first `use` of `module` through which it contains itself, if any."""
    for use in module.decl.uses:
        target = use.target.inner if isinstance(use.target, ast.StackType) else use.target
        sub = find_module(module.file, target.path)
        if sub is None:
            continue
        if sub is module or any(m is sub for m in path):
            return use
        if _module_cycle(sub, [*path, module]) is not None:
            return use
    return None
