"""`presk export --target onnx`: the tutorial's linear layer and tower and the tiny MiniGPT's
forward pass run on onnxruntime within their tests' tolerance of the 256-bit reference; an
entry ONNX cannot express is one line and writes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import exported_tests_pass

ROOT = Path(__file__).resolve().parent.parent
PRESK = [str(Path(sys.executable).parent / "presk")]
MINI = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]

for package in ("torch", "onnx", "onnxruntime"):
    pytest.importorskip(package, reason=f"{package} is needed to export and run ONNX graphs")

CASES = {
    "linear": ["tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=2"],
    "tower": ["tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=2"],
    "minigpt": ["tests/examples/minigpt/minigpt.psk", *MINI, "--entry", "MiniGPT.apply",
                "--dim", "B=2", "--dim", "T=8"],
}  # fmt: skip
# What each graph is stored in: the tower and MiniGPT use GELU, whose Erf onnxruntime
# has only in float32.
PRECISION = {
    "linear": "float64",
    "tower": "float32: onnxruntime has no float64 Erf",
    "minigpt": "float32: onnxruntime has no float64 Erf",
}


def export(args: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PRESK, "export", args[0], "--target", "onnx", *args[1:], "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_passes_its_conformance_test(case: str, tmp_path: Path) -> None:
    out = tmp_path / case
    done = export(CASES[case], out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("presk export: wrote ")
    assert done.stdout.endswith(f"(opset 18, {PRECISION[case]})\n")
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == [
        ".presk-export", "conformance/expected.json", "conformance/inputs.json", "model.onnx",
        "test_conformance.py",
    ]  # fmt: skip
    import onnx

    model = onnx.load(str(out / "model.onnx"))
    onnx.checker.check_model(model)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [18]
    assert "torch" not in (out / "test_conformance.py").read_text(encoding="utf-8")
    stdout = exported_tests_pass(out)
    assert "1 passed" in stdout


def test_the_test_finds_a_wrong_graph(tmp_path: Path) -> None:
    """A graph whose θ is changed fails its conformance test: the comparison is live."""
    import onnx
    from onnx import numpy_helper

    out = tmp_path / "linear"
    assert export(CASES["linear"], out).returncode == 0
    model = onnx.load(str(out / "model.onnx"))
    weight = model.graph.initializer[0]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.001, weight.name))
    onnx.save(model, str(out / "model.onnx"))
    test = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_conformance.py"],
        cwd=out, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert test.returncode == 1 and "1 failed" in test.stdout


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"],
         "cannot export loss_grad to ONNX: `loss_grad` takes a gradient"),
        (["tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=2"],
         "cannot export pick to ONNX: `pick` draws samples"),
    ],
)  # fmt: skip
def test_inexpressible_entry_is_one_line(args: list[str], why: str, tmp_path: Path) -> None:
    out = tmp_path / "x"
    done = export(args, out)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and why in done.stderr
    assert not out.exists()


def test_bad_flags_are_one_line(tmp_path: Path) -> None:
    out = tmp_path / "x"
    for extra in (["--conformance-entry", "x"], ["--mode", "scop"], ["--entry", "Lin.apply"]):
        done = export([*CASES["linear"], *extra], out)
        assert done.returncode != 0 and done.stdout == "", extra
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, extra
    done = export(["tutorial/01_linear.psk", "--dim", "batch=2"], out)
    assert done.returncode != 0 and "--entry is required" in done.stderr
    assert not out.exists()
