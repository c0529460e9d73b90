"""Products whose left operand is read by columns copy it once a chunk, with the same bits.

`dot_vjp_r` (dw = xᵀ·dy) reads x[k, i]: a step in k jumps a row of x. Where
the rows come in at least two chunks of whole twelve-row tiles, each
chunk's block of A is copied once into a panel that every panel of columns
then reads (presk/kernel/lower/adjoint_tiles.py, `_Form.by_chunks`): the
loop over blocks of K moves outside the loop over column panels, and no
output element's order changes. So the bytes must equal point zero's
(`tiles=False`) in f64, f32 and bf16, on one thread and split over two.
Attention's adjoints that read their left operand by columns (dk = dsᵀ·q,
dv = aᵀ·dy per batch and head) take the same form.
"""

from __future__ import annotations

import re
import shutil

import pytest
from test_native_bits import _bits, _compile, _setup
from test_native_bits_adjoints import ATTENTION, PRODUCT

from presk.kernel.text import kernel_text

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _chunked(case, dtype: str) -> list[str]:
    """The kernels that copy a chunk of their left operand (a scratch of 96, 72 or 48 rows)."""
    p = _compile(case, dtype)
    chunk = re.compile(r"scratch %\d+ : \w+\[\d+, (96|72|48)\] \{")
    return sorted(k.name for _, k in p.host.kernels if chunk.search(kernel_text(k)))


# dw is [K, N] summing B·T. Per shape, what it exercises:
#   (3, 200, 192, 48)  two chunks of 96 rows; K = 600 in blocks with a short last one
#                      (bf16: sums carried between blocks, so the panel form stays);
#                      48 columns: f32 panels of one vector, f64 of two… and a tail
#   (2, 50, 144, 40)   two chunks of 72 rows, K = 100 in one block (every type chunks)
#   (1, 7, 96, 33)     two chunks of 48 rows; 33 columns: whole panels and row-wise ones
#   (2, 5, 84, 32)     84 rows: no chunk divides them twice, the panel form
SHAPES = [
    ((3, 200, 192, 48), {"f64": ["dot_vjp_r"], "f32": ["dot_vjp_r"], "bf16": []}),
    ((2, 50, 144, 40), {"f64": ["dot_vjp_r"], "f32": ["dot_vjp_r"], "bf16": ["dot_vjp_r"]}),
    ((1, 7, 96, 33), {"f64": ["dot_vjp_r"], "f32": ["dot_vjp_r"], "bf16": ["dot_vjp_r"]}),
    ((2, 5, 84, 32), {"f64": [], "f32": [], "bf16": []}),
]


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(("shape", "chunked"), SHAPES, ids=[str(s) for s, _ in SHAPES])
def test_chunks_of_a_give_the_row_wise_bits(tmp_path, dtype, shape, chunked) -> None:
    src = tmp_path / "product.psk"
    src.write_text(PRODUCT)
    b, t, k, n = shape
    case = _setup(str(src), "g", {"B": b, "T": t, "K": k, "N": n})
    assert _chunked(case, dtype) == chunked[dtype]
    one = _bits(case, dtype)
    assert one == _bits(case, dtype, tiles=False)
    assert _bits(case, dtype, threads=2) == one


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
def test_attention_adjoints_read_by_columns_take_chunks(tmp_path, dtype) -> None:
    src = tmp_path / "attention.psk"
    src.write_text(ATTENTION)
    case = _setup(str(src), "g", {"B": 1, "T": 192, "E": 16})
    assert _chunked(case, dtype) == ["ein_vjp_r", "ein_vjp_r"]
    one = _bits(case, dtype)
    assert one == _bits(case, dtype, tiles=False)
    assert _bits(case, dtype, threads=2) == one
