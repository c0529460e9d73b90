"""The checker: types every function and lowers it to PSK-Core as it goes.

`check_program` walks every file of a loaded program (imports first) and
checks each function: its signature (types, dimensions, implicit dimensions:
W0001), its body (shapes for every value of the dimensions, broadcasting,
contractions, primitives' rules), its declared return type (E2011), its
effects against `uses` (E4001) and the regularity of `grad`'s argument
(E3001). Checking a body emits its PSK-Core instructions, so the result is
both a report (types of functions and lets, regularity and effects) and a
Core module. A function is checked once, with symbolic dimensions; calls
instantiate its signature. See Note [Checking emits Core].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from presk.core import ir
from presk.diagnostics import Diagnostic, Label, Sink, Span
from presk.elab.presburger import Lin
from presk.elab.program import ConstError, FileEnv, ModuleInfo, Program, lin_eval, lookup_const
from presk.elab.ty import (
    SCALAR,
    Elem,
    Hyper,
    Instance,
    KeyT,
    ModuleT,
    Params,
    Tensor,
    TupleT,
    Type,
)
from presk.syntax import ast
from presk.syntax.deep import deep
from presk.types import prims as prim_rules
from presk.types import regularity as regs
from presk.types.regularity import Blame, Deps, Reg
from presk.types.scope import TypeScope, find_module, member_type, resolve
from presk.types.shapes import DimContext, ShapeError, Unifier, same_type
from presk.types.values import (
    Denot,
    FnRef,
    ImportVal,
    LambdaVal,
    MethodVal,
    ModVal,
    PrimVal,
    Val,
)


class Abort(Exception):
    """Stops checking the current function after its first error (no cascades)."""


@dataclass(eq=False)
class FnInfo:
    """A function: its signature, and once checked its report and its Core."""

    name: str  # qualified: `Linear.apply`, `loss_grad.lambda0`, `Linear.init`
    file: FileEnv
    module: ModuleInfo | None
    decl: ast.FnDecl | None
    dims: list[str] = field(default_factory=list)
    dim_ctx: DimContext = field(default_factory=DimContext)
    params: list[tuple[str, Type, Fraction | None]] = field(default_factory=list)
    module_args: dict[str, ModuleT] = field(default_factory=dict)
    # Every declared parameter, module-typed ones included, for matching calls.
    all_params: list[tuple[str, Type, Fraction | None]] = field(default_factory=list)
    ret: Type | None = None
    declared_effects: tuple[str, ...] = ()
    state: str = "new"  # new, signed, checking, done, failed
    regularity: dict[str, tuple[Reg, Blame | None]] = field(default_factory=dict)
    effects: dict[str, Span] = field(default_factory=dict)
    lets: list[tuple[str, Type]] = field(default_factory=list)
    core: ir.Function | None = None
    lambdas: list[FnInfo] = field(default_factory=list)
    generated: bool = False
    depends: set[str] = field(default_factory=set)  # parameters the result depends on

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1] if self.module is not None else self.name


@dataclass
class FnCtx:
    """The state of one function body being checked and lowered."""

    info: FnInfo
    locals: dict[str, Denot] = field(default_factory=dict)
    instrs: list[ir.Instr] = field(default_factory=list)
    next_index: int = 0
    theta: Val | None = None
    members: dict[str, Val] = field(default_factory=dict)
    parent: FnCtx | None = None
    lambda_count: list[int] = field(default_factory=lambda: [0])

    def emit(self, name: str | None, ty: Type, op: ir.Op, span: Span | None, deps: Deps) -> Val:
        index = self.next_index
        self.next_index += 1
        self.instrs.append(ir.Instr(index, name, ty, op, span))
        return Val(ty, ir.Ref(index, name), deps)

    def name_last(self, val: Val, name: str) -> Val | None:
        """Give the instruction that produced `val` a source name, if it is the last one."""
        if (
            isinstance(val.operand, ir.Ref)
            and self.instrs
            and self.instrs[-1].index == val.operand.index
            and self.instrs[-1].name is None
        ):
            last = self.instrs[-1]
            self.instrs[-1] = ir.Instr(last.index, name, last.type, last.op, last.span)
            return Val(val.ty, ir.Ref(last.index, name), val.deps)
        return None


@dataclass
class CheckedProgram:
    """The checker's result: every function's report, the Core module, the instances seen."""

    program: Program
    functions: list[FnInfo]
    core: ir.Module
    instances: list[Instance]
    warnings: list[Diagnostic]

    def find(self, name: str) -> FnInfo | None:
        for info in self.functions:
            if info.name == name:
                return info
        return None


_PRIMITIVES = prim_rules.RULES


class Checker:
    """Checks a loaded program; see the module docstring."""

    def __init__(self, program: Program, sink: Sink) -> None:
        self.program = program
        self.sink = sink
        self.infos: dict[tuple[int, str], FnInfo] = {}
        self.order: list[FnInfo] = []
        self.inits: list[FnInfo] = []
        self.instances: list[Instance] = []
        self._prefixes: dict[int, str] | None = None
        self._reported: set[tuple[str, str, str, int, int]] = set()

    # ------------------------------------------------------------ driver

    def run(self) -> CheckedProgram:
        for file in self.program.files:
            # Aliases are resolved once here, used or not, so a broken one is reported.
            for alias in file.aliases.values():
                try:
                    resolve(TypeScope(file), alias.type)
                except ConstError as error:
                    self.report(error.code, error.message, error.span, error.label)
        for file in self.program.files:
            for decl in file.tree.decls:
                match decl:
                    case ast.Module():
                        module = file.modules.get(decl.name.name)
                        if module is None or module.decl is not decl:
                            continue
                        self.note_module_instances(module)
                        if _module_cycle(module, []) is not None:
                            continue
                        for fn in decl.fns:
                            info = self.fn_info(file, module, fn)
                            self.order.append(info)
                            self.check_fn(info)
                        self.inits.append(self.init_info(module))
                    case ast.FnDecl():
                        if file.fns.get(decl.name.name) is decl:
                            info = self.fn_info(file, None, decl)
                            self.order.append(info)
                            self.check_fn(info)
        functions = [*self.order, *self.inits]
        for info in self.order:
            functions.extend(self._all_lambdas(info))
        core = ir.Module(tuple(info.core for info in functions if info.core is not None))
        return CheckedProgram(self.program, functions, core, self.instances, [])

    def _all_lambdas(self, info: FnInfo) -> list[FnInfo]:
        out: list[FnInfo] = []
        for lam in info.lambdas:
            out.append(lam)
            out.extend(self._all_lambdas(lam))
        return out

    def report(
        self,
        code: str,
        message: str,
        span: Span,
        label: str,
        *,
        secondary: tuple[Label, ...] = (),
        help: str | None = None,
        note: str | None = None,
    ) -> None:
        key = (code, message, span.source.path, span.start, span.end)
        if key in self._reported:
            return  # the same broken declaration, reached again from another function
        self._reported.add(key)
        self.sink.report(Diagnostic(code, message, Label(span, label), secondary, help, note))

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
    ) -> Abort:
        """Report an error and return the exception that stops this function's check."""
        self.report(code, message, span, label, secondary=secondary, help=help, note=note)
        return Abort()

    def shape_fail(self, error: ShapeError, span: Span) -> Abort:
        return self.fail(
            error.code, error.message, span, error.label, note=error.note, help=error.help
        )

    def prefix(self, file: FileEnv) -> str:
        """`stem.` for a file whose names clash with another file's, else empty.

        Core functions live in one namespace; the main file keeps plain names
        and an imported file that would collide is qualified by its stem.
        """
        if self._prefixes is None:
            self._prefixes = {}
            seen: set[str] = set()
            for env in [self.program.main, *reversed(self.program.files[:-1])]:
                names = set(env.fns) | set(env.modules)
                clash = bool(names & seen)
                stem = env.basename.rsplit(".", 1)[0]
                self._prefixes[id(env)] = f"{stem}." if clash else ""
                seen |= names
        return self._prefixes[id(file)]

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


def _source_text(node: ast.Expr) -> str:
    return node.span.source.text[node.span.start : node.span.end]


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


@deep
def check_program(program: Program, sink: Sink) -> CheckedProgram:
    """Check every function of a loaded program; errors go to `sink`."""
    return Checker(program, sink).run()


def lookup_module(file: FileEnv, path: tuple[ast.Ident, ...]) -> ModuleInfo | None:
    """A module by `M` or `alias.M` (re-exported for the CLI's entry parsing)."""
    return find_module(file, path)


# Note [Checking emits Core]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# Typing an expression and lowering it to PSK-Core need the same facts: what
# each name resolves to, which function a call reaches with which dimension
# arguments, where a module's parameters live in θ. Rather than record those
# facts in side tables for a second walk, the checker emits each instruction
# as soon as it has typed it. Core's definitions (presk/core/ir.py) therefore
# precede the checker in the stage order; presk/core/ keeps the text form and
# the verifier, which depend on nothing past the checker.
