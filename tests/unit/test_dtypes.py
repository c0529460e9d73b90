"""presk/dtypes.py: one table of element types, and bf16 rounding as the C runtime does it."""

from __future__ import annotations

import numpy as np

from presk import dtypes
from presk.data import format as data_format
from presk.dtypes import Dtype


def test_every_dtype_has_its_facts() -> None:
    for d in Dtype:
        assert np.dtype(d.numpy).itemsize == d.size
        assert dtypes.by_code(d.code) is d
        assert d.c_arith in ("double", "float", "int64_t")
    assert [d.code for d in Dtype] == [0, 1, 2, 3]
    assert Dtype.BF16.c_type == "uint16_t" and Dtype.BF16.arith is Dtype.F32
    assert Dtype("f32") == "f32" and Dtype.F64.c_type == "double"


def test_the_data_format_reads_the_same_table() -> None:
    assert data_format.DTYPES == ("f64", "f32", "bf16", "i64")
    assert data_format.ITEM_SIZE == {"f64": 8, "f32": 4, "bf16": 2, "i64": 8}
    assert data_format.f32_to_bf16 is dtypes.f32_to_bf16
    assert data_format.bf16_to_f32 is dtypes.bf16_to_f32


def test_bf16_rounds_to_nearest_even_and_keeps_nan_quiet() -> None:
    # 1 + 2^-8 is halfway between two bf16 values: ties to the even one (1.0).
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, np.inf, np.nan], dtype=np.float32)
    bits = dtypes.f32_to_bf16(x)
    back = dtypes.bf16_to_f32(bits)
    assert back[0] == 1.0 and back[1] == 1.0 and back[2] == 1 + 2**-6
    assert back[3] == -2.5 and back[4] == np.inf and np.isnan(back[5])
    assert bits[5] & 0x40
