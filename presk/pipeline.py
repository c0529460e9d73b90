"""The whole compiler, as two lists of passes run in order.

    FRONT_END   a file and its `--const` overrides   -> CheckedProgram (with PSK-Core)
    BACK_END    one entry at concrete dims, in one realization, on N workers
                                                      -> CompiledEntry (C text, a loaded .so)

Every command that runs, dumps, times or exports an entry goes through
`front_end` and `compile_entry` (or `lower_entry`, which stops before the C
compiler); none assembles the stages itself. A pass is a function from one
state to the next: the states are frozen, so what a pass sees is what the
previous pass left.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Generic, Literal, TypeVar

from presk.ad.reverse import NotDifferentiable, differentiate
from presk.backends.native import CompiledEntry, layout_of_type
from presk.build.compile import build
from presk.build.load import Library, load
from presk.cgen.host import PrintOptions
from presk.cgen.program import Unit, print_unit
from presk.core import ir
from presk.diagnostics import CommandError, Sink, UsageError
from presk.dtypes import Dtype
from presk.elab.program import LoadError, Program, UnknownConstant
from presk.elab.program import load as load_program
from presk.elab.ty import Hyper
from presk.entries import Binding, Entry
from presk.host.program import HostProgram, HTensor, HValue, record
from presk.host.realization import Realization
from presk.interp.reference import RunError
from presk.kernel.layout import Layout
from presk.machine import memory_bytes, size_text
from presk.types.check import CheckedProgram, check_program

Remat = Literal["store", "recompute"]
S = TypeVar("S")


@dataclass(frozen=True)
class Pass(Generic[S]):
    """One step of the compiler: its name (as `--stage` and the docs call it) and what it does."""

    name: str
    description: str
    run: Callable[[S], S]


# ---------------------------------------------------------------- the front end


@dataclass(frozen=True)
class Front:
    """A file on its way to PSK-Core."""

    path: str
    overrides: dict[str, Fraction]
    sink: Sink
    program: Program | None = None
    checked: CheckedProgram | None = None


def _load(state: Front) -> Front:
    try:
        program = load_program(state.path, state.overrides, state.sink)
    except LoadError as error:
        raise CommandError(str(error)) from None
    except UnknownConstant as error:
        raise UsageError(str(error)) from None
    return replace(state, program=program)


def _check(state: Front) -> Front:
    assert state.program is not None
    checked = check_program(state.program, state.sink)
    state.sink.check()
    return replace(state, checked=checked)


FRONT_END: tuple[Pass[Front], ...] = (
    Pass("load", "lex, parse and elaborate the file and its imports; constants in ℚ", _load),
    Pass("check", "shapes, regularity and effects; lowering to PSK-Core", _check),
)


def front_end(path: str, overrides: dict[str, Fraction]) -> tuple[CheckedProgram, Sink]:
    """Load and check a program; raises CompileError (warnings included) on errors."""
    state = Front(path, overrides, Sink())
    try:
        for step in FRONT_END:
            state = step.run(state)
    except RecursionError:
        raise CommandError(f"{path}: the program is nested too deeply to compile") from None
    assert state.checked is not None
    return state.checked, state.sink


# ---------------------------------------------------------------- the back end


_DIFFERENTIATED: dict[tuple[int, str], tuple[CheckedProgram, ir.Module]] = {}


def core_module(checked: CheckedProgram, remat: Remat = "store") -> ir.Module:
    """The program's Core with every `grad` expanded: computed once per program and remat.

    Raises NotDifferentiable for a derivative the AD does not build yet.
    """
    key = (id(checked), remat)
    hit = _DIFFERENTIATED.get(key)
    if hit is not None and hit[0] is checked:
        return hit[1]
    module = differentiate(checked.core, remat)
    if len(_DIFFERENTIATED) >= 8:
        _DIFFERENTIATED.pop(next(iter(_DIFFERENTIATED)))
    _DIFFERENTIATED[key] = (checked, module)
    return module


@dataclass(frozen=True)
class Request:
    """What to compile: an entry at concrete dims, in a realization, on `threads` workers."""

    checked: CheckedProgram
    entry: Entry
    binding: Binding
    realization: Realization
    threads: int = 1
    remat: Remat = "store"
    banner: str = ""
    tiles: bool = True  # False: point zero, every contraction row-wise (export --mode scop)
    profile: bool = False  # each launch timed (bench --by-kernel); the same bits
    capture: bool = False  # each launch's inputs copied out once where asked (autotune)
    layouts: Mapping[str, Layout] = field(default_factory=dict)  # a plan's point per site
    # The machine's worker count a plan's splits are checked against (None: `threads`;
    # 0: none, as `dump` shows kernels it does not run).
    machine_threads: int | None = None

    @property
    def dims(self) -> dict[str, int]:
        return self.binding.dims


@dataclass(frozen=True)
class Compilation:
    """An entry on its way to a loaded library; each pass fills the next field."""

    request: Request
    module: ir.Module | None = None
    layouts: tuple[HValue, ...] | None = None
    host: HostProgram | None = None
    unit: Unit | None = None
    library_path: Path | None = None
    library: Library | None = None


def _differentiate(state: Compilation) -> Compilation:
    return replace(state, module=core_module(state.request.checked, state.request.remat))


def _layout(state: Compilation) -> Compilation:
    request = state.request
    realization = request.realization
    prefix = request.binding.shown_prefix
    for name, ty, default in request.entry.info.params:
        if isinstance(ty, Hyper) and default is None:
            # An entry runs its hyperparameters at their defaults, as `presk run` draws them.
            raise RunError(f"cannot compile hyperparameter `{name}` of type {ty}: no default")
    layouts = tuple(
        layout_of_type(ty, request.dims, prefix, realization, default)
        for _, ty, default in request.entry.info.params
    )
    return replace(state, layouts=layouts)


def _record(state: Compilation) -> Compilation:
    request = state.request
    assert state.module is not None and state.layouts is not None
    host = record(
        state.module,
        request.entry.info.name,
        request.dims,
        list(state.layouts),
        request.realization,
        request.threads,
        tiles=request.tiles,
        layouts=dict(request.layouts),
        machine_threads=request.machine_threads,
    )
    return replace(state, host=host)


# No entry this machine cannot hold is compiled: its arena and its buffers
# are counted before anything is allocated.
def _budget(state: Compilation) -> Compilation:
    assert state.host is not None
    host = state.host
    tensors = [leaf for _, leaf in host.inputs if isinstance(leaf, HTensor)]
    tensors += [leaf for _, leaf in host.outputs]
    needed = host.arena_bytes + sum(leaf.size * Dtype(leaf.dtype).size for leaf in tensors)
    available = memory_bytes()
    if needed > available:
        raise RunError(
            f"one call of `{state.request.entry.text}` needs {size_text(needed)} "
            f"(arena, inputs and outputs); this machine has {size_text(available)}"
        )
    return state


def _print(state: Compilation) -> Compilation:
    request = state.request
    assert state.host is not None
    names = ["theta" if name == "θ" else name for name, _, _ in request.entry.info.params]
    options = PrintOptions(profile=request.profile, capture=request.capture)
    unit = print_unit(state.host, request.entry.info.name, names, request.banner, options)
    return replace(state, unit=unit)


def _build(state: Compilation) -> Compilation:
    assert state.unit is not None and state.host is not None
    path = build(state.unit.text, openmp=state.host.splits > 0)
    return replace(state, library_path=path)


def _load_library(state: Compilation) -> Compilation:
    assert state.unit is not None and state.library_path is not None
    return replace(state, library=load(state.library_path, state.unit.cdef))


BACK_END: tuple[Pass[Compilation], ...] = (
    Pass(
        "differentiate",
        "grad as vjp/fwd/bwd with residuals, then dead code removed",
        _differentiate,
    ),
    Pass("layout", "each argument's buffers at these dims, in the realization's types", _layout),
    Pass(
        "record",
        "the host program at concrete shapes: fusion groups lowered to kernels, "
        "launches, folds, views, the arena, OpenMP splits",
        _record,
    ),
    Pass("budget", "the bytes one call needs, against the machine's memory", _budget),
    Pass("print", "kernels and host functions as one C translation unit", _print),
    Pass("build", "cc into a shared object, cached by the hash of its text and flags", _build),
    Pass("load", "dlopen through cffi", _load_library),
)


def run_back_end(request: Request, until: str = "load") -> Compilation:
    """Run the back end's passes in order, up to and including `until`."""
    if until not in {p.name for p in BACK_END}:
        raise ValueError(f"no pass {until!r}")
    state = Compilation(request)
    for step in BACK_END:
        state = step.run(state)
        if step.name == until:
            break
    return state


def lower_entry(request: Request) -> Compilation:
    """An entry recorded and printed, without the C compiler (`dump --stage kernel`)."""
    return run_back_end(request, until="print")


def compile_entry(
    checked: CheckedProgram,
    entry: Entry,
    binding: Binding,
    realization: Realization,
    threads: int = 1,
    *,
    remat: Remat = "store",
    banner: str | None = None,
    tiles: bool = True,
    layouts: Mapping[str, Layout] | None = None,
    machine_threads: int | None = None,
) -> CompiledEntry:
    """An entry compiled to a loaded library, callable on arrays and parameter trees."""
    request = Request(
        checked,
        entry,
        binding,
        realization,
        threads,
        remat,
        f"entry {entry.text}" if banner is None else banner,
        tiles,
        layouts=dict(layouts or {}),
        machine_threads=machine_threads,
    )
    state = run_back_end(request)
    assert state.unit is not None and state.host is not None and state.library is not None
    assert state.layouts is not None
    return CompiledEntry(state.unit, state.host, state.library, realization, threads, state.layouts)


def compile_path(
    path: str,
    entry: str,
    dims: dict[str, int],
    realization: Realization,
    threads: int = 1,
    *,
    consts: dict[str, Fraction] | None = None,
    banner: str | None = None,
    tiles: bool = True,
    layouts: Mapping[str, Layout] | None = None,
    remat: Remat = "store",
) -> tuple[CompiledEntry, CheckedProgram, Entry, Binding]:
    """A file's entry compiled at `dims`: what scripts, benchmarks and tests call."""
    from presk.entries import bind_dims, find_entry

    checked, _ = front_end(path, consts or {})
    chosen = find_entry(checked, entry)
    binding = bind_dims(chosen, {k: str(v) for k, v in dims.items()})
    compiled = compile_entry(
        checked,
        chosen,
        binding,
        realization,
        threads,
        remat=remat,
        banner=banner,
        tiles=tiles,
        layouts=layouts,
    )
    return compiled, checked, chosen, binding


__all__ = [
    "BACK_END",
    "FRONT_END",
    "Compilation",
    "NotDifferentiable",
    "Pass",
    "Request",
    "compile_entry",
    "compile_path",
    "core_module",
    "front_end",
    "lower_entry",
]
