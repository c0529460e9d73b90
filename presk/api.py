"""presk from Python: load a program, compile an entry once, call it on arrays.

    >>> import presk
    >>> prog = presk.load("tutorial/01_linear.psk")
    >>> linear = prog.entry("Linear{3, 2}.apply", dims={"batch": 4})
    >>> theta, x = linear.inputs(seed=0)
    >>> linear(theta, x).shape
    (4, 2)

Arguments are numpy arrays (or anything `np.asarray` takes: torch tensors
too), parameter trees as nested dicts of arrays, tuples, and `presk.Key`s;
results come back the same way. The compiled code is cached on disk as on
the command line, and within a `Program` per (entry, dims, backend,
realization, threads): asking twice gives the same `Entry`.
"""

from __future__ import annotations

import operator
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import gmpy2
import numpy as np

from presk import diagnostics
from presk.backends.native import CompiledEntry, HostArg, check_arguments, layout_of_type
from presk.diagnostics import NotBuiltYet, UsageError, render
from presk.elab.ty import Hyper, Params, at_dims, dims_env, subst
from presk.entries import Binding, bind_dims, find_entry, function_names
from presk.host.program import HConst, HKey, HTensor, HTree, HValue
from presk.host.realization import Realization, RealizationError, parse
from presk.interp import rng
from presk.interp.reference import NotBuilt, RunError, Tree, Value
from presk.interp.run import reference_interpreter
from presk.interp.synth import draw, draw_inputs, to_reference
from presk.interp.tensor import Kind, Tensor
from presk.machine import MAX_THREADS, default_threads
from presk.pipeline import compile_entry, core_module, front_end
from presk.types.check import CheckedProgram

Key = rng.Key


class CompileError(diagnostics.CompileError):
    """A program presk refuses: `str()` is the rendered diagnostics, `.diagnostics` the list."""

    def __str__(self) -> str:
        return "\n".join(render(d) for d in self.diagnostics)


class RuntimeFailure(Exception):
    """The program failed while running (a log of a negative number, an index out of range)."""


def load(
    path: str | Path, consts: Mapping[str, int | float | Fraction | str] | None = None
) -> Program:
    """A checked program: the file and its imports, with constants overridden by `consts`."""
    if not isinstance(path, str | os.PathLike) or isinstance(path, bytes):
        raise UsageError(f"path={path!r}: expected a file path (a str or a pathlib.Path)")
    if "\0" in str(path):
        raise UsageError(f"path={str(path)!r}: a file path holds no NUL character")
    if consts is not None and not isinstance(consts, Mapping):
        raise UsageError(f"consts={consts!r}: expected a dict of constant names to numbers")
    overrides: dict[str, Fraction] = {}
    for name, value in (consts or {}).items():
        if not isinstance(name, str):
            raise UsageError(f"consts: the key {name!r} is not a constant's name (a str)")
        try:
            if isinstance(value, bool):
                raise TypeError(value)
            overrides[name] = Fraction(value)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            raise UsageError(f"consts[{name!r}] = {value!r}: not a number") from None
    try:
        checked, sink = front_end(str(path), overrides)
    except diagnostics.CompileError as error:
        raise CompileError(error.diagnostics) from None
    except (diagnostics.CommandError, UsageError) as error:
        raise UsageError(_as_api(str(error))) from None
    return Program(str(path), checked, [d for d in sink.diagnostics if not d.is_error])


@dataclass(frozen=True)
class FunctionSummary:
    """One function as `presk check --summary` shows it."""

    name: str
    file: str
    params: tuple[tuple[str, str], ...]
    result: str
    lets: tuple[tuple[str, str], ...]
    regularity: dict[str, str]
    effects: tuple[str, ...]


@dataclass
class Program:
    """A checked program: its entries, its summary, and compiled entries on request."""

    path: str
    checked: CheckedProgram
    warnings: list[diagnostics.Diagnostic]
    _entries: dict[tuple[object, ...], Entry] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def entries(self) -> list[str]:
        """The functions of the main file, as `entry()` and `--entry` name them."""
        return function_names(self.checked)

    def check(self) -> list[FunctionSummary]:
        """Every checked function's types, lets, regularity classes and effects."""
        out = []
        for info in self.checked.functions:
            if info.generated or info.state != "done":
                continue
            out.append(
                FunctionSummary(
                    info.name,
                    info.file.path,
                    tuple((name, str(ty)) for name, ty, _ in info.params),
                    str(info.ret),
                    tuple((name, str(ty)) for name, ty in info.lets),
                    {name: str(reg) for name, (reg, _) in info.regularity.items()},
                    tuple(sorted(info.effects)),
                )
            )
        return out

    def entry(
        self,
        name: str,
        dims: Mapping[str, int] | None = None,
        *,
        backend: str = "native",
        realize: str | Realization = "f64",
        threads: int | None = None,
        plan: object = None,
    ) -> Entry:
        """The entry `name` (`f`, `M.f`, `M{a, b}.f`) at `dims`, ready to call.

        `backend` is "native" (compiled C, in `realize`: f64, f32, bf16 or "@FILE")
        or "interp" (the exact reference at 256 bits; results rounded to float64).
        """
        if plan is not None:
            raise NotBuiltYet("plan= (layout plans come with `presk plan`)")
        _text("name", name)
        if not isinstance(backend, str) or backend not in ("native", "interp"):
            raise UsageError(f"backend={backend!r}: expected 'native' or 'interp'")
        realization = _realization(realize)
        count = default_threads() if threads is None else _threads(threads)
        given = _dims(dims)
        key = (name, tuple(sorted(given.items())), backend, repr(realization), count)
        with self._lock:
            if key in self._entries:
                return self._entries[key]
            chosen = _find(self.checked, name)
            binding = _bind(chosen, given)
            for param, ty, default in chosen.info.params:
                if isinstance(ty, Hyper) and default is None:
                    raise UsageError(
                        f"{name}: hyperparameter `{param}` has no default "
                        "(an entry runs its hyperparameters at their defaults)"
                    )
            compiled = None
            if backend == "native":
                try:
                    compiled = compile_entry(self.checked, chosen, binding, realization, count)
                except RunError as error:
                    raise RuntimeFailure(error.message) from None
                layouts = compiled.layouts
            else:
                # The reference checks its arguments against the layouts the native
                # backend would take in f64: the same checks, the same messages.
                try:
                    layouts = tuple(
                        layout_of_type(
                            ty, binding.dims, binding.shown_prefix, Realization("f64"), default
                        )
                        for _, ty, default in chosen.info.params
                    )
                except RunError as error:
                    raise RuntimeFailure(error.message) from None
            made = Entry(
                self,
                name,
                chosen.info.name,
                binding,
                backend,
                realization,
                count,
                compiled,
                layouts,
            )
            self._entries[key] = made
            return made

    def init(
        self, module: str, seed: int = 0, dims: Mapping[str, int] | None = None
    ) -> dict[str, Any]:
        """θ₀ of a module instance (`"Tower"`, `"Linear{3, 2}"`): what `presk run` draws."""
        _text("module", module)
        seed = _seed(seed)
        given = _dims(dims)
        chosen = _find(self.checked, f"{module}.init")
        ty = chosen.info.ret
        if not isinstance(ty, Params):
            raise UsageError(f"{module}: not a module with parameters")
        binding = _bind(chosen, given)
        concrete = at_dims(ty, binding.dims)
        try:
            value: dict[str, Any] = draw(concrete, "θ", "theta", binding.dims, None, seed, None)
        except RunError as error:
            raise RuntimeFailure(error.message) from None
        return value


@dataclass(frozen=True)
class Entry:
    """A compiled entry: call it on arrays and parameter trees; it returns the same."""

    program: Program
    name: str
    function: str
    binding: Binding
    backend: str
    realization: Realization
    threads: int
    compiled: CompiledEntry | None
    layouts: tuple[HValue, ...]  # each argument's buffers: what a call is checked against

    @property
    def dims(self) -> dict[str, int]:
        return dict(self.binding.dims)

    def inputs(self, seed: int = 0) -> list[Any]:
        """The arguments `presk run --seed SEED` synthesizes, as arrays and dicts."""
        seed = _seed(seed)
        info = self._info()
        try:
            drawn: list[Any] = draw_inputs(
                info.params, self.binding.dims, self.binding.prefix, seed
            )
        except RunError as error:
            raise RuntimeFailure(error.message) from None
        return drawn

    def __call__(self, *args: Any) -> Any:
        """The entry on `args`; a wrong argument is a UsageError naming it, on either backend."""
        self._check_hyperparameters(args)
        if self.compiled is not None:
            return self.compiled(*args)
        return self._reference(list(args))

    def _check_hyperparameters(self, args: tuple[Any, ...]) -> None:
        """A hyperparameter's argument is its default: the entry runs at its defaults
        (the native code has it compiled in)."""
        for i, (layout, value) in enumerate(zip(self.layouts, args, strict=False)):
            if not isinstance(layout, HConst):
                continue
            name = self._info().params[i][0]
            where = f"argument {i + 1} (hyperparameter `{name}`)"
            number = value.item() if isinstance(value, np.integer | np.floating) else value
            if isinstance(number, bool) or not isinstance(number, int | float | Fraction):
                raise UsageError(f"{where}: expected a number, got {type(value).__name__}")
            try:
                same = Fraction(number) == layout.value or float(number) == float(layout.value)
            except (ValueError, OverflowError):
                same = False
            if not same:
                raise UsageError(
                    f"{where}: {value} is not its default {layout.value}; "
                    "an entry runs its hyperparameters at their defaults"
                )

    def _info(self) -> Any:
        info = self.program.checked.find(self.function)
        assert info is not None
        return info

    def _reference(self, args: list[Any]) -> Any:
        info = self._info()
        leaves = list(check_arguments(self.layouts, args))
        hosts = [_host_value(layout, leaves) for layout in self.layouts]
        dims, prefix = self.binding.dims, self.binding.shown_prefix
        env = dims_env(dims)
        with gmpy2.context(precision=256):
            try:
                values = [
                    to_reference(host, subst(ty, env), dims, prefix)
                    for host, (_, ty, _) in zip(hosts, info.params, strict=True)
                ]
                module = core_module(self.program.checked)
                result = reference_interpreter(module).call(info.name, dims, values)
            except RunError as error:
                raise RuntimeFailure(error.message) from None
            except NotBuilt as error:
                raise NotBuiltYet(str(error)) from None
        return _arrays(result)


def _host_value(layout: HValue, leaves: list[Any]) -> HostArg:
    """An argument rebuilt from its checked buffers (taken from the front of `leaves`):
    arrays in float64 and int64, dicts, tuples, keys, hyperparameters at their defaults."""
    match layout:
        case HTensor() | HKey():
            return leaves.pop(0)
        case HTree(items):
            return {k: _host_value(sub, leaves) for k, sub in items}
        case tuple():
            return tuple(_host_value(sub, leaves) for sub in layout)
        case HConst(value):
            return value
    raise TypeError(f"unexpected layout {layout!r}")


def _arrays(value: Value) -> Any:
    """A reference result as arrays: reals rounded once to float64, indices as int64."""
    match value:
        case Tensor():
            flat = value.data.reshape(-1)
            if value.kind == Kind.REAL:
                return np.array([float(x) for x in flat], dtype=np.float64).reshape(value.shape)
            return np.array([int(x) for x in flat], dtype=np.int64).reshape(value.shape)
        case Tree(items):
            return {k: _arrays(v) for k, v in items}
        case tuple():
            return tuple(_arrays(v) for v in value)
    return value


# The command line's flags, as this API's arguments are named, in messages of the code
# both share (`--dim batch=x: …` is `dims: batch=x: …` here).
_FLAGS = {"--dim": "dims:", "--entry": "entry", "--realize": "realize", "--const": "consts:"}


def _as_api(message: str) -> str:
    for flag, argument in _FLAGS.items():
        if message.startswith(flag + " "):
            return argument + message[len(flag) :]
    return message


def _text(argument: str, value: object) -> None:
    if not isinstance(value, str):
        raise UsageError(f"{argument}={value!r}: expected a str")


def _whole(argument: str, value: object, low: int, high: int | None = None) -> int:
    """A whole number (an int or a numpy integer, not a bool) in [low, high]."""
    try:
        if isinstance(value, bool):
            raise TypeError(value)
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        number = None
    if number is None or number < low or (high is not None and number > high):
        bound = f" in [{low}, {high}]" if high is not None else f" ≥ {low}"
        raise UsageError(f"{argument}={value!r}: expected a whole number{bound}")
    return number


def _seed(seed: object) -> int:
    """A seed as `--seed` takes it: a whole number in [0, 2**64 - 1]."""
    return _whole("seed", seed, 0, 2**64 - 1)


def _dims(dims: object) -> dict[str, str]:
    """`dims` as `--dim` flags: a mapping of dimension names to whole numbers ≥ 0."""
    if dims is None:
        return {}
    if not isinstance(dims, Mapping):
        raise UsageError(f"dims={dims!r}: expected a dict of dimension names to whole numbers")
    out: dict[str, str] = {}
    for name, value in dims.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise UsageError(f"dims: the key {name!r} is not a dimension's name")
        out[name] = str(_whole(f"dims[{name!r}]", value, 0))
    return out


def _find(checked: CheckedProgram, text: str) -> Any:
    try:
        return find_entry(checked, text)
    except UsageError as error:
        raise UsageError(_as_api(str(error))) from None


def _bind(chosen: Any, given: dict[str, str]) -> Binding:
    try:
        return bind_dims(chosen, given)
    except UsageError as error:
        raise UsageError(_as_api(str(error))) from None
    except RunError as error:
        raise UsageError(error.message) from None


def _realization(realize: str | Realization) -> Realization:
    if isinstance(realize, Realization):
        return realize
    if not isinstance(realize, str):
        raise UsageError(f"realize={realize!r}: expected f64, f32, bf16 or @FILE")
    try:
        return parse(realize)
    except RealizationError as error:
        raise UsageError(_as_api(error.message)) from None


def _threads(threads: int) -> int:
    return _whole("threads", threads, 1, MAX_THREADS)
