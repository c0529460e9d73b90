"""The kernel interpreter: a point's kernels evaluated statement by statement.

A second executor of PSK-Kernel beside the compiled C, so that a point's bits
are checked against point zero's by something that shares no code with the C
printer or the C compiler (`presk autotune --interp`). It computes what the
printer's C means (cgen/c_printer.py), operation by operation in the kernel's
arithmetic type:

- f64 arithmetic is Python's float, f32 NumPy's float32 scalars: both IEEE
  operations rounded once, as C's under `-ffp-contract=off`;
- bf16 computes in f32, widened on load and rounded to nearest-even on store
  (presk/dtypes.py `f32_to_bf16`, the runtime's rounding);
- a constant is rounded once to the arithmetic type (`constant`);
- `max` and `min` keep the first operand on ties, as `a < b ? b : a` does;
- exp, log, tanh, sin, cos and erf call the libm every program compiles in,
  and a draw the runtime's Philox generator, both through a small unit of the
  runtime built once (there is no second copy of either in Python);
- a vector is a tuple of its lanes, each lane its own column; a split
  kernel's loop runs in full (its workers own disjoint outputs).

It is slow, about a microsecond an operation: it checks points at small
shapes, not at the sizes they are timed at.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, assert_never

import gmpy2
import numpy as np
import numpy.typing as npt

from presk.build.compile import build
from presk.build.load import Library, load
from presk.cgen.program import runtime_text
from presk.dtypes import Dtype, f32_to_bf16
from presk.kernel import ir

Scalar = Any  # a float, a NumPy float32 or an int
Vector = tuple[Scalar, ...]

_LIBM = ("exp", "log", "tanh", "sin", "cos", "erf")


def _runtime_unit() -> tuple[str, str]:
    """Exported wrappers of the runtime's libm and draw, and their cffi declarations."""
    lines, cdef = [runtime_text()], []
    for name in _LIBM:
        for real, suffix in (("double", ""), ("float", "f")):
            head = f"{real} presk_i_{name}{suffix}({real} x)"
            lines.append(f"{head} {{ return presk_{name}{suffix}(x); }}")
            cdef.append(head + ";")
    head = "double presk_i_uniform(uint32_t k0, uint32_t k1, uint64_t j)"
    lines.append(f"{head} {{ presk_key k = {{{{k0, k1}}}}; return presk_uniform(k, j); }}")
    cdef.append(head + ";")
    return "\n".join(lines) + "\n", "\n".join(cdef)


_runtime: Library | None = None


def runtime() -> Library:
    """The runtime's libm and generator, compiled once a process (and cached by hash)."""
    global _runtime
    if _runtime is None:
        text, cdef = _runtime_unit()
        _runtime = load(build(text), cdef)
    return _runtime


def storage(b: ir.Buffer) -> np.dtype[Any]:
    """The NumPy type a buffer's elements are stored in (a key: two 32-bit words)."""
    return np.dtype(np.uint32) if b.dtype == "key" else np.dtype(Dtype(b.dtype).numpy)


class _Kernel:
    """One kernel's evaluation over flat arrays, one per buffer index."""

    def __init__(self, kernel: ir.Kernel, arrays: dict[int, npt.NDArray[Any]]) -> None:
        self.kernel = kernel
        self.arrays = arrays
        self.arith = ir.arith(kernel.dtype)
        self.real: Callable[[Any], Scalar] = float if self.arith == "f64" else np.float32
        self.env: dict[str, Any] = {}
        self.lib = runtime().lib
        suffix = "" if self.arith == "f64" else "f"
        self.calls = {name: getattr(self.lib, f"presk_i_{name}{suffix}") for name in _LIBM}
        self.constants: dict[Fraction, Scalar] = {}

    # ------------------------------------------------------------ indices

    def index(self, e: ir.Index) -> int:
        match e:
            case ir.IVar(name):
                return int(self.env[name])
            case ir.IConst(value):
                return value
            case ir.IBin(op, left, right):
                a, b = self.index(left), self.index(right)
                match op:
                    case ir.IntOp.ADD:
                        return a + b
                    case ir.IntOp.MUL:
                        return a * b
                    case ir.IntOp.DIV:
                        return a // b
                    case ir.IntOp.MOD:
                        return a % b
                    case _:
                        assert_never(op)
            case _:
                assert_never(e)

    def offset(self, b: ir.Buffer, idx: tuple[ir.Index, ...]) -> int:
        at = 0
        for i, size in zip(idx, b.shape, strict=True):
            at = at * size + self.index(i)
        return at

    # ------------------------------------------------------------ values

    def load_at(self, b: ir.Buffer, at: int) -> Scalar:
        raw = self.arrays[b.index][at]
        match b.dtype:
            case "i64":
                return int(raw)
            case "bf16":
                value = np.uint32(int(raw) << 16).view(np.float32)
                return value if self.arith == "f32" else float(value)
            case "f32":
                return raw if self.arith == "f32" else float(raw)
            case _:
                return float(raw) if self.arith == "f64" else np.float32(raw)

    def constant(self, value: Fraction) -> Scalar:
        found = self.constants.get(value)
        if found is None:
            if self.arith == "f64":
                found = float(value)
            else:
                exact = gmpy2.mpq(value.numerator, value.denominator)
                with gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True):
                    found = np.float32(float(gmpy2.mpfr(exact)))
            self.constants[value] = found
        return found

    def expr(self, e: ir.Expr | ir.Index | ir.Cmp) -> Scalar:
        match e:
            case ir.Load(buffer, idx):
                return self.load_at(buffer, self.offset(buffer, idx))
            case ir.Var(name):
                return self.env[name]
            case ir.Const(value):
                return self.constant(value)
            case ir.FromIndex(value):
                return self.real(self.expr(value))
            case ir.Bin(op, left, right):
                return self.bin(op, self.expr(left), self.expr(right))
            case ir.Neg(operand):
                return -self.expr(operand)
            case ir.Fn(name, arg):
                x = self.expr(arg)
                if name == ir.Libm.SQRT:
                    return float(np.sqrt(np.float64(x))) if self.arith == "f64" else np.sqrt(x)
                return self.real(self.calls[str(name)](x))
            case ir.Cmp(op, left, right):
                return self.compare(op, self.expr(left), self.expr(right))
            case ir.Select(cond, then, other):
                return self.expr(then) if self.test(cond) else self.expr(other)
            case ir.IVar() | ir.IConst() | ir.IBin():
                return self.index(e)
            case _:
                assert_never(e)

    def bin(self, op: ir.BinOp, a: Scalar, b: Scalar) -> Scalar:
        match op:
            case ir.BinOp.ADD:
                return a + b
            case ir.BinOp.SUB:
                return a - b
            case ir.BinOp.MUL:
                return a * b
            case ir.BinOp.DIV:
                if self.arith == "f64" and b == 0:  # Python raises where C gives ±inf or NaN
                    return float(np.float64(a) / np.float64(b))
                return a / b
            case ir.BinOp.MAX:
                return b if a < b else a
            case ir.BinOp.MIN:
                return b if b < a else a
            case _:
                assert_never(op)

    @staticmethod
    def compare(op: ir.CmpOp, a: Scalar, b: Scalar) -> bool:
        match op:
            case ir.CmpOp.LT:
                return bool(a < b)
            case ir.CmpOp.LE:
                return bool(a <= b)
            case ir.CmpOp.GT:
                return bool(a > b)
            case ir.CmpOp.GE:
                return bool(a >= b)
            case ir.CmpOp.EQ:
                return bool(a == b)
            case ir.CmpOp.NE:
                return bool(a != b)
            case _:
                assert_never(op)

    def test(self, cond: ir.Cmp | ir.Load) -> bool:
        return bool(self.expr(cond) != 0) if isinstance(cond, ir.Load) else bool(self.expr(cond))

    def vexpr(self, v: ir.VExpr) -> Vector:
        match v:
            case ir.VLoad(buffer, idx, lanes):
                at = self.offset(buffer, idx)
                return tuple(self.load_at(buffer, at + lane) for lane in range(lanes))
            case ir.Splat(value, lanes):
                return (self.expr(value),) * lanes
            case ir.VBin(op, left, right):
                a, b = self.vexpr(left), self.vexpr(right)
                if op == ir.VecOp.ADD:
                    return tuple(x + y for x, y in zip(a, b, strict=True))
                return tuple(x * y for x, y in zip(a, b, strict=True))
            case ir.VVar(name):
                return tuple(self.env[name])
            case _:
                assert_never(v)

    # ------------------------------------------------------------ statements

    def store_at(self, b: ir.Buffer, at: int, value: Scalar) -> None:
        array = self.arrays[b.index]
        match b.dtype:
            case "bf16":
                array[at] = f32_to_bf16(np.asarray([value], dtype=np.float32))[0]
            case "i64":
                array[at] = int(value)  # C's conversion truncates, as int() does
            case _:
                array[at] = value

    def run(self, body: tuple[ir.Stmt, ...]) -> None:
        env = self.env
        for s in body:
            match s:
                case ir.For(var, bound, inner):
                    for i in range(bound):
                        env[var] = i
                        self.run(inner)
                case ir.Let(name, value, integer):
                    got = self.expr(value)
                    env[name] = int(got) if integer else self.real(got)
                case ir.Store(buffer, idx, value):
                    self.store_at(buffer, self.offset(buffer, idx), self.expr(value))
                case ir.If(cond, then, other):
                    self.run(then if self.test(cond) else other)
                case ir.Random(name, key, counter):
                    k = self.arrays[key.index]
                    env[name] = self.lib.presk_i_uniform(int(k[0]), int(k[1]), self.index(counter))
                case ir.VLet(name, value, _):
                    env[name] = self.vexpr(value)
                case ir.VStore(buffer, idx, value):
                    at = self.offset(buffer, idx)
                    for lane, x in enumerate(self.vexpr(value)):
                        self.store_at(buffer, at + lane, x)
                case ir.Scratch(buffer, inner):
                    self.arrays[buffer.index] = np.zeros(buffer.size or 1, dtype=storage(buffer))
                    self.run(inner)
                    del self.arrays[buffer.index]
                case _:
                    assert_never(s)


def run_kernels(kernels: tuple[ir.Kernel, ...], arrays: dict[int, npt.NDArray[Any]]) -> None:
    """Evaluate `kernels` in order over flat arrays by buffer index (outputs overwritten)."""
    with np.errstate(all="ignore"):  # C's inf and NaN, without NumPy's warnings
        for k in kernels:
            _Kernel(k, arrays).run(k.body)


__all__ = ["run_kernels", "runtime", "storage"]
