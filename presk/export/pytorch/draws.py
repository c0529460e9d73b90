"""Module constructors, and what the export draws with presk's generator (its copy,
`presk_random.py`).

`constructor_args` are a class's `__init__` arguments. Every `nn.Module` class carries
`PRESK_INIT`: each leaf of its parameter tree with its path in presk (the key's name), its
path in the module (`{}` for a layer of a stack) and its initializer, so that
`presk_random.init(model, key)` draws the tree presk's `M.init(key)` draws, and
`presk_random.init(model, key_from_seed(s), "theta/")` the θ that `presk run --seed s`
synthesizes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction

from presk.elab.presburger import Lin
from presk.elab.program import ModuleInfo
from presk.elab.ty import Instance, Tensor
from presk.export.pytorch.layout import Unsupported
from presk.export.pytorch.names import number
from presk.syntax import ast
from presk.types.scope import module_scope, resolve, use_instance

HELPER = "presk_random"  # the helper module's name (`presk_random.py`)


def constructor_args(module: ModuleInfo) -> list[str]:
    """A module's constructor arguments: its dims, then the file dims its parameters'
    shapes depend on (MiniGPT's position table has T rows: `MiniGPT(T)`)."""
    names = list(module.dims)
    for var in _free_dims(module):
        if var not in names:
            names.append(var)
    return names


def _free_dims(module: ModuleInfo) -> list[str]:
    inst = Instance(module, tuple(Lin.var(d) for d in module.dims))
    found: list[str] = []

    def note(lin: Lin) -> None:
        for var, _ in lin.coeffs:
            if var not in module.dims and var not in found:
                found.append(var)

    scope, _ = module_scope(inst)
    for decl in module.decl.params:
        ty = resolve(scope, decl.type)
        if isinstance(ty, Tensor):
            for axis in ty.axes:
                note(axis.size)
    for use in module.decl.uses:
        sub = use_instance(inst, use)
        for arg in sub.args:
            note(arg)
        if sub.stack is not None:
            note(sub.stack)
        for var in _free_dims(sub.module):
            if var not in module.dims and var not in found:
                found.append(var)
    return found


def initializer(decl: ast.ParamDecl) -> str:
    """The initializer as presk_random.draw takes it: `("normal", 0.02)`."""
    init = decl.init
    kind = init.name.name if init is not None else "zeros"
    if kind in ("zeros", "ones", "xavier_uniform"):
        return f'("{kind}",)'
    if kind == "normal":
        std = Fraction(1)  # presk's default, also for a std that is not a literal
        for kwarg in init.kwargs if init is not None else ():
            if kwarg.name.name == "std" and isinstance(kwarg.value, ast.Num):
                std = kwarg.value.value
        return f'("normal", {number(std)})'
    raise Unsupported(f"the initializer `{kind}` of `{decl.name.name}`")


# A module's attribute as the export names it (naming.Naming.attr): passed in, since the
# naming reads this module's constructor arguments.
Attr = Callable[[ModuleInfo, str], str]


def init_table(module: ModuleInfo, attr_of: Attr) -> list[tuple[str, str, str]]:
    """(presk path, module path with `{}` for a layer, initializer) of every leaf."""
    out: list[tuple[str, str, str]] = []

    def walk(inst: Instance, presk: str, torch: str, stacked: bool) -> None:
        for decl in inst.module.decl.params:
            attr = attr_of(inst.module, decl.name.name)
            out.append((presk + decl.name.name, torch + attr, initializer(decl)))
        for use in inst.module.decl.uses:
            sub = use_instance(inst, use)
            name, attr = use.name.name, attr_of(inst.module, use.name.name)
            if sub.stack is not None:
                if stacked:
                    raise Unsupported("a stack inside a stack")
                walk(sub.unstacked(), f"{presk}{name}.", f"{torch}{attr}.{{}}.", True)
            else:
                walk(sub, f"{presk}{name}.", f"{torch}{attr}.", stacked)

    walk(Instance(module, tuple(Lin.var(d) for d in module.dims)), "", "", False)
    return out


def _text(value: str) -> str:
    """A Python string literal in double quotes (JSON's escapes are Python's)."""
    return json.dumps(value, ensure_ascii=False)


def init_lines(module: ModuleInfo, attr_of: Attr) -> list[str]:
    """The class attribute `PRESK_INIT` (indented for the class body)."""
    lines = [
        "    # presk's initializer of each leaf, for presk_random.init: (presk path, path here,",
        "    # `{}` a layer of a stack, initializer).",
        "    PRESK_INIT = (",
    ]
    table = init_table(module, attr_of)
    lines += [f"        ({_text(p)}, {_text(t)}, {how})," for p, t, how in table]
    return [*lines, "    )"]


__all__ = ["HELPER", "constructor_args", "init_lines", "init_table", "initializer"]
