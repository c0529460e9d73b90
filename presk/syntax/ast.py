"""The surface syntax tree.

Nodes are frozen dataclasses, one class per construct, each with the span it
came from. Names are `Ident`s so that every use can be pointed at. The AST is
what the parser saw: nothing is resolved (a `NamedType` may be an alias, a
machine type or a module; `Name` may be a variable, a constant or a module).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from fractions import Fraction

from presk.diagnostics import Span
from presk.syntax.deep import deep


@dataclass(frozen=True, slots=True)
class Ident:
    """A name and where it was written."""

    name: str
    span: Span


# ---------------------------------------------------------------- types


@dataclass(frozen=True, slots=True)
class EllipsisAxis:
    """The open prefix `...` of a tensor type."""

    span: Span


@dataclass(frozen=True, slots=True)
class AxisSyn:
    """An axis: `name: size` or a bare `size` (a dimension expression)."""

    name: Ident | None
    size: Expr
    span: Span


AxisItem = EllipsisAxis | AxisSyn


@dataclass(frozen=True, slots=True)
class RealType:
    """`ℝ[axes]`."""

    axes: tuple[AxisItem, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class IdxType:
    """`idx[N][axes]`: indices in [0, N)."""

    bound: Expr
    axes: tuple[AxisItem, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class BoolType:
    """`bool[axes]`: a mask."""

    axes: tuple[AxisItem, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class NamedType:
    """A dotted name with optional `{args}`: an alias, `f64`, `key`, or a module."""

    path: tuple[Ident, ...]
    args: tuple[Expr, ...] | None
    span: Span

    @property
    def dotted(self) -> str:
        return ".".join(part.name for part in self.path)


@dataclass(frozen=True, slots=True)
class StackType:
    """`stack{L}(Block)`: L copies of a module, parameters stacked."""

    count: Expr
    inner: NamedType
    span: Span


@dataclass(frozen=True, slots=True)
class ParamsType:
    """`params M`: the parameter tree of a module (or of a module-typed argument)."""

    target: NamedType
    span: Span


@dataclass(frozen=True, slots=True)
class TupleType:
    """`(T1, T2, ...)`."""

    items: tuple[TypeSyn, ...]
    span: Span


TypeSyn = RealType | IdxType | BoolType | NamedType | StackType | ParamsType | TupleType


# ---------------------------------------------------------------- expressions


class BinOp(Enum):
    """Binary operators, with their source spelling as value."""

    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    MOD = "%"
    POW = "^"
    DOT = "·"
    EQ = "=="
    NE = "!="
    LE = "<="
    LT = "<"
    GE = ">="
    GT = ">"
    PIPE = "|>"


COMPARISONS = frozenset({BinOp.EQ, BinOp.NE, BinOp.LE, BinOp.LT, BinOp.GE, BinOp.GT})


@dataclass(frozen=True, slots=True)
class Num:
    """A numeric literal; `value` is exact."""

    text: str
    value: Fraction
    is_int: bool
    span: Span


@dataclass(frozen=True, slots=True)
class Str:
    """A string literal (paths)."""

    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class Name:
    """A bare identifier."""

    ident: Ident
    span: Span


@dataclass(frozen=True, slots=True)
class Member:
    """`base.name`: a module member, a method or an imported declaration."""

    base: Expr
    name: Ident
    span: Span


@dataclass(frozen=True, slots=True)
class PosArg:
    """A positional argument."""

    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class KwArg:
    """`name = value`."""

    name: Ident
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class AxisArg:
    """`axis name`."""

    name: Ident
    span: Span


@dataclass(frozen=True, slots=True)
class DimArg:
    """`name: size`, as in `causal_mask(seq: T)`."""

    name: Ident
    size: Expr
    span: Span


Arg = PosArg | KwArg | AxisArg | DimArg


@dataclass(frozen=True, slots=True)
class Call:
    """`func(args)`."""

    func: Expr
    args: tuple[Arg, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Binary:
    """`left op right`."""

    op: BinOp
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Neg:
    """`-x`."""

    operand: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Ascribe:
    """`(e : T)`: a constant or hyperparameter injected into a type."""

    value: Expr
    type: TypeSyn
    span: Span


@dataclass(frozen=True, slots=True)
class TupleExpr:
    """`(a, b, ...)`."""

    items: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Lambda:
    """`λ x y. body`."""

    params: tuple[Ident, ...]
    body: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Ein:
    """`ein[out axes](a * b)`: a typed contraction."""

    out: tuple[Ident, ...]
    body: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Grad:
    """`grad(f)`: the gradient of a scalar function, a function itself."""

    func: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Stream:
    """`stream "file.psk.d"`: a data source in a training run."""

    path: Str
    span: Span


Expr = (
    Num
    | Str
    | Name
    | Member
    | Call
    | Binary
    | Neg
    | Ascribe
    | TupleExpr
    | Lambda
    | Ein
    | Grad
    | Stream
)


# ---------------------------------------------------------------- bodies


@dataclass(frozen=True, slots=True)
class TuplePattern:
    """`(x, y)` on the left of a let."""

    names: tuple[Ident, ...]
    span: Span


Pattern = Ident | TuplePattern


@dataclass(frozen=True, slots=True)
class Let:
    """`let pattern = value`, one line."""

    pattern: Pattern
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Body:
    """A function body: lets, then the result expression."""

    lets: tuple[Let, ...]
    result: Expr
    span: Span


# ---------------------------------------------------------------- declarations


@dataclass(frozen=True, slots=True)
class Import:
    """`import "path" as alias`."""

    path: Str
    alias: Ident
    span: Span


@dataclass(frozen=True, slots=True)
class Const:
    """`const NAME : nat = expr`."""

    name: Ident
    type: NamedType
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class StaticAssert:
    """`static assert cond`."""

    cond: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class DimDecl:
    """`dim B` or `dim T <= 1024`."""

    name: Ident
    bound: Expr | None
    span: Span


@dataclass(frozen=True, slots=True)
class TypeAlias:
    """`type Q = ℝ[...]`."""

    name: Ident
    type: TypeSyn
    span: Span


@dataclass(frozen=True, slots=True)
class Init:
    """An initializer: `xavier_uniform`, `normal(std = 0.02)`."""

    name: Ident
    kwargs: tuple[KwArg, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ParamDecl:
    """`param w : ℝ[In, Out] init = xavier_uniform`."""

    name: Ident
    type: TypeSyn
    init: Init | None
    span: Span


@dataclass(frozen=True, slots=True)
class UseDecl:
    """`use name : Module{args}` or `use blocks : stack{L}(Block)`."""

    name: Ident
    target: NamedType | StackType
    span: Span


@dataclass(frozen=True, slots=True)
class FnParam:
    """`name : T` or `name : T = default`."""

    name: Ident
    type: TypeSyn
    default: Expr | None
    span: Span


@dataclass(frozen=True, slots=True)
class FnDecl:
    """`fn name{dims}(params) -> T uses E = body`. `header` spans up to `=`."""

    name: Ident
    dims: tuple[Ident, ...]
    params: tuple[FnParam, ...]
    ret: TypeSyn | None
    effects: tuple[Ident, ...]
    body: Body
    header: Span
    span: Span


@dataclass(frozen=True, slots=True)
class Module:
    """`module Name{dims} { members }`."""

    name: Ident
    dims: tuple[Ident, ...]
    params: tuple[ParamDecl, ...]
    uses: tuple[UseDecl, ...]
    fns: tuple[FnDecl, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Field:
    """A field of an optimizer or training block: `name [: T] = value`."""

    name: Ident
    type: TypeSyn | None
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """`checkpoint every N steps to "dir/"`."""

    every: Expr
    to: Str
    span: Span


@dataclass(frozen=True, slots=True)
class Optimizer:
    """`optimizer adamw { fields }`."""

    name: Ident
    fields: tuple[Field, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Training:
    """`training run { fields }`."""

    name: Ident
    fields: tuple[Field, ...]
    checkpoint: Checkpoint | None
    span: Span


@dataclass(frozen=True, slots=True)
class Inference:
    """`inference serve { fields }`: a model, its weights and its generation function."""

    name: Ident
    fields: tuple[Field, ...]
    span: Span


Decl = (
    Import
    | Const
    | StaticAssert
    | DimDecl
    | TypeAlias
    | Module
    | FnDecl
    | Optimizer
    | Training
    | Inference
)


@dataclass(frozen=True, slots=True)
class File:
    """A parsed source file."""

    decls: tuple[Decl, ...]
    span: Span


# ---------------------------------------------------------------- dump


@deep
def dump(node: object, indent: int = 0) -> str:
    """The tree as `presk dump --stage ast` prints it: one node per line."""
    lines: list[str] = []
    _dump(node, indent, None, lines)
    return "\n".join(lines) + "\n"


def _where(span: Span) -> str:
    line, col = span.source.line_col(span.start)
    return f"@{line}:{col}"


def _dump(node: object, indent: int, label: str | None, lines: list[str]) -> None:
    pad = "  " * indent + (f"{label}: " if label else "")
    if isinstance(node, Ident):
        lines.append(f"{pad}{node.name}")
        return
    if isinstance(node, Enum):
        lines.append(f"{pad}{node.value}")
        return
    if isinstance(node, tuple):
        if not node:
            return
        if all(isinstance(item, Ident) for item in node):
            lines.append(pad + ", ".join(item.name for item in node))
            return
        for item in node:
            _dump(item, indent, label, lines)
        return
    if not is_dataclass(node):
        lines.append(f"{pad}{node!r}")
        return
    simple: list[str] = []
    nested: list[tuple[str, object]] = []
    for f in fields(node):
        value = getattr(node, f.name)
        if f.name == "span" or value is None or value == ():
            continue
        if isinstance(value, Span):
            continue
        if isinstance(value, (str, bool, int, Fraction)):
            simple.append(f"{f.name}={value!s}" if not isinstance(value, str) else f"{value!r}")
        elif isinstance(value, Ident):
            simple.append(value.name)
        elif isinstance(value, Enum):
            simple.append(str(value.value))
        else:
            nested.append((f.name, value))
    head = type(node).__name__
    span = getattr(node, "span", None)
    where = f" {_where(span)}" if isinstance(span, Span) else ""
    lines.append(f"{pad}{head}{' ' if simple else ''}{' '.join(simple)}{where}")
    for name, value in nested:
        _dump(value, indent + 1, name, lines)
