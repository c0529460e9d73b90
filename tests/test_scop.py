"""`presk export --mode scop`: each nest alone at point zero, checked against the native backend.

The selection form of a kernel must compute the bits of its branching form,
the static-control verdicts must be right (gathers and draws are not; Polly
agrees where Debian's clang has it), and `make check` must both pass on
the exported nests and fail when a nest is changed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import REPO_ROOT, compare_golden, run_presk

from presk.kernel import ir
from presk.kernel import scop as kscop
from presk.kernel.text import kernel_text

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

MINI = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]
ATTEND = ["tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=2", "--dim", "T=4"]
MINIGPT = [
    "tests/ad/minigpt_grad.psk",
    "--entry",
    "loss_grad",
    *MINI,
    "--dim",
    "B=2",
    "--dim",
    "T=4",
]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def export(args: list[str], realize: str, out: Path) -> str:
    code, stdout, stderr = run_presk(
        "export", *args, "--mode", "scop", "--realize", realize, "-o", str(out), debug=True
    )
    assert code == 0, stderr
    return stdout


def make(out: Path, *targets: str, cc: str = "cc") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-C", str(out), f"CC={cc}", *targets], capture_output=True, text=True
    )


# ---------------------------------------------------------------- the kernel pass


def test_a_branch_becomes_selections_and_its_condition_is_decided_first() -> None:
    x = ir.Buffer(0, "f32", ((None, 4),))
    out = ir.Buffer(1, "i64", ())
    at = (ir.IVar("i0"),)
    # argmax's form: the branch assigns the maximum its condition reads.
    body = (
        ir.Let("s0", ir.IConst(0), integer=True),
        ir.Let("s1", ir.Load(x, (ir.IConst(0),))),
        ir.For(
            "i0",
            4,
            (
                ir.If(
                    ir.Cmp(">=", ir.Load(x, at), ir.Var("s1")),
                    (ir.Let("s0", ir.IVar("i0"), integer=True), ir.Let("s1", ir.Load(x, at))),
                ),
            ),
        ),
        ir.Store(out, (), ir.IVar("s0")),
    )
    kernel = kscop.to_selections(ir.Kernel("argmax", "f32", (x,), (out,), body))
    text = kernel_text(kernel)
    assert "if" not in text.replace("(", " ").split()
    assert "c0 = ((%0[i0] >= s1) ? 1 : 0)" in text
    assert "s1 = ((c0 != 0) ? %0[i0] : s1)" in text
    assert kscop.reasons(kernel) == []


def test_two_arms_storing_one_element_become_one_store() -> None:
    x = ir.Buffer(0, "f32", ((None, 3),))
    mask = ir.Buffer(1, "i64", ((None, 3),))
    out = ir.Buffer(2, "f32", ((None, 3),))
    at = (ir.IVar("i0"),)
    branch = ir.If(
        ir.Load(mask, at),
        (ir.Let("s0", ir.Fn("exp", ir.Load(x, at))), ir.Store(out, at, ir.Var("s0"))),
        (ir.Store(out, at, ir.Const(Fraction(0))),),
    )
    kernel = ir.Kernel("k", "f32", (x, mask), (out,), (ir.For("i0", 3, (branch,)),))
    lines = kernel_text(kscop.to_selections(kernel)).splitlines()
    stores = [line.strip() for line in lines if line.strip().startswith("%2[")]
    assert stores == ["%2[i0] = (%1[i0] ? s0 : 0)"]


def test_gathers_draws_and_straight_lines_are_not_static_control() -> None:
    table = ir.Buffer(0, "f32", ((None, 5), (None, 2)))
    ids = ir.Buffer(1, "i64", ((None, 3),))
    out = ir.Buffer(2, "f32", ((None, 3), (None, 2)))
    gather = (
        ir.For(
            "i0",
            3,
            (
                ir.Let("s0", ir.Load(ids, (ir.IVar("i0"),)), integer=True),
                ir.For(
                    "i1",
                    2,
                    (
                        ir.Store(
                            out,
                            (ir.IVar("i0"), ir.IVar("i1")),
                            ir.Load(table, (ir.IVar("s0"), ir.IVar("i1"))),
                        ),
                    ),
                ),
            ),
        ),
    )
    reasons = kscop.reasons(ir.Kernel("embed", "f32", (table, ids), (out,), gather))
    assert reasons and "gather" in reasons[0]
    key = ir.Buffer(3, "key", ())
    draw = (ir.For("i0", 3, (ir.Random("s0", key, ir.IVar("i0")),)),)
    assert "random" in kscop.reasons(ir.Kernel("d", "f32", (key,), (out,), draw))[0]
    single = (ir.Store(ir.Buffer(4, "f32", ()), (), ir.Const(Fraction(2))),)
    assert (
        "no loop" in kscop.reasons(ir.Kernel("c", "f32", (), (ir.Buffer(4, "f32", ()),), single))[0]
    )


# ---------------------------------------------------------------- the export


def test_attention_nests_compute_the_native_bits_and_a_changed_nest_does_not(
    tmp_path: Path, update_golden: bool
) -> None:
    out = tmp_path / "scop"
    summary = export(ATTEND, "f32", out)
    assert "6 nests at 6 shapes at point zero, a C function each" in summary
    assert "5 of them static-control parts and 1 not" in summary
    done = make(out, "check")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == "the 6 nests compute the native backend's bits\n"
    report = json.loads((out / "nests.json").read_text())
    verdicts = {n["kernel"]: n["static_control"] for n in report["nests"]}
    assert verdicts == {
        "ein": True,
        "sqrt": False,
        "div": True,
        "causal_mask": True,
        "softmax": True,
    }
    softmax = (out / "nests/attend_5.c").read_text()
    region = softmax[softmax.index("#pragma scop") : softmax.index("#pragma endscop")]
    assert " if " not in region and "if (" not in region
    compare_golden(REPO_ROOT / "tests/golden/scop/attend_5.c", softmax, update_golden)
    # A nest that computes something else is caught: subtract the running max twice.
    start = softmax.index("#pragma scop")
    changed = softmax[:start] + softmax[start:].replace("- s0)", "- s0 - s0)", 1)
    assert changed != softmax
    (out / "nests/attend_5.c").write_text(changed)
    done = make(out, "check")
    assert done.returncode != 0
    assert "attend_5: output 0 differs from the native backend's" in done.stdout
    assert "1 of the 6 nests differ" in done.stdout


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
def test_minigpt_gradient_nests_on_every_compiler(tmp_path: Path, realize: str) -> None:
    out = tmp_path / realize
    export(MINIGPT, realize, out)
    for cc in [cc for cc in ("gcc", "clang") if shutil.which(cc)]:
        done = make(out, "clean", "check", cc=cc)
        assert done.returncode == 0 and done.stderr == "", (cc, done.stderr)
        assert done.stdout.endswith("nests compute the native backend's bits\n")
    report = json.loads((out / "nests.json").read_text())
    gathers = {n["kernel"] for n in report["nests"] if any("gather" in w for w in n["why"])}
    assert gathers == {"embed", "embed_vjp", "cross_entropy"}


def test_random_nests_are_checked_without_pragmas(tmp_path: Path) -> None:
    out = tmp_path / "rand"
    args = ["conformance/programs/07_random.psk", "--entry", "e_dropout"]
    assert "0 of them static-control parts and 1 not" in export(args, "f32", out)
    assert "#pragma scop" not in (out / "nests/e_dropout_2.c").read_text()
    done = make(out, "check")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "the nest computes the native backend's bits\n"


def _polly_works() -> bool:
    if shutil.which("clang") is None:
        return False
    probe = subprocess.run(
        ["clang", "-mllvm", "-polly", "-x", "c", "-c", "-o", "/dev/null", "-"],
        input="void f(void) {}\n",
        capture_output=True,
        text=True,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _polly_works(), reason="no clang with Polly")
def test_polly_models_every_static_control_nest(tmp_path: Path) -> None:
    out = tmp_path / "polly"
    export(MINIGPT, "f32", out)
    done = make(out, "polly", "POLLY=clang")
    assert done.returncode == 0, done.stderr
    counts = {
        m.group(1): int(m.group(2)) for m in re.finditer(r"nests/(\w+)\.c: (\d+) SCoP", done.stdout)
    }
    report = json.loads((out / "nests.json").read_text())
    assert len(counts) == len(report["nests"])
    for nest in report["nests"]:
        if nest["static_control"]:
            assert counts[nest["name"]] >= 1, nest["name"]


def test_bad_mode_and_threads_are_one_line_errors(tmp_path: Path) -> None:
    code, _, err = run_presk("export", *ATTEND, "--mode", "polka", "-o", str(tmp_path / "x"))
    assert code == 2 and err.count("\n") == 1 and "--mode polka" in err
    code, _, err = run_presk(
        "export", *ATTEND, "--mode", "scop", "--threads", "2", "-o", str(tmp_path / "y")
    )
    assert code == 2 and err.count("\n") == 1 and "one worker" in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_plan_is_refused_at_point_zero(tmp_path: Path) -> None:
    """--mode scop writes every nest at point zero: a layout plan has nothing to say."""
    code, _, err = run_presk(
        "export", *ATTEND, "--mode", "scop", "--plan", "@tutorial/pack.json",
        "-o", str(tmp_path / "p"),
    )  # fmt: skip
    assert code == 2 and "point zero" in err and err.count("\n") == 1
    code, _, err = run_presk("export", *ATTEND, "--plan", "@p.json", "-o", str(tmp_path / "q"))
    assert code == 2 and "No such file" in err and err.count("\n") == 1
    assert not (tmp_path / "p").exists() and not (tmp_path / "q").exists()


def test_a_packed_kernel_is_not_point_zero() -> None:
    from presk.kernel.lower import Launch, Step, lower

    a = ir.Buffer(0, "f32", ((None, 8), (None, 64)))
    b = ir.Buffer(1, "f32", ((None, 64), (None, 32)))
    out = ir.Buffer(2, "f32", ((None, 8), (None, 32)))
    launch = Launch([Step("dot", {}, [a, b], out.axes)], [a, b], out)
    packed = kscop.to_selections(lower(launch, "f32", tiles=True))
    assert "not point zero" in kscop.reasons(packed)[0]
    assert kscop.reasons(kscop.to_selections(lower(launch, "f32", tiles=False))) == []
