"""Python names for a program's names, distinct in every scope the export writes.

`ident` spells one presk name as a Python identifier, but it is not injective: Python
normalises identifiers by NFKC (`g₁` is `g1` to the parser), and a character Python refuses
becomes `_` (`a-b` and `a_b` meet). So every scope of the generated code takes its names
from a `Table`: a name keeps its `ident` spelling when nothing else of the scope has it
(compared after NFKC, as Python compares them), else it gets the first free suffix `_1`,
`_2` … The scopes:

* the files written (`Naming.file`): one table of module names, holding the export's own
  files (`presk_random`, `test_conformance`, …) and the modules generated code imports
  (the standard library's, torch's), compared also without case, as a file system may;
* each file's module level (`Naming.function`, `Naming.cls`, `Naming.alias`): functions,
  classes and import aliases, beside the names generated code uses there (`torch`, `nn`,
  `F`, `math`, `presk_random`, the builtins);
* each class (`Naming.attr`, `Naming.method`): dims kept as attributes, parameters,
  sub-modules and methods, beside `nn.Module`'s own attributes;
* each function (`Naming.signature`, then `BodyWriter.fresh`): parameters, dims and lets,
  beside its file's module-level names;
* the generated scripts that import user code (`test_conformance.py`, `presk_run.py`,
  `serve.py`): an imported name that meets one of the script's own is imported `as` a
  fresh one (`imported`).

Names are chosen in two passes, so that a name that meets nothing prints as `ident` gives
it even when another name's suffix would have been its spelling.
"""

from __future__ import annotations

import keyword
import sys
import unicodedata
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from presk.core import ir
from presk.elab.program import FileEnv, ModuleInfo, Program
from presk.elab.ty import Params
from presk.export.pytorch.draws import HELPER, constructor_args
from presk.export.pytorch.names import ident, module_name
from presk.syntax import ast
from presk.types.check import CheckedProgram, FnInfo
from presk.types.values import TrainingRun


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# The export's own files (without `.py`): the helper, the tests, the ONNX tracer, the
# trainer's and the server's scripts, and pytest's conftest.
OWN_FILES = (HELPER, *words("test_conformance _onnx_build presk_run train pskd serve conftest"))
# Modules generated code imports, directly or through torch: a file of the same name
# beside them would shadow them.
IMPORTED_MODULES = ("torch", "numpy", "onnx", "onnxruntime", "pytest", "_pytest")
RESERVED_FILES = (*OWN_FILES, *IMPORTED_MODULES, *sorted(sys.stdlib_module_names))

# Names generated code uses at a file's module level and inside its functions: the
# imports, and the builtins it calls.
IMPORTS = ("torch", "nn", "F", "math", HELPER)
BUILTINS = words("range float int super max min sum len dict tuple list zip isinstance abs print")
BUILTINS += words("enumerate bool object")
PYTHON = (*keyword.kwlist, *keyword.softkwlist, *BUILTINS, "self", "__class__")

# nn.Module's attributes (torch 2.x) and the export's own: a parameter, a sub-module or a
# method of one of these names would replace torch's.
MODULE_ATTRS = words(
    """
    T_destination add_module apply bfloat16 buffers call_super_init children compile cpu
    cuda double dump_patches eval extra_repr float forward get_buffer get_extra_state
    get_parameter get_submodule half ipu load_state_dict modules mtia named_buffers
    named_children named_modules named_parameters parameters register_backward_hook
    register_buffer register_forward_hook register_forward_pre_hook
    register_full_backward_hook register_full_backward_pre_hook
    register_load_state_dict_post_hook register_load_state_dict_pre_hook register_module
    register_parameter register_state_dict_post_hook register_state_dict_pre_hook
    requires_grad_ set_extra_state set_submodule share_memory state_dict to to_empty train
    type xpu zero_grad training PRESK_INIT __init__
    """
)

# Locals of the generated `run_step`, which refers to the objective by its module-level
# name: in a file with a training run, those names are taken.
OPTIMIZER_LOCALS = words("model θ m v g t lr total batch value norm new_θ new_m new_v leaf")


def _nfkc(name: str) -> str:
    return unicodedata.normalize("NFKC", name)


def _file_key(name: str) -> str:
    return _nfkc(name).casefold()


class Table:
    """The names of one scope; see the module docstring."""

    def __init__(self, reserved: Iterable[str] = (), files: bool = False) -> None:
        self.key = _file_key if files else _nfkc
        self.taken: set[str] = {self.key(n) for n in reserved}

    def copy(self) -> Table:
        other = Table()
        other.key = self.key
        other.taken = set(self.taken)
        return other

    def has(self, name: str) -> bool:
        return self.key(name) in self.taken

    def claim(self, name: str) -> None:
        self.taken.add(self.key(name))

    def fresh(self, base: str) -> str:
        """`base`, or `base_1`, `base_2` … the first not taken; taken from now on."""
        name, n = base, 1
        while self.has(name):
            name = f"{base}_{n}"
            n += 1
        self.claim(name)
        return name

    def assign(self, bases: Sequence[str]) -> list[str]:
        """Names for `bases` in order: the first of each spelling that is free keeps it,
        then the others take fresh ones (so no suffix takes a later name's spelling)."""
        out: list[str | None] = [None] * len(bases)
        for i, base in enumerate(bases):
            if not self.has(base):
                self.claim(base)
                out[i] = base
        return [n if n is not None else self.fresh(b) for n, b in zip(out, bases, strict=True)]


def imported(own: Iterable[str], names: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The local names of `from MODULE import NAME` in a script whose own names are `own`
    (a name that meets one of them, or another import, is imported `as` a fresh one)."""
    table = Table([*PYTHON, *own])
    keys = sorted(set(names))
    return dict(zip(keys, table.assign([name for _, name in keys]), strict=True))


def import_line(module: str, names: dict[str, str]) -> str:
    """`from module import a, b as b_1` for {imported name: local name}."""
    parts = [n if n == local else f"{n} as {local}" for n, local in sorted(names.items())]
    return f"from {module} import {', '.join(parts)}"


@dataclass(frozen=True)
class Signature:
    """A function's Python parameters: each Core parameter's name, the module passed
    beside a parameter tree, and the table of its scope once they are taken."""

    names: dict[int, str]  # Core parameter index → name
    companions: dict[int, str]  # index of a tree parameter → its module's argument
    table: Table


@dataclass
class Naming:
    """Every Python name of one program's export."""

    files: dict[int, str] = field(default_factory=dict)  # id(FileEnv) → module
    tables: dict[int, Table] = field(default_factory=dict)  # id(FileEnv) → module level
    globals: dict[tuple[int, str], str] = field(default_factory=dict)  # (file, key) → name
    attrs: dict[tuple[int, str], str] = field(default_factory=dict)  # (module, key) → name
    signatures: dict[int, Signature] = field(default_factory=dict)  # id(FnInfo) → …
    # Keep the objects whose ids key the maps alive as long as the naming.
    keep: list[object] = field(default_factory=list)

    # ------------------------------------------------------------ lookups

    def file(self, env: FileEnv) -> str:
        return self.files[id(env)]

    def function(self, info: FnInfo) -> str:
        return self.globals[(id(info.file), "fn " + info.name)]

    def cls(self, module: ModuleInfo) -> str:
        return self.globals[(id(module.file), "class " + module.name)]

    def alias(self, env: FileEnv, alias: str) -> str:
        return self.globals[(id(env), "import " + alias)]

    def attr(self, module: ModuleInfo, name: str) -> str:
        """A dim, parameter or sub-module of the class (`self.<attr>`)."""
        return self.attrs[(id(module.decl), "attr " + name)]

    def method(self, info: FnInfo) -> str:
        assert info.module is not None
        return self.attrs[(id(info.module.decl), "method " + info.short)]

    def scope(self, env: FileEnv) -> Table:
        """A fresh copy of what a function of `env` sees taken."""
        return self.tables[id(env)].copy()

    def signature(self, info: FnInfo) -> Signature:
        """The parameters of `info` (a module's function: `self` first)."""
        found = self.signatures.get(id(info))
        if found is None:
            found = self._signature(info)
            self.signatures[id(info)] = found
            self.keep.append(info)
        return found

    def _signature(self, info: FnInfo) -> Signature:
        fn = info.core
        assert fn is not None
        table = self.scope(info.file)
        params: tuple[ir.Param, ...] = fn.params
        if info.module is not None:
            table.claim("self")
            params = params[1:]
        declared = module_arguments(info)
        trees = [p for p in params if isinstance(p.type, Params)]
        bases: list[str] = []
        slots: list[tuple[str, int]] = []  # ("companion" | "name", parameter index)
        for p in params:
            if isinstance(p.type, Params) and info.module is None:
                default = "model" if len(trees) == 1 else f"model_{ident(p.name)}"
                bases.append(declared.get(p.name, default))
                slots.append(("companion", p.index))
            bases.append(ident(p.name))
            slots.append(("name", p.index))
        names: dict[int, str] = {}
        companions: dict[int, str] = {}
        for (kind, index), name in zip(slots, table.assign(bases), strict=True):
            (companions if kind == "companion" else names)[index] = name
        return Signature(names, companions, table)


_NAMINGS: weakref.WeakKeyDictionary[Program, Naming] = weakref.WeakKeyDictionary()


def naming(checked: CheckedProgram) -> Naming:
    """The program's names (computed once per program)."""
    found = _NAMINGS.get(checked.program)
    if found is None:
        found = _build(checked)
        _NAMINGS[checked.program] = found
    return found


def _build(checked: CheckedProgram) -> Naming:
    out = Naming()
    files = Table(RESERVED_FILES, files=True)
    envs = checked.program.files
    for env, name in zip(envs, files.assign([module_name(e.basename) for e in envs]), strict=True):
        out.files[id(env)] = name
    runs: dict[int, list[TrainingRun]] = {}
    for run in checked.trainings:
        runs.setdefault(id(checked.program.main), []).append(run)
    for env in envs:
        _file_names(out, checked, env, runs.get(id(env), []))
    return out


def _file_names(
    out: Naming, checked: CheckedProgram, env: FileEnv, runs: list[TrainingRun]
) -> None:
    reserved = [*PYTHON, *IMPORTS]
    if runs:
        reserved += OPTIMIZER_LOCALS
    table = Table(reserved)
    keys: list[str] = []
    bases: list[str] = []
    for alias in env.imports:
        keys.append("import " + alias)
        bases.append(ident(alias))
    infos = [i for i in checked.functions if i.file is env and i.decl is not None]
    modules: list[ModuleInfo] = []
    for decl in env.tree.decls:
        match decl:
            case ast.Module():
                module = env.modules.get(decl.name.name)
                if module is not None and module.decl is decl:
                    keys.append("class " + module.name)
                    bases.append(ident(module.name))
                    modules.append(module)
            case ast.FnDecl():
                for info in infos:
                    if info.module is None and info.decl is decl and not info.generated:
                        keys.append("fn " + info.name)
                        bases.append(ident(info.short))
    for run in runs:
        for info in (run.rate, run.update, run.step):
            keys.append("fn " + info.name)
            bases.append(ident(info.name))
    chosen = table.assign(bases)
    for key, name in zip(keys, chosen, strict=True):
        out.globals.setdefault((id(env), key), name)
    # What a function of the file sees: the imports, the builtins, the file's names.
    out.tables[id(env)] = Table([*PYTHON, *IMPORTS, *chosen])
    for module in modules:
        methods = [i for i in infos if i.module is module and not i.generated]
        _class_names(out, module, methods)


def _class_names(out: Naming, module: ModuleInfo, methods: list[FnInfo]) -> None:
    table = Table([*PYTHON, *MODULE_ATTRS])
    keys: list[str] = []
    bases: list[str] = []
    seen: set[str] = set()
    names = [
        *constructor_args(module),
        *(p.name.name for p in module.decl.params),
        *(u.name.name for u in module.decl.uses),
    ]
    for name in names:
        if name not in seen:
            seen.add(name)
            keys.append("attr " + name)
            bases.append(ident(name))
    for info in methods:
        if info.short == "apply":
            out.attrs[(id(module.decl), "method apply")] = "forward"
        else:
            keys.append("method " + info.short)
            bases.append(ident(info.short))
    for key, name in zip(keys, table.assign(bases), strict=True):
        out.attrs[(id(module.decl), key)] = name
    out.keep.append(module.decl)


def module_arguments(info: FnInfo) -> dict[str, str]:
    """Of a top-level function, each parameter tree's name → the module argument it is the
    parameters of (`θ` → `net` for `θ : params net`), as `ident` spells it."""
    declared: dict[str, str] = {}
    if info.decl is not None:
        for param in info.decl.params:
            ty = param.type
            if isinstance(ty, ast.ParamsType) and len(ty.target.path) == 1:
                target = ty.target.path[0].name
                if target in info.module_args:
                    declared[param.name.name] = ident(target)
    return declared


__all__ = [
    "Naming",
    "Signature",
    "Table",
    "import_line",
    "imported",
    "module_arguments",
    "naming",
    "words",
]
