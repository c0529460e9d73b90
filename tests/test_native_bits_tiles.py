"""The forward dot's twelve-row register tiles give the row-wise form's bits.

The packed form (presk/kernel/lower/tiles.py `dot_packed`) runs each chunk of
rows in tiles of 12 rows and its last rows (a multiple of 4) in one shorter
tile; every output element still adds its terms one at a time in
increasing k from 0, so the bytes must equal point zero's (`tiles=False`)
in f64, f32 and bf16. Shapes the packed form refuses (one row, one column,
rows not a multiple of 4, K without a divisor that fills a panel) take the
other forms and must keep the bits too.
"""

from __future__ import annotations

import re
import shutil

import pytest
from test_native_bits import _bits, _compile, _setup

from presk.kernel.text import kernel_text

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

PRODUCT = "dim R\ndim K\ndim C\nfn f(a : ℝ[R, K], b : ℝ[K, C]) -> ℝ[R, C] = a · b\n"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


# (rows, K, columns) and what the packed kernel holds: "12" a loop of twelve-row tiles,
# "tail" a shorter last tile, "" another form (the shape is not packed).
#   (40, 20, 64)   three tiles of 12 and a tail of 4, one block of K, two column panels
#   (12, 600, 32)  one whole tile, K = 600 in three blocks of 200 (sums stored, reloaded;
#                  bf16: carried in an f32 scratch)
#   (8, 300, 32)   the tail alone (8 rows), K in two blocks of 150
#   (1028, 7, 32)  85 tiles and a tail of 8, all of K in one block
#   (200, 600, 32) 16 tiles and a tail of 8 (bf16: chunks of 100 rows, 8 tiles and 4)
#   (1, 20, 32)    one row: not packed
#   (36, 20, 1)    one column: row-wise
#   (6, 20, 32)    rows not a multiple of 4: not packed
#   (24, 257, 32)  K prime past a panel: the [4, 16] tile (bf16: row-wise)
SHAPES = [
    ((40, 20, 64), {"12", "tail"}),
    ((12, 600, 32), {"12"}),
    ((8, 300, 32), {"tail"}),
    ((1028, 7, 32), {"12", "tail"}),
    ((200, 600, 32), {"12", "tail"}),
    ((1, 20, 32), set()),
    ((36, 20, 1), set()),
    ((6, 20, 32), set()),
    ((24, 257, 32), set()),
]


def _tiles(text: str) -> set[str]:
    """Which twelve-row tiles a packed dot's text shows (none: not the packed form)."""
    if "scratch" not in text:
        return set()
    out = set()
    if "* 12)" in text:
        out.add("12")
    # A shorter tile reads a's rows (in place) from a first row that is no multiple of 12.
    loads = [line.strip() for line in text.splitlines() if re.match(r"\s*s\d+ = ", line)]
    if any("= %0[" in line and "* 12)" not in line for line in loads):
        out.add("tail")
    return out


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(("shape", "tiles"), SHAPES, ids=[str(s) for s, _ in SHAPES])
def test_twelve_row_tiles_give_the_row_wise_bits(tmp_path, dtype, shape, tiles) -> None:
    src = tmp_path / "product.psk"
    src.write_text(PRODUCT)
    r, k, c = shape
    case = _setup(str(src), "f", {"R": r, "K": k, "C": c})
    p = _compile(case, dtype)
    (kernel,) = [kern for _, kern in p.host.kernels if kern.name == "dot"]
    assert _tiles(kernel_text(kernel)) == tiles
    assert _bits(case, dtype) == _bits(case, dtype, tiles=False)


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
def test_twelve_row_tiles_on_two_threads_keep_the_bits(tmp_path, dtype) -> None:
    """The column panels are the split loop: each worker's tiles are one thread's."""
    src = tmp_path / "product.psk"
    src.write_text(PRODUCT)
    case = _setup(str(src), "f", {"R": 100, "K": 600, "C": 128})
    one = _bits(case, dtype)
    assert _bits(case, dtype, threads=2) == one
    assert _bits(case, dtype, tiles=False) == one
