"""Linear arithmetic over the naturals with divisibility: shape equalities and static asserts.

The elaborator asks two kinds of question about symbolic dimensions: is a shape equality
such as `In == Out` or `4*D == D + 3*D` true for EVERY value of the dimensions (and if not,
for which values do the sides differ), and does a `static assert` such as `D % H == 0`,
`T <= 1024` or `HD * H == D` hold. Both are validity questions for quantifier-free
Presburger formulas over bounded naturals, answered here by `decide`.

Provides `Lin` (a linear form with rational coefficients), the formulas `Cmp`, `Divides`,
`ModEq`, `And`, `Or`, `Not`, `TrueF`, `FalseF` (with the helpers `conj`, `disj`,
`implies`, `free_vars`, `evaluate`), `Bounds`, `Result`, `decide`, `equal_for_all` and
`format_counterexample`.

The parts live beside this module: the forms and formulas in formulas.py, their
compilation to integer atoms in nnf.py, the satisfiability procedure in cooper.py. This
module holds `decide` with the search for the least counterexample, and re-exports the
rest.

Invariants:

* A `Lin` is canonical: its coefficients are sorted by variable name and none is zero, so
  two forms are equal as functions of the naturals iff they are equal as values (`==`).
* `decide` is sound and complete for the whole fragment: `valid` is True iff the formula
  holds at every point of the box, and otherwise `counterexample` is the smallest failing
  point: least sum of values first, then lexicographically with LARGER values on EARLIER
  variables of the given order (so `In == Out` fails first at In = 1, Out = 0).
* `k | e` (`Divides(k, e)`) means e is an integer multiple of k; a rational e that is not an
  integer is divisible by nothing, and `0 | e` means e == 0.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice

# The `x as x` imports re-export names used through this module but not in __all__: the
# step limit, the Scalar alias, and the compiler and solver the unit tests call directly.
from presk.elab.cooper import STEP_LIMIT as STEP_LIMIT
from presk.elab.cooper import Undecided, _step, _steps
from presk.elab.cooper import _sat as _sat
from presk.elab.formulas import (
    And,
    Cmp,
    CmpOp,
    Divides,
    FalseF,
    Formula,
    Lin,
    ModEq,
    NonLinear,
    Not,
    Or,
    TrueF,
    conj,
    disj,
    evaluate,
    free_vars,
    implies,
)
from presk.elab.formulas import Scalar as Scalar
from presk.elab.nnf import _compile as _compile
from presk.elab.nnf import _eval, _Gt, _mk_and, _Nnf, _subst_nnf, _Vec

__all__ = [
    "And",
    "Bounds",
    "Cmp",
    "CmpOp",
    "Divides",
    "FalseF",
    "Formula",
    "Lin",
    "ModEq",
    "NonLinear",
    "Not",
    "Or",
    "Result",
    "TrueF",
    "Undecided",
    "conj",
    "decide",
    "disj",
    "equal_for_all",
    "evaluate",
    "format_counterexample",
    "free_vars",
    "implies",
]


# Note: how validity is decided, and why not by searching a box.
#
# A tempting shortcut is to search every variable over [0, c + M], with M the lcm of the
# moduli and c the largest constant of the comparison atoms. That is UNSOUND as soon as two
# variables interact: `not (x == 5*y and y >= 3)` has c = 3 and M = 1, so the box is
# [0, 4]^2, yet its only counterexamples have x >= 15. Bounds that are sound in general
# (Papadimitriou's small-solution theorem for integer programs) are exponential in the
# number of atoms, far too large to enumerate. So validity is decided symbolically:
#
# 1. `F` holds on the box B iff `not F and B` has no integer solution. `_compile` turns
#    `not F` into negation normal form over integer atoms `0 < t` and `k | t` / `not k | t`
#    (rational coefficients are cleared by a positive multiplier; `a == b` becomes two
#    inequalities, `a != b` a disjunction); the box adds `0 < x - lo + 1`, `0 < -x + hi + 1`.
# 2. `_sat` splits the formula into its disjunctive normal form lazily, one conjunction of
#    atoms at a time, and `_solve` decides a conjunction by eliminating one variable per
#    step with Cooper's theorem (D. C. Cooper, "Theorem proving in arithmetic without
#    multiplication", 1972). Let x occur with coefficients a_1..a_m, L = lcm |a_i|, and
#    x' = L*x; every atom scaled by L/|a_i| > 0 mentions x' with coefficient +-1, and
#    `exists x. phi` is `exists x'. L | x' and phi'`. With delta the lcm of L and of the
#    scaled divisors of the divisibility atoms on x', and Bs the terms b of the lower-bound
#    atoms `b < x'`:
#        exists x'. phi'(x')  <=>  OR_{j=1..delta} phi'_{-inf}(j)
#                                  OR  OR_{j=1..delta, b in Bs} phi'(b + j)
#    (phi'_{-inf} replaces lower-bound atoms by False and upper-bound atoms by True). Proof
#    sketch: let phi'(x) hold with x not of the form b + j. Then no b lies in [x - delta, x),
#    so x - delta satisfies every lower-bound atom x does, every upper-bound atom (it is
#    smaller) and the same divisibility atoms (delta is a multiple of each divisor); phi'
#    is negation-free, hence monotone in its atoms, so phi'(x - delta) holds. Descending,
#    either some b + j is reached or x drops below every b and a, where phi' agrees with
#    phi'_{-inf}, which is delta-periodic, so phi'_{-inf}(j) holds for some j. The dual
#    form with the upper bounds a (`x' < a`, candidates a - j, +inf) is used when it has
#    fewer candidates. Each disjunct is the conjunction with x eliminated, decided
#    recursively, so the search is exact: no threshold or period is guessed anywhere.
#    Cheaper exact steps are taken first where they apply: an equality `a*x + r == 0`
#    (found as two opposite inequalities) substitutes |a|*x := -sign(a)*r and keeps
#    `|a| | r`; a conjunction left in one variable is an interval and congruences, so one
#    period of the interval from its finite end is searched; a variable whose finite range
#    is smaller than its Cooper candidate count is enumerated. Every step keeps the
#    value it substituted, so a satisfiable conjunction returns a model (for the infinity
#    disjuncts, x' is moved by multiples of delta beyond every bound of the model).
# 3. The least counterexample: points of small sum are first tried directly in the
#    required order (`search_limit` of them); past that the solver is the oracle. A model
#    gives an upper bound on the least sum, a binary search on `sum <= s` finds it, and the
#    variables are then fixed in order, each to the largest value v for which
#    `x_i >= v and sum == s*` is still satisfiable (binary search again). Each query is
#    exact, so the result is the least point in the order; it is re-checked by evaluation.


@dataclass(frozen=True)
class Bounds:
    """Per-variable bounds; every variable is a natural number.

    `upper[name]` is an inclusive upper bound (absent or None: unbounded); `lower[name]` an
    inclusive lower bound (absent: 0, negative values are rejected by `decide`). Names of
    variables not being decided are ignored, so one `Bounds` can describe every dimension.
    """

    upper: Mapping[str, int | None] = field(default_factory=dict)
    lower: Mapping[str, int] = field(default_factory=dict)

    def lo(self, name: str) -> int:
        """The lower bound of `name` (0 by default)."""
        return self.lower.get(name, 0)

    def hi(self, name: str) -> int | None:
        """The upper bound of `name`, or None when unbounded."""
        return self.upper.get(name)


@dataclass(frozen=True)
class Result:
    """The answer of `decide`: validity, and the least counterexample when invalid."""

    valid: bool
    counterexample: dict[str, int] | None = None


def _points_with_sum(
    s: int, lo: Sequence[int], hi: Sequence[int | None]
) -> Iterator[tuple[int, ...]]:
    """The points of the box with coordinate sum `s`, larger values on earlier variables
    first (the counterexample order within one sum)."""
    n = len(lo)
    suf_lo = [0] * (n + 1)
    suf_hi: list[int | None] = [0] * (n + 1)
    for k in range(n - 1, -1, -1):
        suf_lo[k] = suf_lo[k + 1] + lo[k]
        h, sh = hi[k], suf_hi[k + 1]
        suf_hi[k] = None if h is None or sh is None else h + sh

    def rec(k: int, rem: int) -> Iterator[tuple[int, ...]]:
        if k == n:
            if rem == 0:
                yield ()
            return
        top = rem - suf_lo[k + 1]
        h = hi[k]
        if h is not None:
            top = min(top, h)
        bottom = lo[k]
        rest_hi = suf_hi[k + 1]
        if rest_hi is not None:
            bottom = max(bottom, rem - rest_hi)
        for v in range(top, bottom - 1, -1):
            for tail in rec(k + 1, rem - v):
                yield (v, *tail)

    yield from rec(0, s)


def _unit(n: int, i: int, sign: int, const: int) -> _Vec:
    v = [0] * (n + 1)
    v[i] = sign
    v[n] = const
    return tuple(v)


def _min_counterexample(
    neg: _Nnf, lo: Sequence[int], hi: Sequence[int | None], search_limit: int
) -> tuple[int, ...] | None:
    """The least point of the box (in the counterexample order) satisfying `neg`."""
    n = len(lo)
    if neg is False:
        return None
    # Direct search over the smallest sums: exact for the sums it completes.
    budget = search_limit
    s = sum(lo)
    top = None if any(h is None for h in hi) else sum(h for h in hi if h is not None)
    while budget > 0:
        if top is not None and s > top:
            return None
        finished = True
        for p in _points_with_sum(s, lo, hi):
            _step()
            if budget == 0:
                finished = False
                break
            budget -= 1
            if _eval(neg, p):
                return p
        if not finished:
            break
        s += 1
    # Symbolic: every sum below s is known to hold no counterexample.
    box_atoms: list[_Nnf] = [_Gt(_unit(n, i, 1, 1 - lo[i])) for i in range(n)]
    box_atoms += [_Gt(_unit(n, i, -1, h + 1)) for i, h in enumerate(hi) if h is not None]
    base = _mk_and([neg, *box_atoms])
    enum = search_limit > 0

    def ranges(total: int | None) -> list[tuple[int, int] | None]:
        # Static ranges for enumeration: the box, narrowed by `sum <= total`.
        out: list[tuple[int, int] | None] = []
        for i in range(n):
            h = hi[i]
            if total is not None:
                cap = total - (sum(lo) - lo[i])
                h = cap if h is None else min(h, cap)
            out.append((lo[i], h) if enum and h is not None else None)
        return out

    m = _sat(base, n, ranges(None))
    if m is None:
        return None
    best = tuple(m[k] for k in range(n))
    lo_s, hi_s = s, sum(best)
    while lo_s < hi_s:
        mid = (lo_s + hi_s) // 2
        at_most = _Gt((*([-1] * n), mid + 1))
        m = _sat(_mk_and([base, at_most]), n, ranges(mid))
        if m is None:
            lo_s = mid + 1
        else:
            best = tuple(m[k] for k in range(n))
            hi_s = sum(best)
    s_star = hi_s
    if search_limit > 0:
        few = sum(1 for _ in islice(_points_with_sum(s_star, lo, hi), search_limit + 1))
        if few <= search_limit:
            return next(p for p in _points_with_sum(s_star, lo, hi) if _eval(neg, p))
    phi = _mk_and([base, _Gt((*([-1] * n), s_star + 1)), _Gt((*([1] * n), 1 - s_star))])
    box = ranges(s_star)
    for i in range(n - 1):
        # The largest v with a counterexample of sum s* having x_i >= v (earlier fixed).
        lo_v = best[i]
        hi_v = s_star - sum(best[:i]) - sum(lo[i + 1 :])
        h = hi[i]
        if h is not None:
            hi_v = min(hi_v, h)
        while lo_v < hi_v:
            mid = (lo_v + hi_v + 1) // 2
            m = _sat(_mk_and([phi, _Gt(_unit(n, i, 1, 1 - mid))]), n, box)
            if m is None:
                hi_v = mid - 1
            else:
                best = (*best[:i], *(m[k] for k in range(i, n)))
                lo_v = best[i]
        phi = _subst_nnf(phi, i, 1, _unit(n, i, 0, lo_v))
    return best


def _check_vars(variables: Sequence[str], used: frozenset[str]) -> list[str]:
    names = list(variables)
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate variables in {names}")
    missing = sorted(used - set(names))
    if missing:
        raise ValueError(f"variables {missing} occur but are not among {names}")
    return names


def decide(
    formula: Formula,
    variables: Sequence[str],
    bounds: Bounds | None = None,
    *,
    search_limit: int = 4096,
) -> Result:
    """Whether `formula` holds for every natural assignment of `variables` within `bounds`.

    When it does not, the result carries the least counterexample: least sum of values,
    then larger values on earlier variables (in the order of `variables`). Every free
    variable of the formula must be listed; listed variables it does not mention still
    appear in the counterexample (at their lower bound). `search_limit` is how many points
    are tried directly before the symbolic procedure takes over; 0 makes the procedure
    purely symbolic (the tests use it to exercise Cooper elimination on small boxes).
    Raises Undecided when the answer needs more than STEP_LIMIT steps.
    """
    names = _check_vars(variables, free_vars(formula))
    _steps.set(0)
    bnd = bounds if bounds is not None else Bounds()
    lo = [bnd.lo(v) for v in names]
    hi = [bnd.hi(v) for v in names]
    for v, low in zip(names, lo, strict=True):
        if low < 0:
            raise ValueError(f"lower bound {low} of {v} is negative; variables are naturals")
    if any(h is not None and h < low for low, h in zip(lo, hi, strict=True)):
        return Result(True, None)  # an empty box: the formula holds vacuously
    index = {v: i for i, v in enumerate(names)}
    neg = _compile(formula, index, len(names), False)
    point = _min_counterexample(neg, lo, hi, search_limit)
    if point is None:
        return Result(True, None)
    # The answer is re-checked on the public formula, independently of the compilation.
    cx = dict(zip(names, point, strict=True))
    assert not evaluate(formula, cx), f"presburger: bogus counterexample {cx}"
    return Result(False, cx)


def _at_least_one(h: int | None) -> bool:
    return h is None or h >= 1


def equal_for_all(
    a: Lin, b: Lin, variables: Sequence[str], bounds: Bounds | None = None
) -> dict[str, int] | None:
    """None if `a == b` for every assignment within `bounds`, else the least counterexample
    (same order as `decide`)."""
    names = _check_vars(variables, frozenset(a.vars()) | frozenset(b.vars()))
    bnd = bounds if bounds is not None else Bounds()
    free = all(bnd.lo(v) == 0 and _at_least_one(bnd.hi(v)) for v in names)
    if free:
        # The naturals^k lie in no proper affine hyperplane, so a == b everywhere iff the
        # canonical forms agree. Otherwise the least witness is 0 (if the constants differ)
        # or the unit vector of the first variable whose coefficients differ: it is the
        # first point of sum 1 in the order, and every point of sum 1 is in the box.
        d = a - b
        if d.const != 0:
            return dict.fromkeys(names, 0)
        for v in names:
            if d.coeff(v) != 0:
                return {w: int(w == v) for w in names}
        return None
    return decide(Cmp("==", a, b), names, bnd).counterexample


def format_counterexample(cx: Mapping[str, int], variables: Sequence[str]) -> str:
    """`In = 1, Out = 0`: the assignment in the order of `variables`."""
    return ", ".join(f"{v} = {cx[v]}" for v in variables if v in cx)
