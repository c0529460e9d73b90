"""Semantic types: what the checker infers and what later stages read.

Dimension sizes are linear forms (`Lin`) over the symbolic dimensions, with
constants already substituted. A tensor type may start with the open prefix
`...` of its function (`open`); a call binds the callee's prefix to axes of
the caller. Module instances carry their dimension arguments; their parameter
trees are laid out by `param_leaves`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import TYPE_CHECKING

from presk.elab.presburger import Lin

if TYPE_CHECKING:
    from presk.elab.program import ModuleInfo


class Elem(Enum):
    """The element kind of a tensor."""

    REAL = "ℝ"
    IDX = "idx"
    BOOL = "bool"


@dataclass(frozen=True, slots=True)
class Axis:
    """One axis: an optional name and a size."""

    name: str | None
    size: Lin

    def __str__(self) -> str:
        return f"{self.name}: {self.size}" if self.name else str(self.size)


@dataclass(frozen=True, slots=True)
class Tensor:
    """`ℝ[...]`, `idx[N][...]` or `bool[...]`; `open` is a leading `...`."""

    elem: Elem
    axes: tuple[Axis, ...]
    open: bool = False
    bound: Lin | None = None

    def __str__(self) -> str:
        parts = (["..."] if self.open else []) + [str(axis) for axis in self.axes]
        inner = f"[{', '.join(parts)}]"
        if self.elem == Elem.IDX:
            return f"idx[{self.bound}]{inner}"
        return f"{self.elem.value}{inner}"

    def with_axes(self, axes: tuple[Axis, ...], open: bool | None = None) -> Tensor:
        return Tensor(self.elem, axes, self.open if open is None else open, self.bound)


def real(*axes: Axis, open: bool = False) -> Tensor:
    """A real tensor type."""
    return Tensor(Elem.REAL, tuple(axes), open)


SCALAR = Tensor(Elem.REAL, ())


@dataclass(frozen=True, slots=True)
class Hyper:
    """A machine number: a hyperparameter (`f64`) or a count (`nat`)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class KeyT:
    """A random key."""

    def __str__(self) -> str:
        return "key"


@dataclass(frozen=True, slots=True, eq=False)
class Instance:
    """A module at dimension arguments (`Linear{D, 1}`), or a stack of one."""

    module: ModuleInfo
    args: tuple[Lin, ...]
    stack: Lin | None = None  # `stack{L}(M)` when set

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Instance)
            and self.module is other.module
            and self.args == other.args
            and self.stack == other.stack
        )

    def __hash__(self) -> int:
        return hash((id(self.module), self.args, self.stack))

    def __str__(self) -> str:
        base = self.module.name
        if self.args:
            base += "{" + ", ".join(str(a) for a in self.args) + "}"
        return f"stack{{{self.stack}}}({base})" if self.stack is not None else base

    def unstacked(self) -> Instance:
        return Instance(self.module, self.args)


@dataclass(frozen=True, slots=True)
class Params:
    """`params M`: the parameter tree of an instance."""

    inst: Instance

    def __str__(self) -> str:
        return f"params {self.inst}"


@dataclass(frozen=True, slots=True)
class ModuleT:
    """A module-typed (compile-time) argument: `net : lin.Linear{D, 1}`."""

    inst: Instance

    def __str__(self) -> str:
        return str(self.inst)


@dataclass(frozen=True, slots=True)
class TupleT:
    """A tuple of values."""

    items: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(item) for item in self.items) + ")"


@dataclass(frozen=True, slots=True)
class FnT:
    """A function value (a lambda, a `grad`): its parameter and result types."""

    params: tuple[Type, ...]
    result: Type

    def __str__(self) -> str:
        return "(" + ", ".join(str(p) for p in self.params) + f") -> {self.result}"


Type = Tensor | Hyper | KeyT | Params | ModuleT | TupleT | FnT


def subst_lin(size: Lin, env: dict[str, Lin]) -> Lin:
    """Replace dimension variables in `size` by linear forms."""
    result = Lin.const_(size.const)
    for name, coeff in size.coeffs:
        result = result + (env[name] * coeff if name in env else Lin.var(name) * coeff)
    return result


def subst(ty: Type, env: dict[str, Lin]) -> Type:
    """Substitute dimension variables throughout a type."""
    match ty:
        case Tensor(elem, axes, open_, bound):
            new_axes = tuple(Axis(a.name, subst_lin(a.size, env)) for a in axes)
            return Tensor(elem, new_axes, open_, None if bound is None else subst_lin(bound, env))
        case Params(inst):
            return Params(subst_inst(inst, env))
        case ModuleT(inst):
            return ModuleT(subst_inst(inst, env))
        case TupleT(items):
            return TupleT(tuple(subst(item, env) for item in items))
        case FnT(params, result):
            return FnT(tuple(subst(p, env) for p in params), subst(result, env))
        case Hyper() | KeyT():
            return ty


def dims_env(dims: dict[str, int]) -> dict[str, Lin]:
    """Concrete dimension values as the linear forms `subst` takes."""
    return {k: Lin.const_(Fraction(v)) for k, v in dims.items()}


def at_dims(ty: Type, dims: dict[str, int]) -> Type:
    """`ty` with its dimension variables at concrete values."""
    return subst(ty, dims_env(dims))


def subst_inst(inst: Instance, env: dict[str, Lin]) -> Instance:
    """Substitute dimension variables in an instance's arguments."""
    stack = None if inst.stack is None else subst_lin(inst.stack, env)
    return Instance(inst.module, tuple(subst_lin(a, env) for a in inst.args), stack)


def lin_int(size: Lin) -> int | None:
    """The integer value of a constant form, else None."""
    if size.is_const and size.const.denominator == 1:
        return int(size.const)
    return None


def const_lin(value: int | Fraction) -> Lin:
    return Lin.const_(Fraction(value))
