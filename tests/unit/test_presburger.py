"""The Presburger decision procedure: linear forms, worked examples, and decide() against
brute force, both on small boxes (exact agreement) and unbounded (the counterexample is a
real one and no smaller point fails; a claimed validity survives a large box)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from presk.elab import presburger
from presk.elab.presburger import (
    And,
    Bounds,
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
    Result,
    TrueF,
    conj,
    decide,
    disj,
    equal_for_all,
    evaluate,
    format_counterexample,
    implies,
)

V = Lin.var
C = Lin.const_

# --- brute force: an independent statement of the counterexample order ----------------


def _order_key(p: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    # Least sum first, then larger values on earlier variables.
    return (sum(p), tuple(-v for v in p))


def brute_box(f: Formula, names: Sequence[str], lo: Sequence[int], hi: Sequence[int]) -> Result:
    """The least failing point of a finite box, by sorting the whole box."""
    pts = sorted(
        itertools.product(*(range(a, b + 1) for a, b in zip(lo, hi, strict=True))),
        key=_order_key,
    )
    for p in pts:
        env = dict(zip(names, p, strict=True))
        if not evaluate(f, env):
            return Result(False, env)
    return Result(True, None)


def points_up_to(n: int, total: int) -> Iterator[tuple[int, ...]]:
    """Every natural point with sum <= total, in the counterexample order."""
    for s in range(total + 1):
        level = [p for p in itertools.product(range(s + 1), repeat=n) if sum(p) == s]
        yield from sorted(level, key=_order_key)


# --- Lin ---------------------------------------------------------------------------------


def test_lin_printing_is_canonical() -> None:
    assert str(4 * V("D")) == "4*D"
    assert str(V("B") + 3) == "B + 3"
    assert str(V("In")) == "In"
    assert str(2 * V("T") - 1) == "2*T - 1"
    assert str(V("b") + V("a")) == "a + b"
    assert str(-V("D") + Fraction(1, 2)) == "-D + 1/2"
    assert str(V("D") * Fraction(1, 2)) == "(1/2)*D"
    assert str(V("D") - V("D")) == "0"
    assert str(C(-3)) == "-3"


def test_lin_arithmetic() -> None:
    d = V("D")
    assert 4 * d == d + 3 * d
    assert (d + 3 * d).coeffs == (("D", Fraction(4)),)
    assert (V("x") - V("x")).is_const
    assert (C(2) * C(3)).value() == 6
    assert (C(2) * d) == 2 * d == d * C(2)
    assert (5 - d).subst({"D": 2}).value() == 3
    assert (V("a") + 2 * V("b")).subst({"b": Fraction(1, 2)}) == V("a") + 1
    assert (V("b") + V("a")).vars() == ("a", "b")
    assert Lin((("x", Fraction(1)), ("x", Fraction(-1))), Fraction(0)) == C(0)
    with pytest.raises(NonLinear):
        _ = d * V("H")
    with pytest.raises(ValueError):
        d.value()


# --- worked examples ---------------------------------------------------------------------


def test_in_out_differ_at_in_1_out_0() -> None:
    names = ["In", "Out"]
    cx = equal_for_all(V("In"), V("Out"), names)
    assert cx == {"In": 1, "Out": 0}
    assert format_counterexample(cx, names) == "In = 1, Out = 0"
    for limit in (0, 4096):
        r = decide(Cmp("==", V("In"), V("Out")), names, search_limit=limit)
        assert r == Result(False, {"In": 1, "Out": 0})


def test_equal_forms() -> None:
    d = V("D")
    assert equal_for_all(4 * d, d + 3 * d, ["D"]) is None
    assert decide(Cmp("==", 4 * d, d + 3 * d), ["D"], search_limit=0).valid
    assert equal_for_all(d + 1, d, ["D"]) == {"D": 0}
    assert equal_for_all(2 * d, d, ["B", "D"]) == {"B": 0, "D": 1}
    # Bounds that leave only D = 0: the forms agree on the whole box.
    assert equal_for_all(2 * d, d, ["D"], Bounds(upper={"D": 0})) is None
    assert equal_for_all(2 * d, d, ["D"], Bounds(lower={"D": 3})) == {"D": 3}


def test_static_asserts_over_constants() -> None:
    d, h = 768, 12
    assert decide(Divides(h, C(d)), []).valid
    assert decide(Divides(5, C(d)), []) == Result(False, {})
    assert decide(Cmp("==", C(64) * C(h), C(d)), []).valid  # HD * H == D
    assert not decide(Cmp("==", C(63) * C(h), C(d)), [], search_limit=0).valid
    assert decide(ModEq(C(7), 4, 3), []).valid
    # D % H == 0 with D symbolic and H constant.
    assert decide(Divides(12, V("D")), ["D"]) == Result(False, {"D": 1})


def test_divisibility_with_symbols() -> None:
    b = V("B")
    for limit in (0, 4096):
        assert decide(Divides(2, 2 * b), ["B"], search_limit=limit).valid
        assert decide(Divides(2, b), ["B"], search_limit=limit) == Result(False, {"B": 1})
        assert decide(Divides(3, 6 * b + 3), ["B"], search_limit=limit).valid
        assert decide(Divides(2, b * Fraction(1, 2)), ["B"], search_limit=limit) == Result(
            False, {"B": 1}
        )
        assert decide(Divides(0, b), ["B"], search_limit=limit) == Result(False, {"B": 1})
        # The residue of 2*B + 1 mod 5 repeats with period 5 in B, not 5 // 2.
        odd = Not(Divides(5, 2 * b + 1))
        assert decide(odd, ["B"], search_limit=limit) == Result(False, {"B": 2})
        big = Or((Cmp("<", b, C(30)), Not(ModEq(3 * b, 7, 2))))
        assert decide(big, ["B"], search_limit=limit) == Result(False, {"B": 31})


def test_bounds() -> None:
    t = V("T")
    le = Cmp("<=", t, C(1024))
    for limit in (0, 4096):
        assert decide(le, ["T"], Bounds(upper={"T": 1024}), search_limit=limit).valid
        assert decide(le, ["T"], search_limit=limit) == Result(False, {"T": 1025})
        assert decide(le, ["T"], Bounds(upper={"T": 2048}), search_limit=limit) == Result(
            False, {"T": 1025}
        )
    b = V("B")
    assert decide(Cmp(">=", b, C(1)), ["B"], Bounds(lower={"B": 1})).valid
    assert decide(Cmp(">=", b, C(2)), ["B"], Bounds(lower={"B": 1})) == Result(False, {"B": 1})
    # An empty box makes everything hold.
    assert decide(FalseF(), ["B"], Bounds(lower={"B": 3}, upper={"B": 2})).valid


def test_implications() -> None:
    t, d = V("T"), V("D")
    assert decide(implies(Cmp("<=", t, C(512)), Cmp("<=", t, C(1024))), ["T"]).valid
    assert decide(Or((Not(Divides(4, d)), Divides(2, d))), ["D"], search_limit=0).valid
    # Needs the symbolic procedure: the direct search alone cannot cover every D.
    assert decide(implies(Divides(6, d), Divides(3, d)), ["D"], search_limit=0).valid
    assert decide(implies(Divides(2, d), Divides(4, d)), ["D"]) == Result(False, {"D": 2})
    assert decide(implies(Cmp(">", t, C(0)), Cmp(">=", 2 * t, t + 1)), ["T"]).valid
    assert decide(TrueF(), ["T"]).valid
    assert decide(disj(FalseF(), conj()), []).valid


def test_counterexamples_beyond_any_small_box() -> None:
    """A per-variable search over [0, max constant + lcm of moduli] is unsound: these
    counterexamples lie far outside it."""
    x, y, z = V("x"), V("y"), V("z")
    for limit in (0, 5, 4096):
        f = Not(conj(Cmp("==", x, 5 * y), Cmp(">=", y, C(3))))
        assert decide(f, ["x", "y"], search_limit=limit) == Result(False, {"x": 15, "y": 3})
        g = Or((Cmp("<", x, C(20)), Not(Divides(7, x))))
        assert decide(g, ["x"], search_limit=limit) == Result(False, {"x": 21})
        h = Not(conj(Cmp("==", 3 * x, 2 * y + 1), Cmp("==", y + z, C(9)), Divides(4, z)))
        assert decide(h, ["x", "y", "z"], search_limit=limit) == Result(
            False, {"x": 1, "y": 1, "z": 8}
        )
        chain = Not(conj(Cmp("==", x, 3 * y), Cmp("==", y, 3 * z), Cmp(">=", z, C(4))))
        assert decide(chain, ["x", "y", "z"], search_limit=limit) == Result(
            False, {"x": 36, "y": 12, "z": 4}
        )
        k = Not(conj(Cmp("==", 2 * x, 3 * y + 7), Cmp(">=", y, C(5)), Divides(5, x + z)))
        assert decide(k, ["x", "y", "z"], search_limit=limit) == Result(
            False, {"x": 11, "y": 5, "z": 4}
        )


def test_rejects_unlisted_variables() -> None:
    with pytest.raises(ValueError):
        decide(Cmp("==", V("a"), V("b")), ["a"])
    with pytest.raises(ValueError):
        decide(TrueF(), ["a", "a"])
    with pytest.raises(ValueError):
        decide(TrueF(), ["a"], Bounds(lower={"a": -1}))
    with pytest.raises(ValueError):
        Cmp("=<", V("a"), V("b"))  # type: ignore[arg-type]


# --- random formulas against brute force -------------------------------------------------

OPS: list[CmpOp] = ["==", "!=", "<=", "<", ">=", ">"]


def lin_of(names: Sequence[str]) -> st.SearchStrategy[Lin]:
    return st.builds(
        lambda cs, c: Lin(tuple((v, Fraction(k)) for v, k in zip(names, cs, strict=True)), c),
        st.lists(st.integers(-3, 3), min_size=len(names), max_size=len(names)),
        st.integers(-8, 8).map(Fraction),
    )


def formula_of(names: Sequence[str]) -> st.SearchStrategy[Formula]:
    lin = lin_of(names)
    atom: st.SearchStrategy[Formula] = st.one_of(
        st.builds(Cmp, st.sampled_from(OPS), lin, lin),
        st.builds(Divides, st.integers(1, 4), lin),
        st.integers(1, 4).flatmap(
            lambda k: st.builds(ModEq, lin, st.just(k), st.integers(0, k - 1))
        ),
    )
    return st.recursive(
        atom,
        lambda sub: st.one_of(
            st.lists(sub, min_size=1, max_size=3).map(lambda fs: And(tuple(fs))),
            st.lists(sub, min_size=1, max_size=3).map(lambda fs: Or(tuple(fs))),
            sub.map(Not),
        ),
        max_leaves=4,
    )


@st.composite
def system_of(draw: st.DrawFn, names: Sequence[str]) -> Formula:
    """`not (p*u == q*v + r and ...)`: its counterexamples are the solutions of a small
    system, whose least solution can lie far beyond every constant of the formula, and
    often there is none (a validity the procedure must prove)."""
    atoms: list[Formula] = []
    for _ in range(draw(st.integers(1, 3))):
        u, v = draw(st.permutations(names))[:2]
        p, q, r = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(-3, 3))
        atoms.append(Cmp("==", p * V(u), q * V(v) + r))
    for _ in range(draw(st.integers(0, 2))):
        w = draw(st.sampled_from(names))
        if draw(st.booleans()):
            atoms.append(Cmp(">=", V(w), C(draw(st.integers(0, 4)))))
        else:
            atoms.append(Divides(draw(st.integers(2, 4)), V(w) + draw(st.integers(-3, 3))))
    return Not(And(tuple(draw(st.permutations(atoms)))))


def problem_of(names: Sequence[str]) -> st.SearchStrategy[Formula]:
    if len(names) == 1:
        return formula_of(names)
    return st.one_of(formula_of(names), system_of(names))


@st.composite
def boxed_problem(
    draw: st.DrawFn,
) -> tuple[Formula, list[str], list[int], list[int]]:
    names = ["x", "y", "z"][: draw(st.integers(1, 3))]
    lo = [draw(st.integers(0, 2)) for _ in names]
    hi = [low + draw(st.integers(0, 6 - low)) for low in lo]
    return draw(problem_of(names)), names, lo, hi


@st.composite
def free_problem(draw: st.DrawFn) -> tuple[Formula, list[str]]:
    names = ["x", "y", "z"][: draw(st.integers(1, 3))]
    return draw(problem_of(names)), names


SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# A regression: Cooper's delta must use the divisors as scaled to a unit coefficient.
_SCALED_DIVISOR = (
    Not(And((Divides(4, 2 * V("y") + V("z")), Not(Divides(4, V("y") + 2))))),
    ["y", "z"],
    [1, 0],
    [4, 1],
)


@SETTINGS
@given(boxed_problem())
@example(_SCALED_DIVISOR)
def test_matches_brute_force_on_boxes(
    problem: tuple[Formula, list[str], list[int], list[int]],
) -> None:
    f, names, lo, hi = problem
    bounds = Bounds(
        upper=dict(zip(names, hi, strict=True)), lower=dict(zip(names, lo, strict=True))
    )
    want = brute_box(f, names, lo, hi)
    # 0: purely symbolic (Cooper elimination, oracle-driven minimisation); 7: a direct
    # search that stops part-way; default: direct search covers the box.
    for limit in (0, 7, 4096):
        assert decide(f, names, bounds, search_limit=limit) == want, (str(f), limit)


# How far the unbounded checks can afford to look, per number of variables.
_BOX = {1: 200, 2: 30, 3: 12}
_SUM = {1: 400, 2: 60, 3: 24}


@SETTINGS
@given(free_problem())
def test_unbounded_against_brute_force(problem: tuple[Formula, list[str]]) -> None:
    f, names = problem
    n = len(names)
    symbolic = decide(f, names, search_limit=0)
    assert decide(f, names) == symbolic, str(f)
    if symbolic.valid:
        # Soundness: no failing point in a box far beyond every constant of the formula.
        assert brute_box(f, names, [0] * n, [_BOX[n]] * n).valid, str(f)
        return
    cx = symbolic.counterexample
    assert cx is not None
    assert not evaluate(f, cx)
    point = tuple(cx[v] for v in names)
    if sum(point) <= _SUM[n]:
        # Minimality: the first failing point in the order is the one returned.
        fails = (
            p
            for p in points_up_to(n, sum(point))
            if not evaluate(f, dict(zip(names, p, strict=True)))
        )
        first = next(fails)
        assert first == point, str(f)


@SETTINGS
@given(st.integers(1, 3).flatmap(lambda n: st.tuples(*[lin_of(["x", "y", "z"][:n])] * 2)))
def test_equal_for_all_agrees(pair: tuple[Lin, Lin]) -> None:
    a, b = pair
    names = ["x", "y", "z"]
    cx = equal_for_all(a, b, names)
    assert cx == decide(Cmp("==", a, b), names, search_limit=0).counterexample
    assert (cx is None) == (a == b)
    assert cx == brute_box(Cmp("==", a, b), names, [0, 0, 0], [3, 3, 3]).counterexample


@SETTINGS
@given(
    st.lists(
        st.sampled_from([Fraction(1, 2), Fraction(-2, 3), Fraction(3, 4)]), min_size=2, max_size=2
    ),
    st.sampled_from(OPS),
    st.integers(-4, 4),
    st.integers(1, 4),
)
def test_fractional_coefficients(cs: list[Fraction], op: CmpOp, c: int, k: int) -> None:
    x, y = V("x"), V("y")
    e = cs[0] * x + cs[1] * y + c
    f = Or((Cmp(op, e, C(0)), Divides(k, e)))
    names = ["x", "y"]
    bounds = Bounds(upper={"x": 8, "y": 8})
    want = brute_box(f, names, [0, 0], [8, 8])
    assert decide(f, names, bounds, search_limit=0) == want, str(f)
    assert decide(f, names, bounds) == want, str(f)


@SETTINGS
@given(free_problem())
def test_integer_solver_without_box(problem: tuple[Formula, list[str]]) -> None:
    """The elimination procedure itself, over all integers: without box atoms variables
    may lack lower or upper bounds, which exercises Cooper's infinity disjuncts."""
    f, names = problem
    n = len(names)
    phi = presburger._compile(f, {v: i for i, v in enumerate(names)}, n, True)
    model = presburger._sat(phi, n, [None] * n)
    if model is None:
        r = {1: 40, 2: 12, 3: 6}[n]
        for p in itertools.product(range(-r, r + 1), repeat=n):
            assert not evaluate(f, dict(zip(names, p, strict=True))), (str(f), p)
    else:
        assert evaluate(f, {v: model[i] for i, v in enumerate(names)}), str(f)
