"""Layout plans: every point of a nest's space computes point zero's bits, natively.

Point zero is the row-wise form on one worker without lanes. The nests are
a dot as Linear has it, attention's two `ein`s and its masked softmax, and
the adjoints of a product, at shapes whose sizes are not multiples of any
tile (edges), with K in several blocks of 32 and of 128. Each nest's points
are compiled side by side (presk/tune/harness.py) and run on the same
inputs. `make layout-check` runs every point; this suite runs a fixed
sample of each space (PRESK_LAYOUTS=full runs them all here too).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO_ROOT, run_presk

from presk.entries import bind_dims, find_entry
from presk.host.plan import PlanError, from_json
from presk.host.realization import Realization
from presk.kernel import ir
from presk.kernel.layout import NO_SPLIT, Layout, NestKind, Split
from presk.pipeline import Request, front_end
from presk.tune import epilogue, harness
from presk.tune.capture import capture, points_of, with_entry_inputs
from presk.tune.sweep import EPILOGUES, sweep

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

FULL = os.environ.get("PRESK_LAYOUTS") == "full"
THREADS = 2  # splits over two workers (and one)

GRAD = """dim B
dim K
dim N
fn f(x : ℝ[B, K], m : ℝ[K, N], w : ℝ[B, N]) -> ℝ[] = sum((x · m) * w)
fn g(x : ℝ[B, K], m : ℝ[K, N], w : ℝ[B, N]) -> (ℝ[B, K], ℝ[K, N]) =
  (grad(λ x. f(x, m, w))(x), grad(λ m. f(x, m, w))(m))
"""

# (file, entry, dims, the kinds of nest whose points are checked)
CASES = {
    "linear": ("tutorial/01_linear.psk", "Linear{150, 37}.apply", {"batch": 7}),
    "attention": ("tutorial/03_attention.psk", "attend", {"B": 2, "T": 37}),
    "adjoints": ("grad.psk", "g", {"B": 40, "K": 7, "N": 36}),
}
KINDS = (NestKind.CONTRACTION, NestKind.SOFTMAX)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _nests(
    case: str, dtype: str, tmp_path: Path, kinds: tuple[NestKind, ...] = KINDS
) -> list[harness.Captured]:
    path, entry, dims = CASES[case]
    if path == "grad.psk":
        (tmp_path / path).write_text(GRAD, encoding="utf-8")
        path = str(tmp_path / path)
    else:
        path = str(REPO_ROOT / path)
    checked, _ = front_end(path, {})
    chosen = find_entry(checked, entry)
    binding = bind_dims(chosen, {k: str(v) for k, v in dims.items()})
    request = Request(checked, chosen, binding, Realization(dtype))
    return [n for n in capture(request).nests if n.nest.kind in kinds]


def _sample(points: list[Layout]) -> list[Layout]:
    """Point zero, the default, and every 37th point (the space's order mixes them)."""
    if FULL:
        return points
    return points[:2] + points[2::37]


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_point_gives_point_zeros_bits(case: str, dtype: str, tmp_path: Path) -> None:
    nests = _nests(case, dtype, tmp_path)
    kinds = {n.nest.kind for n in nests}
    assert NestKind.CONTRACTION in kinds
    if case == "attention":
        assert NestKind.SOFTMAX in kinds
    spaces = [(nest, points_of(nest, THREADS, "full")) for nest in nests]
    for _, points in spaces:
        assert points[0].split == NO_SPLIT and len(points) > 2
    benches = harness.prepare_all([(n, _sample(p)) for n, p in spaces], THREADS)
    for nest, bench in zip(nests, benches, strict=True):
        results = harness.check(bench, THREADS)
        differ = [r.point.text() for r in results if r.same is False]
        assert differ == [], f"{nest.site} {dtype}: {differ[:3]}"
        ran = [r for r in results if r.same]
        assert len(ran) >= 2, nest.site
        # Splits at depth 0, 1 and 2 are among those run where the nest allows them.
        if nest.nest.kind is NestKind.CONTRACTION and FULL:
            depths = {r.point.split.depth for r in ran if r.point.split not in (None, NO_SPLIT)}
            assert depths, nest.site


def test_packed_adjoints_copy_the_panel_of_their_own_sizes(tmp_path: Path) -> None:
    """A pack's sizes are the contraction's: dx = dy·wᵀ sums over what dx lacks, so a pack
    sized from its panel instead copied past it (a heap overrun) where x has several
    leading axes."""
    program = tmp_path / "grad3.psk"
    program.write_text(GRAD.replace("ℝ[B, K]", "ℝ[B, 3, K]").replace("ℝ[B, N]", "ℝ[B, 3, N]"))
    checked, _ = front_end(str(program), {})
    chosen = find_entry(checked, "g")
    binding = bind_dims(chosen, {"B": "4", "K": "16", "N": "24"})
    request = Request(checked, chosen, binding, Realization("f32"))
    nests = [n for n in capture(request).nests if n.nest.kind is NestKind.CONTRACTION]
    packs = []
    for n in nests:
        points = points_of(n, 1, "small")
        packed = [p for p in points if p.pack]
        if packed:
            packs.append((n, [points[0], *packed]))
    assert packs
    for nest, bench in zip([n for n, _ in packs], harness.prepare_all(packs, 1), strict=True):
        lowered = bench.points[1]
        pack = lowered.kernels[0]
        assert pack.name == "pack" and lowered.panel is not None
        # The copy runs over the panel's elements exactly.
        bounds = ir.loop_bounds(pack.body)
        total = 1
        for bound in bounds.values():
            total *= bound
        assert total == lowered.panel.size, nest.site
        results = harness.check(bench, 1)
        assert [r.point.text() for r in results if r.same is False] == [], nest.site


def test_a_broken_point_is_seen(tmp_path: Path) -> None:
    """The comparison can fail: a kernel that sums in the wrong order is caught."""
    (nest,) = [n for n in _nests("linear", "f32", tmp_path) if n.nest.kind is NestKind.CONTRACTION]
    tiled = Layout("tiled", (2, 8), 0, "IJ", 8, False)
    bench = harness.prepare(nest, [Layout(form="rowwise", split=NO_SPLIT), tiled], 1)
    zero = bench.run(0, 1)
    bench.inputs[0][0] += 1.0  # the same kernel on other inputs: other bytes
    assert zero[0].tobytes() != bench.run(1, 1)[0].tobytes()


def test_points_a_nest_cannot_take_are_refused_at_these_shapes(tmp_path: Path) -> None:
    nests = {n.site: n for n in _nests("attention", "f32", tmp_path)}
    scores, values = nests["scores/%2"], nests["attend/%6"]
    refused = {
        "lanes without a pack": (scores, Layout("tiled", (1, 4), 0, "IJ", 4, False)),
        "the loop over blocks of K": (
            values,
            Layout("tiled", (1, 4), 32, "KIJ", 1, False, Split(2, 2)),
        ),
        "a softmax's row": (nests["attend/%5"], Layout(split=Split(3, 2))),
        "three workers": (values, Layout(split=Split(0, 3))),
    }
    for what, (nest, point) in refused.items():
        assert harness.lower_point(nest, point, THREADS).refused, what


def test_a_point_of_one_lane_is_scalar_code(tmp_path: Path) -> None:
    """lanes 1 keeps gcc's own vectorizer off for the point's kernel, and so does a tiled
    point whose lanes the nest's four columns cannot fill (its tile is scalar); the
    default and a point of four lanes keep it on, and every one of them computes point
    zero's bits."""
    from presk.cgen.c_printer import SCALAR_ATTRIBUTE, kernel_c

    values = {n.site: n for n in _nests("attention", "f32", tmp_path)}["attend/%6"]
    points = {
        "one lane": (Layout("tiled", (4, 4), 0, "IJ", 1, False), False),
        "lanes unstated": (Layout("tiled", (4, 4), 0, "IJ", None, False), False),
        "four lanes": (Layout("tiled", (4, 4), 0, "IJ", 4, False), True),
        "eight lanes over four columns": (Layout("tiled", (4, 8), 0, "IJ", 8, False), False),
        "the default": (Layout(), True),
    }
    for what, (point, vectorize) in points.items():
        (kernel,) = harness.lower_point(values, point, THREADS).kernels
        assert kernel.vectorize is vectorize, what
        assert (SCALAR_ATTRIBUTE in kernel_c(kernel, "k")) is not vectorize, what
    bench = harness.prepare(values, [p for p, _ in points.values()], 1)
    zero = bench.run(len(points) - 1, 1)
    assert all(harness.same_bytes(bench.run(i, 1), zero) for i in range(len(points)))


# ---------------------------------------------------------------- the plan file


def _plan(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return f"@{path}"


ATTEND = ("tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=2", "--dim", "T=64")


def test_run_under_a_plan_prints_the_same_output(tmp_path: Path) -> None:
    plan = _plan(
        tmp_path,
        {
            "realization": "f32",
            "layout": {
                "scores/%2": {"tile": [4, 16], "lanes": 16, "pack": True, "split": "none"},
                "attend/%5": {"passes": 2, "split": {"depth": 0, "workers": 2}},
                "attend/%6": {"tile": [2, 4], "kblock": 32, "order": "JKI", "lanes": 4},
            },
        },
    )
    run = ("run", *ATTEND, "--backend", "native", "--threads", "2")
    code, plain, err = run_presk(*run, "--realize", "f32")
    assert code == 0, err
    code, planned, err = run_presk(*run, "--plan", plan)
    assert (code, err) == (0, "")
    assert planned == plain
    code, dumped, _ = run_presk("dump", *ATTEND, "--stage", "kernel", "--plan", plan)
    assert code == 0 and "kernel pack" in dumped and "kernel split" in dumped


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        ({"scores/%2": {"tile": [1, 4], "lanes": 4}}, "needs a pack"),
        (
            {
                "attend/%6": {
                    "tile": [1, 4],
                    "kblock": 32,
                    "order": "KIJ",
                    "split": {"depth": 2, "workers": 2},
                }
            },
            "is not parallel",
        ),
        ({"attend/%5": {"split": {"depth": 3, "workers": 2}}}, "perfect nest"),
        ({"attend/%6": {"split": {"depth": 0, "workers": 3}}}, "half of it"),
        ({"attend/%5": {"tile": [1, 4]}}, "no `form`"),
        ({"attend/%6": {"tile": [1, 4], "lanes": 3}}, "lanes"),
        ({"attend/%6": {"tile": [1, 4], "order": "IJK"}}, "not IJ or JI"),
    ],
)
def test_illegal_points_are_refused_with_E7002(tmp_path: Path, layout: object, reason: str) -> None:
    plan = _plan(tmp_path, {"realization": "f32", "layout": layout})
    code, out, err = run_presk(
        "run", *ATTEND, "--backend", "native", "--threads", "2", "--plan", plan
    )
    assert (code, out) == (1, "")
    assert "E7002" in err and reason in err and "Traceback" not in err, err


def test_bf16_partial_sums_are_never_stored_between_blocks(tmp_path: Path) -> None:
    point = {"tile": [1, 4], "kblock": 32, "order": "KIJ"}
    plan = _plan(tmp_path, {"realization": "bf16", "layout": {"attend/%6": point}})
    code, _, err = run_presk("dump", *ATTEND, "--stage", "kernel", "--plan", plan)
    assert code == 1 and "E7002" in err and "bf16 partial sums" in err
    # With the block loop over K innermost the sums stay in registers: allowed.
    plan = _plan(
        tmp_path, {"realization": "bf16", "layout": {"attend/%6": {**point, "order": "IJK"}}}
    )
    assert run_presk("dump", *ATTEND, "--stage", "kernel", "--plan", plan)[0] == 0


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"layout": {"nowhere/%9": {"split": "none"}}}, "no nest of `attend`"),
        ({"layout": {"attend/%6": {"tiles": [1, 4]}}}, "unknown field `tiles`"),
        ({"realisation": "f32"}, "unknown field `realisation`"),
        ({"layout": {"attend/%6": {"split": {"depth": 0}}}}, "`split` is"),
        ({"layout": {"attend/%6": {"tile": "big"}}}, "`tile` is"),
    ],
)
def test_a_bad_plan_is_one_line(tmp_path: Path, doc: object, message: str) -> None:
    code, out, err = run_presk(
        "run", *ATTEND, "--backend", "native", "--plan", _plan(tmp_path, doc)
    )
    assert code in (1, 2) and out == "" and len(err.strip().splitlines()) == 1, err
    assert message in err, err


def test_a_plan_names_its_file_errors(tmp_path: Path) -> None:
    code, _, err = run_presk("run", *ATTEND, "--plan", "plan.json")
    assert code == 2 and "expected @FILE" in err
    code, _, err = run_presk("run", *ATTEND, "--plan", f"@{tmp_path / 'missing.json'}")
    assert code == 2 and "No such file" in err
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    code, _, err = run_presk("run", *ATTEND, "--plan", f"@{tmp_path / 'bad.json'}")
    assert code == 2 and "not JSON" in err
    code, _, err = run_presk(
        "run", *ATTEND, "--realize", "f64", "--plan", _plan(tmp_path, {"realization": "f32"})
    )
    assert code == 2 and "not the realization of --plan" in err


def test_a_plan_round_trips_through_json() -> None:
    doc = {
        "realization": "f32",
        "layout": {
            "a/%1": {"form": "tiled", "tile": [4, 16], "kblock": 128, "order": "JKI", "lanes": 16,
                     "pack": True, "split": {"depth": 1, "workers": 2}},
            "a/%2": {"passes": 2, "split": "none"},
        },
    }  # fmt: skip
    plan = from_json(doc)
    assert plan.to_json() == doc
    with pytest.raises(PlanError):
        from_json({"layout": {"a/%1": {"kblock": True}}})


def test_a_plan_stating_every_default_prints_the_same_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`make plan-check`'s subset: the defaults stated as a plan change no byte of C."""
    import sys

    sys.path.insert(0, str(REPO_ROOT))
    from conformance.plan_check import main

    assert main(["--fast"]) == 0
    out = capsys.readouterr().out
    assert out.endswith(" 0 failed\n") and not out.startswith("0 passed"), out


def test_a_stated_default_leaves_out_a_split_that_changes_the_kernel(tmp_path: Path) -> None:
    """A 64³ product takes the packed form, whose column blocks follow the workers: a
    block for each of the machine's cores (two at least) by default, one block where a
    plan says one worker. So `split none` is not the default's choice on one thread,
    and the stated default leaves it out (the tiny MiniGPT failed `make plan-check` so)."""
    from presk.kernel.lower import lower
    from presk.kernel.text import kernel_text
    from presk.tune.defaults import stated_default

    src = tmp_path / "gemm.psk"
    src.write_text("dim N\nfn gemm(a : ℝ[N, N], b : ℝ[N, N]) -> ℝ[N, N] = a · b\n")
    checked, _ = front_end(str(src), {})
    entry = find_entry(checked, "gemm")
    request = Request(checked, entry, bind_dims(entry, {"N": "64"}), Realization("f32"), 1)
    (nest,) = capture(request).nests
    default = kernel_text(lower(nest.launch, nest.dtype, True))
    assert "scratch" in default  # the packed form
    assert kernel_text(lower(nest.launch, nest.dtype, True, Layout(split=NO_SPLIT))) != default
    point = stated_default(nest, 1)
    assert point.split is None
    assert kernel_text(lower(nest.launch, nest.dtype, True, point)) == default


# ---------------------------------------------------------------- autotune and rank

LINEAR = ("tutorial/01_linear.psk", "--entry", "Linear{40, 24}.apply", "--dim", "batch=6")


def test_autotune_measures_every_point_and_rank_reads_two_days(tmp_path: Path) -> None:
    days = [tmp_path / "day1", tmp_path / "day2"]
    for day in days:
        code, out, err = run_presk(
            "autotune", *LINEAR, "--realize", "f32", "--threads", "2", "--repeat", "2",
            "--out", str(day), "--out-plan", str(tmp_path / "best.json"),
        )  # fmt: skip
        assert code == 0, err
        assert "every output bit-identical to point 0, natively: yes" in out
    # The product's add, timed as its epilogue beside the two launches, gives their bits.
    assert "Linear.apply/%3              + Linear.apply/%5 as its epilogue: " in out
    assert "every output bit-identical to the two launches: yes" in out
    joined = [json.loads(x) for x in (days[0] / EPILOGUES).read_text().splitlines()]
    assert joined and all(x["same"] for x in joined) and joined[0]["point"]["epilogue"]
    nests = [f for f in days[0].glob("*.jsonl") if f.name != EPILOGUES]
    lines = [json.loads(x) for f in nests for x in f.read_text().splitlines()]
    assert lines and all(x["same"] in (True, None) for x in lines)
    ran = [x for x in lines if x["same"]]
    assert all(len(x["times_us"]) == 2 and x["median_us"] > 0 for x in ran)
    assert any(x["point"].get("form") == "tiled" for x in ran)
    # The best points are a plan `run` takes, with point zero's output.
    run = ("run", *LINEAR, "--backend", "native", "--threads", "2")
    plain = run_presk(*run, "--realize", "f32")
    planned = run_presk(*run, "--plan", f"@{tmp_path / 'best.json'}")
    assert planned == plain and plain[0] == 0
    code, out, err = run_presk(
        "rank", str(days[0]), str(days[1]), "--out", str(tmp_path / "rank.md")
    )
    assert code == 0, err
    assert "| L | every point bit-identical" in out and "**holds**" in out
    assert "| tile |" in out and (tmp_path / "rank.md").read_text() == out


def test_the_epilogue_verdict_compares_with_the_two_launches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked, _ = front_end(str(REPO_ROOT / LINEAR[0]), {})
    chosen = find_entry(checked, LINEAR[2])
    request = Request(checked, chosen, bind_dims(chosen, {"batch": "6"}), Realization("f32"))
    captured = capture(request)
    swept = sweep(captured, "small", 1, 1, "", "f32")[0]
    lines = epilogue.measure(captured, swept, 1, 2)
    assert len(lines) == 1 + epilogue.FASTEST and all(x["same"] for x in lines)
    assert all(x["two_launches_us"] == x["product_us"] + x["add_us"] for x in lines)
    found = epilogue.chosen(lines)
    assert found is not None
    assert found[1] == min(x["two_launches_us"] for x in lines)
    assert found[0]["median_us"] == min(x["median_us"] for x in lines)
    # Against the product alone (the add's drawn operand is not zero) every point differs.
    monkeypatch.setattr(epilogue, "_two_launches", lambda p, product, add: product.run(0, 1))
    wrong = epilogue.measure(captured, swept, 1, 0)
    assert [x["same"] for x in wrong] == [False] * len(lines)
    assert epilogue.chosen(wrong) is None


def test_autotune_times_each_nest_on_the_inputs_the_entry_gives_it(tmp_path: Path) -> None:
    path, entry, dims = CASES["attention"]
    checked, _ = front_end(str(REPO_ROOT / path), {})
    chosen = find_entry(checked, entry)
    binding = bind_dims(chosen, {k: str(v) for k, v in dims.items()})
    request = Request(checked, chosen, binding, Realization("f32"))
    nests = {n.site: n for n in with_entry_inputs(request, capture(request)).nests}
    assert all(n.given is not None for n in nests.values())
    # The softmax reads the causal mask the entry built: a triangle, not draws of 0 and 1.
    mask = nests["attend/%5"].given[1]  # type: ignore[index]
    t = dims["T"]
    assert mask.shape == (t, t) and np.array_equal(mask, np.tril(np.ones((t, t), mask.dtype)))
    # The weighted sum reads the softmax's rows: each sums to about one.
    rows = nests["attend/%6"].given[0]  # type: ignore[index]
    assert np.allclose(rows.sum(axis=-1), 1.0, atol=1e-5)
    drawn = harness.inputs_for(replace(nests["attend/%6"], given=None))
    assert not np.allclose(drawn[0].sum(axis=-1), 1.0, atol=1e-5)
    # autotune uses them (meta.json says so), and every point still gives point zero's bits.
    day = tmp_path / "day"
    code, out, err = run_presk(
        "autotune", *ATTEND, "--realize", "f32", "--threads", "1", "--repeat", "1",
        "--out", str(day),
    )  # fmt: skip
    assert code == 0, err
    assert "every output bit-identical to point 0, natively: yes" in out
    assert json.loads((day / "meta.json").read_text())["inputs"] == "entry"
    code, out, err = run_presk("autotune", *ATTEND, "--inputs", "typed", "--out", str(day))
    assert (code, out) == (2, "") and "--inputs typed" in err


def test_autotune_never_writes_into_a_foreign_directory(tmp_path: Path) -> None:
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine", encoding="utf-8")
    code, out, err = run_presk("autotune", *LINEAR, "--out", str(mine))
    assert (code, out) == (1, "") and "did not write" in err
    assert [p.name for p in mine.iterdir()] == ["keep.txt"]
    code, _, err = run_presk("autotune", *LINEAR, "--out", str(mine / "keep.txt"))
    assert code == 1 and "a file" in err
    code, _, err = run_presk("autotune", *LINEAR)
    assert code == 2 and "--out DIR is required" in err
    code, _, err = run_presk("rank", str(mine), str(mine))
    assert code == 1 and "not a sweep" in err


def test_train_under_a_plan_keeps_every_loss(tmp_path: Path) -> None:
    # The step runs its forward pass once, through `Linear.apply.fwd`.
    point = {"tile": [2, 4], "lanes": 4, "epilogue": True}  # the bias added in the dot's kernel
    plan = _plan(tmp_path, {"layout": {"Linear.apply.fwd/%3": point}})
    train = ("train", "tutorial/07_train.psk", "--backend", "native", "--steps", "4")
    runs = []
    for extra, ckpt in (((), "a"), (("--plan", plan), "b")):
        code, out, err = run_presk(
            *train, "--log-every", "1", "--ckpt", str(tmp_path / ckpt), *extra
        )
        assert code == 0, err
        runs.append([line for line in out.splitlines() if line.startswith("step")])
    assert runs[0] == runs[1] and len(runs[0]) >= 4


def test_an_exported_program_under_a_plan_has_the_native_bits(tmp_path: Path) -> None:
    import subprocess

    out = tmp_path / "planned"
    code, stdout, err = run_presk(
        "export", "tutorial/03_attention.psk", "--entry", "scores", "--dim", "B=1",
        "--dim", "T=4", "--plan", "@tutorial/pack.json", "--threads", "2", "-o", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert "in f32:" in stdout and "divided among up to 2 threads" in stdout
    kernels = (out / "kernels.c").read_text()
    assert "kernel pack" in kernels and "kernel split@1" in kernels
    done = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "the native backend's, bit for bit" in done.stdout
