"""Satisfiability of the compiled formulas over the integers (`_sat`): the lazy DNF and
Cooper's variable elimination, within a budget of steps (`STEP_LIMIT`, `Undecided`).

The Note in presk/elab/presburger.py explains the procedure and its proof (its step 2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import NamedTuple

from presk.elab.nnf import (
    _AndN,
    _Atom,
    _Dvd,
    _Gt,
    _mk_dvd,
    _Model,
    _model_value,
    _neg_vec,
    _Nnf,
    _OrN,
    _plus,
    _subst_atom,
    _Vec,
)


class Undecided(Exception):
    """Raised by `decide` when the formula needs more than `STEP_LIMIT` steps.

    The procedure is exact, but Cooper's candidates and the periods it searches grow with
    the coefficients and moduli: `N % (10^20 + 39) == 5` has a period of 10^20. Past the
    limit the question is refused (a diagnostic) rather than left running.
    """


# Candidates, period points and box points `decide` may try for one formula: ordinary
# shape questions take a few hundred at most.
STEP_LIMIT = 50_000
_steps: ContextVar[int] = ContextVar("presburger_steps", default=0)


def _step() -> None:
    """Count one step of the current `decide`; Undecided past STEP_LIMIT."""
    used = _steps.get() + 1
    if used > STEP_LIMIT:
        raise Undecided(f"more than {STEP_LIMIT} steps")
    _steps.set(used)


def _dnf(phi: _Nnf) -> Iterator[list[_Atom]]:
    """The conjunctions of atoms of `phi`'s disjunctive normal form, lazily."""
    if phi is True:
        yield []
    elif phi is False:
        return
    elif isinstance(phi, _Gt | _Dvd):
        yield [phi]
    elif isinstance(phi, _OrN):
        for p in phi.parts:
            yield from _dnf(p)
    elif isinstance(phi, _AndN):
        atoms = [p for p in phi.parts if isinstance(p, _Gt | _Dvd)]
        rest = [p for p in phi.parts if not isinstance(p, _Gt | _Dvd)]
        yield from _dnf_product(atoms, rest, 0)


def _dnf_product(acc: list[_Atom], rest: Sequence[_Nnf], k: int) -> Iterator[list[_Atom]]:
    if k == len(rest):
        yield acc
        return
    for left in _dnf(rest[k]):
        yield from _dnf_product(acc + left, rest, k + 1)


def _normalize(atoms: Iterable[_Atom]) -> tuple[list[_Atom], _Vec | None] | None:
    """A conjunction simplified: of the inequalities on one form only the tightest is kept,
    opposite inequalities that leave no room make it False (None), and one equality
    `e == 0` they pin down (if any) is returned alongside."""
    tightest: dict[_Vec, int] = {}  # 0 < v + c is tightest for the smallest c
    dvds: dict[tuple[int, _Vec], set[tuple[int, bool]]] = {}
    for a in atoms:
        if isinstance(a, _Gt):
            key, c = a.t[:-1], a.t[-1]
            old = tightest.get(key)
            if old is None or c < old:
                tightest[key] = c
        else:
            seen = dvds.setdefault((a.k, a.t[:-1]), set())
            const = a.t[-1]
            # Constants are reduced mod k: two different residues cannot both hold, and an
            # atom and its negation contradict.
            if (const, not a.neg) in seen:
                return None
            if not a.neg and any(not ng and r != const for r, ng in seen):
                return None
            seen.add((const, a.neg))
    eq: _Vec | None = None
    for key, c1 in tightest.items():
        c2 = tightest.get(tuple(-x for x in key))
        if c2 is None:
            continue
        # 0 < v + c1 and 0 < -v + c2 leave 1 - c1 <= v <= c2 - 1.
        if c1 + c2 < 2:
            return None
        if c1 + c2 == 2 and eq is None:
            eq = (*key, c1 - 1)
    out: list[_Atom] = [_Gt((*key, c)) for key, c in tightest.items()]
    for (k, key), seen in dvds.items():
        out.extend(_Dvd(k, (*key, const), ng) for const, ng in sorted(seen))
    return out, eq


class _Plan(NamedTuple):
    """How one variable would be eliminated from a conjunction, and at what cost."""

    cost: int
    kind: str  # "enum", "lo", "up", "minf", "pinf"
    scale: int  # L, the lcm of the variable's coefficients
    delta: int


def _plan(atoms: Sequence[_Atom], i: int, box: tuple[int, int] | None) -> _Plan:
    """The cheapest exact way to eliminate x_i: enumeration of its static range, or one of
    Cooper's two forms (candidate count = bounds used * delta)."""
    scale = 1
    n_lo = n_up = 0
    for a in atoms:
        c = a.t[i]
        if c:
            scale = math.lcm(scale, abs(c))
            if isinstance(a, _Gt):
                if c > 0:
                    n_lo += 1
                else:
                    n_up += 1
    delta = scale
    for a in atoms:
        c = a.t[i]
        if c and isinstance(a, _Dvd):
            delta = math.lcm(delta, a.k * (scale // abs(c)))
    if n_lo == 0:
        # Only the j with L | j survive the `L | x'` atom in the infinity disjuncts.
        plan = _Plan(delta // scale, "minf", scale, delta)
    elif n_up == 0:
        plan = _Plan(delta // scale, "pinf", scale, delta)
    elif n_lo <= n_up:
        plan = _Plan(delta * n_lo, "lo", scale, delta)
    else:
        plan = _Plan(delta * n_up, "up", scale, delta)
    if box is not None and box[1] - box[0] + 1 < plan.cost:
        plan = _Plan(max(0, box[1] - box[0] + 1), "enum", 1, 1)
    return plan


def _branch(
    atoms: Sequence[_Atom],
    i: int,
    d: int,
    cands: Iterable[_Vec],
    n: int,
    box: Sequence[tuple[int, int] | None],
) -> _Model | None:
    """Try `d * x_i := u` for each candidate u (keeping `d | u`); the first satisfiable one
    gives the model, with x_i = u / d."""
    for u in cands:
        _step()
        new: list[_Atom] = []
        ok = True
        for a in (*(_subst_atom(a, i, d, u) for a in atoms), _mk_dvd(d, u, False)):
            if a is False:
                ok = False
                break
            if a is not True:
                new.append(a)
        if not ok:
            continue
        m = _solve(new, n, box)
        if m is None:
            continue
        v = _model_value(u, m)
        assert v % d == 0, "presburger: substituted value not divisible"
        m[i] = v // d
        return m
    return None


def _solve_one(conj: Sequence[_Atom], i: int) -> _Model | None:
    """A conjunction in the one variable x_i: its inequalities bound x_i to an interval, and
    `k | a*x + r` only depends on x mod k/gcd(k, a), so one period P of the interval (from
    its finite end) holds a solution if any point does."""
    low: int | None = None
    high: int | None = None
    period = 1
    dvds: list[_Dvd] = []
    for a in conj:
        c, r = a.t[i], a.t[-1]
        if isinstance(a, _Dvd):
            dvds.append(a)
            period = math.lcm(period, a.k // math.gcd(a.k, c))
        elif c > 0:  # c*x + r > 0 iff x >= floor(-r / c) + 1
            b = -r // c + 1
            low = b if low is None else max(low, b)
        else:  # c*x + r > 0 iff x <= floor((r - 1) / |c|)
            b = (r - 1) // -c
            high = b if high is None else min(high, b)
    if low is not None:
        first = low
        last = first + period - 1 if high is None else min(high, first + period - 1)
    elif high is not None:
        first, last = high - period + 1, high
    else:
        first, last = 0, period - 1
    for x in range(first, last + 1):
        _step()
        if all(((a.t[i] * x + a.t[-1]) % a.k == 0) != a.neg for a in dvds):
            return {i: x}
    return None


def _solve(atoms: Iterable[_Atom], n: int, box: Sequence[tuple[int, int] | None]) -> _Model | None:
    """A model of a conjunction of atoms over the integers, or None if it has none.

    `box[i]`, when given, is a finite range known to contain x_i in every model (the
    conjunction itself must imply it); it only enables enumeration.
    """
    norm = _normalize(atoms)
    if norm is None:
        return None
    conj, eq = norm
    if not conj:
        return {}
    if eq is not None:
        # a*x + r == 0 with the least |a|: |a|*x := -sign(a)*r, exact, no branching.
        i = min((k for k in range(n) if eq[k]), key=lambda k: abs(eq[k]))
        sg = 1 if eq[i] > 0 else -1
        u = [-sg * c for c in eq]
        u[i] = 0
        return _branch(conj, i, abs(eq[i]), [tuple(u)], n, box)
    occurring = [k for k in range(n) if any(a.t[k] for a in conj)]
    # Atoms without variables are evaluated on construction, so some variable occurs.
    assert occurring, "presburger: constant atom survived normalisation"
    if len(occurring) == 1:
        return _solve_one(conj, occurring[0])
    plans = [(_plan(conj, k, box[k]), k) for k in occurring]
    plan, i = min(plans, key=lambda p: p[0].cost)
    if plan.kind == "enum":
        b = box[i]
        assert b is not None
        cands = ((*([0] * n), v) for v in range(b[0], b[1] + 1))
        return _branch(conj, i, 1, cands, n, box)
    scale, delta = plan.scale, plan.delta
    if plan.kind in ("lo", "up"):
        want_lo = plan.kind == "lo"
        terms: list[_Vec] = []
        for a in conj:
            c = a.t[i]
            if isinstance(a, _Gt) and c and (c > 0) == want_lo:
                # 0 < c*x + r scaled by L/|c|: 0 < +-x' + (L/|c|)*r, so a lower bound
                # x' > -(L/c)*r or an upper bound x' < (L/|c|)*r.
                m = scale // abs(c)
                r = [m * tk for tk in a.t]
                r[i] = 0
                terms.append(_neg_vec(tuple(r)) if want_lo else tuple(r))
        step = 1 if want_lo else -1
        cands = (_plus(term, step * j) for term in terms for j in range(1, delta + 1))
        return _branch(conj, i, scale, cands, n, box)
    # An infinity disjunct: x' far below every upper bound (minf) or above every lower
    # bound (pinf); only the divisibility atoms on x' remain, and they see x' mod delta.
    minf = plan.kind == "minf"
    bounds = [a for a in conj if isinstance(a, _Gt) and a.t[i]]
    others = [a for a in conj if not (isinstance(a, _Gt) and a.t[i])]
    sgn = 1 if minf else -1
    for j in range(scale, delta + 1, scale):
        _step()
        at_j = (*([0] * n), sgn * j)
        model = _branch(others, i, scale, [at_j], n, box)
        if model is None:
            continue
        x = model[i]
        step = delta // scale
        for a in bounds:
            c = a.t[i]
            r = list(a.t)
            r[i] = 0
            rv = _model_value(tuple(r), model)
            if minf:  # c < 0: 0 < c*x + rv iff x <= (rv - 1) // |c|
                top = (rv - 1) // -c
                if x > top:
                    x -= -(-(x - top) // step) * step
            else:  # c > 0: 0 < c*x + rv iff x >= -rv // c + 1
                low = -rv // c + 1
                if x < low:
                    x += -(-(low - x) // step) * step
        model[i] = x
        return model
    return None


def _sat(phi: _Nnf, n: int, box: Sequence[tuple[int, int] | None]) -> _Model | None:
    """A model of `phi` over the integers (every variable fixed), or None."""
    for conj in _dnf(phi):
        m = _solve(conj, n, box)
        if m is not None:
            for k in range(n):
                m.setdefault(k, 0)
            return m
    return None
