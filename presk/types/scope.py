"""Resolving surface types to semantic types, and parameter-tree layouts.

A `TypeScope` says which names are dimensions and which are module-typed
arguments (for `params net`); `resolve` turns an `ast.TypeSyn` into a `Type`,
substituting constants and reporting unknown names. `param_leaves` lays out
the parameter tree of a module instance: each leaf's dotted path and type,
sub-modules under their `use` name, stacks with a leading layer axis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from presk.diagnostics import Span
from presk.elab.presburger import Lin
from presk.elab.program import MACHINE_TYPES, ConstError, FileEnv, ModuleInfo, lin_eval
from presk.elab.ty import (
    Axis,
    Elem,
    Hyper,
    Instance,
    KeyT,
    ModuleT,
    Params,
    Tensor,
    TupleT,
    Type,
    subst,
)
from presk.syntax import ast


@dataclass
class TypeScope:
    """What names mean inside a type: dimensions, module-typed arguments."""

    file: FileEnv
    dims: dict[str, Lin] = field(default_factory=dict)
    module_args: dict[str, ModuleT] = field(default_factory=dict)
    # Called for an unknown name in a size position; returns its variable or None.
    implicit: Callable[[str, Span], Lin | None] | None = None

    def dim(self, name: str, span: Span) -> Lin | None:
        if name in self.dims:
            return self.dims[name]
        if name in self.file.dims:
            return Lin.var(name)
        if self.implicit is not None:
            return self.implicit(name, span)
        return None


def _size(scope: TypeScope, expr: ast.Expr) -> Lin:
    spans: dict[str, Span] = {}

    def visit(e: ast.Expr) -> None:
        match e:
            case ast.Name(ident):
                spans.setdefault(ident.name, ident.span)
            case ast.Binary(_, left, right):
                visit(left)
                visit(right)
            case ast.Neg(operand):
                visit(operand)

    visit(expr)
    return lin_eval(scope.file, expr, lambda name: scope.dim(name, spans[name]))


def resolve(scope: TypeScope, syn: ast.TypeSyn) -> Type:
    """The semantic type of a surface type. Raises ConstError for unknown names."""
    match syn:
        case ast.RealType(axes):
            open_, resolved = _axes(scope, axes)
            return Tensor(Elem.REAL, resolved, open_)
        case ast.BoolType(axes):
            open_, resolved = _axes(scope, axes)
            return Tensor(Elem.BOOL, resolved, open_)
        case ast.IdxType(bound, axes):
            open_, resolved = _axes(scope, axes)
            return Tensor(Elem.IDX, resolved, open_, _size(scope, bound))
        case ast.TupleType(items):
            return TupleT(tuple(resolve(scope, item) for item in items))
        case ast.ParamsType(target):
            if len(target.path) == 1 and target.args is None:
                arg = scope.module_args.get(target.path[0].name)
                if arg is not None:
                    return Params(arg.inst)
            inst = resolve_module(scope, target)
            return Params(inst)
        case ast.StackType(count, inner):
            inst = resolve_module(scope, inner)
            return ModuleT(Instance(inst.module, inst.args, _size(scope, count)))
        case ast.NamedType(path, args):
            if len(path) == 1 and args is None:
                name = path[0].name
                if name in MACHINE_TYPES:
                    return Hyper(name)
                if name == "key":
                    return KeyT()
                if name in scope.file.aliases:
                    # The function's own scope, so that the dims it names are its dims.
                    with _expanding(scope.file.aliases[name], syn.span):
                        return resolve(scope, scope.file.aliases[name].type)
            if len(path) == 2 and args is None and path[0].name in scope.file.imports:
                other = scope.file.imports[path[0].name]
                if path[1].name in other.aliases:
                    with _expanding(other.aliases[path[1].name], syn.span):
                        return _alias(other, other.aliases[path[1].name])
            return ModuleT(resolve_module(scope, syn))


_EXPANDING: list[ast.TypeAlias] = []


@contextmanager
def _expanding(alias: ast.TypeAlias, span: Span) -> Iterator[None]:
    """Guard an alias's expansion against an alias that refers to itself."""
    if any(a is alias for a in _EXPANDING):
        raise ConstError(
            "E2018",
            f"type alias `{alias.name.name}` refers to itself",
            span,
            "this expands the alias being defined",
        )
    _EXPANDING.append(alias)
    try:
        yield
    finally:
        _EXPANDING.pop()


def _alias(file: FileEnv, alias: ast.TypeAlias) -> Type:
    return resolve(TypeScope(file), alias.type)


def _axes(scope: TypeScope, items: tuple[ast.AxisItem, ...]) -> tuple[bool, tuple[Axis, ...]]:
    open_ = False
    axes: list[Axis] = []
    for index, item in enumerate(items):
        match item:
            case ast.EllipsisAxis(span):
                if index != 0:
                    raise ConstError(
                        "E2005", "`...` must come first", span, "the open prefix leads the axes"
                    )
                open_ = True
            case ast.AxisSyn(name, size):
                if name is not None and any(a.name == name.name for a in axes):
                    raise ConstError(
                        "E2005",
                        f"axis name `{name.name}` appears twice in this type",
                        name.span,
                        "axis names must be distinct",
                    )
                value = _size(scope, size)
                if value.is_const and (value.const.denominator != 1 or value.const < 0):
                    raise ConstError(
                        "E2019",
                        f"an axis of {value.const} elements",
                        size.span,
                        "an axis size is a natural number",
                    )
                axes.append(Axis(name.name if name else None, value))
    return open_, tuple(axes)


def find_module(file: FileEnv, path: tuple[ast.Ident, ...]) -> ModuleInfo | None:
    """The module named `M` or `alias.M` from `file`."""
    if len(path) == 1:
        return file.modules.get(path[0].name)
    if len(path) == 2 and path[0].name in file.imports:
        return file.imports[path[0].name].modules.get(path[1].name)
    return None


def resolve_module(scope: TypeScope, syn: ast.NamedType) -> Instance:
    """An instance `M{args}`; every dimension of M must be given."""
    module = find_module(scope.file, syn.path)
    if module is None:
        raise ConstError(
            "E2001",
            f"unresolved name `{syn.dotted}`",
            syn.span,
            "not a type, module or alias in scope",
        )
    args = tuple(_size(scope, arg) for arg in syn.args or ())
    if len(args) != len(module.dims):
        raise ConstError(
            "E2002",
            f"`{module.name}` takes {len(module.dims)} dimension argument"
            f"{'' if len(module.dims) == 1 else 's'}, given {len(args)}",
            syn.span,
            f"expected {{{', '.join(module.dims)}}}",
        )
    return Instance(module, args)


def module_scope(inst: Instance) -> tuple[TypeScope, dict[str, Lin]]:
    """The scope of a module's declarations and the substitution of its dims."""
    module = inst.module
    scope = TypeScope(module.file, {d: Lin.var(d) for d in module.dims})
    return scope, dict(zip(module.dims, inst.args, strict=True))


def param_type(inst: Instance, decl: ast.ParamDecl) -> Type:
    """A parameter's type in an instance (without a stack's layer axis)."""
    scope, env = module_scope(inst)
    return subst(resolve(scope, decl.type), env)


def use_instance(inst: Instance, decl: ast.UseDecl) -> Instance:
    """The instance a `use` declares, in an instance of its module."""
    scope, env = module_scope(inst)
    match decl.target:
        case ast.StackType(count, inner):
            sub = resolve_module(scope, inner)
            stacked = Instance(sub.module, sub.args, _size(scope, count))
        case ast.NamedType():
            stacked = resolve_module(scope, decl.target)
    resolved = subst(ModuleT(stacked), env)
    assert isinstance(resolved, ModuleT)
    return resolved.inst


def member_type(inst: Instance, name: str) -> Type | None:
    """The type of `θ.name` for θ : params inst (a leaf or a subtree), or None."""
    base = inst.unstacked()
    for decl in inst.module.decl.params:
        if decl.name.name == name:
            ty = param_type(base, decl)
            if inst.stack is not None and isinstance(ty, Tensor):
                ty = Tensor(ty.elem, (Axis(None, inst.stack), *ty.axes), ty.open, ty.bound)
            return ty
    for use in inst.module.decl.uses:
        if use.name.name == name:
            sub = use_instance(base, use)
            if inst.stack is not None:
                if sub.stack is not None:
                    return None  # a stack of stacks is not supported
                sub = Instance(sub.module, sub.args, inst.stack)
            return Params(sub)
    return None


def param_leaves(inst: Instance, prefix: str = "") -> list[tuple[str, Tensor, ast.ParamDecl]]:
    """Every leaf of `params inst` in order: dotted path, type, declaration."""
    leaves: list[tuple[str, Tensor, ast.ParamDecl]] = []
    for decl in inst.module.decl.params:
        ty = member_type(inst, decl.name.name)
        if isinstance(ty, Tensor):
            leaves.append((prefix + decl.name.name, ty, decl))
    for use in inst.module.decl.uses:
        ty = member_type(inst, use.name.name)
        if isinstance(ty, Params):
            leaves.extend(param_leaves(ty.inst, f"{prefix}{use.name.name}."))
    return leaves
