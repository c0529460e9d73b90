"""Machine element types, one table: C type, size, arithmetic type, numpy type, file code.

A ground-floor module (it imports nothing from presk), so that every stage —
the host program, the C printer, the export, the data files, the native
backend — reads the same facts. `Dtype` is a `StrEnum`: a member equals its
name (`Dtype.F32 == "f32"`), so the strings that the IRs carry convert with
`Dtype(name)` and compare without it.

bf16 is stored as the upper 16 bits of an f32 and computes in f32;
`f32_to_bf16` rounds as the C runtime's `presk_f32_to_bf16` does
(runtime/c/presk_rt.h), so Python and C agree on every bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt


class Dtype(StrEnum):
    """An element type of a buffer: three realizations of ℝ and the index type."""

    F64 = "f64"
    F32 = "f32"
    BF16 = "bf16"
    I64 = "i64"

    @property
    def c_type(self) -> str:
        """The C type of one stored element (`uint16_t` for bf16's bits)."""
        return _INFO[self].c_type

    @property
    def size(self) -> int:
        """Bytes of one stored element."""
        return _INFO[self].size

    @property
    def arith(self) -> Dtype:
        """The type arithmetic happens in: bf16 computes in f32, others in themselves."""
        return _INFO[self].arith

    @property
    def c_arith(self) -> str:
        """The C type of the arithmetic type."""
        return self.arith.c_type

    @property
    def numpy(self) -> type[np.generic]:
        """The numpy type of one stored element (bf16: its raw bits, uint16)."""
        return _INFO[self].numpy

    @property
    def code(self) -> int:
        """The element type's code in `.psk.d` files and the export's main.c."""
        return _INFO[self].code

    @property
    def is_real(self) -> bool:
        return self is not Dtype.I64


@dataclass(frozen=True, slots=True)
class _Info:
    c_type: str
    size: int
    arith: Dtype
    numpy: type[np.generic]
    code: int


_INFO: dict[Dtype, _Info] = {
    Dtype.F64: _Info("double", 8, Dtype.F64, np.float64, 0),
    Dtype.F32: _Info("float", 4, Dtype.F32, np.float32, 1),
    Dtype.BF16: _Info("uint16_t", 2, Dtype.F32, np.uint16, 2),
    Dtype.I64: _Info("int64_t", 8, Dtype.I64, np.int64, 3),
}

REALS = (Dtype.F64, Dtype.F32, Dtype.BF16)
"""The realizations of ℝ, widest first."""


def by_code(code: int) -> Dtype:
    """The element type of a file code; ValueError for an unknown one."""
    for dtype in Dtype:
        if dtype.code == code:
            return dtype
    raise ValueError(f"unknown dtype code {code}")


# -- bf16 ---------------------------------------------------------------------------------


def f32_to_bf16(values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    """Round f32 values to bf16 bits: nearest, ties to even; a NaN stays a quiet NaN.

    The same rounding as `presk_f32_to_bf16` in runtime/c/presk_rt.h (and the native
    backend), so a file packed here holds what a bf16 realization would compute with.
    """
    u = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    quiet = ((u >> 16) | 0x40).astype(np.uint16)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def bf16_to_f32(bits: npt.NDArray[np.uint16]) -> npt.NDArray[np.float32]:
    """Widen bf16 bits to f32, exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


__all__ = ["REALS", "Dtype", "bf16_to_f32", "by_code", "f32_to_bf16"]
