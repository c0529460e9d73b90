"""Linear forms and quantifier-free Presburger formulas over them: the language of `decide`.

Provides `Lin` (a linear form with rational coefficients), the formulas `Cmp`, `Divides`,
`ModEq`, `And`, `Or`, `Not`, `TrueF`, `FalseF`, and the helpers `conj`, `disj`,
`implies`, `free_vars` and `evaluate` (presk/elab/presburger.py states the invariants).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypeAlias

Scalar: TypeAlias = int | Fraction


CmpOp: TypeAlias = Literal["==", "!=", "<=", "<", ">=", ">"]
_CMP_OPS: frozenset[str] = frozenset({"==", "!=", "<=", "<", ">=", ">"})
# The negation of each comparison; used to push `Not` down to the atoms.
_NEGATED: dict[str, CmpOp] = {"==": "!=", "!=": "==", "<=": ">", "<": ">=", ">=": "<", ">": "<="}


class NonLinear(Exception):
    """Raised when two non-constant linear forms are multiplied."""


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
