"""Formulas compiled to integer atoms in negation normal form, as the decision procedure
takes them (`_compile`), and evaluating and substituting in them.

The Note in presk/elab/presburger.py explains the compilation (its step 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, TypeAlias

from presk.elab.formulas import (
    _NEGATED,
    And,
    Cmp,
    Divides,
    FalseF,
    Formula,
    Lin,
    ModEq,
    Not,
    Or,
    TrueF,
)

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
