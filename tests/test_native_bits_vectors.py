"""Every vector unit gives the same bits: AVX-512's, AVX's and SSE's shapes of the tiled forms.

The lowering shapes its vectors and register tiles by the machine's vector
registers (presk/machine.py, `vector_unit`; `PRESK_VECTOR_BYTES` states
another machine's): 64-byte vectors and twelve-row tiles with AVX-512, 32
bytes and six rows with AVX, 16 bytes with SSE. A lane is one output element
whatever the width, so each shape must print point zero's bytes (`tiles=False`)
in f64, f32 and bf16: the packed product, its two adjoints with the chunks of
a left operand read by columns, attention's eins and their adjoints, and the
column sums of a bias's gradient. The rest of the suite runs with 64
(tests/conftest.py).
"""

from __future__ import annotations

import re
import shutil

import pytest
from test_native_bits import _bits, _compile, _setup
from test_native_bits_adjoints import ATTENTION, PRODUCT
from test_native_bits_sums import SUMS

from presk.kernel.text import kernel_text
from presk.machine import vector_unit

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

GEMM = "dim R\ndim K\ndim C\nfn f(a : ℝ[R, K], b : ℝ[K, C]) -> ℝ[R, C] = a · b\n"

# (program, entry, dims): a product with row and column tails and K past a panel; the
# product's gradients (two chunks of dw's rows on every unit); attention and its adjoints;
# the column sums.
CASES = {
    "dot": (GEMM, "f", {"R": 40, "K": 600, "C": 40}),
    "dot_adjoints": (PRODUCT, "g", {"B": 2, "T": 50, "K": 144, "N": 40}),
    "attention": (ATTENTION, "g", {"B": 1, "T": 40, "E": 24}),
    "sums": (SUMS, "sums", {"B": 5, "N": 40}),
}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.mark.parametrize("width", [64, 32, 16])
@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_vector_unit_gives_point_zeros_bits(tmp_path, monkeypatch, case, dtype, width):
    monkeypatch.setenv("PRESK_VECTOR_BYTES", str(width))
    text, entry, dims = CASES[case]
    src = tmp_path / f"{case}.psk"
    src.write_text(text)
    c = _setup(str(src), entry, dims)
    one = _bits(c, dtype)
    assert one == _bits(c, dtype, tiles=False)
    if case == "dot_adjoints":
        assert _bits(c, dtype, threads=2) == one


@pytest.mark.parametrize(("width", "rows", "lanes"), [(64, 12, 16), (32, 6, 8), (16, 6, 4)])
def test_the_packed_product_takes_the_units_vectors_and_rows(
    tmp_path, monkeypatch, width, rows, lanes
):
    """The f32 packed dot: vectors of one register's lanes, tiles of 12 or 6 rows."""
    monkeypatch.setenv("PRESK_VECTOR_BYTES", str(width))
    assert vector_unit().lanes(4) == lanes
    src = tmp_path / "dot.psk"
    src.write_text(GEMM)
    p = _compile(_setup(str(src), "f", {"R": 40, "K": 600, "C": 64}), "f32")
    (text,) = [kernel_text(k) for _, k in p.host.kernels if k.name == "dot"]
    assert {int(n) for n in re.findall(r"\.\.\+(\d+)\]", text)} == {lanes}
    assert f"* {rows})" in text


def test_a_vector_width_no_machine_has_is_refused(monkeypatch) -> None:
    from presk.diagnostics import UsageError

    monkeypatch.setenv("PRESK_VECTOR_BYTES", "48")
    with pytest.raises(UsageError, match="PRESK_VECTOR_BYTES=48"):
        vector_unit()


@pytest.mark.parametrize(("width", "lanes"), [(64, True), (32, False), (16, False)])
def test_libm_lane_forms_only_with_64_byte_registers(tmp_path, monkeypatch, width, lanes):
    """The lane libm is written in 64-byte vectors: narrower units keep the scalar calls
    (with the same bits)."""
    monkeypatch.setenv("PRESK_VECTOR_BYTES", str(width))
    src = tmp_path / "gelu.psk"
    src.write_text("dim N\nfn f(x : ℝ[N]) -> ℝ[N] = gelu(x)\n")
    c = _setup(str(src), "f", {"N": 100})
    p = _compile(c, "f32")
    assert ("presk_erff_lanes(presk_lv" in p.c_text) == lanes
    assert _bits(c, "f32") == _bits(c, "f32", tiles=False)


@pytest.mark.parametrize(("dtype", "head", "lanes"), [("f32", 4, 4), ("f32", 12, 8), ("f64", 2, 2)])
def test_a_product_narrower_than_a_register_takes_narrower_vectors(tmp_path, dtype, head, lanes):
    """Attention's weighted sum at a head of 4 (tutorial 03's) or 12 columns: vectors of the
    most lanes, down to 16 bytes, its columns fill, each lane still one output element."""
    src = tmp_path / "attention.psk"
    src.write_text(ATTENTION)
    c = _setup(str(src), "g", {"B": 1, "T": 40, "E": head})
    p = _compile(c, dtype)
    (text,) = [
        kernel_text(k)
        for _, k in p.host.kernels
        if k.name == "ein" and k.outputs[0].shape[-1] == head
    ]
    assert {int(n) for n in re.findall(r"\.\.\+(\d+)\]", text)} == {lanes}
    assert _bits(c, dtype) == _bits(c, dtype, tiles=False)
