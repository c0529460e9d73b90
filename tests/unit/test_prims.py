"""Tensor values and primitives: accuracy against mpmath, exact small cases, summation
order, broadcasting, run-time failures, and the %g-compatible printer."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import gmpy2
import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presk.interp import prims as P
from presk.interp.tensor import (
    Axis,
    Kind,
    PrimError,
    Tensor,
    exact_decimal,
    format_axes,
    format_number,
    format_value,
    scalar,
)

BITS = 256
REL = mpmath.mpf(2) ** -250


@contextmanager
def prec(bits: int = BITS) -> Iterator[None]:
    """Evaluate under `bits` of MPFR precision, as the interpreter does."""
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        yield


@pytest.fixture(autouse=True)
def _mp_prec() -> Iterator[None]:
    old = mpmath.mp.prec
    mpmath.mp.prec = 400
    yield
    mpmath.mp.prec = old


def to_mp(x: Any) -> Any:
    """An mpfr as an mpmath number, exactly."""
    man, exp = x.as_mantissa_exp()
    return mpmath.ldexp(mpmath.mpf(int(man)), int(exp))


def close(got: Any, want: Any, scale: Any = None) -> bool:
    """|got - want| <= 2^-250 * (|want| or the given scale)."""
    ref = abs(want) if scale is None else scale
    return bool(abs(to_mp(got) - want) <= REL * ref)


def A(name: str | None, size: int) -> Axis:
    return Axis(name, size)


def vec(name: str | None, values: list[Any]) -> Tensor:
    return Tensor.real([A(name, len(values))], values)


def mat(n0: str | None, n1: str | None, rows: list[list[Any]]) -> Tensor:
    return Tensor.real([A(n0, len(rows)), A(n1, len(rows[0]))], rows)


def floats(t: Tensor) -> Any:
    """Nested lists of Python floats (for readable exact small-case comparisons)."""

    def conv(v: Any) -> Any:
        return [conv(w) for w in v] if isinstance(v, list) else float(v)

    return conv(t.tolist())


def random_reals(n: int, lo: float, hi: float, seed: int) -> list[Any]:
    """n 256-bit values in [lo, hi] with full-width mantissas."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        frac = gmpy2.mpfr(rng.getrandbits(BITS)) / gmpy2.mpfr(2) ** BITS
        out.append(lo + (hi - lo) * frac)
    return out


# -- unary functions against mpmath ------------------------------------------------------

UNARY: list[tuple[str, Callable[[Tensor], Tensor], Callable[[Any], Any], float, float]] = [
    ("exp", P.exp, mpmath.exp, -20.0, 20.0),
    ("log", P.log, mpmath.log, 1e-6, 1e6),
    ("sqrt", P.sqrt, mpmath.sqrt, 0.0, 1e4),
    ("tanh", P.tanh, mpmath.tanh, -10.0, 10.0),
    ("sin", P.sin, mpmath.sin, -100.0, 100.0),
    ("cos", P.cos, mpmath.cos, -100.0, 100.0),
    ("erf", P.erf, mpmath.erf, -6.0, 6.0),
    ("neg", P.neg, lambda x: -x, -5.0, 5.0),
    ("abs", P.abs_, abs, -5.0, 5.0),
]


@pytest.mark.parametrize(("name", "prim", "ref", "lo", "hi"), UNARY, ids=[u[0] for u in UNARY])
def test_unary_against_mpmath(
    name: str, prim: Callable[[Tensor], Tensor], ref: Callable[[Any], Any], lo: float, hi: float
) -> None:
    with prec():
        xs = random_reals(60, lo, hi, seed=hash(name) % 1000)
        out = prim(Tensor.real([A("n", len(xs))], xs))
        for x, y in zip(xs, out.flat(), strict=True):
            assert y.precision == BITS
            assert close(y, ref(to_mp(x))), (name, x, y)


def test_gelu_against_mpmath() -> None:
    with prec():
        xs = [*random_reals(60, -8.0, 6.0, seed=7), gmpy2.mpfr(0), gmpy2.mpfr(-1)]
        out = P.gelu(vec("n", xs))
        for x, y in zip(xs, out.flat(), strict=True):
            mx = to_mp(x)
            want = mx * (1 + mpmath.erf(mx / mpmath.sqrt(2))) / 2
            # For negative x, 1 + erf(x/√2) cancels; the steps are only accurate relative
            # to |x| there, which is what the scale says.
            assert close(y, want, abs(want) + abs(mx)), (x, y)
        # Where nothing cancels the result is accurate relative to itself.
        for x, y in zip(xs, out.flat(), strict=True):
            if x >= 0:
                mx = to_mp(x)
                assert close(y, mx * (1 + mpmath.erf(mx / mpmath.sqrt(2))) / 2)


def test_gelu_follows_the_documented_steps_bit_for_bit() -> None:
    with prec(64):
        xs = random_reals(30, -4.0, 4.0, seed=8)
        out = P.gelu(vec(None, xs))
        s = gmpy2.sqrt(2)
        for x, y in zip(xs, out.flat(), strict=True):
            t = x / s
            e = gmpy2.erf(t)
            p = 1 + e
            h = p / 2
            assert y == x * h


def test_relu_and_special_values() -> None:
    with prec():
        out = P.relu(vec(None, [-2, gmpy2.mpfr("-0"), 0, 3]))
        assert floats(out) == [0.0, 0.0, 0.0, 3.0]
        assert not any(gmpy2.is_signed(v) for v in out.flat())  # relu(-0) = +0
        assert P.log(scalar(0)).item() == gmpy2.mpfr("-inf")


@pytest.mark.parametrize(
    ("prim", "arg", "message"),
    [
        (P.log, "-0.5", "log of a negative number (-0.5)"),
        (P.sqrt, "-2", "square root of a negative number (-2)"),
    ],
)
def test_domain_errors(prim: Callable[[Tensor], Tensor], arg: str, message: str) -> None:
    with prec(), pytest.raises(PrimError) as info:
        prim(vec(None, [1, arg]))
    assert info.value.message == message


def test_division_by_zero_and_nan_raise() -> None:
    with prec():
        with pytest.raises(PrimError, match="division by zero"):
            P.div(vec(None, [1, 2]), vec(None, [1, 0]))
        inf = gmpy2.mpfr("inf")
        with pytest.raises(PrimError, match="undefined"):
            P.sub(scalar(inf), scalar(inf))
        with pytest.raises(PrimError, match="non-integer exponent"):
            P.pow_(scalar(-2), scalar("0.5"))
        with pytest.raises(PrimError, match="zero raised to a negative power"):
            P.pow_(scalar(0), -1)


def test_pow_integer_and_real_exponents() -> None:
    with prec():
        x = vec(None, [3, "0.1", -2])
        for base, got in zip(x.flat(), P.pow_(x, -3).flat(), strict=True):
            # the exact integer power of the (rounded) base, correctly rounded once
            assert close(got, to_mp(base) ** -3)
        assert P.pow_(x, 2).flat()[2] == 4
        exps = Tensor.idx([A(None, 2)], [10, 2], None)
        assert P.pow_(vec(None, [2, 3]), exps).tolist() == [1024, 9]
        assert P.pow_(scalar(2), scalar("0.5")).item() == gmpy2.sqrt(2)
        y = P.pow_(vec(None, ["1.5", 7]), scalar("2.25")).flat()
        assert close(y[0], mpmath.mpf(1.5) ** mpmath.mpf(2.25))
        assert close(y[1], mpmath.mpf(7) ** mpmath.mpf(2.25))


def test_results_follow_the_context_precision_and_leave_it_alone() -> None:
    with prec(100):
        x = vec(None, [1, 2])
        y = P.div(P.exp(x), 3)
        assert all(v.precision == 100 for v in y.flat())
        assert gmpy2.get_context().precision == 100
        P.softmax(x, 0)
        P.gelu(x)
        assert gmpy2.get_context().precision == 100


# -- softmax family against mpmath -------------------------------------------------------


def _logit_rows(seed: int, rows: int = 4, v: int = 7) -> Tensor:
    xs = random_reals(rows * v, -5.0, 5.0, seed)
    return Tensor.real(
        [A("batch", rows), A("vocab", v)], [xs[r * v : (r + 1) * v] for r in range(rows)]
    )


def _mp_softmax(row: list[Any]) -> list[Any]:
    m = max(row)
    e = [mpmath.exp(x - m) for x in row]
    s = mpmath.fsum(e)
    return [x / s for x in e]


def test_softmax_log_softmax_cross_entropy_against_mpmath() -> None:
    with prec():
        x = _logit_rows(11)
        sm, lsm = P.softmax(x, "vocab"), P.log_softmax(x, "vocab")
        targets = Tensor.idx([A("batch", 4)], [0, 6, 3, 3], 7)
        ce = P.cross_entropy(x, targets, "vocab")
        assert ce.axes == (A("batch", 4),)
        for r, row in enumerate(x.tolist()):
            mrow = [to_mp(v) for v in row]
            want = _mp_softmax(mrow)
            for j in range(7):
                assert close(sm.data[r, j], want[j])
                assert close(lsm.data[r, j], mpmath.log(want[j]))
            t = targets.data[r]
            assert close(ce.data[r], -mpmath.log(want[t]))


def test_softmax_follows_the_documented_steps() -> None:
    with prec(53):
        x = _logit_rows(12, rows=2, v=5)
        got = P.softmax(x, "vocab")
        for r, row in enumerate(x.tolist()):
            m = max(row)
            e = [gmpy2.exp(v - m) for v in row]
            s = e[0]
            for v in e[1:]:
                s = s + v
            assert got.tolist()[r] == [v / s for v in e]
            ce = P.cross_entropy(x, Tensor.idx([A("batch", 2)], [1, 4], 5), "vocab")
            t = [1, 4][r]
            assert ce.data[r] == gmpy2.log(s) - (row[t] - m)


def test_softmax_over_a_middle_axis() -> None:
    with prec():
        x = Tensor.real([A("a", 2), A("b", 3), A("c", 2)], [[[1, 2], [3, 4], [5, 6]]] * 2)
        y = P.softmax(x, "b")
        assert y.axes == x.axes
        col = [y.data[0, j, 1] for j in range(3)]
        want = _mp_softmax([mpmath.mpf(2), mpmath.mpf(4), mpmath.mpf(6)])
        assert all(close(g, w) for g, w in zip(col, want, strict=True))


def test_masked_softmax_and_fully_masked_row() -> None:
    with prec():
        x = Tensor.real([A("seq", 3), A("seq2", 3)], [[1, 2, 3], [4, 5, 6], [7, 8, 9]])
        y = P.softmax(x, "seq2", P.causal_mask("seq", 3))
        assert floats(y)[0] == [1.0, 0.0, 0.0]
        assert y.data[1, 2] == 0
        assert close(y.data[1, 0], 1 / (1 + mpmath.e))
        # the mask broadcasts by position into a batch of score matrices
        xb = Tensor.real([A("heads", 2), *x.axes], [x.tolist(), x.tolist()])
        yb = P.softmax(xb, "seq2", P.causal_mask("seq", 3))
        assert yb.tolist() == [y.tolist(), y.tolist()]
        dead = Tensor.boolean(x.axes, [[True, False, False], [False, False, False], [True] * 3])
        with pytest.raises(PrimError, match="softmax row is fully masked"):
            P.softmax(x, "seq2", dead)
        ls = P.log_softmax(x, "seq2", P.causal_mask("seq", 3))
        assert ls.data[0, 0] == 0 and ls.data[0, 1] == gmpy2.mpfr("-inf")


def test_cross_entropy_target_out_of_range() -> None:
    with prec(), pytest.raises(PrimError, match="out of range"):
        P.cross_entropy(_logit_rows(1), Tensor.idx([A("batch", 4)], [0, 7, 0, 0], None), 1)


def test_argmax_picks_the_last_of_equal_maxima() -> None:
    with prec():
        x = mat("batch", "vocab", [[1, 3, 3, 2], [5, 1, 5, 5], [0, 0, 0, 0]])
        got = P.argmax(x, "vocab")
        assert got.kind is Kind.IDX and got.bound == 4 and got.axes == (A("batch", 3),)
        assert got.tolist() == [2, 3, 3]
        col = P.argmax(x, "batch")
        assert col.bound == 3 and col.tolist() == [1, 0, 1, 1]


def test_sample_with_fixed_uniforms() -> None:
    with prec():
        # p = softmax(log([1, 2, 3, 4])) = [0.1, 0.2, 0.3, 0.4]: cumulative 0.1 0.3 0.6 1.
        logits = Tensor.real(
            [A("batch", 5), A("vocab", 4)],
            [[gmpy2.log(k) for k in (1, 2, 3, 4)]] * 5,
        )
        got = P.sample([0.0, 0.05, 0.1000001, 0.59, 0.999], logits, "vocab")
        assert got.bound == 4 and got.axes == (A("batch", 5),)
        assert got.tolist() == [0, 0, 1, 2, 3]
        with pytest.raises(PrimError, match="uniforms"):
            P.sample([0.5], logits, "vocab")
    with prec(8):
        # At 8 bits the rounded partial sums of this row end at 0.9961 < 1: a u above that
        # falls back to the largest j with p_j > 0.
        x = vec("vocab", [0, Fraction(3, 16), Fraction(-3, 8)])
        p = P.softmax(x, "vocab").flat()
        assert (p[0] + p[1]) + p[2] < 1
        assert P.sample([0.999], x, "vocab").item() == 2
        assert P.sample([0.3], x, "vocab").item() == 0
        assert P.sample([0.5], x, "vocab").item() == 1


# -- summation order ----------------------------------------------------------------------


def test_sums_add_sequentially_in_increasing_index_order() -> None:
    with prec(53):
        tiny = gmpy2.mpfr(2) ** -60
        # (1 + tiny) rounds to 1, then - 1 -> 0; any other grouping keeps tiny
        x = vec("k", [1, tiny, -1])
        assert P.reduce_sum(x, "k").item() == 0
        assert P.reduce_sum(x).item() == 0
        assert P.reduce_sum(vec("k", [1, -1, tiny])).item() == tiny
        assert P.dot(x, vec("k", [1, 1, 1])).item() == 0
        m = mat("a", "k", [[1, tiny, -1], [1, -1, tiny]])
        assert P.reduce_sum(m, "k").tolist() == [0, tiny]
        assert P.reduce_mean(m, "k").tolist() == [0, tiny / 3]


def test_ein_sums_in_the_left_operands_axis_order() -> None:
    with prec(53):
        tiny = gmpy2.mpfr(2) ** -60
        a = mat("i", "j", [[1, tiny], [-1, 0]])
        b = mat("j", "i", [[1, 1], [1, 1]])
        # row-major over (i, j) as in a: 1, tiny, -1, 0 -> 0; over (j, i) it would be tiny
        assert P.ein((), a, b).item() == 0
        a2 = mat("j", "i", [[1, tiny], [-1, 0]])  # a's order is now (j, i)
        b2 = mat("i", "j", [[1, 1], [1, 1]])
        assert P.ein((), a2, b2).item() == 0


def test_sum_to_sums_broadcast_axes_in_order() -> None:
    with prec(53):
        tiny = gmpy2.mpfr(2) ** -60
        ct = Tensor.real([A("batch", 3), A("model", 2)], [[1, 2], [tiny, 3], [-1, 4]])
        back = P.sum_to(ct, (A("model", 2),))
        assert back.axes == (A("model", 2),) and back.tolist() == [0, 9]
        # name-based alignment: the target's order and names come back
        back2 = P.sum_to(ct, (A("batch", 3),))
        assert back2.tolist() == [3, tiny + 3, 3]
        same = P.sum_to(ct, (A(None, 3), A(None, 2)))
        assert same.tolist() == ct.tolist() and same.axes == (A(None, 3), A(None, 2))
        with pytest.raises(PrimError):
            P.sum_to(vec("model", [1, 2]), ct.axes)


# -- contractions, gathers, masks ----------------------------------------------------------


def test_dot_exact() -> None:
    with prec():
        a = mat("batch", "model", [[1, 2, 3], [4, 5, 6]])
        w = mat("model", "hidden", [[1, 0], [0, 1], [1, 1]])
        got = P.dot(a, w)
        assert got.axes == (A("batch", 2), A("hidden", 2))
        assert floats(got) == [[4.0, 5.0], [10.0, 11.0]]
        assert P.dot(vec(None, [1, 2, 3]), vec(None, [4, 5, 6])).item() == 32
        assert floats(P.dot(vec("model", [1, 2, 3]), w)) == [4.0, 5.0]
        with pytest.raises(PrimError, match="sizes differ"):
            P.dot(a, mat("x", "y", [[1], [2]]))


def test_ein_exact() -> None:
    with prec():
        q = Tensor.real(
            [A("heads", 2), A("seq", 2), A("hd", 2)],
            [[[1, 2], [3, 4]], [[5, 6], [7, 8]]],
        )
        k = P.rename_axis(q, "seq", "seq2")
        scores = P.ein(("heads", "seq", "seq2"), q, k)
        assert scores.axes == (A("heads", 2), A("seq", 2), A("seq2", 2))
        assert floats(scores) == [[[5.0, 11.0], [11.0, 25.0]], [[61.0, 83.0], [83.0, 113.0]]]
        # matrix product with the output in a chosen order
        a = mat("i", "k", [[1, 2], [3, 4]])
        b = mat("k", "j", [[5, 6], [7, 8]])
        assert floats(P.ein(("j", "i"), a, b)) == [[19.0, 43.0], [22.0, 50.0]]
        # an elementwise product with no summed axis
        assert floats(P.ein(("i", "k"), a, a)) == [[1.0, 4.0], [9.0, 16.0]]
        with pytest.raises(PrimError, match="must be named"):
            P.ein(("i",), mat("i", None, [[1]]), mat("i", "k", [[1]]))
        with pytest.raises(PrimError, match="left operand only"):
            P.ein(("i",), a, vec("i", [1, 2]))
        with pytest.raises(PrimError, match="size"):
            P.ein(("i",), a, mat("k", "i", [[1, 2, 3], [4, 5, 6]]))


def test_embed_and_its_adjoint() -> None:
    with prec():
        table = Tensor.real([A("vocab", 3), A("model", 2)], [[1, 2], [3, 4], [5, 6]])
        ids = Tensor.idx([A("batch", 2), A("seq", 2)], [[2, 0], [2, 1]], 3)
        e = P.embed(table, ids)
        assert e.axes == (A("batch", 2), A("seq", 2), A("model", 2))
        assert floats(e) == [[[5.0, 6.0], [1.0, 2.0]], [[5.0, 6.0], [3.0, 4.0]]]
        back = P.embed_vjp(e, ids, table.axes[0])
        assert back.axes == table.axes
        assert floats(back) == [[1.0, 2.0], [3.0, 4.0], [10.0, 12.0]]
        assert P.embed_vjp(e, ids, 3).axes == (A(None, 3), A("model", 2))
        assert floats(P.embed(vec("vocab", [7, 8, 9]), Tensor.idx((), 1, 3))) == 8.0
        with pytest.raises(PrimError, match="out of range"):
            P.embed(table, Tensor.idx([A(None, 1)], [3], None))


def test_embed_vjp_accumulates_in_row_major_order() -> None:
    with prec(53):
        tiny = gmpy2.mpfr(2) ** -60
        ids = Tensor.idx([A("seq", 3)], [0, 0, 0], 1)
        ct = vec("seq", [1, tiny, -1])
        assert P.embed_vjp(ct, ids, 1).tolist() == [0]


def test_one_hot_positions_causal_mask() -> None:
    with prec():
        ids = Tensor.idx([A("batch", 3)], [2, 0, 1], 3)
        oh = P.one_hot(ids)
        assert oh.axes == (A("batch", 3), A(None, 3))
        assert floats(oh) == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
        pos = P.positions("seq", 4)
        assert pos.kind is Kind.IDX and pos.bound == 4 and pos.tolist() == [0, 1, 2, 3]
        cm = P.causal_mask("seq", 3)
        assert cm.axes == (A("seq", 3), A("seq2", 3)) and cm.kind is Kind.BOOL
        assert cm.tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_dropout() -> None:
    with prec():
        x = mat("a", "b", [[1, 2], [3, 4]])
        got = P.dropout([0.1, 0.5, 0.9, 0.49], 0.5, x)
        assert floats(got) == [[0.0, 4.0], [6.0, 0.0]]
        q = gmpy2.mpfr(1) - gmpy2.mpfr("0.3")
        got3 = P.dropout([0.5] * 4, gmpy2.mpfr("0.3"), x)
        assert got3.tolist() == [[v / q for v in row] for row in x.tolist()]
        assert P.dropout([0.0] * 4, 0.0, x).tolist() == x.tolist()
        with pytest.raises(PrimError):
            P.dropout([0.5] * 4, 1.0, x)


# -- broadcasting -------------------------------------------------------------------------


def test_broadcast_rejects_mismatched_names_at_equal_rank() -> None:
    with prec():
        a = Tensor.zeros([A("batch", 4), A("model", 4)])
        b = Tensor.zeros([A("time", 4), A("model", 4)])
        with pytest.raises(PrimError, match=r"cannot broadcast \[batch: 4, model: 4\]"):
            P.add(a, b)


def test_broadcast_by_position_and_by_name() -> None:
    bm = (A("batch", 2), A("model", 3))
    # trailing positions, named or not
    assert P.align(bm, (A("model", 3),)).axes == bm
    assert P.align(bm, (A(None, 3),)).axes == bm
    al = P.align((A(None, 3),), bm)
    assert al.axes == bm and al.a_pos == (1,) and al.b_pos == (0, 1)
    # the non-None name wins at equal rank
    assert P.align((A(None, 2), A("model", 3)), (A("batch", 2), A(None, 3))).axes == bm
    # by name when the trailing positions disagree
    al = P.align(bm, (A("batch", 2),))
    assert al.axes == bm and al.b_pos == (0,)
    big = (A("batch", 2), A("heads", 4), A("seq", 5), A("hd", 3))
    al = P.align((A("seq", 5), A("heads", 4)), big)
    assert al.axes == big and al.a_pos == (2, 1)
    # scalars go anywhere
    assert P.align((), bm).axes == bm
    for bad in [
        (A(None, 2),),  # unnamed and not trailing-compatible
        (A("batch", 3),),  # right name, wrong size
        (A("seq", 2),),  # unknown name
        (A(None, 3), A(None, 2)),  # equal rank, sizes swapped
        (A("model", 3), A("batch", 2)),  # equal rank: no permutation by names
    ]:
        with pytest.raises(PrimError, match="cannot broadcast"):
            P.align(bm, bad)
    with pytest.raises(PrimError):
        P.align((A("x", 2), A("x", 2), A("y", 2)), (A("x", 2),))  # name occurs twice


def test_broadcast_arithmetic_values() -> None:
    with prec():
        x = Tensor.real([A("batch", 2), A("model", 3)], [[1, 2, 3], [4, 5, 6]])
        assert floats(P.add(x, vec(None, [10, 20, 30]))) == [[11, 22, 33], [14, 25, 36]]
        assert floats(P.mul(vec("batch", [10, 100]), x)) == [[10, 20, 30], [400, 500, 600]]
        assert floats(P.sub(x, 1)) == [[0, 1, 2], [3, 4, 5]]
        y = P.div(x, vec("batch", [1, 2]))
        assert y.axes == x.axes and floats(y) == [[1, 2, 3], [2, 2.5, 3]]
        assert floats(P.maximum(x, scalar(3))) == [[3, 3, 3], [4, 5, 6]]
        assert floats(P.minimum(x, scalar(3))) == [[1, 2, 3], [3, 3, 3]]
        z = P.broadcast_like(vec("batch", [7, 8]), x.axes)
        assert z.axes == x.axes and floats(z) == [[7, 7, 7], [8, 8, 8]]
        m = P.broadcast_like(P.causal_mask("s", 2), (A("h", 2), A("s", 2), A("s2", 2)))
        assert m.kind is Kind.BOOL and m.tolist()[1] == [[True, False], [True, True]]


# -- shape operations ---------------------------------------------------------------------


def test_merge_split_permute_transpose() -> None:
    with prec():
        x = Tensor.real([A("a", 2), A("b", 3), A("c", 1)], [[[1], [2], [3]], [[4], [5], [6]]])
        m = P.merge(x, "a", "b")
        assert m.axes == (A(None, 6), A("c", 1))
        assert floats(m) == [[1.0], [2.0], [3.0], [4.0], [5.0], [6.0]]
        with pytest.raises(PrimError, match="not adjacent"):
            P.merge(x, "b", "a")
        s = P.split(P.merge(x, "a", "b"), 0, (A("a", 2), A("b", 3)))
        assert s == x
        with pytest.raises(PrimError):
            P.split(x, "b", (A(None, 2), A(None, 2)))
        p = P.permute(x, ("c", "a", "b"))
        assert p.axes == (A("c", 1), A("a", 2), A("b", 3))
        assert floats(p) == [[[1, 2, 3], [4, 5, 6]]]
        t = P.transpose(mat("i", "j", [[1, 2, 3], [4, 5, 6]]))
        assert t.axes == (A("j", 3), A("i", 2)) and floats(t) == [[1, 4], [2, 5], [3, 6]]
        assert P.transpose(x, ("b", "c", "a")).axes == (A("b", 3), A("c", 1), A("a", 2))
        r = P.rename_axis(x, "b", "b2")
        assert r.names == ("a", "b2", "c")


def test_split_heads_layout_and_round_trip() -> None:
    with prec():
        d, h, t = 6, 3, 2
        rows = [[100 * b + 10 * s + c for c in range(d)] for s in range(t) for b in range(2)]
        x = Tensor.real(
            [A("batch", 2), A("seq", t), A("model", d)],
            [[rows[s * 2 + b] for s in range(t)] for b in range(2)],
        )
        y = P.split_heads(x, "heads", h)
        k = d // h
        assert y.axes == (A("batch", 2), A("heads", h), A("seq", t), A("hd", k))
        for b in range(2):
            for hh in range(h):
                for s in range(t):
                    for c in range(k):
                        assert y.data[b, hh, s, c] == x.data[b, s, hh * k + c]
        back = P.merge_heads(y)
        assert back.axes == (A("batch", 2), A("seq", t), A(None, d))
        assert back.tolist() == x.tolist()
        with pytest.raises(PrimError):
            P.split_heads(x, "heads", 4)


# -- conversions and values -----------------------------------------------------------------


def test_real_conversions() -> None:
    with prec(53):
        assert P.real(Fraction(1, 3)).item() == gmpy2.mpfr(1) / 3
        assert P.real("0.1").item() == gmpy2.mpfr(0.1)
        assert P.real(3).item() == 3
        idx = Tensor.idx([A(None, 3)], [0, 2, 1], 3)
        r = P.real(idx)
        assert r.kind is Kind.REAL and r.bound is None and r.tolist() == [0, 2, 1]
        assert P.real(P.causal_mask("s", 2)).tolist() == [[1, 0], [1, 1]]
    with prec(8):
        assert P.real(257).item() == 256  # correctly rounded to 8 bits (ties to even)


def test_tensor_construction_checks() -> None:
    with prec():
        with pytest.raises(ValueError):
            Tensor.real([A("a", 2)], [1, 2, 3])
        with pytest.raises(PrimError):
            Tensor.idx([A(None, 2)], [0, 5], 3)
        t = Tensor.real([A("a", 2)], [1, 2])
        assert t.shape == (2,) and t.rank == 1 and t.size == 2
        assert scalar(1.5).item() == 1.5 and scalar(True).kind is Kind.BOOL
        assert t.map(lambda v: v * 2).tolist() == [2, 4]
        assert t == Tensor.real([A("a", 2)], [1, 2]) and t != Tensor.real([A("b", 2)], [1, 2])


# -- printing -------------------------------------------------------------------------------


def test_format_value_examples() -> None:
    with prec(53):
        x = Tensor.real(
            [A("batch", 2), A(None, 2)],
            [[0.896290523413, -1.22253725991], [0.0468872897054, 4.15888308336]],
        )
        assert format_value(x, 12) == (
            "[batch: 2, 2] [[0.896290523413, -1.22253725991], [0.0468872897054, 4.15888308336]]"
        )
        assert format_value(scalar(3.478812), 6) == "3.47881"
        assert format_value(scalar(-2.5190750412), 10) == "-2.519075041"
        ids = Tensor.idx([A("batch", 5)], [3, 3, 5, 1, 7], 8)
        assert format_value(ids, 12) == "[batch: 5] [3, 3, 5, 1, 7]"
        assert (
            format_value(P.causal_mask("s", 2), 3) == "[s: 2, s2: 2] [[true, false], [true, true]]"
        )
        assert format_value(Tensor.idx((), 4, 9), 3) == "4"
        assert format_axes((A("batch", 4), A(None, 2))) == "[batch: 4, 2]"
        assert format_axes(()) == "[]"


def test_format_number_cases() -> None:
    cases = [
        (1e-06, 12, "1e-06"),
        (1.5e20, 12, "1.5e+20"),
        (0.0001, 12, "0.0001"),
        (123456.0, 3, "1.23e+05"),
        (999999.5, 6, "1e+06"),
        (2.5, 1, "2"),
        (0.0, 6, "0"),
        (-0.0, 6, "0"),
        (float("inf"), 6, "inf"),
        (float("-inf"), 6, "-inf"),
    ]
    for x, d, want in cases:
        assert format_number(gmpy2.mpfr(x, 53), d) == want, (x, d)
    with prec(256):
        third = gmpy2.mpfr(1) / 3
        assert format_number(third, 30) == "0.333333333333333333333333333333"
        assert format_number(gmpy2.log(gmpy2.mpfr(64)), 12) == "4.15888308336"


@settings(max_examples=2000, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=25),
)
def test_format_number_matches_percent_g(x: float, digits: int) -> None:
    want = f"%.{digits}g" % x
    if x == 0:
        want = "0"
    assert format_number(gmpy2.mpfr(x, 53), digits) == want


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_exact_decimal_round_trips_doubles(x: float) -> None:
    s = exact_decimal(gmpy2.mpfr(x, 53))
    assert Fraction(s) == Fraction(x)
    assert float(s) == x
    assert gmpy2.mpfr(s, 53) == x


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=2**256 - 1), st.integers(min_value=-1200, max_value=1200))
def test_exact_decimal_round_trips_wide_values(man: int, exp: int) -> None:
    with prec(256):
        x = gmpy2.mul_2exp(gmpy2.mpfr(man), exp)
        s = exact_decimal(x)
        assert Fraction(s) == Fraction(*x.as_integer_ratio())
        assert gmpy2.mpfr(s, 256) == x
        assert exact_decimal(-x) == "-" + s


def test_exact_decimal_forms() -> None:
    assert exact_decimal(gmpy2.mpfr(-0.046875, 53)) == "-0.046875"
    assert exact_decimal(gmpy2.mpfr(1536, 53)) == "1536"
    assert exact_decimal(gmpy2.mpfr(2.0**-20, 53)) == "9.5367431640625e-7"
    assert exact_decimal(gmpy2.mpfr(2.0**80, 53)) == "1.208925819614629174706176e+24"
    assert exact_decimal(gmpy2.mpfr("-0", 53)) == "-0"
    assert exact_decimal(gmpy2.mpfr(0, 53)) == "0"
    assert math.isclose(float(exact_decimal(gmpy2.mpfr(0.1, 53))), 0.1)
