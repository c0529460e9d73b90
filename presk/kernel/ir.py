"""PSK-Kernel definitions: loop nests over row-major buffers.

A `Kernel` reads input buffers and writes one output buffer (a few adjoint
kernels write two). Its body is a tree of statements: `For` loops with a
constant bound, `Let` scalar bindings, `Store`s into a buffer at an index,
and `If`; tiled forms add vector statements and `Scratch`, a local buffer
a panel is packed into. Expressions are loads, scalar variables, constants, arithmetic,
calls of the libm functions, comparisons and selections; indices are
integer expressions over loop variables.

Semantics: every real operation is rounded to the kernel's arithmetic type
(f64 for f64, f32 for f32 and bf16); a bf16 buffer holds 16 bits, widened
exactly on load and rounded to nearest even on store. A `For`'s bound is
evaluated once, before the loop; iterations run in increasing order, so a
sum written as a loop adds its terms in increasing index order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import assert_never

from presk.dtypes import Dtype


def arith(dtype: str) -> str:
    """The arithmetic type of a storage type: bf16 computes in f32 (presk/dtypes.py)."""
    return str(Dtype(dtype).arith)


@dataclass(frozen=True, slots=True)
class Buffer:
    """A buffer `%index` with its element type and axes (name or None, length)."""

    index: int
    dtype: str
    axes: tuple[tuple[str | None, int], ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(size for _, size in self.axes)

    @property
    def size(self) -> int:
        n = 1
        for _, size in self.axes:
            n *= size
        return n


# ---------------------------------------------------------------- operators

# Each operator's value is its text in `dump --stage kernel` (and, but for max
# and min, in C): a StrEnum formats as its value, so the dumps are unchanged.


class IntOp(StrEnum):
    """An integer operator of an index expression."""

    ADD = "+"
    MUL = "*"
    DIV = "/"  # floor division of non-negative operands
    MOD = "%"


class BinOp(StrEnum):
    """A real binary operator."""

    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    MAX = "max"
    MIN = "min"


class CmpOp(StrEnum):
    """A comparison."""

    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="


class Libm(StrEnum):
    """A function of the libm compiled into every program (docs/libm.md)."""

    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    TANH = "tanh"
    SIN = "sin"
    COS = "cos"
    ERF = "erf"


class VecOp(StrEnum):
    """A lane-wise vector operator."""

    ADD = "+"
    MUL = "*"


# ---------------------------------------------------------------- index expressions


@dataclass(frozen=True, slots=True)
class IVar:
    """A loop variable."""

    name: str


@dataclass(frozen=True, slots=True)
class IConst:
    """An integer constant."""

    value: int


@dataclass(frozen=True, slots=True)
class IBin:
    """Integer arithmetic: `+`, `*`, `/` (floor), `%`."""

    op: IntOp
    left: Index
    right: Index


Index = IVar | IConst | IBin


# ---------------------------------------------------------------- value expressions


@dataclass(frozen=True, slots=True)
class Load:
    """An element of a buffer (widened to the arithmetic type if bf16)."""

    buffer: Buffer
    index: tuple[Index, ...]


@dataclass(frozen=True, slots=True)
class Var:
    """A scalar variable bound by `Let` (or an accumulator)."""

    name: str


@dataclass(frozen=True, slots=True)
class Const:
    """A real constant, rounded to the arithmetic type."""

    value: Fraction


@dataclass(frozen=True, slots=True)
class FromIndex:
    """An integer (an index expression or an i64 load) as a real."""

    value: Index | Load


@dataclass(frozen=True, slots=True)
class Bin:
    """`+ - * /`, and `max`/`min` (first operand on ties)."""

    op: BinOp
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Neg:
    """Negation."""

    operand: Expr


@dataclass(frozen=True, slots=True)
class Fn:
    """A libm function: exp, log, sqrt, tanh, sin, cos, erf."""

    name: Libm
    arg: Expr


@dataclass(frozen=True, slots=True)
class Cmp:
    """A comparison `< <= > >= == !=` of reals (or of integers when both are)."""

    op: CmpOp
    left: Expr | Index
    right: Expr | Index


@dataclass(frozen=True, slots=True)
class Select:
    """`cond ? a : b`."""

    cond: Cmp | Load
    then: Expr
    other: Expr


Expr = Load | Var | Const | FromIndex | Bin | Neg | Fn | Select


# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class For:
    """`for var in 0..bound { body }`; the bound is evaluated once."""

    var: str
    bound: int
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Let:
    """Bind (or rebind) a scalar variable in the arithmetic type, or i64 if `integer`."""

    name: str
    value: Expr | Index
    integer: bool = False


@dataclass(frozen=True, slots=True)
class Store:
    """Write a value (rounded to the buffer's type) at an index."""

    buffer: Buffer
    index: tuple[Index, ...]
    value: Expr | Index


@dataclass(frozen=True, slots=True)
class If:
    """`if cond { then } else { other }`."""

    cond: Cmp | Load
    then: tuple[Stmt, ...]
    other: tuple[Stmt, ...] = ()


@dataclass(frozen=True, slots=True)
class Random:
    """`var = uniform(key, counter)`: the runtime generator's draw, a double in [0, 1)."""

    name: str
    key: Buffer
    counter: Index


@dataclass(frozen=True, slots=True)
class VLoad:
    """`lanes` consecutive elements of a buffer's last axis, from `index` (a vector).

    Widened to the arithmetic type if bf16, as a `Load` is.
    """

    buffer: Buffer
    index: tuple[Index, ...]
    lanes: int


@dataclass(frozen=True, slots=True)
class Splat:
    """A scalar in every lane."""

    value: Expr
    lanes: int


@dataclass(frozen=True, slots=True)
class VBin:
    """Lane-wise `+` or `*` of vectors: each lane is its own output column."""

    op: VecOp
    left: VExpr
    right: VExpr


@dataclass(frozen=True, slots=True)
class VVar:
    """A vector variable."""

    name: str
    lanes: int


VExpr = VLoad | Splat | VBin | VVar


@dataclass(frozen=True, slots=True)
class VLet:
    """Bind (or rebind) a vector variable."""

    name: str
    value: VExpr
    lanes: int


@dataclass(frozen=True, slots=True)
class VStore:
    """Store a vector's lanes at consecutive elements from `index`, each rounded as by `Store`."""

    buffer: Buffer
    index: tuple[Index, ...]
    value: VExpr


@dataclass(frozen=True, slots=True)
class Scratch:
    """A kernel-local buffer that exists for the duration of `body`, undefined on entry.

    A tiled contraction copies (packs) a panel of an operand into it so that
    its inner loop reads consecutive memory; a copy changes no bit. Its
    index follows the kernel's own buffers. Declared inside a loop, it
    belongs to one iteration: the workers of a split kernel never share one.
    """

    buffer: Buffer
    body: tuple[Stmt, ...]


Stmt = For | Let | Store | If | Random | VLet | VStore | Scratch


@dataclass(frozen=True, slots=True)
class Kernel:
    """A kernel: named after its primitive(s), inputs, outputs and a body."""

    name: str
    dtype: str  # the arithmetic realization: f64, f32 or bf16
    inputs: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]
    body: tuple[Stmt, ...]
    # The loop at `split_depth` runs over [lo, hi) given by the caller: one worker's
    # share; the loops around it run in full (a layout plan's split at a depth).
    split: bool = False
    split_depth: int = 0
    workers: int = 0  # a plan's worker count for the split (0: the caller's team)
    # False: the printer keeps every loop scalar (a plan's `lanes: 1` on an elementwise nest).
    lanes: bool = True
    # False: the C compiler's own vectorizer stays off too (a plan's point of one lane), so
    # that a point runs the lanes it states: gcc rewrote a scalar tile of four output
    # columns into sixteen-lane vectors and shuffles, 4× slower than the four-lane point.
    vectorize: bool = True


def walk(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement of `body`, each before the statements inside it."""
    for s in body:
        yield s
        match s:
            case For(_, _, inner) | Scratch(_, inner):
                yield from walk(inner)
            case If(_, then, other):
                yield from walk(then)
                yield from walk(other)
            case Let() | Store() | VLet() | VStore() | Random():
                pass
            case _:
                assert_never(s)


def has_vectors(body: tuple[Stmt, ...]) -> bool:
    """Whether a statement of `body` names a vector (a `VLet` or a `VStore`)."""
    return any(isinstance(s, VLet | VStore) for s in walk(body))


def loop_bounds(body: tuple[Stmt, ...]) -> dict[str, int]:
    """The largest bound of each loop variable in a kernel's body (a name may bound several
    loops: a blocked range's whole blocks and its last one)."""
    out: dict[str, int] = {}
    for s in body:
        match s:
            case For(var, bound, inner):
                out[var] = max(out.get(var, 0), bound)
                inner_bounds = loop_bounds(inner)
            case Scratch(_, inner):
                inner_bounds = loop_bounds(inner)
            case If(_, then, other):
                inner_bounds = loop_bounds(then)
                for name, b in loop_bounds(other).items():
                    inner_bounds[name] = max(inner_bounds.get(name, 0), b)
            case _:
                continue
        for name, b in inner_bounds.items():
            out[name] = max(out.get(name, 0), b)
    return out
