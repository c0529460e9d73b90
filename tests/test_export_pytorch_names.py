"""Distinct presk names stay distinct in the PyTorch and ONNX exports.

Python normalises identifiers by NFKC (`g₁` is `g1`) and `ident` turns what Python refuses
into `_` (`a-b` and `a_b` meet), so each scope of the generated code takes its names from
a table (presk/export/pytorch/naming.py). Each program here had two names merged before:
its export's own conformance test now passes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import exported_tests_pass

from presk.export.pytorch.naming import Table, imported

PRESK = [str(Path(sys.executable).parent / "presk")]

torch = pytest.importorskip("torch", reason="torch is needed to run the exported code")

TWO_FUNCTIONS = """dim B
fn g1(x : ℝ[B, 4]) -> ℝ[B, 4] = x * 2
fn g₁(x : ℝ[B, 4]) -> ℝ[B, 4] = x * 3
fn f(x : ℝ[B, 4]) -> ℝ[B, 4] = g1(x) + g₁(x)
"""
TWO_PARAMETERS = """dim B
fn f(x1 : ℝ[B, 4], x₁ : ℝ[B, 4]) -> ℝ[B, 4] = x1 * x₁
"""
TWO_FIELDS = """module Net {
  param w1 : ℝ[4] init = normal(std = 1)
  param w₁ : ℝ[4] init = normal(std = 1)
  fn apply(x : ℝ[4]) -> ℝ[4] = x * w1 + w₁
}
"""


def export(source: Path, *args: str, target: str = "pytorch") -> Path:
    out = source.parent / f"out_{target}"
    mode = ["--mode", "readable"] if target == "pytorch" else []
    done = subprocess.run(
        [*PRESK, "export", source.name, "--target", target, *mode, *args, "-o", str(out)],
        cwd=source.parent, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


passes = exported_tests_pass


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_nfkc_equal_functions_stay_two(tmp_path: Path) -> None:
    out = export(write(tmp_path / "k2.psk", TWO_FUNCTIONS), "--conformance-entry", "f",
                 "--dim", "B=2")  # fmt: skip
    text = (out / "k2.py").read_text(encoding="utf-8")
    assert "def g1(x):" in text and "def g1_1(x):" in text  # g1 as it was; g₁ renamed
    assert "return g1(x) + g1_1(x)" in text
    assert "1 passed" in passes(out)


def test_nfkc_equal_parameters_stay_two(tmp_path: Path) -> None:
    out = export(write(tmp_path / "k.psk", TWO_PARAMETERS), "--conformance-entry", "f",
                 "--dim", "B=2")  # fmt: skip
    assert "def f(x1, x1_1):" in (out / "k.py").read_text(encoding="utf-8")
    assert "1 passed" in passes(out)


def test_nfkc_equal_parameters_of_a_module_stay_two(tmp_path: Path) -> None:
    out = export(write(tmp_path / "net.psk", TWO_FIELDS), "--conformance-entry", "Net.apply")
    text = (out / "net.py").read_text(encoding="utf-8")
    assert "self.w1 = " in text and "self.w1_1 = " in text
    assert "2 passed" in passes(out)  # the call, and presk_random's draw of θ


def test_imported_files_of_one_module_name_stay_two(tmp_path: Path) -> None:
    write(tmp_path / "a-b.psk", "fn h(x : ℝ[4]) -> ℝ[4] = x * 2\n")
    write(tmp_path / "a_b.psk", "fn h(x : ℝ[4]) -> ℝ[4] = x * 3\n")
    main = write(
        tmp_path / "main.psk",
        'import "a-b.psk" as p\nimport "a_b.psk" as q\nfn f(x : ℝ[4]) -> ℝ[4] = p.h(x) + q.h(x)\n',
    )
    out = export(main, "--conformance-entry", "f")
    assert (out / "a_b.py").is_file() and (out / "a_b_1.py").is_file()
    text = (out / "main.py").read_text(encoding="utf-8")
    assert "import a_b as p" in text and "import a_b_1 as q" in text
    assert "1 passed" in passes(out)


def test_a_file_named_like_the_generated_test(tmp_path: Path) -> None:
    out = export(write(tmp_path / "test_conformance.psk", TWO_FUNCTIONS),
                 "--conformance-entry", "f", "--dim", "B=2")  # fmt: skip
    assert "def g1_1(x):" in (out / "test_conformance_1.py").read_text(encoding="utf-8")
    assert "from test_conformance_1 import f" in (out / "test_conformance.py").read_text()
    assert "1 passed" in passes(out)


def test_an_entry_named_like_the_tests_helpers(tmp_path: Path) -> None:
    """`check` is also test_conformance.py's own function: it is imported under another name."""
    source = "dim B\nfn check(x : ℝ[B, 4]) -> ℝ[B, 4] = x * 2\n"
    out = export(write(tmp_path / "m.psk", source), "--conformance-entry", "check",
                 "--dim", "B=2")  # fmt: skip
    assert "def check(x):" in (out / "m.py").read_text(encoding="utf-8")
    assert "from m import check as check_1" in (out / "test_conformance.py").read_text()
    assert "1 passed" in passes(out)


def test_onnx_keeps_nfkc_equal_functions_apart(tmp_path: Path) -> None:
    for package in ("onnx", "onnxruntime"):
        pytest.importorskip(package, reason=f"{package} is needed to export ONNX graphs")
    out = export(write(tmp_path / "k2.psk", TWO_FUNCTIONS), "--entry", "f", "--dim", "B=2",
                 target="onnx")  # fmt: skip
    assert "1 passed" in passes(out)


def test_onnx_of_a_file_named_like_its_tracer(tmp_path: Path) -> None:
    for package in ("onnx", "onnxruntime"):
        pytest.importorskip(package, reason=f"{package} is needed to export ONNX graphs")
    out = export(write(tmp_path / "_onnx_build.psk", TWO_FUNCTIONS), "--entry", "f",
                 "--dim", "B=2", target="onnx")  # fmt: skip
    assert "1 passed" in passes(out)


def test_table_keeps_names_that_meet_nothing() -> None:
    table = Table(["torch"])
    # The first of a spelling keeps it; a later g1_1 of the user keeps its own too.
    assert table.assign(["g1", "g1", "g1_1", "torch", "ﬁ"]) == [
        "g1",
        "g1_2",
        "g1_1",
        "torch_1",
        "ﬁ",
    ]
    assert table.fresh("fi") == "fi_1"  # NFKC: ﬁ is fi
    files = Table(["test_conformance"], files=True)
    assert files.assign(["Net", "net", "Test_Conformance"]) == [
        "Net",
        "net_1",
        "Test_Conformance_1",
    ]
    assert imported(["check"], [("m", "check"), ("n", "f")]) == {
        ("m", "check"): "check_1",
        ("n", "f"): "f",
    }
