"""What one call of the exact reference would cost, known before it runs, and the budget.

An export that writes the exact reference's result beside its own (the C
program's `conformance/reference.psk.d`, the PyTorch and ONNX tests'
`expected.json`) runs the reference interpreter on the entry: every scalar
operation in MPFR at 256 bits, a few microseconds each from Python. At a
model's size that is hours, so each such export first estimates the work.

The estimate is read off the native host program of the same entry at the
same shapes, which spells out every loop with a constant bound: for one call
(folds unrolled, calls expanded), each statement a kernel executes counts one,
plus one for each arithmetic operation, comparison or libm call in it; a
vector statement counts once per lane, a branch its larger arm. The reference
does the same element operations, one by one (the native program's index
arithmetic, which it does not do, is not counted), so the figure is a rough
over-estimate of its work.

Above the budget (`DEFAULT_BUDGET`, or `PRESK_REFERENCE_BUDGET`) an export
skips the reference unless `--reference` forces it; `--no-reference` skips it
always.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import assert_never

from presk.diagnostics import NotBuiltYet, UsageError
from presk.entries import Binding, Entry
from presk.host import ir as h
from presk.host.program import HostProgram
from presk.host.realization import Realization, RealizationError
from presk.host.values import HostError
from presk.kernel import ir as k
from presk.pipeline import Request, run_back_end
from presk.types.check import CheckedProgram

# About a minute of the reference on one core (it does some 4·10^6 operations a second):
# `make c-conformance`'s largest export, attention at B = 16, T = 256, is 1.3·10^8; the
# course GPT's gradient at B = 1, T = 16 is 1.7·10^9.
DEFAULT_BUDGET = 250_000_000
BUDGET_VARIABLE = "PRESK_REFERENCE_BUDGET"


class Choice(Enum):
    """What the user asked of the reference: `--reference`, `--no-reference`, or neither."""

    FORCE = "--reference"
    SKIP = "--no-reference"
    AUTO = "by the budget"


@dataclass(frozen=True)
class Verdict:
    """Whether an export computes the reference, and the line it prints when it does not."""

    run: bool
    ops: int
    budget: int
    note: str | None


def budget() -> int:
    """The budget of scalar operations: `PRESK_REFERENCE_BUDGET` if set, else the default."""
    text = os.environ.get(BUDGET_VARIABLE)
    if text is None:
        return DEFAULT_BUDGET
    value = text.strip().replace("_", "")
    if not (value.isascii() and value.isdigit()):
        raise UsageError(f"{BUDGET_VARIABLE}={text!r}: expected a whole number of operations")
    return int(value)


def choice_of(force: bool, skip: bool) -> Choice:
    """The flags `--reference` and `--no-reference` as one choice (both: refused)."""
    if force and skip:
        raise UsageError("--reference and --no-reference: give one")
    return Choice.FORCE if force else Choice.SKIP if skip else Choice.AUTO


def decide(estimate: Callable[[], int | None], choice: Choice, entry_text: str) -> Verdict:
    """Whether to run the reference of `entry_text`; `estimate` is called unless skipped
    (None: no estimate, as for an entry the native backend cannot record, which runs)."""
    limit = budget()
    if choice is Choice.SKIP:
        note = f"the exact reference of `{entry_text}` is skipped (--no-reference)"
        return Verdict(False, 0, limit, note)
    ops = estimate()
    if choice is Choice.FORCE or ops is None or ops <= limit:
        return Verdict(True, ops or 0, limit, None)
    return Verdict(False, ops, limit, f"the exact reference of `{entry_text}` is skipped: "
                   + over_budget(ops, limit))  # fmt: skip


def over_budget(ops: int, limit: int) -> str:
    """The words for an estimate over the budget, with the flag that forces the reference."""
    return (
        f"about {ops:.3g} scalar operations estimated, over the budget of {limit:.3g} "
        f"({BUDGET_VARIABLE}); --reference computes it"
    )


def entry_ops(checked: CheckedProgram, entry: Entry, binding: Binding) -> int | None:
    """The estimate for an entry no export compiled: its host program recorded in f64
    (no C is printed or built); None where the native backend cannot record it."""
    request = Request(checked, entry, binding, Realization("f64"), tiles=False)
    try:
        host = run_back_end(request, until="record").host
    except (HostError, NotBuiltYet, RealizationError):
        return None
    assert host is not None
    return reference_ops(host)


def reference_ops(host: HostProgram) -> int:
    """The estimated scalar operations of one call of the entry (the module docstring)."""
    kernels = dict(host.kernels)
    functions = {fn.c_name: fn for fn in host.functions}
    functions[host.entry.c_name] = host.entry
    kernel_cost: dict[str, int] = {}
    function_cost: dict[str, int] = {}

    def launch(name: str) -> int:
        if name not in kernel_cost:
            kernel_cost[name] = _stmts(kernels[name].body)
        return kernel_cost[name]

    def function(name: str) -> int:
        if name not in function_cost:
            function_cost[name] = body(functions[name].body)
        return function_cost[name]

    def body(stmts: tuple[h.Stmt, ...]) -> int:
        total = 0
        for stmt in stmts:
            match stmt:
                case h.Launch(kernel):
                    total += launch(kernel)
                case h.Call(callee):
                    total += function(callee)
                case h.Copy(_, _, size):
                    total += size // 8 + 1  # a copy costs the reference about an element each
                case h.Fold(_, layers, order, inner):
                    laps = layers - 1 if order is h.Order.ALL_BUT_LAST else layers
                    total += laps * body(inner)
                case h.Site() | h.Swap():
                    pass
                case _:
                    assert_never(stmt)
        return total

    return body(host.entry.body)


def _stmts(stmts: tuple[k.Stmt, ...]) -> int:
    total = 0
    for stmt in stmts:
        match stmt:
            case k.For(_, bound, inner):
                total += bound * _stmts(inner)
            case k.Let(_, value) | k.Store(_, _, value):
                total += 1 + _ops(value)
            case k.If(cond, then, other):
                total += 1 + _ops(cond) + max(_stmts(then), _stmts(other))
            case k.Random():
                total += 1
            case k.VLet(_, value, lanes):
                total += lanes * (1 + _vops(value))
            case k.VStore(_, _, value):
                total += _lanes(value) * (1 + _vops(value))
            case k.Scratch(_, inner):
                total += _stmts(inner)
            case _:
                assert_never(stmt)
    return total


def _ops(expr: k.Expr | k.Index | k.Cmp) -> int:
    """Real operations in a scalar expression (index arithmetic is free to the reference)."""
    match expr:
        case k.Bin(_, left, right) | k.Cmp(_, left, right):
            return 1 + _ops(left) + _ops(right)
        case k.Neg(operand) | k.Fn(_, operand):
            return 1 + _ops(operand)
        case k.Select(cond, then, other):
            return 1 + _ops(cond) + _ops(then) + _ops(other)
        case k.Load() | k.Var() | k.Const() | k.FromIndex() | k.IVar() | k.IConst() | k.IBin():
            return 0
        case _:
            assert_never(expr)


def _vops(expr: k.VExpr) -> int:
    """Lane-wise operations in a vector expression, per lane."""
    match expr:
        case k.VBin(_, left, right):
            return 1 + _vops(left) + _vops(right)
        case k.Splat(value, _):
            return _ops(value)
        case k.VLoad() | k.VVar():
            return 0
        case _:
            assert_never(expr)


def _lanes(expr: k.VExpr) -> int:
    match expr:
        case k.VBin(_, left, _):
            return _lanes(left)
        case k.VLoad(_, _, lanes) | k.Splat(_, lanes) | k.VVar(_, lanes):
            return lanes
        case _:
            assert_never(expr)


__all__ = [
    "BUDGET_VARIABLE",
    "DEFAULT_BUDGET",
    "Choice",
    "Verdict",
    "budget",
    "choice_of",
    "decide",
    "entry_ops",
    "over_budget",
    "reference_ops",
]
