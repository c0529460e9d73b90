"""The packed forms of a product's adjoints give the row-wise form's bits.

dx = dy·wᵀ (`dot_vjp_l`) and dw = xᵀ·dy (`dot_vjp_r`) take register tiles
over packed panels (presk/kernel/lower/adjoint_tiles.py); each output
element still adds its terms one at a time in increasing index order from
0, so the bytes must equal point zero's (`tiles=False`) in every type.
"""

from __future__ import annotations

import shutil

import pytest
from test_native_bits import _bits, _compile, _setup

from presk.kernel import ir
from presk.kernel.text import kernel_text

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

PRODUCT = """dim B
dim T
dim K
dim N
fn f(x : ℝ[B, T, K], m : ℝ[K, N], w : ℝ[B, T, N]) -> ℝ[] = sum((x · m) * w)
fn g(x : ℝ[B, T, K], m : ℝ[K, N], w : ℝ[B, T, N]) -> (ℝ[B, T, K], ℝ[K, N]) =
  (grad(λ x. f(x, m, w))(x), grad(λ m. f(x, m, w))(m))
"""

# A right operand of two axes after the summed one: both adjoints flatten them.
SEVERAL = """dim B
dim K
fn f(x : ℝ[B, K], m : ℝ[K, 3, 16], w : ℝ[B, 3, 16]) -> ℝ[] = sum((x · m) * w)
fn g(x : ℝ[B, K], m : ℝ[K, 3, 16], w : ℝ[B, 3, 16]) -> (ℝ[B, K], ℝ[K, 3, 16]) =
  (grad(λ x. f(x, m, w))(x), grad(λ m. f(x, m, w))(m))
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _packed_adjoints(case, dtype: str) -> set[str]:
    """The adjoint kernels of the tiled build that took a packed (scratch) form."""
    p = _compile(case, dtype)
    return {k.name for _, k in p.host.kernels if k.name.startswith("dot_vjp") and _scratch(k)}


def _scratch(kernel: ir.Kernel) -> bool:
    return "scratch" in kernel_text(kernel)


# dx is [B·T, K] summing N; dw is [K, N] summing B·T. Per shape, what it exercises, and
# which adjoints are packed in every type:
#   (2, 3, 64, 32)   whole row tiles and panels, one block of K
#   (1, 1, 40, 48)   dx one row, 40 columns (whole panels, then row-wise columns); dw 40 rows
#   (3, 200, 7, 40)  dw 7 rows (a tile of 3), K = 600 in blocks with a short last one
#                    (bf16: sums carried in f32 scratch); dx only 7 columns: a narrow
#                    vector of 4 lanes, then row-wise columns
#   (5, 60, 64, 600) dx 300 rows, K = 600: bf16's sums in chunks of rows, a short last
#   (2, 5, 1, 1)     one row and one column: narrower than a vector, both row-wise
#   (2, 5, 33, 17)   dx 33 columns (panels of one vector and a tail), dw 33 rows, 17 columns
SHAPES = [
    ((2, 3, 64, 32), {"dot_vjp_l", "dot_vjp_r"}),
    ((1, 1, 40, 48), {"dot_vjp_l", "dot_vjp_r"}),
    ((3, 200, 7, 40), {"dot_vjp_l", "dot_vjp_r"}),
    ((5, 60, 64, 600), {"dot_vjp_l", "dot_vjp_r"}),
    ((2, 5, 1, 1), set()),
    ((2, 5, 33, 17), {"dot_vjp_l", "dot_vjp_r"}),
]


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(("shape", "packed"), SHAPES, ids=[str(s) for s, _ in SHAPES])
def test_packed_adjoints_give_the_row_wise_bits(tmp_path, dtype, shape, packed) -> None:
    src = tmp_path / "product.psk"
    src.write_text(PRODUCT)
    b, t, k, n = shape
    case = _setup(str(src), "g", {"B": b, "T": t, "K": k, "N": n})
    assert _packed_adjoints(case, dtype) == packed
    assert _bits(case, dtype) == _bits(case, dtype, tiles=False)


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
def test_an_operand_of_several_axes_is_flattened_with_the_row_wise_bits(tmp_path, dtype) -> None:
    src = tmp_path / "several.psk"
    src.write_text(SEVERAL)
    case = _setup(str(src), "g", {"B": 70, "K": 36})
    assert _packed_adjoints(case, dtype) == {"dot_vjp_l", "dot_vjp_r"}
    assert _bits(case, dtype) == _bits(case, dtype, tiles=False)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_the_minigpt_gradient_keeps_its_bits(dtype) -> None:
    mini = {"V": 64, "D": 16, "H": 2, "L": 2}
    case = _setup("tests/ad/minigpt_grad.psk", "loss_grad", {"B": 2, "T": 8}, mini)
    assert _packed_adjoints(case, dtype) == {"dot_vjp_l", "dot_vjp_r"}
    assert _bits(case, dtype) == _bits(case, dtype, tiles=False)


# Attention's two eins and their four adjoints, each a product per (batch, heads) element;
# where the output's last axis is the left operand's (dv = aᵀ·dy), the operands trade roles.
ATTENTION = """dim B
dim T
dim E
type Q = ℝ[batch: B, heads: 2, seq: T, hd: E]
fn attend(q : Q, k : Q, v : Q) -> Q =
  let s = ein[batch, heads, seq, seq2](q * k)
  ein[batch, heads, seq, hd](s * v)
fn f(q : Q, k : Q, v : Q, w : Q) -> ℝ[] = sum(attend(q, k, v) * w)
fn g(q : Q, k : Q, v : Q, w : Q) -> (Q, Q, Q) =
  (grad(λ q. f(q, k, v, w))(q), grad(λ k. f(q, k, v, w))(k), grad(λ v. f(q, k, v, w))(v))
"""

EINS = ["ein", "ein", "ein_vjp_l", "ein_vjp_l", "ein_vjp_r", "ein_vjp_r"]


# (2, 40, 24): 40 rows (whole tiles), 40 or 24 columns (a panel and row-wise columns);
# (1, 3, 16): one batch, three rows (a short tile), three columns (ein s and dq: row-wise
#   in f32 and bf16, under four lanes; f64's narrow vectors of two lanes take them);
# (2, 300, 32): K = 300 past one block (bf16: carried sums in chunks of rows);
# (2, 64, 4), (1, 40, 6): a head of 4 or 6 (tutorial 03's): the weighted sum and dq in
#   narrow vectors (6: four lanes, then two row-wise columns).
SHORT = ["ein", "ein_vjp_l", "ein_vjp_r", "ein_vjp_r"]


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(
    ("dims", "eins"),
    [
        ((2, 40, 24), EINS),
        ((1, 3, 16), {"f64": EINS, "f32": SHORT, "bf16": SHORT}),
        ((2, 300, 32), EINS),
        ((2, 64, 4), EINS),
        ((1, 40, 6), EINS),
    ],
)
def test_attention_eins_give_the_row_wise_bits(tmp_path, dtype, dims, eins) -> None:
    src = tmp_path / "attention.psk"
    src.write_text(ATTENTION)
    b, t, e = dims
    case = _setup(str(src), "g", {"B": b, "T": t, "E": e})
    p = _compile(case, dtype)
    expected = eins[dtype] if isinstance(eins, dict) else eins
    assert sorted(k.name for _, k in p.host.kernels if _scratch(k)) == expected
    assert _bits(case, dtype) == _bits(case, dtype, tiles=False)


SCORES = """dim B
dim T
dim E
type Q = ℝ[batch: B, heads: 2, seq: T, hd: E]
fn scores(q : Q, k : Q) -> ℝ[batch: B, heads: 2, seq: T, seq2: T] =
  ein[batch, heads, seq, seq2](q * k)
"""


def _panel_axes(kernel: ir.Kernel) -> int:
    """The axes of a kernel's first scratch buffer: 3 where it holds every panel of b."""
    line = next(x for x in kernel_text(kernel).splitlines() if "scratch" in x)
    return line.split("[", 1)[1].split("]", 1)[0].count(",") + 1


# All of K in one block and all of b in 32 KiB: b is packed once and every row tile runs
# along the panels (`_Form.by_rows`), row after row of the output. (2, 64, 4): tutorial
# 03's head of 4 (f32: two panels of 32 columns; f64: four of 16), rows in five tiles of
# twelve and one of four; (1, 70, 8): 70 columns, whole panels then row-wise columns;
# (1, 32, 16) in f32: one panel of 32 columns, nothing to walk along (the panel form);
# (1, 64, 256): b is 64 KiB, past the budget (the panel form, K in one block).
@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(
    ("dims", "axes"),
    [
        ((2, 64, 4), {"f64": 3, "f32": 3, "bf16": 3}),
        ((1, 70, 8), {"f64": 3, "f32": 3, "bf16": 3}),
        ((1, 32, 16), {"f64": 3, "f32": 2, "bf16": 2}),
        ((1, 64, 256), {"f64": 2, "f32": 2, "bf16": 2}),
    ],
)
def test_scores_walk_the_rows_over_a_whole_packed_b(tmp_path, dtype, dims, axes) -> None:
    src = tmp_path / "scores.psk"
    src.write_text(SCORES)
    b, t, e = dims
    case = _setup(str(src), "scores", {"B": b, "T": t, "E": e})
    (kernel,) = [k for _, k in _compile(case, dtype).host.kernels if k.name == "ein"]
    assert _panel_axes(kernel) == axes[dtype]
    assert _bits(case, dtype) == _bits(case, dtype, tiles=False)
    assert _bits(case, dtype, threads=2) == _bits(case, dtype, tiles=False)
