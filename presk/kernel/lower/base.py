"""What every lowering rule shares: launches, primitive names, fresh names, loop nests.

A `Launch` is what the host hands the lowering: the steps of one fusion group
(each a primitive with its attributes, its operands and its result's concrete
axes), the buffers they read and the buffer the root writes. A rule turns the
root step of a launch into the statements of a kernel body; `Names` gives it
fresh loop variables and scalars and carries the options of this lowering.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from presk.kernel.ir import Buffer, Const, For, IBin, IConst, Index, IntOp, IVar, Load, Stmt


class LoweringError(Exception):
    """A primitive this backend cannot lower (reported as not built yet)."""


class LayoutError(Exception):
    """A point a nest cannot take (E7002), with the condition's reason."""


class PrimName(StrEnum):
    """The primitives the native backend lowers, by their PSK-Core names."""

    # Elementwise: one expression per element (presk/kernel/lower/elementwise.py).
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    POW = "pow"
    NEG = "neg"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    TANH = "tanh"
    SIN = "sin"
    COS = "cos"
    ERF = "erf"
    GELU = "gelu"
    RELU = "relu"
    ABS = "abs"
    HEAVISIDE = "heaviside"
    YLOG = "ylog"
    SIGN = "sign"
    ERF_VJP = "erf_vjp"
    GELU_VJP = "gelu_vjp"
    REAL = "real"
    # Reductions and their adjoints (reductions.py).
    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    SUM_TO = "sum_to"
    REDUCE_VJP = "reduce_vjp"
    ZEROS_LIKE = "zeros_like"
    # Contractions (contractions.py, tiles.py).
    DOT = "dot"
    EIN = "ein"
    DOT_VJP_L = "dot_vjp_l"
    DOT_VJP_R = "dot_vjp_r"
    EIN_VJP_L = "ein_vjp_l"
    EIN_VJP_R = "ein_vjp_r"
    # Row-wise primitives (softmax.py).
    SOFTMAX = "softmax"
    LOG_SOFTMAX = "log_softmax"
    SOFTMAX_VJP = "softmax_vjp"
    LOG_SOFTMAX_VJP = "log_softmax_vjp"
    CROSS_ENTROPY = "cross_entropy"
    CROSS_ENTROPY_VJP = "cross_entropy_vjp"
    ARGMAX = "argmax"
    SAMPLE = "sample"
    # A draw per element (elementwise.py).
    DROPOUT = "dropout"
    # Gathers, masks and layouts (gathers.py).
    EMBED = "embed"
    EMBED_VJP = "embed_vjp"
    ONE_HOT = "one_hot"
    CAUSAL_MASK = "causal_mask"
    POSITIONS = "positions"
    MERGE = "merge"
    SPLIT = "split"
    SPLIT_HEADS = "split_heads"
    MERGE_HEADS = "merge_heads"
    SHAPE_VJP = "shape_vjp"


def prim_name(name: str) -> PrimName:
    """The primitive of a step's name, or LoweringError if the backend has no rule for it."""
    try:
        return PrimName(name)
    except ValueError:
        raise LoweringError(f"the primitive `{name}` has no native lowering yet") from None


ZERO = Const(Fraction(0))
ONE = Const(Fraction(1))


def c(value: int | Fraction) -> Const:
    """A real constant."""
    return Const(Fraction(value))


# ---------------------------------------------------------------- launches

Axes = tuple[tuple[str | None, int], ...]


@dataclass(frozen=True)
class Step:
    """One primitive of a launch: its name, attributes and operands.

    An operand is a kernel input buffer, a constant, or the value of an
    earlier step of the same (fused) launch, by position.
    """

    name: str  # a PSK-Core primitive name; see `PrimName`
    attrs: dict[str, object]
    operands: list[Buffer | Fraction | int]  # int: an earlier step
    axes: Axes  # the result's concrete axes


@dataclass(frozen=True)
class Launch:
    """A fusion group: its steps in order, its inputs and the root's output buffer."""

    steps: list[Step]
    inputs: list[Buffer]
    output: Buffer
    outputs: list[Buffer] = field(default_factory=list)
    # A product's bias epilogue: the one add that reads it, done in its kernel (epilogue.py).
    epilogue: Epilogue | None = None

    @property
    def name(self) -> str:
        if len(self.steps) == 1:
            return self.steps[0].name + (" + add" if self.epilogue else "")
        return f"fused {len(self.steps)} steps"


@dataclass(frozen=True)
class Epilogue:
    """The add that alone reads a product, folded into the product's kernel.

    `operand` is the add's other operand, an input of the kernel: of the
    product's shape, or one axis along the product's last. `first`: the add
    reads it as its left operand (kept, as NaN payloads follow the order).
    """

    operand: Buffer
    first: bool


@dataclass
class Names:
    """Fresh loop variables i0, i1, … and scalars s0, s1, … of one kernel, and its options."""

    tiles: bool  # whether contractions may take their tiled forms (else point zero)
    passes: int = 3  # a softmax's passes over its row (a layout plan may state 2)
    # The workers a point's split states (1: "split none"), which the packed product
    # gives a block of columns each; None: as many as the machine's cores.
    workers: int | None = None
    loops: int = 0
    scalars: int = 0
    epilogue: Epilogue | None = None  # the launch's, for the product's final stores
    finished: int = 0  # final stores given the epilogue (a form that gives none is a bug)

    def loop(self) -> str:
        self.loops += 1
        return f"i{self.loops - 1}"

    def scalar(self) -> str:
        self.scalars += 1
        return f"s{self.scalars - 1}"


# A lowering rule: the root step of a launch to the statements of its kernel.
Rule = Callable[[Step, Launch, Names], tuple[Stmt, ...]]


# ---------------------------------------------------------------- loop nests and alignment


def nest(sizes: list[int], names: list[str], body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """Loops over `sizes` (outermost first) around `body`."""
    for size, name in reversed(list(zip(sizes, names, strict=True))):
        body = (For(name, size, body),)
    return body


def align_positions(operand: Axes, result: Axes) -> list[int]:
    """For each axis of `operand`, the axis of `result` it aligns with (the reference's rule)."""
    offset = len(result) - len(operand)
    if offset < 0:
        raise LoweringError("an operand has more axes than the result")
    by_position = all(
        (a is None or r is None or a == r) and asize == rsize
        for (a, asize), (r, rsize) in zip(operand, result[offset:], strict=True)
    )
    if by_position:
        return [offset + i for i in range(len(operand))]
    names = [name for name, _ in result]
    positions = []
    for name, size in operand:
        if name is None or names.count(name) != 1 or result[names.index(name)][1] != size:
            raise LoweringError("operands do not align")
        positions.append(names.index(name))
    return positions


def load_aligned(buffer: Buffer, out_axes: Axes, vars_: list[str]) -> Load:
    """An element of `buffer` inside a nest over `out_axes` with loop variables `vars_`."""
    positions = align_positions(buffer.axes, out_axes)
    return Load(buffer, tuple(IVar(vars_[p]) for p in positions))


def flat(vars_: list[str], sizes: list[int]) -> Index:
    """The row-major linear index of loop variables over `sizes`."""
    result: Index = IConst(0)
    for var, size in zip(vars_, sizes, strict=True):
        result = (
            IVar(var)
            if result == IConst(0)
            else IBin(IntOp.ADD, IBin(IntOp.MUL, result, IConst(size)), IVar(var))
        )
    return result


def axis_of(buffer: Buffer, name: str | None) -> int:
    """The position of the axis named `name`."""
    names = [n for n, _ in buffer.axes]
    if name is None or names.count(name) != 1:
        raise LoweringError(f"no axis `{name}`")
    return names.index(name)
