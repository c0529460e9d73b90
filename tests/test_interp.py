"""The kernel interpreter (presk/tune/interp.py): a second executor of every point.

Each sampled point of the nests test_layouts.py checks natively (a dot as Linear
has it, attention's two `ein`s and its masked softmax, the adjoints of a
product) is evaluated statement by statement and must give the bytes point
zero's compiled C gives, in f64, f32 and bf16; small kernels written here pin
the rules it follows (each f32 operation rounded, bf16 rounded on store), and
`presk autotune --interp` reports the verdict per point.
"""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import run_presk
from test_layouts import ATTEND, CASES, FULL, THREADS, _nests, _sample

from presk.dtypes import bf16_to_f32
from presk.kernel import ir
from presk.kernel.layout import NO_SPLIT, Layout
from presk.tune import harness
from presk.tune.capture import points_of
from presk.tune.interp import run_kernels

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_sampled_point_interpreted_gives_point_zeros_bits(
    case: str, dtype: str, tmp_path: Path
) -> None:
    nests = _nests(case, dtype, tmp_path)
    # Half of test_layouts' sample here; every point under PRESK_LAYOUTS=full (make layout-check).
    step = 1 if FULL else 2
    spaces = [(nest, _sample(points_of(nest, THREADS, "full"))[::step]) for nest in nests]
    for bench in harness.prepare_all(spaces, THREADS):
        zero = bench.run(0, 1)
        ran = 0
        for i, lowered in enumerate(bench.points):
            if lowered.refused is not None:
                continue
            got = bench.interpret(i)
            differ = [a.tobytes() != b.tobytes() for a, b in zip(got, zero, strict=True)]
            assert not any(differ), f"{bench.nest.site} {dtype}: {lowered.point.text()}"
            ran += 1
        assert ran >= 1, bench.nest.site


def test_another_input_gives_other_bytes(tmp_path: Path) -> None:
    """The comparison can fail: the interpreter reads the inputs it is given."""
    (nest,) = [n for n in _nests("linear", "f32", tmp_path) if n.nest.kind.name == "CONTRACTION"]
    bench = harness.prepare(nest, [Layout(form="rowwise", split=NO_SPLIT)], 1)
    zero = bench.run(0, 1)
    bench.inputs[0][0] += 1.0
    assert zero[0].tobytes() != bench.interpret(0)[0].tobytes()


X = ir.Buffer(0, "f32", ((None, 3),))
ONE = ir.Buffer(1, "f32", ((None, 1),))


def _sum_kernel(dtype: str, out: ir.Buffer) -> ir.Kernel:
    """out[0] = x[0] + x[1] + x[2], in order, in the arithmetic type of `dtype`."""
    add = ir.Bin(ir.BinOp.ADD, ir.Var("s"), ir.Load(X, (ir.IVar("i"),)))
    body = (
        ir.Let("s", ir.Const(Fraction(0))),
        ir.For("i", 3, (ir.Let("s", add),)),
        ir.Store(out, (ir.IConst(0),), ir.Var("s")),
    )
    return ir.Kernel("sum", dtype, (X,), (out,), body)


def test_a_scratch_outside_any_batched_loop_holds_one_copy() -> None:
    """A scratch at the top of a kernel (no loop evaluated together): a value read back
    from it is a scalar, stored as one (a pack's last block of columns is such)."""
    panel = ir.Buffer(2, "f32", ((None, 3),))
    copy = ir.For("i", 3, (ir.Store(panel, (ir.IVar("i"),), ir.Load(X, (ir.IVar("i"),))),))
    back = ir.Store(ONE, (ir.IConst(0),), ir.Load(panel, (ir.IConst(2),)))
    k = ir.Kernel("copy", "f32", (X,), (ONE,), (ir.Scratch(panel, (copy, back)),))
    out = np.zeros(1, dtype=np.float32)
    run_kernels((k,), {0: np.array([1.0, 2.0, 3.0], dtype=np.float32), 1: out})
    assert out[0] == 3.0


def test_each_f32_operation_rounds_and_f64_does_not() -> None:
    x = np.array([1e8, 1.0, -1e8], dtype=np.float32)
    out = np.full(1, np.nan, dtype=np.float32)
    run_kernels((_sum_kernel("f32", ONE),), {0: x, 1: out})
    assert out[0] == 0.0  # 1e8 + 1 is 1e8 in f32
    wide = np.full(1, np.nan, dtype=np.float64)
    run_kernels((_sum_kernel("f64", ir.Buffer(1, "f64", ((None, 1),))),), {0: x, 1: wide})
    assert wide[0] == 1.0


def test_a_bf16_store_rounds_to_nearest_even() -> None:
    x = np.array([1.0, 2.0**-8, 0.0], dtype=np.float32)  # 1 + 2⁻⁸: halfway, ties to 1
    y = np.array([1.0, 3 * 2.0**-9, 0.0], dtype=np.float32)  # above halfway: up
    for values, expected in ((x, 1.0), (y, 1.0 + 2.0**-7)):
        out = np.zeros(1, dtype=np.uint16)
        run_kernels((_sum_kernel("bf16", ir.Buffer(1, "bf16", ((None, 1),))),), {0: values, 1: out})
        assert bf16_to_f32(out)[0] == expected


def test_autotune_interp_reports_each_points_verdict(tmp_path: Path) -> None:
    days = [tmp_path / "day1", tmp_path / "day2"]
    argv = ("autotune", *ATTEND[:3], "--dim", "B=1", "--dim", "T=9", "--realize", "bf16")
    for day in days:
        code, out, err = run_presk(*argv, "--repeat", "1", "--interp", "--out", str(day))
        assert code == 0, err
        assert "bit-identical to point 0, natively and on the kernel interpreter: yes" in out
    lines = [json.loads(x) for f in days[0].glob("*.jsonl") for x in f.read_text().splitlines()]
    ran = [x for x in lines if x["refused"] is None]
    assert ran and all(x["interp_same"] is True for x in ran)
    meta = json.loads((days[0] / "meta.json").read_text())
    assert meta["interp"] is True and meta["interpreted_s"] > 0 and "interpreted in" in out
    code, out, err = run_presk("rank", str(days[0]), str(days[1]))
    assert code == 0, err
    statement = next(x for x in out.splitlines() if x.startswith("| L |"))
    assert "natively and on the kernel interpreter" in statement and "**holds**" in statement
    assert f"{2 * len(ran)} interpreted, 0 differing" in statement


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_a_draw_and_branches_on_each_iteration_are_interpreted(tmp_path: Path, dtype: str) -> None:
    """Sampling: the runtime's draw, branches whose conditions differ between the rows
    evaluated together (each arm under its mask), and an index stored to an i64 output."""
    day = tmp_path / "day"
    code, out, err = run_presk(
        "autotune", "tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=33",
        "--realize", dtype, "--repeat", "1", "--interp", "--out", str(day),
    )  # fmt: skip
    assert code == 0, err
    assert "natively and on the kernel interpreter: yes" in out
    (path,) = day.glob("*.jsonl")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert sum(x["interp_same"] is True for x in lines) >= 2
