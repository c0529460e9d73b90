"""The layout cost model: a point's static terms, the fit, and the commands that use it.

The terms are checked on kernels written by hand, whose counts are worked
out in the comments; the fit on samples drawn from known constants, which
it must give back; `presk bench --calibrate --space calib` on a tiny GEMM
(one worker, one call a point), whose profile then drives `presk plan`,
`presk reprice` and `presk refit`.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from presk.kernel import ir
from presk.kernel.layout import NO_SPLIT, Layout
from presk.tune import machine
from presk.tune.features import Features, _sets, features
from presk.tune.machine import Machine
from presk.tune.model import (
    LAUNCH_MAX_US,
    Sample,
    combine,
    fit_layout,
    plan_choice,
    predict,
    profile_of,
)
from tests.conftest import run_presk

# A machine with a first-level cache of four lines, so that a 1 KiB buffer misses it.
SMALL = Machine(
    cpu=0, l1d=256, l2=1 << 20, l3=1 << 22, l3_shared=1, workers=2, registers=16, vector_bytes=32
)

A = ir.Buffer(0, "f32", ((None, 16), (None, 16)))  # 16 rows of one 64-byte line each
OUT = ir.Buffer(1, "f32", ((None, 16),))


def _row_sums(split: bool = False) -> ir.Kernel:
    """out[i] = Σ_j a[i, j]: for i in 0..16 { s = 0; for j in 0..16 { s = s + a[i, j] };
    out[i] = s }."""
    i, j = ir.IVar("i"), ir.IVar("j")
    inner = ir.For("j", 16, (ir.Let("s", ir.Bin(ir.BinOp.ADD, ir.Var("s"), ir.Load(A, (i, j)))),))
    body = (
        ir.Let("s", ir.Const(Fraction(0))),
        inner,
        ir.Store(OUT, (i,), ir.Var("s")),
    )
    return ir.Kernel(
        "sum", "f32", (A,), (OUT,), (ir.For("i", 16, body),), split=split, workers=2 if split else 0
    )


def test_counts_and_lines_of_a_row_sum() -> None:
    got = features((_row_sums(),), "f32", SMALL, 1)
    # 16 iterations of i and 256 of j; 256 loads and 16 stores; 256 additions.
    assert (got.work, got.loads, got.ops) == (272, 272, 256)
    # The whole kernel (16 lines of a, one of out: 1088 bytes) misses the 256-byte L1d
    # but fits the L2: each i brings its row (one line); the line of out, which every i
    # writes, is still there from the i before (two iterations, three lines, fit).
    assert (got.l2, got.l3, got.mem) == (16 * 64 + 64, 0, 0)
    assert (got.group, got.launches, got.spawns) == ("f32+lanes1+w1", 1, 0)
    assert got.bytes == 16 * 16 * 4 + 16 * 4


def test_an_accumulator_waits_for_its_last_add() -> None:
    # The row sum's `s = s + a[i, j]` reads what it writes: each of the 256 runs of the inner
    # leaf waits for the one before; the stores of out[i] and the zeroing of s do not.
    assert features((_row_sums(),), "f32", SMALL, 1).steps == 256
    # Added to in place in the output, the same; a copy waits on nothing.
    i, j = ir.IVar("i"), ir.IVar("j")
    add = ir.Store(OUT, (i,), ir.Bin(ir.BinOp.ADD, ir.Load(OUT, (i,)), ir.Load(A, (i, j))))
    in_place = ir.Kernel("sum", "f32", (A,), (OUT,), (ir.For("i", 16, (ir.For("j", 16, (add,)),)),))
    assert features((in_place,), "f32", SMALL, 1).steps == 256
    copy = ir.Store(OUT, (i,), ir.Load(A, (i, ir.IConst(0))))
    k = ir.Kernel("copy", "f32", (A,), (OUT,), (ir.For("i", 16, (copy,)),))
    assert features((k,), "f32", SMALL, 1).steps == 0


def test_a_row_divided_in_place_waits_on_nothing() -> None:
    # out[i, j] = out[i, j] / s reads what it writes, but each j another element: the
    # loop over j never comes back to one (a softmax's last pass), where the in-place
    # add above does for every j.
    i, j = ir.IVar("i"), ir.IVar("j")
    square = ir.Buffer(1, "f32", ((None, 16), (None, 16)))
    divide = ir.Store(square, (i, j), ir.Bin(ir.BinOp.DIV, ir.Load(square, (i, j)), ir.Var("s")))
    body = (ir.Let("s", ir.Const(Fraction(3))), ir.For("j", 16, (divide,)))
    k = ir.Kernel("div", "f32", (), (square,), (ir.For("i", 16, body),))
    assert features((k,), "f32", SMALL, 1).steps == 0


def test_an_accumulator_under_an_if_waits_for_its_last_add() -> None:
    # if (a[i, j] > 0) { s = s + a[i, j] }: the sum under the test still chains along j
    # (a softmax's two-pass row, its exponentials added as they are stored).
    i, j = ir.IVar("i"), ir.IVar("j")
    add = ir.Let("s", ir.Bin(ir.BinOp.ADD, ir.Var("s"), ir.Load(A, (i, j))))
    test = ir.Cmp(ir.CmpOp.GT, ir.Load(A, (i, j)), ir.Const(Fraction(0)))
    inner = ir.For("j", 16, (ir.If(test, (add,), ()),))
    body = (ir.Let("s", ir.Const(Fraction(0))), inner, ir.Store(OUT, (i,), ir.Var("s")))
    k = ir.Kernel("sum", "f32", (A,), (OUT,), (ir.For("i", 16, body),))
    assert features((k,), "f32", SMALL, 1).steps == 256
    # Two such sums under two tests in one loop are two chains side by side: each step
    # of j still waits for one add, not two (a two-pass softmax's eight masked rows).
    other = ir.Let("t", ir.Bin(ir.BinOp.ADD, ir.Var("t"), ir.Load(A, (i, j))))
    twice = ir.For("j", 16, (ir.If(test, (add,), ()), ir.If(test, (other,), ())))
    body = (ir.Let("s", ir.Const(Fraction(0))), ir.Let("t", ir.Const(Fraction(0))), twice)
    k = ir.Kernel("sums", "f32", (A,), (OUT,), (ir.For("i", 16, body),))
    assert features((k,), "f32", SMALL, 1).steps == 256


def test_one_workers_share_of_a_split() -> None:
    got = features((_row_sums(split=True),), "f32", SMALL, 2)
    # Loop i at depth 0 over two workers: 8 of its 16 iterations each.
    assert (got.work, got.loads, got.l2) == (8 + 128, 128 + 8, 8 * 64 + 64)
    assert (got.group, got.spawns) == ("f32+lanes1+w2", 1)


def test_a_fitting_kernel_brings_nothing() -> None:
    roomy = Machine(0, 1 << 16, 1 << 20, 1 << 22, 1, 1, 16, 32)
    got = features((_row_sums(),), "f32", roomy, 1)
    assert (got.l2, got.l3, got.mem) == (0, 0, 0)


def test_a_column_walk_touches_a_line_per_element() -> None:
    """out[j] = Σ_i a[i, j], j outside: each j walks a column, 16 lines."""
    i, j = ir.IVar("i"), ir.IVar("j")
    inner = ir.For("i", 16, (ir.Let("s", ir.Bin(ir.BinOp.ADD, ir.Var("s"), ir.Load(A, (i, j)))),))
    body = (ir.Let("s", ir.Const(Fraction(0))), inner, ir.Store(OUT, (j,), ir.Var("s")))
    k = ir.Kernel("colsum", "f32", (A,), (OUT,), (ir.For("j", 16, body),))
    got = features((k,), "f32", SMALL, 1)
    # The column (16 lines) misses a four-line L1d: every j brings it again, and out[j]'s line.
    assert got.l2 == 16 * (16 * 64 + 64)


def test_a_vector_load_counts_once_and_sets_the_lanes() -> None:
    src = ir.Buffer(0, "f32", ((None, 64),))
    dst = ir.Buffer(1, "f32", ((None, 64),))
    i = ir.IVar("i")
    start = (ir.IBin(ir.IntOp.MUL, i, ir.IConst(16)),)
    body = (ir.VStore(dst, start, ir.VLoad(src, start, 16)),)
    k = ir.Kernel("copy", "f32", (src,), (dst,), (ir.For("i", 4, body),))
    got = features((k,), "f32", SMALL, 1)
    assert (got.work, got.loads, got.group) == (4, 8, "f32+lanes16+w1")
    # 256 bytes each, 512 in all: more than the L1d, so each i brings a line of each.
    assert got.l2 == 4 * 2 * 64


def test_a_tile_of_rows_of_vectors_covers_its_rows() -> None:
    """out[4i + r, 32j + 16c : +16] for rows r < 4 and vectors c < 2, j < 2 inside i:
    the tile's eight stores are four rows of two vectors, not one run of eight lines,
    and the loops cover the whole output, each of its 64 lines once."""
    out = ir.Buffer(0, "f32", ((None, 16), (None, 64)))  # 16 rows of four lines
    i, j = ir.IVar("i"), ir.IVar("j")

    def at(r: int, c: int) -> tuple[ir.Index, ir.Index]:
        row = ir.IBin(ir.IntOp.ADD, ir.IBin(ir.IntOp.MUL, i, ir.IConst(4)), ir.IConst(r))
        col = ir.IBin(ir.IntOp.ADD, ir.IBin(ir.IntOp.MUL, j, ir.IConst(32)), ir.IConst(16 * c))
        return row, col

    stores = tuple(
        ir.VStore(out, at(r, c), ir.Splat(ir.Const(Fraction(0)), 16))
        for r in range(4)
        for c in range(2)
    )
    k = ir.Kernel("tile", "f32", (), (out,), (ir.For("i", 4, (ir.For("j", 2, stores),)),))
    # An L1d of 48 lines: the output (64) misses it, one i's four rows (16) fit.
    mid = Machine(0, 48 * 64, 1 << 20, 1 << 22, 1, 1, 32, 64)
    assert features((k,), "f32", mid, 1).l2 == 64 * 64


def test_lines_an_iteration_shares_with_the_one_before_are_not_brought_again() -> None:
    """for j < 8 { for i < 16 { out[i, 8j : +8] = 0 } }: strips of half a line down 16 rows
    of four lines. Two strips share their lines, and the L1d holds two iterations (16
    lines) but not the output (64): the loop brings each line once, not once a strip."""
    out = ir.Buffer(0, "f32", ((None, 16), (None, 64)))
    i, j = ir.IVar("i"), ir.IVar("j")
    store = ir.VStore(
        out, (i, ir.IBin(ir.IntOp.MUL, j, ir.IConst(8))), ir.Splat(ir.Const(Fraction(0)), 8)
    )
    k = ir.Kernel("strips", "f32", (), (out,), (ir.For("j", 8, (ir.For("i", 16, (store,)),)),))
    twenty = Machine(0, 20 * 64, 1 << 20, 1 << 22, 1, 1, 16, 32)
    assert features((k,), "f32", twenty, 1).l2 == 64 * 64


def test_rows_in_one_set_of_the_l1d_miss_it_however_few() -> None:
    """out[j] = Σ_i a[i, j] over 8 rows 1 KiB apart, j < 16 outside (one line of each
    row). The column's 8 lines fit a 4 KiB L1d by size, and the whole kernel does; but
    an L1d of 16 sets of four ways puts lines 1 KiB apart in one set, which holds four
    of them: each j brings its column again (and out's line), as a set walked in a
    cycle longer than its ways misses every time. An L1d whose ways are not known
    counts no conflicts."""
    rows = ir.Buffer(0, "f32", ((None, 8), (None, 256)))
    i, j = ir.IVar("i"), ir.IVar("j")
    inner = ir.For("i", 8, (ir.Let("s", ir.Bin(ir.BinOp.ADD, ir.Var("s"), ir.Load(rows, (i, j)))),))
    body = (ir.Let("s", ir.Const(Fraction(0))), inner, ir.Store(OUT, (j,), ir.Var("s")))
    k = ir.Kernel("colsum", "f32", (rows,), (OUT,), (ir.For("j", 16, body),))
    four_way = Machine(0, 16 * 4 * 64, 1 << 20, 1 << 22, 1, 1, 16, 32, l1d_ways=4)
    assert features((k,), "f32", four_way, 1).l2 == 16 * (8 + 1) * 64
    unknown = Machine(0, 16 * 4 * 64, 1 << 20, 1 << 22, 1, 1, 16, 32)
    assert features((k,), "f32", unknown, 1).l2 == 0


def test_lines_reused_each_step_keep_their_set_beside_new_ones() -> None:
    """The rule `reuse`: s_r += a[r, k] · b[k, 0] for four rows of a 1 KiB apart, k < 64
    (a: 16 lines; b: a new line each step, 64). In an L1d of 16 sets of four ways the
    rows' lines fill one set, every way; b's two lines of two steps would crowd it by
    the rule `sets` alone, so every step would bring its five lines again (321 with
    out's). But a set gives up its least recently used line, b's, and keeps the rows'
    that every step reads: each line comes once, 16 + 64 and out's."""
    rows = ir.Buffer(0, "f32", ((None, 4), (None, 256)))
    col = ir.Buffer(1, "f32", ((None, 64), (None, 16)))
    out = ir.Buffer(2, "f32", ((None, 16),))
    k = ir.IVar("k")

    def term(r: int) -> ir.Expr:
        row, column = ir.Load(rows, (ir.IConst(r), k)), ir.Load(col, (k, ir.IConst(0)))
        product = ir.Bin(ir.BinOp.MUL, row, column)
        return ir.Bin(ir.BinOp.ADD, ir.Var(f"s{r}"), product)

    start = tuple(ir.Let(f"s{r}", ir.Const(Fraction(0))) for r in range(4))
    steps = ir.For("k", 64, tuple(ir.Let(f"s{r}", term(r)) for r in range(4)))
    done = tuple(ir.Store(out, (ir.IConst(r),), ir.Var(f"s{r}")) for r in range(4))
    kernel = ir.Kernel("rows", "f32", (rows, col), (out,), (*start, steps, *done))
    four_way = Machine(0, 16 * 4 * 64, 1 << 20, 1 << 22, 1, 1, 16, 32, l1d_ways=4)
    assert features((kernel,), "f32", four_way, 1).l2 == (16 + 64 + 1) * 64


def _fill(rows_outer: bool) -> ir.Kernel:
    """out[i, 16j : +16] = 0 for 32 rows i of four vectors j (8 KiB), the rows outside
    (along each row's lines) or inside (down a column of lines, 256 bytes a step)."""
    out = ir.Buffer(0, "f32", ((None, 32), (None, 64)))
    i, j = ir.IVar("i"), ir.IVar("j")
    store = ir.VStore(
        out, (i, ir.IBin(ir.IntOp.MUL, j, ir.IConst(16))), ir.Splat(ir.Const(Fraction(0)), 16)
    )
    nest = ir.For("i", 32, (ir.For("j", 4, (store,)),))
    if not rows_outer:
        nest = ir.For("j", 4, (ir.For("i", 32, (store,)),))
    return ir.Kernel("fill", "f32", (), (out,), (nest,))


def test_a_walk_across_the_lines_of_a_large_buffer_is_strided() -> None:
    """The rule `streams`: past an L2 of 4 KiB, the row-order fill walks along its lines
    (16 lanes, a line a step) and the column-order one across them, 256 bytes a step:
    all of its 128 lines count as strided bytes. In an L2 that holds the output nothing
    comes from past it, so nothing is strided."""
    small_l2 = Machine(0, 1024, 4096, 1 << 22, 1, 1, 32, 64)
    along, across = (features((_fill(r),), "f32", small_l2, 1) for r in (True, False))
    assert along.l3 == across.l3 == 128 * 64
    assert (along.strided, across.strided) == (0, 128 * 64)
    roomy = Machine(0, 1024, 1 << 20, 1 << 22, 1, 1, 32, 64)
    assert features((_fill(False),), "f32", roomy, 1).strided == 0


def test_strided_bytes_are_the_share_of_the_lines_walked_across() -> None:
    """out[i, 16j : +16] = src[j, 16i : +16], i inside j: out walked down its columns,
    src along its rows, 8 KiB each past an L2 of 4 KiB. Half of the lines are walked
    across, so half of the bytes past L2 are strided."""
    out = ir.Buffer(0, "f32", ((None, 32), (None, 64)))
    src = ir.Buffer(1, "f32", ((None, 4), (None, 512)))
    i, j = ir.IVar("i"), ir.IVar("j")
    sixteen = ir.IConst(16)
    load = ir.VLoad(src, (j, ir.IBin(ir.IntOp.MUL, i, sixteen)), 16)
    store = ir.VStore(out, (i, ir.IBin(ir.IntOp.MUL, j, sixteen)), load)
    nest = ir.For("j", 4, (ir.For("i", 32, (store,)),))
    k = ir.Kernel("copy", "f32", (src,), (out,), (nest,))
    got = features((k,), "f32", Machine(0, 1024, 4096, 1 << 22, 1, 1, 32, 64), 1)
    assert got.l3 == 2 * 128 * 64 and got.strided == got.l3 / 2


def test_a_tile_whose_rows_cover_the_step_walks_along() -> None:
    """A tile of two vectors a row steps 128 bytes along its rows: its constant offsets
    cover the step, so the walk is along the lines (the scores' row order); one vector
    a row stepping 128 bytes leaves a line out each step, across."""
    from presk.tune.features import _run, _step

    assert _run({0.0, 64.0, 1024.0, 1088.0}, 64) == 128
    assert _run({0.0, 1024.0}, 64) == 64
    assert _step((("i", 1024.0), ("j", 128.0)), [("i", 8), ("j", 4), ("k", 16)]) == 128
    assert _step((("i", 1024.0), ("j", 128.0)), [("j", 4), ("i", 8)]) == 1024
    assert _step((("i", 1024.0),), [("i", 1), ("k", 16)]) == 0


def test_the_sets_a_box_falls_into() -> None:
    # A run of eight lines takes eight sets of 64; rows 4 KiB apart one, 2 KiB apart two;
    # a stride under a line joins the run; a run of two lines down rows 4 KiB apart, two.
    assert _sets(((64.0, 8),), 4, 64) == 8
    assert _sets(((4096.0, 8),), 64, 64) == 1
    assert _sets(((2048.0, 8),), 64, 64) == 2
    assert _sets(((48.0, 8),), 16, 64) == 6
    assert _sets(((4096.0, 8), (64.0, 2)), 64, 64) == 2
    assert _sets(((4100.0, 8),), 64, 64) == 8  # not a whole number of lines: spread


def test_the_machine_is_read_from_sys_with_its_l1d_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caches = [("1", "Data", "48K", "12"), ("1", "Instruction", "32K", "8")]
    caches += [("2", "Unified", "1024K", "16"), ("3", "Unified", "32768K", "16")]
    for n, (level, kind, size, ways) in enumerate(caches):
        index = tmp_path / "cpu0" / "cache" / f"index{n}"
        index.mkdir(parents=True)
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (index / name).write_text(text + "\n")
        (index / "ways_of_associativity").write_text(ways + "\n")
        (index / "shared_cpu_list").write_text("0-1\n")
    monkeypatch.setattr(machine, "SYS_CPU", tmp_path)
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda _: {0}, raising=False)
    got = machine.read_machine()
    assert (got.l1d, got.l1d_ways, got.l2, got.l3, got.l3_shared) == (
        48 << 10,
        12,
        1 << 20,
        32 << 20,
        2,
    )
    assert "L1d 48 KiB 12-way" in got.line("gemm/%2", "f32")
    # A profile's machine written before the ways were read: not known, 0.
    doc = {k: v for k, v in got.to_json().items() if k != "l1d_ways"}
    assert machine.machine_of(doc) == replace(got, l1d_ways=0)


# ---------------------------------------------------------------- the fit


def _synthetic(form: str, q: float) -> tuple[list[Sample], dict[str, float]]:
    rng = random.Random(7)
    groups = ("f32+lanes1+w1", "f32+lanes16+w1", "f32+lanes1+w2")
    pi = dict(zip(groups, (2e9, 8e9, 3e9), strict=True))
    rho = dict(zip(groups, (4e9, 1e9, 5e9), strict=True))
    alpha = dict(zip(groups, (6e9, 2e10, 9e9), strict=True))
    beta, sigma, strided = (5e10, 2e10, 1e10), 1.5e9, 4e9
    samples = []
    for n in range(90):
        g = groups[n % 3]
        w, r, b2, b3, bm, st, sd, ar = (10 ** rng.uniform(4, 7) for _ in range(8))
        terms = [1e6 * w / pi[g], 1e6 * r / rho[g], 1e6 * b2 / beta[0], 1e6 * b3 / beta[1]]
        terms += [1e6 * bm / beta[2], 1e6 * st / sigma, 1e6 * sd / strided, 1e6 * ar / alpha[g]]
        t = 2.0 + combine(terms, form, q)
        samples.append(Sample(str(n), g, Features(w, r, b2, b3, bm, g, 1, 0, ar, 0, st, sd), t))
    truth = {f"pi {g}": v for g, v in pi.items()} | {f"alpha {g}": v for g, v in alpha.items()}
    return samples, {
        **truth,
        "beta_l3": beta[1],
        "sigma": sigma,
        "beta_strided": strided,
        "lam": 2.0,
    }


@pytest.mark.parametrize(("form", "q"), [("pnorm", 2.0), ("sum", 1.0)])
def test_the_fit_gives_back_known_constants(form: str, q: float) -> None:
    samples, truth = _synthetic(form, q)
    done = fit_layout(samples, form)
    fit = done.fit
    got = {f"pi {g}": v for g, v in fit.pi.items()}
    got |= {f"alpha {g}": v for g, v in fit.alpha.items()}
    got |= {"beta_l3": fit.beta[1], "sigma": fit.sigma, "lam": fit.lam_us}
    got["beta_strided"] = fit.beta_strided
    for name, value in truth.items():
        assert math.isclose(got[name], value, rel_tol=1e-3), name
    if form == "pnorm":
        assert math.isclose(fit.q, q, rel_tol=1e-3)
    assert done.u < 1e-6 and done.spearman > 0.999
    assert fit.spawn_us == 0  # no sample was split: nothing to fit it to


def test_a_fit_also_starts_from_the_fit_before(monkeypatch: pytest.MonkeyPatch) -> None:
    samples, _ = _synthetic("pnorm", 2.0)
    before = fit_layout(samples, "pnorm").fit
    from scipy import optimize

    starts: list[list[float]] = []
    solve = optimize.least_squares

    def recording(fun: Any, x0: Any, **kw: Any) -> Any:
        starts.append([float(v) for v in x0])
        return solve(fun, x0, **kw)

    monkeypatch.setattr(optimize, "least_squares", recording)
    again = fit_layout(samples, "pnorm", prior=before)
    # Three cold starts, then the prior's constants in the fit's order (rates per µs).
    warm = starts[-1]
    groups = sorted(before.pi)
    assert len(starts) == 4
    assert warm[:6] == pytest.approx(
        [math.log(before.lam_us), math.log(max(before.spawn_us, 1e-4))]
        + [math.log(b / 1e6) for b in (*before.beta, before.sigma)]
    )
    assert warm[6 : 6 + len(groups)] == pytest.approx(
        [math.log(before.pi[g] / 1e6) for g in groups]
    )
    at_alpha = 7 + 2 * len(groups)  # after π, ρ and β_s
    assert warm[at_alpha - 1] == pytest.approx(math.log(before.beta_strided / 1e6))
    assert warm[at_alpha : at_alpha + len(groups)] == pytest.approx(
        [math.log(before.alpha[g] / 1e6) for g in groups]
    )
    assert warm[-1] == pytest.approx(before.q)
    assert again.u < 1e-6


def test_a_launch_costs_no_more_than_a_launch_can() -> None:
    # Points of two launches (a pack's) slower by 400 µs than their terms say: the fit
    # may not take λ to be 400 µs, which it would then charge to every launch priced.
    samples, _ = _synthetic("sum", 1.0)
    slow = [
        Sample(s.layout, s.group, Features(*(1e5,) * 5, s.group, 2, 0, 0, 0), 2.0 + 400.0)
        for s in samples[:30]
    ]
    fit = fit_layout([*samples, *slow], "sum").fit
    assert fit.lam_us <= LAUNCH_MAX_US * (1 + 1e-9) < 50.0
    assert fit_layout(samples, "sum").fit.lam_us == pytest.approx(2.0, rel=1e-3)


def test_a_plan_keeps_the_default_unless_a_point_beats_it_by_more_than_u() -> None:
    zero, default = Layout(form="rowwise", split=NO_SPLIT), Layout()
    tiled = Layout("tiled", (4, 16), 0, "IJ", 16, False)
    assert plan_choice([default, tiled, zero], [10.0, 9.5, 12.0], 0.1) == 0  # within 1 + u
    assert plan_choice([default, tiled, zero], [10.0, 8.0, 12.0], 0.1) == 1  # 25 % cheaper
    assert plan_choice([zero, tiled], [10.0, 9.5], 0.1) == 1  # no default among them
    assert plan_choice([zero, default, tiled], [10.0, 10.0, 9.0], 0.0) == 2  # u = 0
    assert plan_choice([zero, tiled, default], [9.0, 9.0, 9.0], 0.0) == 2  # a tie: the default
    assert plan_choice([zero, tiled], [9.0, 9.0], 0.0) == 0  # else the first of equals


def test_max_form_predicts_the_largest_term() -> None:
    assert combine([1.0, 5.0, 2.0], "max", 1.0) == 5.0
    assert combine([3.0, 4.0], "pnorm", 2.0) == pytest.approx(5.0)
    assert combine([3.0, 4.0], "sum", 1.0) == 7.0


# ---------------------------------------------------------------- the commands


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GEMM calibrated twice on one worker (the second call keeps the first's
    samples)."""
    path = tmp_path_factory.mktemp("profile") / "layout.json"
    argv = ("bench", "experiments/gemm.psk", "--entry", "gemm", "--dim", "N=16")
    argv += ("--realize", "f32", "--calibrate", str(path), "--space", "calib")
    argv += ("--repeat", "1", "--threads", "1")
    code, out, err = run_presk(*argv)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("-- gemm/%2 on cpu") and "vector registers" in lines[0]
    assert lines[1] == "-- costed under the rules lines,overhead,sets,streams,scalar,chains,reuse"
    assert lines[2].split() == ["layout", "group", "measured", "µs", "predicted", "µs"]
    # N=16: blocks of 32 and 128 are one block; two orders of five tiles, one lane or
    # more, and of three wide ones in vectors; and the default.
    assert f"-- 27 layouts timed (0 ill-formed at these shapes), 0 samples kept from {path}" in out
    code, out, err = run_presk(*argv)
    assert code == 0, err
    assert f"27 samples kept from {path}" in out
    assert "(median relative residual over 54 samples)" in out
    assert out.endswith(f"-- profile written to {path}\n")
    return path


def test_a_calibration_keeps_no_samples_costed_under_other_rules(
    profile: Path, tmp_path: Path
) -> None:
    doc = json.loads(profile.read_text())
    doc["rules"] = "lines,overhead,sets"  # a profile from before the rule `streams`
    older = tmp_path / "older.json"
    older.write_text(json.dumps(doc))
    argv = ("bench", "experiments/gemm.psk", "--entry", "gemm", "--dim", "N=16")
    argv += ("--realize", "f32", "--calibrate", str(older), "--space", "calib")
    code, out, err = run_presk(*argv, "--repeat", "1", "--threads", "1")
    assert code == 0, err
    assert f"0 samples kept from {older} (costed under the rules lines,overhead,sets" in out
    assert len(profile_of(json.loads(older.read_text()), "").samples) == 27


def test_the_profile_holds_the_fit(profile: Path) -> None:
    doc = json.loads(profile.read_text())
    read = profile_of(doc, str(profile))
    assert read.kind == "layout" and read.form == "pnorm" and len(read.samples) == 54
    assert 1.0 <= read.fit.q <= 8.0
    for s in read.samples[:5]:
        assert predict(s.features, read) > 0


def test_the_arithmetic_term_is_priced_only_where_the_fit_has_it(profile: Path) -> None:
    doc = json.loads(profile.read_text())
    read = profile_of(doc, str(profile))
    assert set(read.fit.alpha) == set(read.fit.pi)  # a rate per group, as π
    terms = read.samples[0].features
    # A profile fitted before the term (no "alpha") prices the same terms without it.
    del doc["fit"]["alpha"]
    older = profile_of(doc, str(profile))
    assert older.fit.alpha == {}
    busier = replace(terms, ops=terms.ops + 1e9)
    assert predict(busier, older) == predict(terms, older)
    assert predict(busier, read) > predict(terms, read)


def test_the_calibration_space_holds_the_wide_tiles_and_the_default() -> None:
    from presk.commands.calibrate import TILES, calibration_points
    from presk.entries import bind_dims, find_entry
    from presk.host.realization import Realization
    from presk.kernel.layout import WIDE_TILES, Split
    from presk.pipeline import Request, front_end
    from presk.tune.capture import capture

    checked, _ = front_end("experiments/gemm.psk", {})
    entry = find_entry(checked, "gemm")
    request = Request(checked, entry, bind_dims(entry, {"N": "256"}), Realization("f32"))
    (nest,) = capture(request).nests
    points = calibration_points(nest, 4)
    wide = [p for p in points if p.tile in WIDE_TILES]
    assert wide and {p.lanes for p in wide} == {16}  # one lane of a wide tile spills
    assert {p.lanes for p in points if p.tile in TILES} == {1, 4, 8, 16}
    defaults = [p for p in points if p.form is None]
    assert [p.split for p in defaults] == [NO_SPLIT, Split(0, 2), Split(0, 4)]
    assert len(points) == 3 * (len(TILES) * 10 * 2 + len(WIDE_TILES) * 10 + 1)


def test_plan_prices_every_point_of_attention(profile: Path, tmp_path: Path) -> None:
    out_path = tmp_path / "plan.json"
    code, out, err = run_presk(
        "plan",
        "tutorial/03_attention.psk",
        "--entry",
        "attend",
        "--dim",
        "B=1",
        "--dim",
        "T=4",
        "--realize",
        "f32",
        "--threads",
        "2",
        "--profile",
        str(profile),
        "--out",
        str(out_path),
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["nest", "operands"]
    rows = {line.split()[0]: line for line in lines[1:] if not line.startswith("--")}
    assert {"scores/%2", "attend/%5", "attend/%6"} <= set(rows)
    assert "within 1 + u" in rows["scores/%2"]
    assert any(line.startswith("-- ") and "points costed in" in line for line in lines)
    assert lines[-1] == f"-- plan written to {out_path}"
    plan = json.loads(out_path.read_text())
    assert plan["realization"] == "f32" and set(plan["layout"]) == set(rows)
    # The plan runs, and gives the default's bits.
    base = ("run", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=4")
    native = (*base, "--backend", "native", "--threads", "2")
    plain = run_presk(*native, "--realize", "f32")
    planned = run_presk(*native, "--plan", f"@{out_path}")
    assert plain[0] == 0 and planned == plain


PLAN = ("plan", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=4")


def test_plan_without_a_profile_is_refused(tmp_path: Path) -> None:
    out_path = tmp_path / "plan.json"
    code, out, err = run_presk(*PLAN, "--out", str(out_path))
    assert (code, out) == (2, "") and err.count("\n") == 1 and "--profile" in err
    assert not out_path.exists()


@pytest.mark.parametrize(
    "text", ["not json", '{"kind": "layout"}', '{"kind": "roofline", "form": "max"}']
)
def test_plan_with_a_bad_profile_is_refused(tmp_path: Path, text: str) -> None:
    bad, out_path = tmp_path / "bad.json", tmp_path / "plan.json"
    bad.write_text(text)
    code, out, err = run_presk(*PLAN, "--profile", str(bad), "--out", str(out_path))
    assert (code, out) == (1, "") and err.count("\n") == 1, err
    assert err.startswith("presk plan: --profile") and not out_path.exists()


def test_calibrate_keeps_a_file_it_cannot_read(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text("[]")
    code, out, err = run_presk(
        "bench", "experiments/gemm.psk", "--entry", "gemm", "--dim", "N=4", "--calibrate", str(bad)
    )
    assert (code, out) == (1, "") and err.count("\n") == 1, err
    assert bad.read_text() == "[]"


def test_refit_in_another_form(profile: Path, tmp_path: Path) -> None:
    again = tmp_path / "sum.json"
    code, out, err = run_presk("refit", str(profile), "--combine", "sum", "--out", str(again))
    assert code == 0, err
    assert "-- fit (sum, load term, rules lines,overhead,sets,streams,scalar,chains,reuse)" in out
    assert json.loads(again.read_text())["form"] == "sum"
    code, _, err = run_presk("refit", str(profile))
    assert code == 2 and err.count("\n") == 1


def _day(directory: Path, profile: Path) -> list[dict[str, object]]:
    """A day of `autotune` as it writes one: three points of the scores ein, measured."""
    directory.mkdir()
    meta = {
        "file": "tutorial/03_attention.psk",
        "entry": "attend",
        "dims": {"B": 1, "T": 4},
        "realize": "f32",
        "threads": 1,
        "space": "small",
        "repeat": 1,
        "profile": str(profile),
    }
    (directory / "meta.json").write_text(json.dumps(meta))
    points = [
        {"form": "rowwise", "split": "none"},
        {"form": "tiled", "tile": [1, 1], "kblock": 0, "order": "IJ", "lanes": 1, "pack": False},
        {"form": "tiled", "tile": [2, 4], "kblock": 0, "order": "JI", "lanes": 4, "pack": True},
    ]
    lines: list[dict[str, object]] = []
    for n, (point, median) in enumerate(zip(points, (3.0, 2.0, 1.0), strict=True)):
        lines.append(
            {
                "nest": "scores/%2",
                "index": n,
                "point": point,
                "text": "",
                "type": "f32",
                "config": "B=1,T=4",
                "operands": "[1, 2, 4, 4] [1, 2, 4, 4]",
                "times_us": [median],
                "median_us": median,
                "mad_us": 0.0,
                "predicted_us": None,
                "same": True,
                "refused": None,
            }
        )
    (directory / "scores__2.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return lines


def test_reprice_a_recorded_day(profile: Path, tmp_path: Path) -> None:
    lines = _day(tmp_path / "day", profile)
    again = tmp_path / "again"
    code, out, err = run_presk(
        "reprice", str(tmp_path / "day"), "--profile", str(profile), "--out", str(again)
    )
    assert code == 0, err
    written = [json.loads(x) for x in (again / "scores__2.jsonl").read_text().splitlines()]
    prices = [float(x["predicted_us"]) for x in written]
    assert all(p > 0 for p in prices)
    assert [x["median_us"] for x in written] == [x["median_us"] for x in lines]  # copied
    pick = min(range(3), key=lambda i: prices[i])
    row = next(line for line in out.splitlines() if line.startswith("scores/%2"))
    assert row.split()[1] == "3"
    assert float(row.split()[2]) == pytest.approx(float(written[pick]["median_us"]) / 1.0)
    assert "nothing measured" in out


def test_reprice_refuses_what_is_not_a_day(profile: Path, tmp_path: Path) -> None:
    code, out, err = run_presk("reprice", str(tmp_path), "--profile", str(profile))
    assert (code, out) == (1, "") and err.count("\n") == 1, err
    code, _, err = run_presk("reprice", str(tmp_path))
    assert code == 2 and err.count("\n") == 1


def test_plan_gives_a_bias_to_its_products_epilogue(profile: Path, tmp_path: Path) -> None:
    out_path = tmp_path / "plan.json"
    entry = ("tutorial/01_linear.psk", "--entry", "Linear{40, 24}.apply", "--dim", "batch=6")
    code, out, err = run_presk(
        "plan", *entry, "--realize", "f32", "--profile", str(profile), "--out", str(out_path)
    )
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if not line.startswith("--")}
    product, add = "Linear.apply/%3", "Linear.apply/%5"
    assert set(rows) == {product, add}, rows
    assert rows[product].endswith("epilogue") and f"the epilogue of {product}" in rows[add]
    plan = json.loads(out_path.read_text())
    assert set(plan["layout"]) == {product} and plan["layout"][product]["epilogue"] is True
    native = ("run", *entry, "--backend", "native")
    plain = run_presk(*native, "--realize", "f32")
    planned = run_presk(*native, "--plan", f"@{out_path}")
    assert plain[0] == 0 and planned == plain
