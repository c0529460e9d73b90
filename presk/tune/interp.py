"""The kernel interpreter: a point's kernels evaluated statement by statement.

A second executor of PSK-Kernel beside the compiled C, so that a point's bits
are checked against point zero's by something that shares no code with the C
printer or the C compiler (`presk autotune --interp`). It computes what the
printer's C means (cgen/c_printer.py), operation by operation in the kernel's
arithmetic type:

- f64 and f32 arithmetic are NumPy's float64 and float32: each operation
  rounded once, as C's under `-ffp-contract=off` (a draw, a double, promotes
  what it meets to f64, as in C);
- bf16 computes in f32, widened on load and rounded to nearest-even on store
  (presk/dtypes.py `f32_to_bf16`, the runtime's rounding);
- a constant is rounded once to the arithmetic type (c_printer.py `rounded`);
- `max` and `min` keep the first operand on ties, as `a < b ? b : a` does;
- exp, log, tanh, sin, cos and erf call the libm every program compiles in,
  and a draw the runtime's Philox generator, both through a small unit of the
  runtime built once (there is no second copy of either in Python);
- a vector is a tuple of its lanes, each lane its own column; a split
  kernel's loop runs in full (its workers own disjoint outputs).

The outer loops that own their outputs (sched/split.py's test of a split,
at every depth down from the top) are not stepped through: their
iterations are evaluated together, every scalar an array with one element
an iteration, each operation NumPy's on the array, which rounds every
element once as the scalar would be. A branch whose condition differs
between iterations runs each arm under a mask; a scratch buffer has a copy
an iteration. So the Python statements run once for the inner loops only:
attention's scores at B=16, T=256 evaluate in about a second a point.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, assert_never

import numpy as np
import numpy.typing as npt

from presk.build.compile import build
from presk.build.load import Library, load
from presk.cgen.c_printer import rounded
from presk.cgen.program import runtime_text
from presk.dtypes import Dtype, bf16_to_f32, f32_to_bf16
from presk.kernel import ir
from presk.sched.split import split_reason

Value = Any  # a scalar, or an array of one element an iteration of the batched loops
Vector = tuple[Value, ...]

_LIBM = ("exp", "log", "tanh", "sin", "cos", "erf")


def _runtime_unit() -> tuple[str, str]:
    """Exported array forms of the runtime's libm and draw, and their cffi declarations."""
    lines, cdef = [runtime_text()], []
    for name in _LIBM:
        for real, suffix in (("double", ""), ("float", "f")):
            head = f"void presk_i_{name}{suffix}(const {real} *x, {real} *y, int64_t n)"
            loop = f"for (int64_t i = 0; i < n; i++) y[i] = presk_{name}{suffix}(x[i]);"
            lines.append(f"{head} {{ {loop} }}")
            cdef.append(head + ";")
    head = "void presk_i_uniform(uint32_t k0, uint32_t k1, const uint64_t *j, double *y, int64_t n)"
    loop = "for (int64_t i = 0; i < n; i++) y[i] = presk_uniform(k, j[i]);"
    lines.append(f"{head} {{ presk_key k = {{{{k0, k1}}}}; {loop} }}")
    cdef.append(head + ";")
    return "\n".join(lines) + "\n", "\n".join(cdef)


@functools.cache
def runtime() -> Library:
    """The runtime's libm and generator, compiled once a process (and cached by hash)."""
    text, cdef = _runtime_unit()
    return load(build(text), cdef)


def storage(b: ir.Buffer) -> np.dtype[Any]:
    """The NumPy type a buffer's elements are stored in (a key: two 32-bit words)."""
    return np.dtype(np.uint32) if b.dtype == "key" else np.dtype(Dtype(b.dtype).numpy)


def _batched(kernel: ir.Kernel) -> tuple[list[ir.For], tuple[ir.Stmt, ...]]:
    """The outer loops evaluated together (each parallel, the nest perfect down to it),
    and the body inside them."""
    loops: list[ir.For] = []
    body = kernel.body
    while len(body) == 1 and isinstance(body[0], ir.For):
        if split_reason(kernel, len(loops)) is not None:
            break
        loops.append(body[0])
        body = body[0].body
    return loops, body


def _where(mask: Value, new: Value, old: Value) -> Value:
    return new if mask is None else np.where(mask, new, old)


class _Kernel:
    """One kernel's evaluation over flat arrays, one per buffer index."""

    def __init__(self, kernel: ir.Kernel, arrays: dict[int, npt.NDArray[Any]]) -> None:
        self.kernel = kernel
        self.arrays = arrays
        self.arith = ir.arith(kernel.dtype)
        self.real = np.dtype(np.float64 if self.arith == "f64" else np.float32)
        self.env: dict[str, Any] = {}
        self.lib = runtime()
        suffix = "" if self.arith == "f64" else "f"
        self.calls = {name: getattr(self.lib.lib, f"presk_i_{name}{suffix}") for name in _LIBM}
        self.constants: dict[Fraction, Value] = {}
        self.mask: npt.NDArray[np.bool_] | None = None  # the iterations a branch runs for
        self.n = 1  # iterations evaluated together
        self.iteration = np.arange(1, dtype=np.int64)  # each one's number (its scratch copy)
        self.scratch: set[int] = set()  # scratch buffers: a copy an iteration

    def run(self) -> None:
        loops, body = _batched(self.kernel)
        flat = np.arange(math.prod(loop.bound for loop in loops), dtype=np.int64)
        self.n = max(1, flat.size)
        for loop in reversed(loops):
            self.env[loop.var] = flat % loop.bound
            flat = flat // loop.bound
        self.iteration = np.arange(self.n, dtype=np.int64)
        self.stmts(body)

    def spread(self, x: Value) -> npt.NDArray[Any]:
        """A value as an array of one element an iteration."""
        return np.broadcast_to(np.asarray(x), (self.n,))

    def cast(self, x: Value, dtype: np.dtype[Any]) -> Value:
        if isinstance(x, np.ndarray):
            return x.astype(dtype, copy=False)
        return dtype.type(x)

    # ------------------------------------------------------------ indices

    def index(self, e: ir.Index) -> Value:
        match e:
            case ir.IVar(name):
                return self.env[name]
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

    def offset(self, b: ir.Buffer, idx: tuple[ir.Index, ...]) -> Value:
        at: Value = 0
        for i, size in zip(idx, b.shape, strict=True):
            at = at * size + self.index(i)
        if b.index in self.scratch and self.n > 1:  # this iteration's copy
            at = at + self.iteration * (b.size or 1)
        return at

    # ------------------------------------------------------------ values

    def load_at(self, b: ir.Buffer, at: Value) -> Value:
        raw = self.arrays[b.index][at]
        match b.dtype:
            case "i64":
                return raw
            case "bf16":
                return self.cast(bf16_to_f32(raw), self.real)
            case _:
                return self.cast(raw, self.real)

    def constant(self, value: Fraction) -> Value:
        found = self.constants.get(value)
        if found is None:
            found = self.constants[value] = self.real.type(rounded(value, self.arith))
        return found

    def call(self, name: str, x: Value) -> Value:
        """A libm function of the runtime, on every element."""
        ffi = self.lib.ffi
        xs = np.ascontiguousarray(self.spread(self.cast(x, self.real)))
        ys = np.empty_like(xs)
        real = "double *" if self.arith == "f64" else "float *"
        self.calls[name](
            ffi.cast(real, ffi.from_buffer(xs)), ffi.cast(real, ffi.from_buffer(ys)), xs.size
        )
        return ys

    def expr(self, e: ir.Expr | ir.Index | ir.Cmp) -> Value:
        match e:
            case ir.Load(buffer, idx):
                return self.load_at(buffer, self.offset(buffer, idx))
            case ir.Var(name):
                return self.env.get(name, self.real.type(0))
            case ir.Const(value):
                return self.constant(value)
            case ir.FromIndex(value):
                return self.cast(self.expr(value), self.real)
            case ir.Bin(op, left, right):
                return self.bin(op, self.expr(left), self.expr(right))
            case ir.Neg(operand):
                return -self.expr(operand)
            case ir.Fn(name, arg):
                if name == ir.Libm.SQRT:
                    return np.sqrt(self.cast(self.expr(arg), self.real))
                return self.call(str(name), self.expr(arg))
            case ir.Cmp(op, left, right):
                return self.compare(op, self.expr(left), self.expr(right))
            case ir.Select(cond, then, other):
                test = self.test(cond)
                if np.ndim(test) == 0:
                    return self.expr(then) if test else self.expr(other)
                return np.where(test, self.expr(then), self.expr(other))
            case ir.IVar() | ir.IConst() | ir.IBin():
                return self.index(e)
            case _:
                assert_never(e)

    @staticmethod
    def bin(op: ir.BinOp, a: Value, b: Value) -> Value:
        match op:
            case ir.BinOp.ADD:
                return a + b
            case ir.BinOp.SUB:
                return a - b
            case ir.BinOp.MUL:
                return a * b
            case ir.BinOp.DIV:
                return a / b
            case ir.BinOp.MAX:
                return np.where(a < b, b, a)
            case ir.BinOp.MIN:
                return np.where(b < a, b, a)
            case _:
                assert_never(op)

    @staticmethod
    def compare(op: ir.CmpOp, a: Value, b: Value) -> Value:
        match op:
            case ir.CmpOp.LT:
                return a < b
            case ir.CmpOp.LE:
                return a <= b
            case ir.CmpOp.GT:
                return a > b
            case ir.CmpOp.GE:
                return a >= b
            case ir.CmpOp.EQ:
                return a == b
            case ir.CmpOp.NE:
                return a != b
            case _:
                assert_never(op)

    def test(self, cond: ir.Cmp | ir.Load) -> Value:
        return self.expr(cond) != 0 if isinstance(cond, ir.Load) else self.expr(cond)

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
            case ir.VVar(name, lanes):
                return tuple(self.env.get(name, (self.real.type(0),) * lanes))
            case _:
                assert_never(v)

    # ------------------------------------------------------------ statements

    def store_at(self, b: ir.Buffer, at: Value, value: Value) -> None:
        array = self.arrays[b.index]
        match b.dtype:
            case "bf16":
                value = f32_to_bf16(np.asarray(value, dtype=np.float32))
            case "i64":
                value = np.trunc(np.asarray(value)).astype(np.int64)  # C's conversion
            case _:
                pass
        if self.mask is None:
            array[at] = value
        else:
            array[self.spread(at)[self.mask]] = self.spread(value)[self.mask]

    def bind(self, name: str, value: Value) -> None:
        """A scalar (or vector) variable set, in the iterations the mask keeps."""
        if self.mask is None:
            self.env[name] = value
        elif isinstance(value, tuple):
            old = self.env.get(name, (self.real.type(0),) * len(value))
            self.env[name] = tuple(_where(self.mask, v, o) for v, o in zip(value, old, strict=True))
        else:
            self.env[name] = _where(self.mask, value, self.env.get(name, 0))

    def stmts(self, body: tuple[ir.Stmt, ...]) -> None:
        for s in body:
            match s:
                case ir.For(var, bound, inner):
                    for i in range(bound):
                        self.env[var] = i
                        self.stmts(inner)
                case ir.Let(name, value, integer):
                    got = self.expr(value)
                    self.bind(name, self.cast(got, np.dtype(np.int64) if integer else self.real))
                case ir.Store(buffer, idx, value):
                    self.store_at(buffer, self.offset(buffer, idx), self.expr(value))
                case ir.If(cond, then, other):
                    self.branch(self.test(cond), then, other)
                case ir.Random(name, key, counter):
                    k = self.arrays[key.index]
                    ffi = self.lib.ffi
                    js = np.ascontiguousarray(self.spread(self.index(counter)).astype(np.uint64))
                    ys = np.empty(js.size, dtype=np.float64)
                    self.lib.lib.presk_i_uniform(
                        int(k[0]),
                        int(k[1]),
                        ffi.cast("uint64_t *", ffi.from_buffer(js)),
                        ffi.cast("double *", ffi.from_buffer(ys)),
                        js.size,
                    )
                    self.bind(name, ys)
                case ir.VLet(name, value, _):
                    self.bind(name, self.vexpr(value))
                case ir.VStore(buffer, idx, value):
                    at = self.offset(buffer, idx)
                    for lane, x in enumerate(self.vexpr(value)):
                        self.store_at(buffer, at + lane, x)
                case ir.Scratch(buffer, inner):
                    size = (buffer.size or 1) * self.n
                    self.arrays[buffer.index] = np.zeros(size, dtype=storage(buffer))
                    self.scratch.add(buffer.index)
                    self.stmts(inner)
                    self.scratch.discard(buffer.index)
                    del self.arrays[buffer.index]
                case _:
                    assert_never(s)

    def branch(self, test: Value, then: tuple[ir.Stmt, ...], other: tuple[ir.Stmt, ...]) -> None:
        """An `if`: one arm where every iteration agrees, else each under its mask."""
        if np.ndim(test) == 0:
            self.stmts(then if test else other)
            return
        outer = self.mask
        keep = np.ones(self.n, dtype=bool) if outer is None else outer
        for arm, mask in ((then, keep & test), (other, keep & ~test)):
            if arm and mask.any():
                self.mask = mask
                self.stmts(arm)
        self.mask = outer


def run_kernels(kernels: tuple[ir.Kernel, ...], arrays: dict[int, npt.NDArray[Any]]) -> None:
    """Evaluate `kernels` in order over flat arrays by buffer index (outputs overwritten)."""
    with np.errstate(all="ignore"):  # C's inf and NaN, without NumPy's warnings
        for k in kernels:
            _Kernel(k, arrays).run()


__all__ = ["run_kernels", "runtime", "storage"]
