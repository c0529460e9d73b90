"""The lowering's tables, its enums and its one option."""

from __future__ import annotations

from fractions import Fraction

import pytest

from presk.kernel import ir
from presk.kernel.ir import Buffer
from presk.kernel.lower import ELEMENTWISE, RULES, Launch, LoweringError, PrimName, Step, lower
from presk.kernel.text import kernel_text
from presk.sched.fusion import FUSABLE


def test_every_primitive_has_exactly_one_rule() -> None:
    for prim in PrimName:
        assert (prim in ELEMENTWISE) != (prim in RULES), prim
    assert set(ELEMENTWISE) | set(RULES) == set(PrimName)


def test_fusion_takes_the_elementwise_table_by_name() -> None:
    assert "add" in FUSABLE and "pow" in FUSABLE and "real" not in FUSABLE and "dot" not in FUSABLE


@pytest.mark.parametrize("enum", [ir.IntOp, ir.BinOp, ir.CmpOp, ir.Libm, ir.VecOp, PrimName])
def test_operators_format_as_their_text(enum) -> None:
    for member in enum:
        assert f"{member}" == member.value and member == member.value


def _matrix(index: int, rows: int, cols: int) -> Buffer:
    return Buffer(index, "f32", ((None, rows), (None, cols)))


def test_tiles_is_a_parameter_of_the_lowering() -> None:
    a, b, out = _matrix(0, 8, 16), _matrix(1, 16, 64), _matrix(2, 8, 64)
    launch = Launch([Step("dot", {}, [a, b], out.axes)], [a, b], out)
    assert "<v>" in kernel_text(lower(launch, "f32"))
    assert "<v>" in kernel_text(lower(launch, "f32", tiles=True))
    assert "<v>" not in kernel_text(lower(launch, "f32", tiles=False))


def test_a_primitive_without_a_rule_is_a_lowering_error() -> None:
    x = Buffer(0, "f64", ((None, 2),))
    with pytest.raises(LoweringError, match="no native lowering yet"):
        lower(Launch([Step("fft", {}, [x], x.axes)], [x], Buffer(1, "f64", x.axes)), "f64")
    fused = [Step("exp", {}, [x], x.axes), Step("dot", {}, [0, Fraction(1)], x.axes)]
    with pytest.raises(LoweringError, match="not elementwise"):
        lower(Launch(fused, [x], Buffer(1, "f64", x.axes)), "f64")
