"""Kernels as static-control parts: branches into selections, and why a nest is not one.

A polyhedral tool (pet, PPCG, PLUTO, Polly) reads a loop nest whose bounds
are literal, whose accesses are affine in the loop variables and whose
control flow does not depend on data. Our point-zero kernels meet the first
two conditions by construction except where they gather; their data-dependent
branches (a mask, a running maximum, argmax's comparison) carry only scalar
assignments and stores, so `to_selections` turns each into selections
`x = c ? new : x`, which computes the same bits: a selection evaluates only
the operand it picks, so nothing is computed that the branch did not.

`reasons` lists what keeps a kernel from being a static-control part; an
empty list means it is one.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from presk.kernel import ir

Guard = tuple[tuple[ir.Cmp | ir.Load, bool], ...]  # conditions and the polarity each must have


def to_selections(kernel: ir.Kernel) -> ir.Kernel:
    """The kernel with every loop-free data-dependent `If` turned into selections."""
    fresh = _Fresh()
    return replace(kernel, body=_stmts(kernel.body, fresh))


class _Fresh:
    """Names `c0, c1, …` for conditions that must be evaluated once, before their branch."""

    def __init__(self) -> None:
        self.count = 0

    def name(self) -> str:
        self.count += 1
        return f"c{self.count - 1}"


def _stmts(body: tuple[ir.Stmt, ...], fresh: _Fresh) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    for s in body:
        match s:
            case ir.For(var, bound, inner):
                out.append(ir.For(var, bound, _stmts(inner, fresh)))
            case ir.If(cond, then, other) if not _has_loop(then + other) and not _affine_cond(cond):
                out.extend(_convert(cond, then, other, (), fresh))
            case ir.If(cond, then, other):
                out.append(ir.If(cond, _stmts(then, fresh), _stmts(other, fresh)))
            case _:
                out.append(s)
    return tuple(out)


def _convert(
    cond: ir.Cmp | ir.Load,
    then: tuple[ir.Stmt, ...],
    other: tuple[ir.Stmt, ...],
    guard: Guard,
    fresh: _Fresh,
) -> list[ir.Stmt]:
    """A branch as guarded assignments: both arms run, each keeping what its guard refuses."""
    out: list[ir.Stmt] = []
    if _reads(cond) & (_assigns(then) | _assigns(other)):
        # The branch changes what its condition reads: decide it once, first (under
        # the enclosing guard, so that it reads nothing the original did not).
        name = fresh.name()
        decided = ir.Select(cond, ir.Const(Fraction(1)), ir.Const(Fraction(0)))
        out.append(ir.Let(name, _guarded(guard, decided, ir.Const(Fraction(0)))))
        cond = ir.Cmp(ir.CmpOp.NE, ir.Var(name), ir.Const(Fraction(0)))
    # Both arms ending in a store to the same element become one store of a selection.
    merged: ir.Store | None = None
    if (
        then
        and other
        and isinstance(then[-1], ir.Store)
        and isinstance(other[-1], ir.Store)
        and then[-1].buffer == other[-1].buffer
        and then[-1].index == other[-1].index
    ):
        a, b = then[-1], other[-1]
        value = ir.Select(cond, a.value, b.value)  # type: ignore[arg-type]
        merged = ir.Store(a.buffer, a.index, _guarded(guard, value, ir.Load(a.buffer, a.index)))
        then, other = then[:-1], other[:-1]
    for arm, polarity in ((then, True), (other, False)):
        for s in arm:
            out.extend(_guard(s, (*guard, (cond, polarity)), fresh))
    if merged is not None:
        out.append(merged)
    return out


def _guard(s: ir.Stmt, guard: Guard, fresh: _Fresh) -> list[ir.Stmt]:
    match s:
        case ir.Let(name, value, integer):
            return [ir.Let(name, _guarded(guard, value, ir.Var(name)), integer)]
        case ir.Store(buffer, idx, value):
            return [ir.Store(buffer, idx, _guarded(guard, value, ir.Load(buffer, idx)))]
        case ir.If(cond, then, other):
            return _convert(cond, then, other, guard, fresh)
    raise AssertionError(f"no selection form for {type(s).__name__}")


def _guarded(guard: Guard, value: object, old: ir.Expr) -> ir.Expr:
    """`value` where every condition of `guard` holds as required, else `old`."""
    result = value
    for cond, polarity in reversed(guard):
        result = ir.Select(cond, result, old) if polarity else ir.Select(cond, old, result)  # type: ignore[arg-type]
    return result  # type: ignore[return-value]


def _has_loop(body: tuple[ir.Stmt, ...]) -> bool:
    for s in body:
        match s:
            case ir.For() | ir.Random() | ir.VLet() | ir.VStore() | ir.Scratch():
                return True
            case ir.If(_, then, other) if _has_loop(then + other):
                return True
    return False


def _affine_cond(cond: ir.Cmp | ir.Load) -> bool:
    """A comparison of index expressions only: a static condition, left as an `if`."""
    return isinstance(cond, ir.Cmp) and all(
        isinstance(side, ir.IVar | ir.IConst | ir.IBin) for side in (cond.left, cond.right)
    )


def _assigns(body: tuple[ir.Stmt, ...]) -> set[str]:
    names: set[str] = set()
    for s in body:
        match s:
            case ir.Let(name) | ir.Random(name):
                names.add(name)
            case ir.If(_, then, other):
                names |= _assigns(then) | _assigns(other)
            case ir.For(_, _, inner):
                names |= _assigns(inner)
    return names


def _reads(e: object) -> set[str]:
    """Scalar variables an expression reads."""
    match e:
        case ir.Var(name):
            return {name}
        case ir.Bin(_, left, right) | ir.Cmp(_, left, right):
            return _reads(left) | _reads(right)
        case ir.Neg(operand) | ir.Fn(_, operand):
            return _reads(operand)
        case ir.FromIndex(value):
            return _reads(value)
        case ir.Select(cond, then, other):
            return _reads(cond) | _reads(then) | _reads(other)
        case ir.IVar(name):
            return {name}
        case ir.IBin(_, left, right):
            return _reads(left) | _reads(right)
        case ir.Load(_, idx):
            return set().union(*(_reads(i) for i in idx)) if idx else set()
    return set()


# ---------------------------------------------------------------- static control


def reasons(kernel: ir.Kernel) -> list[str]:
    """Why the kernel (after `to_selections`) is not a static-control part; [] if it is."""
    found: list[str] = []

    def note(reason: str) -> None:
        if reason not in found:
            found.append(reason)

    def index(e: ir.Index, loops: set[str]) -> None:
        match e:
            case ir.IVar(name) if name not in loops:
                note(f"an access at an index read from memory (`{name}`): a gather or scatter")
            case ir.IBin(op, left, right):
                if op == "*" and not (isinstance(left, ir.IConst) or isinstance(right, ir.IConst)):
                    note("an access whose index multiplies two loop variables: not affine")
                if op in ("/", "%") and not isinstance(right, ir.IConst):
                    note("an access dividing by a variable: not affine")
                index(left, loops)
                index(right, loops)

    def expr(e: object, loops: set[str]) -> None:
        match e:
            case ir.Load(_, idx):
                for i in idx:
                    index(i, loops)
            case ir.Bin(_, left, right) | ir.Cmp(_, left, right):
                expr(left, loops)
                expr(right, loops)
            case ir.Neg(operand) | ir.Fn(_, operand):
                expr(operand, loops)
            case ir.FromIndex(value):
                expr(value, loops)
            case ir.Select(cond, then, other):
                expr(cond, loops)
                expr(then, loops)
                expr(other, loops)

    def stmts(body: tuple[ir.Stmt, ...], loops: set[str]) -> None:
        for s in body:
            match s:
                case ir.For(var, _, inner):
                    stmts(inner, loops | {var})
                case ir.Let(_, value, _):
                    expr(value, loops)
                case ir.Store(_, idx, value):
                    for i in idx:
                        index(i, loops)
                    expr(value, loops)
                case ir.If(cond, then, other):
                    if not _affine_cond(cond):
                        note("a loop under a condition that depends on data")
                    expr(cond, loops)
                    stmts(then, loops)
                    stmts(other, loops)
                case ir.Random():
                    note("draws from the runtime's random generator (a call on a key)")
                case ir.VLet() | ir.VStore() | ir.Scratch():
                    note("vector lanes or a packed panel: not point zero")

    stmts(kernel.body, set())
    if not any(isinstance(s, ir.For) for s in kernel.body):
        note("no loop: a single assignment, nothing for a polyhedral tool to transform")
    return found
