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

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import gmpy2
import numpy as np

from presk import diagnostics
from presk.backends.native import CompiledEntry
from presk.diagnostics import NotBuiltYet, UsageError, render
from presk.elab.ty import Params, at_dims, dims_env, subst
from presk.entries import Binding, bind_dims, find_entry, function_names
from presk.host.realization import Realization, RealizationError, parse
from presk.interp import rng
from presk.interp.reference import NotBuilt, RunError, Tree, Value
from presk.interp.run import reference_interpreter
from presk.interp.synth import draw, draw_inputs, to_reference
from presk.interp.tensor import Kind, Tensor
from presk.machine import default_threads
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
    overrides: dict[str, Fraction] = {}
    for name, value in (consts or {}).items():
        try:
            overrides[name] = Fraction(value)
        except (TypeError, ValueError, ZeroDivisionError):
            raise UsageError(f"consts[{name!r}] = {value!r}: not a number") from None
    try:
        checked, sink = front_end(str(path), overrides)
    except diagnostics.CompileError as error:
        raise CompileError(error.diagnostics) from None
    except diagnostics.CommandError as error:
        raise UsageError(str(error)) from None
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
        if backend not in ("native", "interp"):
            raise UsageError(f"backend={backend!r}: expected 'native' or 'interp'")
        realization = _realization(realize)
        count = default_threads() if threads is None else _threads(threads)
        given = {k: str(v) for k, v in (dims or {}).items()}
        key = (name, tuple(sorted(given.items())), backend, repr(realization), count)
        with self._lock:
            if key in self._entries:
                return self._entries[key]
            chosen = find_entry(self.checked, name)
            binding = _bind(chosen, given)
            compiled = None
            if backend == "native":
                try:
                    compiled = compile_entry(self.checked, chosen, binding, realization, count)
                except RunError as error:
                    raise RuntimeFailure(error.message) from None
            made = Entry(
                self, name, chosen.info.name, binding, backend, realization, count, compiled
            )
            self._entries[key] = made
            return made

    def init(
        self, module: str, seed: int = 0, dims: Mapping[str, int] | None = None
    ) -> dict[str, Any]:
        """θ₀ of a module instance (`"Tower"`, `"Linear{3, 2}"`): what `presk run` draws."""
        chosen = find_entry(self.checked, f"{module}.init")
        ty = chosen.info.ret
        if not isinstance(ty, Params):
            raise UsageError(f"{module}: not a module with parameters")
        binding = _bind(chosen, {k: str(v) for k, v in (dims or {}).items()})
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

    @property
    def dims(self) -> dict[str, int]:
        return dict(self.binding.dims)

    def inputs(self, seed: int = 0) -> list[Any]:
        """The arguments `presk run --seed SEED` synthesizes, as arrays and dicts."""
        info = self._info()
        try:
            drawn: list[Any] = draw_inputs(
                info.params, self.binding.dims, self.binding.prefix, seed
            )
        except RunError as error:
            raise RuntimeFailure(error.message) from None
        return drawn

    def __call__(self, *args: Any) -> Any:
        if self.compiled is not None:
            return self.compiled(*args)
        return self._reference(list(args))

    def _info(self) -> Any:
        info = self.program.checked.find(self.function)
        assert info is not None
        return info

    def _reference(self, args: list[Any]) -> Any:
        info = self._info()
        if len(args) != len(info.params):
            raise UsageError(f"the entry takes {len(info.params)} arguments, got {len(args)}")
        dims, prefix = self.binding.dims, self.binding.prefix
        env = dims_env(dims)
        with gmpy2.context(precision=256):
            values = [
                to_reference(_plain(a), subst(ty, env), dims, prefix)
                for a, (_, ty, _) in zip(args, info.params, strict=True)
            ]
            try:
                module = core_module(self.program.checked)
                result = reference_interpreter(module).call(info.name, dims, values)
            except RunError as error:
                raise RuntimeFailure(error.message) from None
            except NotBuilt as error:
                raise NotBuiltYet(str(error)) from None
        return _arrays(result)


def _plain(value: Any) -> Any:
    """Host values with every array-like as a numpy array (torch tensors included)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, rng.Key | Fraction | np.ndarray):
        return value
    return np.asarray(value)


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


def _bind(chosen: Any, given: dict[str, str]) -> Binding:
    try:
        return bind_dims(chosen, given)
    except RunError as error:
        raise UsageError(error.message) from None


def _realization(realize: str | Realization) -> Realization:
    if isinstance(realize, Realization):
        return realize
    try:
        return parse(realize)
    except RealizationError as error:
        raise UsageError(error.message) from None


def _threads(threads: int) -> int:
    if not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise UsageError(f"threads={threads!r}: expected a whole number in [1, 1024]")
    return threads
