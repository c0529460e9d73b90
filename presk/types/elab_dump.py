"""`presk dump --stage elab`: the resolved program and the instances' layouts.

The main file's imports (with resolved paths), constants (evaluated), dims,
type aliases, modules (uses and function signatures, constants substituted)
and functions; then every module instance that a `use` names, with the
dotted path and type of each leaf of its parameter tree.
"""

from __future__ import annotations

from presk.diagnostics import printable
from presk.elab.ty import ModuleT, Params
from presk.syntax import ast
from presk.types.check import CheckedProgram, FnInfo
from presk.types.scope import param_leaves, param_type, use_instance


def _value(value: object) -> str:
    from fractions import Fraction

    if isinstance(value, Fraction) and value.denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    return str(value)


def _signature(info: FnInfo, module_fn: bool) -> str:
    dims_declared = [d.name for d in info.decl.dims] if info.decl else []
    dims = "{" + " ".join(dims_declared) + "}" if dims_declared else ""
    params = [
        f"{name} : {ty}" for name, ty, _ in info.all_params if not (module_fn and name == "θ")
    ]
    effects = f" uses {', '.join(info.declared_effects)}" if info.declared_effects else ""
    ret = f" -> {info.ret}" if info.ret is not None else ""
    return f"fn {info.short}{dims}({', '.join(params)}){ret}{effects}"


def elab_dump(checked: CheckedProgram) -> str:
    """The text of the elaboration dump."""
    main = checked.program.main
    lines = [f"== {printable(main.path)} (main)"]
    infos = {info.decl: info for info in checked.functions if info.decl is not None}
    for imported in main.import_decls:
        target = main.imports.get(imported.alias.name)
        if target is not None:
            lines.append(f"import {imported.alias.name} = {printable(target.path)}")
    for name, value in main.consts.items():
        lines.append(f"const {name} = {_value(value)}")
    for name, _dim in main.dims.items():
        bound = main.dim_bounds.get(name)
        lines.append(f"dim {name}" + (f" <= {_value(bound)}" if bound is not None else ""))
    for decl in main.tree.decls:
        match decl:
            case ast.TypeAlias(alias_name):
                lines.append(f"type {alias_name.name} = {_alias_text(checked, decl)}")
            case ast.Module(module_name):
                module = main.modules.get(module_name.name)
                if module is None:
                    continue
                from presk.elab.presburger import Lin
                from presk.elab.ty import Instance

                generic = Instance(module, tuple(Lin.var(d) for d in module.dims))
                dims = "{" + " ".join(module.dims) + "}" if module.dims else ""
                lines.append(f"module {module_name.name}{dims} {{")
                for param in decl.params:
                    init = f" init = {param.init.name.name}" if param.init else ""
                    lines.append(f"  param {param.name.name} : {param_type(generic, param)}{init}")
                for use in decl.uses:
                    lines.append(f"  use {use.name.name} : {use_instance(generic, use)}")
                for fn in decl.fns:
                    info = infos.get(fn)
                    if info is not None:
                        lines.append("  " + _signature(info, True))
                lines.append("}")
            case ast.FnDecl():
                info = infos.get(decl)
                if info is not None:
                    lines.append(_signature(info, False))
    lines.append("== instances")
    for inst in checked.instances:
        lines.append(f"{inst}:")
        for path, ty, _ in param_leaves(inst):
            lines.append(f"  {path} : {ty}")
    return "\n".join(lines) + "\n"


def _alias_text(checked: CheckedProgram, decl: ast.TypeAlias) -> str:
    from presk.types.scope import TypeScope, resolve

    ty = resolve(TypeScope(checked.program.main), decl.type)
    if isinstance(ty, (ModuleT, Params)):
        return str(ty)
    return str(ty)
