"""Entries and their dimensions: what `--entry` names and what `--dim` binds.

The entry is `f`, `M.f` or `M{a, b}.f` (module dimensions given in braces, as
constant expressions of the main file). `--dim NAME=N` binds a dimension of the
entry or of its file; other names become, in order, the axes of an open prefix
`...` — and are a usage error where the entry has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from presk.diagnostics import Sink, Source, UsageError
from presk.elab.presburger import Lin
from presk.elab.program import ConstError, FileEnv, const_eval
from presk.elab.ty import Axis as TyAxis
from presk.elab.ty import Tensor as TensorT
from presk.elab.ty import TupleT, Type, dims_env, subst
from presk.interp.reference import RunError
from presk.interp.tensor import Axis
from presk.syntax.parser import parse_expression
from presk.types.check import CheckedProgram, FnInfo

_ENTRY = re.compile(r"^\s*(?:([\w.]+?)\s*(?:\{([^}]*)\})?\s*\.\s*)?(\w+)\s*$")


@dataclass(frozen=True)
class Entry:
    """A function chosen by `--entry` and its module dimensions."""

    info: FnInfo
    text: str
    module_dims: dict[str, int]


@dataclass(frozen=True)
class Binding:
    """An entry's dimensions at concrete values, and the axes of its open prefix."""

    dims: dict[str, int]
    prefix: tuple[Axis, ...] | None  # None: the entry has an open prefix nobody named

    @property
    def shown_prefix(self) -> tuple[Axis, ...]:
        return self.prefix or ()


def natural(flag: str, text: str, low: int = 0, high: int | None = None) -> int:
    """A whole number from a flag's value, within its bounds, or a usage error."""
    try:
        value = int(text.strip(), 10)
    except ValueError:
        value = -1
    if value < low or (high is not None and value > high):
        bound = f" in [{low}, {high}]" if high is not None else f" ≥ {low}"
        raise UsageError(f"{flag} {text}: expected a whole number{bound}")
    return value


def parse_bindings(items: list[str], flag: str) -> dict[str, str]:
    """`NAME=V` pairs from a repeatable flag, in order."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or not value.strip():
            raise UsageError(f"{flag} {item!r}: expected NAME=VALUE")
        out[name] = value.strip()
    return out


def function_names(checked: CheckedProgram) -> list[str]:
    """The main file's declared functions, as `--entry` accepts them."""
    main = checked.program.main
    return [info.name for info in checked.functions if info.file is main and not info.generated]


def find_entry(checked: CheckedProgram, text: str) -> Entry:
    """Resolve `--entry` against the main file (or an imported module by alias)."""
    names = ", ".join(function_names(checked))
    # The functions an optimizer or training block generates go by their full name.
    block = next((i for i in checked.functions if i.block and i.name == text.strip()), None)
    if block is not None:
        return Entry(block, text, {})
    match = _ENTRY.match(text)
    if match is None:
        raise UsageError(
            f"--entry {text!r}: expected `f`, `M.f` or `M{{dims}}.f`; functions: {names}"
        )
    module_path, args_text, fn_name = match.groups()
    main = checked.program.main
    if module_path is None:
        info = next(
            (
                i
                for i in checked.functions
                if i.file is main and i.name == fn_name and not i.generated
            ),
            None,
        )
        if info is None:
            raise UsageError(
                f"--entry {text}: no function `{fn_name}` in {main.path}; functions: {names}"
            )
        return Entry(info, text, {})
    parts = module_path.split(".")
    file: FileEnv | None = main
    for alias in parts[:-1]:
        file = file.imports.get(alias) if file else None
    module = file.modules.get(parts[-1]) if file else None
    if module is None:
        raise UsageError(f"--entry {text}: no module `{module_path}`; functions: {names}")
    qualified = f"{module.name}.{fn_name}"
    info = next((i for i in checked.functions if i.module is module and i.name == qualified), None)
    if info is None:
        raise UsageError(f"--entry {text}: module `{module.name}` has no function `{fn_name}`")
    given = [a for a in (args_text or "").split(",") if a.strip()] if args_text is not None else []
    if len(given) != len(module.dims):
        raise UsageError(
            f"--entry {text}: `{module.name}` takes {len(module.dims)} dimension argument(s)"
            + (f" {{{', '.join(module.dims)}}}" if module.dims else "")
        )
    values = {
        dim: _dim_arg(main, dim, arg.strip(), text)
        for dim, arg in zip(module.dims, given, strict=True)
    }
    return Entry(info, text, values)


def _dim_arg(main: FileEnv, dim: str, text: str, entry: str) -> int:
    sink = Sink()
    expr = parse_expression(Source("<entry>", text), sink)
    if expr is None or sink.has_errors:
        raise UsageError(f"--entry {entry}: `{text}` for {dim} is not a constant")
    try:
        value = const_eval(main, expr)
    except ConstError:
        raise UsageError(f"--entry {entry}: `{text}` for {dim} is not a constant") from None
    if value.denominator != 1 or value < 0:
        raise UsageError(f"--entry {entry}: {dim} = {value} is not a natural number")
    return int(value)


def has_open_prefix(info: FnInfo) -> bool:
    """Whether an argument of the entry has an open prefix `...`."""
    return any(isinstance(t, TensorT) and t.open for _, t, _ in info.params)


def bind_dims(entry: Entry, dim_args: dict[str, str]) -> Binding:
    """Dimension values and the open prefix's axes from `--dim` flags."""
    info = entry.info
    dims = dict(entry.module_dims)
    prefix: list[Axis] = []
    is_open = has_open_prefix(info)
    for name, text in dim_args.items():
        value = _dim_value(name, text)
        if name in info.dims or name in info.file.dims:
            dims[name] = value
        elif is_open:
            prefix.append(Axis(name, value))
        else:
            known = sorted(set(info.dims) | set(info.file.dims))
            listed = ", ".join(known) if known else "none"
            raise UsageError(
                f"--dim {name}: `{info.name}` has no dimension `{name}` and no open "
                f"prefix `...` to name (its dimensions: {listed})"
            )
    for name, value in list(dims.items()):
        bound = info.file.dim_bounds.get(name)
        if bound is not None and value > bound:
            raise RunError(
                f"`dim` bound violated: `{name} <= {bound}` is false for {name} = {value}"
            )
    missing = [d for d in info.dims if d not in dims]
    if missing:
        raise RunError(
            f"dimension `{missing[0]}` of `{info.name}` has no value "
            f"(give it with --dim {missing[0]}=N)"
        )
    return Binding(dims, tuple(prefix) if prefix or not is_open else None)


def _dim_value(name: str, text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(f"--dim {name}={text}: expected a whole number ≥ 0")
    return value


def concrete_type(ty: Type, dims: dict[str, int], prefix: tuple[Axis, ...]) -> str:
    """A type at concrete dimensions, for printing: `ℝ[batch: 4, 2]`, `params Linear{3, 2}`."""
    env = dims_env(dims)
    match ty:
        case TensorT():
            body = subst(ty, env)
            assert isinstance(body, TensorT)
            prefix_axes = tuple(
                TyAxis(a.name, Lin.const_(Fraction(a.size))) for a in (prefix if ty.open else ())
            )
            return str(TensorT(body.elem, prefix_axes + body.axes, False, body.bound))
        case TupleT(items):
            return "(" + ", ".join(concrete_type(i, dims, prefix) for i in items) + ")"
    return str(subst(ty, env))
