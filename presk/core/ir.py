"""PSK-Core definitions: one typed instruction per line.

A `Function` has dimension parameters, typed parameters, a straight-line
body of `Instr`s and a result operand. Every binding has an index `%N`:
parameters first, then instructions, in order; a binding named in the source
prints by its name, the index still counting. Types are the checker's, with
symbolic sizes. Parameter trees are explicit: module functions take `θ`
first, sub-module parameters are `field`s of it, and a stack applied to a
value is a `fold`.

Semantics of each op are the reference interpreter's (presk/interp); the
text form is produced by presk/core/text.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from presk.diagnostics import Span
from presk.elab.presburger import Lin
from presk.elab.ty import Type


@dataclass(frozen=True, slots=True)
class Ref:
    """A use of binding `%index` (printed by `name` when it has one)."""

    index: int
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Lit:
    """An exact real literal operand (`2` in `pow 2 %4`)."""

    value: Fraction


Operand = Ref | Lit

# Attribute values: axis names, sizes, flags. Kept hashable for frozen nodes.
AttrValue = str | int | Fraction | Lin | tuple[str, ...] | tuple[tuple[str, str], ...] | None


@dataclass(frozen=True, slots=True)
class Prim:
    """A primitive applied to operands, with static attributes (`axis`, `where`...)."""

    name: str
    args: tuple[Operand, ...]
    attrs: tuple[tuple[str, AttrValue], ...] = ()

    def attr(self, key: str) -> AttrValue:
        for name, value in self.attrs:
            if name == key:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Call:
    """A call of a Core function at dimension arguments."""

    fn: str
    dims: tuple[tuple[str, Lin], ...]
    args: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Fold:
    """`fold F over θs (x)`: apply F once per layer of the stacked tree θs, in order."""

    fn: str
    dims: tuple[tuple[str, Lin], ...]
    stacked: Operand
    count: Lin
    init: Operand
    extra: tuple[Operand, ...] = ()


@dataclass(frozen=True, slots=True)
class FoldVjp:
    """The reverse of a fold: forward through the layers keeping each input, then back.

    `fn` is the layer function's vjp in (θ_l, x_l); the result is the tuple
    (adjoint of the stacked tree, adjoint of the initial value).
    """

    fn: str
    dims: tuple[tuple[str, Lin], ...]
    forward: str
    stacked: Operand
    count: Lin
    init: Operand
    ct: Operand


@dataclass(frozen=True, slots=True)
class FoldFwd:
    """A fold's forward pass that keeps what its reverse reads (the `store` form).

    `fn` is the layer function's `.fwd` in (θ_l, x_l), which returns (x_{l+1},
    residuals). The result is the tuple (final value, every layer's input,
    every layer's residuals): the last two hold one entry per layer along a
    leading axis their types leave out (the types are one layer's), and only
    a `FoldBwd` reads them.
    """

    fn: str
    dims: tuple[tuple[str, Lin], ...]
    stacked: Operand
    count: Lin
    init: Operand


@dataclass(frozen=True, slots=True)
class FoldBwd:
    """The reverse sweep of a `FoldFwd`: the layers in reverse, each its `.bwd`.

    `fn` is the layer function's `.bwd` in (θ_l, x_l, residuals_l, ct); `inputs`
    and `residuals` are items 1 and 2 of the `FoldFwd`. The result is the tuple
    (adjoint of the stacked tree, adjoint of the initial value).
    """

    fn: str
    dims: tuple[tuple[str, Lin], ...]
    stacked: Operand
    count: Lin
    inputs: Operand
    residuals: Operand
    ct: Operand


@dataclass(frozen=True, slots=True)
class Field:
    """A subtree or leaf of a parameter tree: `θ.proj`."""

    tree: Operand
    name: str


@dataclass(frozen=True, slots=True)
class Slice:
    """Layer `index` of a stacked tree (used when a stack is unrolled)."""

    tree: Operand
    index: int


@dataclass(frozen=True, slots=True)
class MakeTuple:
    """A tuple of operands."""

    items: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Get:
    """Element `index` of a tuple."""

    tuple_: Operand
    index: int


@dataclass(frozen=True, slots=True)
class GradOf:
    """`grad F` applied: the gradient of the scalar function F in its last argument.

    With `value` (a training step asks for it), the gradient is in parameter `wrt`
    (None: the last) and the result is the tuple (F's value, that gradient).
    """

    fn: str
    dims: tuple[tuple[str, Lin], ...]
    args: tuple[Operand, ...]
    wrt: int | None = None
    value: bool = False


Op = Prim | Call | Fold | FoldVjp | FoldFwd | FoldBwd | Field | Slice | MakeTuple | Get | GradOf


@dataclass(frozen=True, slots=True)
class Instr:
    """`%index : type = op`, named when the source named it."""

    index: int
    name: str | None
    type: Type
    op: Op
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Param:
    """A function parameter; hyperparameters may carry a default."""

    index: int
    name: str
    type: Type
    default: Fraction | None = None


@dataclass(frozen=True, slots=True)
class Function:
    """A PSK-Core function."""

    name: str
    dims: tuple[str, ...]
    params: tuple[Param, ...]
    ret: Type
    effects: tuple[str, ...]
    body: tuple[Instr, ...]
    result: Operand
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Module:
    """A whole program in PSK-Core: functions by name, in definition order."""

    functions: tuple[Function, ...]

    def get(self, name: str) -> Function:
        for fn in self.functions:
            if fn.name == name:
                return fn
        raise KeyError(name)
