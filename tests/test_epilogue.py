"""The bias epilogue: a product's kernel finishes with the one add that reads it.

Two steps prove it keeps the bits. Every point of a product's space with the
epilogue computes point zero's bits with it (the nests compiled side by side,
presk/tune/harness.py, on the same inputs: the product's and the bias's);
and an entry under a plan stating the epilogue prints what it prints without
one, one launch fewer, in f64, f32 and bf16 (where the sum is stored, rounded,
loaded back and added to), for a bias along the last axis and for a residual
of the product's shape read as the add's left operand.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_presk

from presk.entries import bind_dims, find_entry
from presk.host.realization import Realization
from presk.kernel.layout import NestKind, Split, space
from presk.kernel.lower.epilogue import fits, with_epilogue
from presk.pipeline import Request, front_end
from presk.tune import harness
from presk.tune.capture import Captured, capture

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

PROGRAM = """dim B
dim K
dim N
fn lin(x : ℝ[B, K], w : ℝ[K, N], b : ℝ[N]) -> ℝ[B, N] = x · w + b
fn res(x : ℝ[B, K], w : ℝ[K, N], h : ℝ[B, N]) -> ℝ[B, N] = h + x · w
fn deep(x : ℝ[B, K], w : ℝ[K, N], b : ℝ[N]) -> ℝ[B, N] = gelu(x · w + b)
fn heads(x : ℝ[B, K], w : ℝ[K, h: 2, d: 16], b : ℝ[d: 16]) -> ℝ[B, h: 2, d: 16] = x · w + b
fn twice(x : ℝ[B, K], w : ℝ[K, N]) -> ℝ[B, N] =
  let y = x · w
  y + y
"""
# K in three packed blocks, N one whole panel of 32 and an edge.
DIMS = ("--dim", "B=8", "--dim", "K=600", "--dim", "N=40")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def program(tmp_path: Path) -> str:
    path = tmp_path / "lin.psk"
    path.write_text(PROGRAM, encoding="utf-8")
    return str(path)


def _plan(tmp_path: Path, dtype: str, layout: dict[str, object]) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"realization": dtype, "layout": layout}), encoding="utf-8")
    return f"@{path}"


POINTS = [
    {"epilogue": True},  # the default's form: packed, the sums in the output between blocks
    {"form": "rowwise", "epilogue": True},  # the row is the running sum
    {"tile": [2, 8], "lanes": 8, "epilogue": True},
    {"tile": [1, 4], "kblock": 32, "order": "IJK", "epilogue": True},  # K innermost
    {"tile": [4, 16], "kblock": 128, "order": "KIJ", "lanes": 8, "epilogue": True},  # spilled
]


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("entry", ["lin", "res"])
def test_a_plan_stating_the_epilogue_prints_the_same_output(
    entry: str, dtype: str, program: str, tmp_path: Path
) -> None:
    run = ("run", program, "--entry", entry, *DIMS, "--backend", "native")
    code, plain, err = run_presk(*run, "--realize", dtype)
    assert code == 0, err
    checked = 0
    for point in POINTS:
        spilled = point.get("kblock") and not str(point.get("order", "IJ")).endswith("K")
        if dtype == "bf16" and spilled:
            continue  # refused: bf16 sums would be stored between blocks
        if dtype == "f64" and point.get("lanes") == 8:
            point = {**point, "lanes": 8, "tile": [4, 8]}
        plan = _plan(tmp_path, dtype, {f"{entry}/%3": point})
        code, planned, err = run_presk(*run, "--plan", plan)
        assert (code, err) == (0, ""), point
        assert planned == plain, point
        checked += 1
    assert checked >= 4


def test_the_add_launches_nothing(program: str, tmp_path: Path) -> None:
    dump = ("dump", program, "--entry", "lin", *DIMS, "--stage", "kernel")
    code, plain, _ = run_presk(*dump, "--realize", "f32")
    assert code == 0 and "2 launches" in plain and "kernel add" in plain
    code, fused, err = run_presk(*dump, "--plan", _plan(tmp_path, "f32", {"lin/%3": POINTS[0]}))
    assert code == 0, err
    assert "1 launches" in fused and "kernel dot + add" in fused and "kernel add" not in fused


@pytest.mark.parametrize(
    ("entry", "layout", "reason"),
    [
        ("deep", {"deep/%3": {"epilogue": True}}, "no add alone reads"),
        ("twice", {"twice/%2": {"epilogue": True}}, "no add alone reads"),
        ("lin", {"lin/%3": {"epilogue": True}, "lin/%4": {"lanes": 1}}, "launches nothing"),
        ("lin", {"lin/%4": {"epilogue": True}}, "no `epilogue`"),
        # A tiled dot reads w's last two axes as one J: a bias along d is not along J.
        ("heads", {"heads/%3": {"tile": [2, 8], "epilogue": True}}, "reads its last axes as one"),
    ],
)
def test_an_epilogue_nothing_can_take_is_refused(
    entry: str, layout: dict[str, object], reason: str, program: str, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, "f32", layout)
    run = ("run", program, "--entry", entry, *DIMS, "--backend", "native")
    code, out, err = run_presk(*run, "--plan", plan)
    assert (code, out) == (1, "")
    assert "E7002" in err and reason in err and "Traceback" not in err, err


def test_the_epilogue_must_be_true_or_false(program: str, tmp_path: Path) -> None:
    plan = _plan(tmp_path, "f32", {"lin/%3": {"epilogue": 1}})
    run = ("run", program, "--entry", "lin", *DIMS, "--backend", "native")
    code, out, err = run_presk(*run, "--plan", plan)
    assert code in (1, 2) and out == "" and len(err.strip().splitlines()) == 1, err
    assert "`epilogue` is true or false" in err


def test_an_operand_fits_along_the_last_axis_or_in_the_products_shape() -> None:
    product = (("b", 8), ("n", 40))
    assert fits((("n", 40),), product) is None
    assert fits((("b", 8), ("n", 40)), product) is None
    assert fits((("b", 8),), product) is not None
    assert fits((("m", 40),), product) is not None


# ---------------------------------------------------------------- every point


def _products(path: str, entry: str, dims: dict[str, int], dtype: str) -> list[Captured]:
    checked, _ = front_end(path, {})
    chosen = find_entry(checked, entry)
    binding = bind_dims(chosen, {k: str(v) for k, v in dims.items()})
    request = Request(checked, chosen, binding, Realization(dtype))
    nests = [n for n in capture(request).nests if n.nest.kind is NestKind.CONTRACTION]
    out = []
    for n in nests:
        # The add's operand along the product's last axis, read as its right operand.
        axes = n.launch.output.axes[-1:]
        out.append(replace(n, launch=with_epilogue(n.launch, n.dtype, axes, first=False)))
    return out


CASES = {
    "linear": ("tutorial/01_linear.psk", "Linear{150, 37}.apply", {"batch": 7}),
    "attention": ("tutorial/03_attention.psk", "attend", {"B": 2, "T": 37}),
}


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_point_with_the_epilogue_gives_point_zeros_bits(case: str, dtype: str) -> None:
    path, entry, dims = CASES[case]
    nests = _products(str(REPO_ROOT / path), entry, dims, dtype)
    assert nests
    spaces = []
    for nest in nests:
        points = space(nest.nest, (Split(0, 2),))
        points = points[:2] + points[2::29]  # point zero, the default and a spread sample
        spaces.append((nest, [replace(p, epilogue=True) for p in points]))
    benches = harness.prepare_all(spaces, 2)
    for nest, bench in zip(nests, benches, strict=True):
        results = harness.check(bench, 2)
        differ = [r.point.text() for r in results if r.same is False]
        assert differ == [], f"{nest.site} {dtype}: {differ[:3]}"
        assert sum(1 for r in results if r.same) >= 3, nest.site


def test_an_exported_program_with_the_epilogue_has_the_native_bits(tmp_path: Path) -> None:
    import subprocess

    out = tmp_path / "linear"
    point = {"tile": [2, 8], "lanes": 8, "epilogue": True}
    plan = _plan(tmp_path, "f32", {"Linear.apply/%3": point})
    code, _, err = run_presk(
        "export", "tutorial/01_linear.psk", "--entry", "Linear{40, 24}.apply",
        "--dim", "batch=6", "--plan", plan, "-o", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert "kernel dot + add" in (out / "kernels.c").read_text()
    done = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "the native backend's, bit for bit" in done.stdout
