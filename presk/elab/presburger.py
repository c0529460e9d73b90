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

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import islice
from typing import Literal, NamedTuple, TypeAlias

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

Scalar: TypeAlias = int | Fraction

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

CmpOp: TypeAlias = Literal["==", "!=", "<=", "<", ">=", ">"]
_CMP_OPS: frozenset[str] = frozenset({"==", "!=", "<=", "<", ">=", ">"})
# The negation of each comparison; used to push `Not` down to the atoms.
_NEGATED: dict[str, CmpOp] = {"==": "!=", "!=": "==", "<=": ">", "<": ">=", ">=": "<", ">": "<="}


class NonLinear(Exception):
    """Raised when two non-constant linear forms are multiplied."""


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


def _fmt_coeff(q: Fraction) -> str:
    """A coefficient's magnitude as printed before `*name`: `4`, or `(1/2)` when fractional."""
    return str(q) if q.denominator == 1 else f"({q})"


@dataclass(frozen=True)
class Lin:
    """A linear form `sum(c * name) + const` over rational coefficients.

    `coeffs` is canonical (sorted by name, merged, no zero coefficient): construction
    normalises whatever it is given, so structural equality is semantic equality.
    """

    coeffs: tuple[tuple[str, Fraction], ...] = ()
    const: Fraction = Fraction(0)

    def __post_init__(self) -> None:
        merged: dict[str, Fraction] = {}
        for name, c in self.coeffs:
            merged[name] = merged.get(name, Fraction(0)) + Fraction(c)
        canon = tuple(sorted((n, c) for n, c in merged.items() if c != 0))
        # Frozen dataclass: canonicalise in place once, at construction.
        object.__setattr__(self, "coeffs", canon)
        object.__setattr__(self, "const", Fraction(self.const))

    @staticmethod
    def var(name: str) -> Lin:
        """The form `name`."""
        return Lin(((name, Fraction(1)),))

    @staticmethod
    def const_(q: Scalar) -> Lin:
        """The constant form `q`."""
        return Lin((), Fraction(q))

    @property
    def is_const(self) -> bool:
        """Whether the form mentions no variable."""
        return not self.coeffs

    def value(self) -> Fraction:
        """The value of a constant form; ValueError if a variable occurs."""
        if self.coeffs:
            raise ValueError(f"{self} is not a constant")
        return self.const

    def coeff(self, name: str) -> Fraction:
        """The coefficient of `name` (0 when absent)."""
        for n, c in self.coeffs:
            if n == name:
                return c
        return Fraction(0)

    def vars(self) -> tuple[str, ...]:
        """The variables with a nonzero coefficient, sorted."""
        return tuple(n for n, _ in self.coeffs)

    def subst(self, mapping: Mapping[str, Scalar]) -> Lin:
        """Replace the variables named in `mapping` by their values."""
        const = self.const
        rest: list[tuple[str, Fraction]] = []
        for n, c in self.coeffs:
            if n in mapping:
                const += c * Fraction(mapping[n])
            else:
                rest.append((n, c))
        return Lin(tuple(rest), const)

    @staticmethod
    def _lift(other: Lin | Scalar) -> Lin:
        return other if isinstance(other, Lin) else Lin.const_(other)

    def __add__(self, other: Lin | Scalar) -> Lin:
        o = Lin._lift(other)
        return Lin(self.coeffs + o.coeffs, self.const + o.const)

    def __radd__(self, other: Scalar) -> Lin:
        return self + other

    def __neg__(self) -> Lin:
        return self * -1

    def __sub__(self, other: Lin | Scalar) -> Lin:
        return self + -Lin._lift(other)

    def __rsub__(self, other: Scalar) -> Lin:
        return Lin._lift(other) - self

    def __mul__(self, other: Lin | Scalar) -> Lin:
        if isinstance(other, Lin):
            if other.is_const:
                k = other.const
            elif self.is_const:
                return other * self.const
            else:
                raise NonLinear(f"({self}) * ({other}) is not linear")
        else:
            k = Fraction(other)
        return Lin(tuple((n, c * k) for n, c in self.coeffs), self.const * k)

    def __rmul__(self, other: Scalar) -> Lin:
        return self * other

    def __str__(self) -> str:
        parts: list[str] = []
        for name, c in self.coeffs:
            mag = abs(c)
            body = name if mag == 1 else f"{_fmt_coeff(mag)}*{name}"
            if not parts:
                parts.append(f"-{body}" if c < 0 else body)
            else:
                parts.append(f"- {body}" if c < 0 else f"+ {body}")
        if self.const != 0 or not parts:
            if not parts:
                parts.append(str(self.const))
            else:
                parts.append(f"- {-self.const}" if self.const < 0 else f"+ {self.const}")
        return " ".join(parts)


def _paren(e: Lin) -> str:
    """`e` printed, parenthesised when it has more than one term."""
    s = str(e)
    return f"({s})" if len(e.coeffs) + (e.const != 0) > 1 else s


@dataclass(frozen=True)
class Cmp:
    """The comparison `left op right`."""

    op: CmpOp
    left: Lin
    right: Lin

    def __post_init__(self) -> None:
        if self.op not in _CMP_OPS:
            raise ValueError(f"unknown comparison {self.op!r}")

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class Divides:
    """`k | expr`: expr is an integer multiple of k (what `expr % k == 0` compiles to)."""

    k: int
    expr: Lin

    def __str__(self) -> str:
        return f"{_paren(self.expr)} % {self.k} == 0"


@dataclass(frozen=True)
class ModEq:
    """`expr % k == r`, i.e. `k | expr - r`."""

    expr: Lin
    k: int
    r: int

    def __str__(self) -> str:
        return f"{_paren(self.expr)} % {self.k} == {self.r}"


@dataclass(frozen=True)
class And:
    """The conjunction of `args` (True when empty)."""

    args: tuple[Formula, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))

    def __str__(self) -> str:
        return "(" + " and ".join(map(str, self.args)) + ")" if self.args else "true"


@dataclass(frozen=True)
class Or:
    """The disjunction of `args` (False when empty)."""

    args: tuple[Formula, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))

    def __str__(self) -> str:
        return "(" + " or ".join(map(str, self.args)) + ")" if self.args else "false"


@dataclass(frozen=True)
class Not:
    """The negation of `arg`."""

    arg: Formula

    def __str__(self) -> str:
        return f"not {self.arg}"


@dataclass(frozen=True)
class TrueF:
    """The formula that always holds."""

    def __str__(self) -> str:
        return "true"


@dataclass(frozen=True)
class FalseF:
    """The formula that never holds."""

    def __str__(self) -> str:
        return "false"


Formula: TypeAlias = Cmp | Divides | ModEq | And | Or | Not | TrueF | FalseF


def conj(*fs: Formula) -> Formula:
    """The conjunction of `fs`."""
    return And(fs)


def disj(*fs: Formula) -> Formula:
    """The disjunction of `fs`."""
    return Or(fs)


def implies(a: Formula, b: Formula) -> Formula:
    """`a -> b`, i.e. `not a or b`."""
    return Or((Not(a), b))


def free_vars(f: Formula) -> frozenset[str]:
    """The variables occurring in `f`."""
    if isinstance(f, Cmp):
        return frozenset(f.left.vars()) | frozenset(f.right.vars())
    if isinstance(f, Divides | ModEq):
        return frozenset(f.expr.vars())
    if isinstance(f, And | Or):
        out: frozenset[str] = frozenset()
        for a in f.args:
            out |= free_vars(a)
        return out
    if isinstance(f, Not):
        return free_vars(f.arg)
    return frozenset()


def _divides(k: int, v: Fraction) -> bool:
    """`k | v` on exact values: v is an integer multiple of k."""
    if k == 0:
        return v == 0
    q = v / k
    return q.denominator == 1


def evaluate(f: Formula, env: Mapping[str, Scalar]) -> bool:
    """The truth of `f` under `env` (exact; every free variable must be bound)."""
    if isinstance(f, Cmp):
        lv = f.left.subst(env).value()
        rv = f.right.subst(env).value()
        match f.op:
            case "==":
                return lv == rv
            case "!=":
                return lv != rv
            case "<=":
                return lv <= rv
            case "<":
                return lv < rv
            case ">=":
                return lv >= rv
            case ">":
                return lv > rv
    if isinstance(f, Divides):
        return _divides(f.k, f.expr.subst(env).value())
    if isinstance(f, ModEq):
        return _divides(f.k, f.expr.subst(env).value() - f.r)
    if isinstance(f, And):
        return all(evaluate(a, env) for a in f.args)
    if isinstance(f, Or):
        return any(evaluate(a, env) for a in f.args)
    if isinstance(f, Not):
        return not evaluate(f.arg, env)
    return isinstance(f, TrueF)


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


# ---------------------------------------------------------------------------------------
# Internal representation: variables are indices 0..n-1; a vector holds their integer
# coefficients followed by the constant. Formulas are negation-free (NNF): negation only
# survives as the `neg` flag of a divisibility atom.

_Vec: TypeAlias = tuple[int, ...]


class _Gt(NamedTuple):
    """The atom `0 < t`."""

    t: _Vec


class _Dvd(NamedTuple):
    """The atom `k | t` (k >= 2), or its negation when `neg`."""

    k: int
    t: _Vec
    neg: bool


class _AndN(NamedTuple):
    parts: tuple[_Nnf, ...]


class _OrN(NamedTuple):
    parts: tuple[_Nnf, ...]


_Atom: TypeAlias = _Gt | _Dvd
_Nnf: TypeAlias = bool | _Gt | _Dvd | _AndN | _OrN
_Model: TypeAlias = dict[int, int]


def _mk_gt(t: _Vec) -> _Gt | bool:
    """`0 < t`, normalised: variable coefficients divided by their gcd g (exact on integers:
    0 < g*s + c iff s > -c/g iff 0 < s + ceil(c/g)), constant atoms evaluated."""
    g = 0
    for c in t[:-1]:
        g = math.gcd(g, c)
    if g == 0:
        return t[-1] > 0
    if g == 1:
        return _Gt(t)
    return _Gt((*(c // g for c in t[:-1]), -(-t[-1] // g)))


def _mk_dvd(k: int, t: _Vec, neg: bool) -> _Dvd | bool:
    """`k | t` (negated when `neg`), normalised: coefficients reduced into (-k/2, k/2] (small
    coefficients keep Cooper's lcm small), common factors with k divided out, and atoms
    that no longer depend on any variable evaluated."""
    k = abs(k)
    if k == 1:
        return not neg
    half = k // 2
    red: list[int] = []
    g = k
    for c in t[:-1]:
        r = c % k
        if r > half:
            r -= k
        red.append(r)
        g = math.gcd(g, r)
    const = t[-1] % k
    if g == k:  # every coefficient is a multiple of k: the truth is that of the constant
        return (const == 0) != neg
    if const % g:  # g divides every coefficient and k but not the constant
        return neg
    return _Dvd(k // g, (*(c // g for c in red), const // g), neg)


def _mk_and(parts: Iterable[_Nnf]) -> _Nnf:
    """A flattened, simplified conjunction."""
    out: list[_Nnf] = []
    for p in parts:
        if p is True:
            continue
        if p is False:
            return False
        if isinstance(p, _AndN):
            out.extend(p.parts)
        else:
            out.append(p)
    if not out:
        return True
    return out[0] if len(out) == 1 else _AndN(tuple(out))


def _mk_or(parts: Iterable[_Nnf]) -> _Nnf:
    """A flattened, simplified disjunction."""
    out: list[_Nnf] = []
    for p in parts:
        if p is False:
            continue
        if p is True:
            return True
        if isinstance(p, _OrN):
            out.extend(p.parts)
        else:
            out.append(p)
    if not out:
        return False
    return out[0] if len(out) == 1 else _OrN(tuple(out))


def _to_vec(e: Lin, index: Mapping[str, int], n: int) -> tuple[_Vec, int]:
    """Integer coefficients of `m * e` and the positive multiplier m clearing denominators."""
    m = e.const.denominator
    for _, c in e.coeffs:
        m = math.lcm(m, c.denominator)
    v = [0] * (n + 1)
    for name, c in e.coeffs:
        v[index[name]] = int(c * m)
    v[n] = int(e.const * m)
    return tuple(v), m


def _neg_vec(t: _Vec) -> _Vec:
    return tuple(-c for c in t)


def _plus(t: _Vec, k: int) -> _Vec:
    return (*t[:-1], t[-1] + k)


def _compile(f: Formula, index: Mapping[str, int], n: int, pos: bool) -> _Nnf:
    """`f` (or `not f` when not `pos`) in negation normal form over integer atoms."""
    if isinstance(f, TrueF):
        return pos
    if isinstance(f, FalseF):
        return not pos
    if isinstance(f, Not):
        return _compile(f.arg, index, n, not pos)
    if isinstance(f, And | Or):
        parts = [_compile(a, index, n, pos) for a in f.args]
        # De Morgan: a negated conjunction is a disjunction of negations, and vice versa.
        return _mk_and(parts) if isinstance(f, And) == pos else _mk_or(parts)
    if isinstance(f, Cmp):
        op = f.op if pos else _NEGATED[f.op]
        # Scaling by the positive m keeps the order, and t is integer-valued, so `<=` is
        # `< +1`.
        t, _ = _to_vec(f.right - f.left, index, n)
        nt = _neg_vec(t)
        match op:
            case "<":
                return _mk_gt(t)
            case "<=":
                return _mk_gt(_plus(t, 1))
            case ">":
                return _mk_gt(nt)
            case ">=":
                return _mk_gt(_plus(nt, 1))
            case "==":
                return _mk_and([_mk_gt(_plus(t, 1)), _mk_gt(_plus(nt, 1))])
            case _:  # "!="
                return _mk_or([_mk_gt(t), _mk_gt(nt)])
    if isinstance(f, ModEq):
        return _compile(Divides(f.k, f.expr - f.r), index, n, pos)
    assert isinstance(f, Divides)
    if f.k == 0:
        return _compile(Cmp("==", f.expr, Lin.const_(0)), index, n, pos)
    # k | e with e = s/m (s integer-valued) iff e = k*q iff s = k*m*q iff k*m | s.
    t, m = _to_vec(f.expr, index, n)
    return _mk_dvd(abs(f.k) * m, t, not pos)


def _dot(t: _Vec, point: Sequence[int]) -> int:
    s = t[-1]
    for c, x in zip(t, point, strict=False):
        s += c * x
    return s


def _eval(phi: _Nnf, point: Sequence[int]) -> bool:
    """The truth of an internal formula at a point."""
    if isinstance(phi, bool):
        return phi
    if isinstance(phi, _Gt):
        return _dot(phi.t, point) > 0
    if isinstance(phi, _Dvd):
        return (_dot(phi.t, point) % phi.k == 0) != phi.neg
    if isinstance(phi, _AndN):
        return all(_eval(p, point) for p in phi.parts)
    return any(_eval(p, point) for p in phi.parts)


def _model_value(t: _Vec, m: _Model) -> int:
    """`t` under the model m; variables m does not fix are free, so they are fixed to 0
    here (and recorded, so every later use sees the same value)."""
    s = t[-1]
    for i, c in enumerate(t[:-1]):
        if c:
            s += c * m.setdefault(i, 0)
    return s


def _subst_atom(a: _Atom, i: int, d: int, u: _Vec) -> _Atom | bool:
    """`a` with `d * x_i` replaced by `u` (d > 0, u[i] == 0, and the caller keeps `d | u`).

    The atom is multiplied by d first: `k | t` becomes `d*k | d*t`, and `0 < t`, i.e.
    `t >= 1` on integers, becomes `d*t >= d`, i.e. `0 < d*t - d + 1`. The `- d + 1` keeps
    the bound tight (merely `0 < d*t` would widen an equality `t == 0`, held as
    `0 < t + 1 and 0 < -t + 1`, into a range of width 2d - 1 and cost Cooper branches).
    """
    c = a.t[i]
    if c == 0:
        return a
    t = [d * tk + c * uk for tk, uk in zip(a.t, u, strict=True)]
    t[i] = 0
    if isinstance(a, _Gt):
        t[-1] += 1 - d
        return _mk_gt(tuple(t))
    return _mk_dvd(a.k * d, tuple(t), a.neg)


def _subst_nnf(phi: _Nnf, i: int, d: int, u: _Vec) -> _Nnf:
    """`phi` with `d * x_i` replaced by `u` (see `_subst_atom`)."""
    if isinstance(phi, bool):
        return phi
    if isinstance(phi, _Gt | _Dvd):
        return _subst_atom(phi, i, d, u)
    parts = [_subst_nnf(p, i, d, u) for p in phi.parts]
    return _mk_and(parts) if isinstance(phi, _AndN) else _mk_or(parts)


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
