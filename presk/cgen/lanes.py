"""Which libm calls of an innermost loop the C printer computes a block of lanes at a time.

Takes an innermost `For` of a kernel and the bounds of the kernel's loops;
gives the calls of `exp`, `log`, `tanh` and `erf` that may be evaluated for
a block of consecutive iterations (8 doubles or 16 floats) by the libm's
lane forms (`presk_exp_lanes`, …; libm/musl/presk_libm.c) before the
block's iterations run one after the other. The iterations themselves keep
their order and their operations, so a sum still adds its terms one at a
time in increasing index order (statement H: a lane is a different element,
never a partial sum), and each lane form has the scalar function's bits:
the printed program computes exactly what the scalar loop computes.

A call is taken when its argument varies with the loop variable and can be
evaluated early without changing anything: it reads no scalar the loop
assigns and no buffer the loop stores, and every element it loads is inside
its buffer for every iteration of the enclosing loops (it may sit under a
condition or a selection, and is then computed on lanes that discard it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import assert_never

from presk.kernel import ir
from presk.machine import vector_unit

# The functions that have lane forms, and how many lanes a block has.
LANE_FUNCTIONS = frozenset({ir.Libm.EXP, ir.Libm.LOG, ir.Libm.TANH, ir.Libm.ERF})
LANES = {"f64": 8, "f32": 16}
# The lane forms are written in 64-byte vectors. With narrower registers gcc splits them
# badly (unsigned lane compares one lane at a time, table loads through memory): on an
# AVX2 EPYC the 16-lane erff took 34 ns an element against the scalar call's 17.5, so
# there the scalar calls stay.
LANE_BYTES = 64


def lane_calls(loop: ir.For, bounds: Mapping[str, int], lanes: int) -> tuple[ir.Fn, ...]:
    """The calls of an innermost loop to compute by blocks, inner calls first; () for none."""
    if vector_unit().bytes < LANE_BYTES or loop.bound < lanes or not _plain(loop.body):
        return ()
    assigned, stored = _written(loop.body)
    calls: list[ir.Fn] = []
    for e in _exprs(loop.body):
        for fn in _calls(e):
            if fn not in calls and _early(fn.arg, loop.var, assigned, stored, bounds):
                calls.append(fn)
    return tuple(calls)


def block_guard(
    loop: ir.For, calls: tuple[ir.Fn, ...], bounds: Mapping[str, int]
) -> ir.Cmp | ir.Load | None:
    """The condition without which no call's value is read, when a block may test it first.

    A body that is one `If` whose condition can be evaluated early and whose
    calls all sit in its first branch reads none of them on a lane that fails
    it: a block where every lane fails (a causal mask's refused half) needs
    no lane call at all.
    """
    match loop.body:
        case (ir.If(cond, _, other),):
            assigned, stored = _written(loop.body)
            outside = [*_calls(cond), *(fn for e in _exprs(other) for fn in _calls(e))]
            if any(fn in calls for fn in outside):
                return None
            if not _early(cond, loop.var, assigned, stored, bounds):
                return None
            return cond
        case _:
            return None


def call_guards(
    loop: ir.For, calls: tuple[ir.Fn, ...], bounds: Mapping[str, int]
) -> dict[ir.Fn, ir.Cmp | ir.Load]:
    """Per call, the condition without which its value is never read, where a block may
    test it first: a call that sits only in the first arm of one selection of the body
    (`mask ? exp(x - m) : 0`, one for each row of the two-pass softmax's eight), whose
    condition can be evaluated early, and whose argument holds no other taken call. A
    block whose lanes all fail it (a causal mask's refused half of a row) skips the call.
    """
    assigned, stored = _written(loop.body)
    seen: dict[ir.Fn, int] = {}
    for e in _exprs(loop.body):
        for fn in _calls(e):
            seen[fn] = seen.get(fn, 0) + 1
    guards: dict[ir.Fn, ir.Cmp | ir.Load] = {}
    for e in _exprs(loop.body):
        match e:
            case ir.Select(cond, then, other):
                if any(fn in calls for fn in (*_calls(cond), *_calls(other))):
                    continue
                if not _early(cond, loop.var, assigned, stored, bounds):
                    continue
                for fn in _calls(then):
                    if fn in calls and seen[fn] == 1 and call_depth(fn, calls) == 0:
                        guards[fn] = cond
    return guards


def call_depth(fn: ir.Fn, calls: tuple[ir.Fn, ...]) -> int:
    """0 for a call whose argument holds no other taken call, else one more than theirs."""
    inner = [c for c in _calls(fn.arg) if c in calls]
    return 1 + max(call_depth(c, calls) for c in inner) if inner else 0


# ---------------------------------------------------------------- the body


def _plain(body: tuple[ir.Stmt, ...]) -> bool:
    """Scalar statements only: no nested loop, vector statement or scratch buffer."""
    for s in body:
        match s:
            case ir.Let() | ir.Store() | ir.Random():
                pass
            case ir.If(_, then, other):
                if not (_plain(then) and _plain(other)):
                    return False
            case ir.For() | ir.VLet() | ir.VStore() | ir.Scratch():
                return False
            case _:
                assert_never(s)
    return True


def _written(body: tuple[ir.Stmt, ...]) -> tuple[set[str], set[int]]:
    """The scalars a body assigns and the buffers it stores (a call reading neither may
    be computed before the block's iterations run)."""
    assigned = {s.name for s in ir.walk(body) if isinstance(s, ir.Let | ir.Random)}
    stored = {s.buffer.index for s in ir.walk(body) if isinstance(s, ir.Store)}
    return assigned, stored


def _exprs(body: tuple[ir.Stmt, ...]) -> Iterator[ir.Expr | ir.Index | ir.Cmp]:
    """Every expression of a plain body, in the order the printer prints them."""
    for s in body:
        match s:
            case ir.Let(_, value) | ir.Store(_, _, value):
                yield value
            case ir.If(cond, then, other):
                yield cond
                yield from _exprs(then)
                yield from _exprs(other)


def _calls(e: ir.Expr | ir.Index | ir.Cmp) -> Iterator[ir.Fn]:
    """The lane functions' calls in `e`, each after the calls in its argument."""
    match e:
        case ir.Fn(name, arg):
            yield from _calls(arg)
            if name in LANE_FUNCTIONS:
                yield e
        case ir.Bin(_, left, right) | ir.Cmp(_, left, right):
            yield from _calls(left)
            yield from _calls(right)
        case ir.Neg(operand):
            yield from _calls(operand)
        case ir.Select(cond, then, other):
            yield from _calls(cond)
            yield from _calls(then)
            yield from _calls(other)
        case ir.FromIndex(value):
            yield from _calls(value)
        case ir.Load() | ir.Var() | ir.Const() | ir.IVar() | ir.IConst() | ir.IBin():
            pass
        case _:
            assert_never(e)


# ---------------------------------------------------------------- early evaluation


def _early(
    e: ir.Expr | ir.Index | ir.Cmp,
    var: str,
    assigned: set[str],
    stored: set[int],
    bounds: Mapping[str, int],
) -> bool:
    """Whether `e` varies with `var` and may be evaluated before the block runs."""
    varies = False

    def visit(x: ir.Expr | ir.Index | ir.Cmp) -> bool:
        nonlocal varies
        match x:
            case ir.Load(buffer, index):
                if buffer.index in stored or not _inside(buffer, index, bounds):
                    return False
                return all(visit(i) for i in index)
            case ir.Var(name):
                return name not in assigned
            case ir.IVar(name):
                varies = varies or name == var
                return name not in assigned
            case ir.Const() | ir.IConst():
                return True
            case ir.IBin(_, left, right) | ir.Bin(_, left, right) | ir.Cmp(_, left, right):
                return visit(left) and visit(right)
            case ir.Neg(operand) | ir.Fn(_, operand) | ir.FromIndex(operand):
                return visit(operand)
            case ir.Select(cond, then, other):
                return visit(cond) and visit(then) and visit(other)
            case _:
                assert_never(x)

    return visit(e) and varies


def _inside(buffer: ir.Buffer, index: tuple[ir.Index, ...], bounds: Mapping[str, int]) -> bool:
    """Whether the element is in the buffer for every value of the loop variables."""
    for i, size in zip(index, buffer.shape, strict=True):
        span = _range(i, bounds)
        if span is None or span[0] < 0 or span[1] >= size:
            return False
    return True


def _range(e: ir.Index, bounds: Mapping[str, int]) -> tuple[int, int] | None:
    """The least and greatest value of an index expression; None if not known."""
    match e:
        case ir.IVar(name):
            return (0, bounds[name] - 1) if name in bounds else None
        case ir.IConst(value):
            return (value, value)
        case ir.IBin(op, left, right):
            a, b = _range(left, bounds), _range(right, bounds)
            if a is None or b is None:
                return None
            match op:
                case ir.IntOp.ADD:
                    return (a[0] + b[0], a[1] + b[1])
                case ir.IntOp.MUL:
                    products = [x * y for x in a for y in b]
                    return (min(products), max(products))
                case ir.IntOp.DIV if b[0] == b[1] > 0 and a[0] >= 0:
                    return (a[0] // b[0], a[1] // b[0])
                case ir.IntOp.MOD if b[0] == b[1] > 0 and a[0] >= 0:
                    return (0, min(a[1], b[0] - 1))
                case ir.IntOp.DIV | ir.IntOp.MOD:
                    return None
                case _:
                    assert_never(op)
        case _:
            assert_never(e)
