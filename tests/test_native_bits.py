"""Layout changes change no bit: lanes and tiles, threads, -march=native, gcc and clang.

Every output element of a contraction adds its terms in increasing k, one
element per thread and per lane, and no flag lets the compiler contract or
reassociate: the same entry must give the same bits in every form.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from presk.build import compile as build
from presk.host.realization import Realization
from presk.interp.run import reference_inputs, reference_interpreter
from presk.kernel import ir
from presk.kernel.ir import Buffer
from presk.kernel.layout import NO_SPLIT, Layout, Split
from presk.kernel.lower import Launch, Step, lower, tiles
from presk.kernel.lower.tiles import Packing, packed_shape
from presk.kernel.text import kernel_text
from presk.pipeline import compile_path, core_module, front_end
from presk.sched import split

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

GEMM = "dim N\ndim M\nfn gemm(a : ℝ[N, M], b : ℝ[M, N]) -> ℝ[N, N] = a · b\n"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@dataclass(frozen=True)
class Case:
    """An entry of a file at concrete dims, on the inputs `presk run` synthesizes."""

    path: str
    entry: str
    dims: dict[str, int]
    consts: dict[str, Fraction]
    inputs: list[object]


def _setup(path: str, entry: str, dims: dict[str, int], consts: dict[str, int] | None = None):
    exact = {k: Fraction(v) for k, v in (consts or {}).items()}
    checked, _ = front_end(path, exact)
    info = checked.find(entry)
    assert info is not None
    with gmpy2.context(precision=53):
        inputs = reference_inputs(info, dims, None, 0)
    return Case(path, entry, dims, exact, inputs)


def _compile(case: Case, dtype: str, threads: int = 1, tiles: bool = True):
    compiled, *_ = compile_path(
        case.path,
        case.entry,
        case.dims,
        Realization(dtype),
        threads,
        consts=case.consts,
        banner="bits",
        tiles=tiles,
    )
    return compiled


def _bits(case: Case, dtype: str, threads: int = 1, tiles: bool = True) -> list[bytes]:
    return [a.tobytes() for a in _compile(case, dtype, threads, tiles).raw(case.inputs)]


# (32, 20): the packed form in one block of K; (32, 600): three blocks of 200, the
# accumulators reloaded from the output (bf16: from an f32 scratch); (256, 600): bf16's
# sums in two chunks of 128 rows; (32, 514): no block fits, the [4, 16] tile (bf16: the
# scalar form, compared with itself).
@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("n, m", [(32, 20), (16, 7), (8, 8), (32, 600), (256, 600), (32, 514)])
def test_tiles_and_lanes_give_the_row_wise_bits(tmp_path, monkeypatch, dtype, n, m) -> None:
    src = tmp_path / "gemm.psk"
    src.write_text(GEMM)
    dims = {"N": n, "M": m}
    case = _setup(str(src), "gemm", dims)
    tiled = _bits(case, dtype)
    assert _bits(case, dtype, tiles=False) == tiled


BATCHED = "dim B\ndim T\nfn f(x : ℝ[B, T, 64], w : ℝ[64, 32]) -> ℝ[B, T, 32] = x · w\n"


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
def test_a_batched_product_is_packed_over_its_rows_with_the_row_wise_bits(
    tmp_path, monkeypatch, dtype
) -> None:
    src = tmp_path / "batched.psk"
    src.write_text(BATCHED)
    dims = {"B": 2, "T": 6}
    case = _setup(str(src), "f", dims)
    p = _compile(case, dtype)
    assert any("scratch" in kernel_text(k) for _, k in p.host.kernels)
    packed = _bits(case, dtype)
    assert _bits(case, dtype, tiles=False) == packed


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("n, m", [(256, 128), (96, 768)])
def test_threads_give_the_same_bits(tmp_path, dtype, n, m) -> None:
    src = tmp_path / "gemm.psk"
    src.write_text(GEMM + "fn mix(x : ℝ[N, M]) -> ℝ[N, M] = exp(x) * 2 + x\n")
    dims = {"N": n, "M": m}
    for entry in ("gemm", "mix"):
        case = _setup(str(src), entry, dims)
        one = _bits(case, dtype, threads=1)
        two = _bits(case, dtype, threads=2)
        assert one == two, entry


def test_example_entries_same_bits_on_one_and_two_threads() -> None:
    mini = {"V": 64, "D": 16, "H": 2, "L": 2}
    case = _setup("tests/ad/minigpt_grad.psk", "loss_grad", {"B": 2, "T": 8}, mini)
    one = _bits(case, "f32", 1)
    assert one == _bits(case, "f32", 2)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_march_native_and_compilers_change_no_bit(monkeypatch, cc) -> None:
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    mini = {"V": 64, "D": 16, "H": 2, "L": 2}
    dims = {"B": 2, "T": 8}
    case = _setup("tests/ad/minigpt_grad.psk", "loss_grad", dims, mini)
    monkeypatch.setenv("PRESK_CC", "gcc")
    reference = _bits(case, "f32")
    monkeypatch.setenv("PRESK_CC", cc)
    original = build.build

    def without_native(text: str, *, openmp: bool = False, march_native: bool = True):
        return original(text, openmp=openmp, march_native=False)

    assert _bits(case, "f32") == reference
    monkeypatch.setattr("presk.pipeline.build", without_native)
    assert _bits(case, "f32") == reference


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_packed_form_without_march_native_changes_no_bit(tmp_path, monkeypatch, cc, dtype) -> None:
    """16-lane vectors lowered to SSE2 by either compiler still add one lane at a time."""
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    src = tmp_path / "gemm.psk"
    src.write_text(GEMM)
    dims = {"N": 32, "M": 600}
    case = _setup(str(src), "gemm", dims)
    reference = _bits(case, dtype, tiles=False)
    monkeypatch.setenv("PRESK_CC", cc)
    assert _bits(case, dtype) == reference
    original = build.build

    def without_native(text: str, *, openmp: bool = False, march_native: bool = True):
        return original(text, openmp=openmp, march_native=False)

    monkeypatch.setattr("presk.pipeline.build", without_native)
    assert _bits(case, dtype) == reference


def _matrix(index: int, dtype: str, rows: int, cols: int) -> Buffer:
    return Buffer(index, dtype, ((None, rows), (None, cols)))


@pytest.mark.parametrize(
    "dtype, m, k, n, packed",
    [
        # (lanes, kc, mc, nc); with 64-byte vectors, 12-row tiles and two cores.
        ("f32", 1024, 1024, 1024, (16, 256, 96, 512)),  # the benchmark: a block per worker
        ("f32", 32, 600, 32, (16, 200, 32, 32)),  # the largest divisor of K that fills a panel
        ("f32", 8, 7, 64, (16, 7, 8, 32)),  # all of a short K in one block
        ("f64", 16, 20, 16, (8, 20, 16, 16)),  # 8 double lanes, 16 columns
        ("bf16", 1024, 1024, 1024, (16, 256, 128, 32)),  # sums in 16 KiB of f32: 128 rows
        ("bf16", 36, 600, 32, (16, 200, 36, 32)),  # a chunk is every row that fits
        ("bf16", 1000, 20, 32, (16, 20, 1000, 32)),  # one block: the sums stay in the output
        ("f32", 32, 514, 32, None),  # K's divisors are too small: the [4, 16] tile
        ("f32", 32, 20, 16, None),  # 16 columns are not a multiple of 32
        ("f32", 6, 20, 32, None),  # rows not a multiple of 4
    ],
)
def test_packed_form_applies_where_its_conditions_hold(
    dtype, m, k, n, packed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiles, "cores", lambda: 2)
    a, b, out = _matrix(0, dtype, m, k), _matrix(1, dtype, k, n), _matrix(2, dtype, m, n)
    assert packed_shape(a, b, out) == (packed and Packing(*packed))
    kernel = lower(Launch([Step("dot", {}, [a, b], out.axes)], [a, b], out), dtype)
    text = kernel_text(kernel)
    assert ("scratch %3" in text) == (packed is not None)
    if packed and n > packed[3] and m * k * n >= split.WORK_THRESHOLD:
        assert split.splittable(kernel)  # two blocks of columns or more, and work enough


def test_scratch_stores_do_not_stop_a_split_but_outer_ones_do() -> None:
    """A scratch buffer declared inside the outer loop is one iteration's own."""
    a, b, out = _matrix(0, "f32", 64, 512), _matrix(1, "f32", 512, 64), _matrix(2, "f32", 64, 64)
    kernel = lower(Launch([Step("dot", {}, [a, b], out.axes)], [a, b], out), "f32")
    assert split.splittable(kernel)
    (loop,) = kernel.body
    assert isinstance(loop, ir.For)
    (scratch,) = loop.body
    while isinstance(scratch, ir.For):  # the loop over blocks of K
        (scratch,) = scratch.body
    assert isinstance(scratch, ir.Scratch)
    # The same scratch around the outer loop would carry values from one iteration to the next.
    hoisted = ir.Kernel(kernel.name, "f32", kernel.inputs, kernel.outputs, (scratch,))
    assert not split.splittable(hoisted)


def test_native_matches_reference_digits_for_attention() -> None:
    case = _setup("tutorial/03_attention.psk", "attend", {"B": 1, "T": 3})
    native = _compile(case, "f64").call_reference(case.inputs)
    checked, _ = front_end(case.path, {})
    with gmpy2.context(precision=256):
        exact = reference_interpreter(core_module(checked)).call("attend", case.dims, case.inputs)
    got = np.array([float(x) for x in native.data.reshape(-1)])
    want = np.array([float(x) for x in exact.data.reshape(-1)])
    assert np.all(np.abs(got - want) <= 2**-40 * (np.abs(want) + 2**-50))


def test_invoke_keeps_every_buffer_alive() -> None:
    """C writes through raw pointers: dropping the Bound must not free what invoke uses."""
    import gc
    import weakref

    case = _setup("tutorial/03_attention.psk", "attend", {"B": 1, "T": 3})
    bound = _compile(case, "f64").bind(case.inputs)
    refs = [weakref.ref(a) for a in bound.outputs]
    invoke = bound.invoke
    del bound
    gc.collect()
    assert all(r() is not None for r in refs)
    assert invoke() == 0


@pytest.mark.parametrize("split, nc", [(None, 512), (NO_SPLIT, 1024), (Split(0, 2), 512)])
def test_the_packed_product_gives_each_stated_worker_a_block(
    split, nc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block of columns packs all of a again: "split none" takes one block, a split
    one for each of its workers, the default one for each of the machine's cores."""
    monkeypatch.setattr(tiles, "cores", lambda: 2)
    a, b, out = (_matrix(i, "f32", 1024, 1024) for i in range(3))
    launch = Launch([Step("dot", {}, [a, b], out.axes)], [a, b], out)
    text = kernel_text(lower(launch, "f32", True, Layout(split=split)))
    assert f"scratch %3 : f32[{nc // 32}, 256, 32]" in text
    assert packed_shape(a, b, out, split and split.workers) == Packing(16, 256, 96, nc)
