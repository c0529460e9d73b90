"""`presk export --target pytorch --mode readable`: the exports of the tutorial and MiniGPT
pass their own conformance tests, ruff and byte-compilation; bad input is one line."""

from __future__ import annotations

import py_compile
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import exported_tests_pass

ROOT = Path(__file__).resolve().parent.parent
PRESK = [str(Path(sys.executable).parent / "presk")]
MINI = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]
GPT = "tests/examples/minigpt/"

torch = pytest.importorskip("torch", reason="torch is needed to run the exported code")

CASES = {
    "linear": ["tutorial/01_linear.psk", "--conformance-entry", "Linear{3, 2}.apply",
               "--dim", "batch=2"],
    "norm": ["tutorial/02_norm.psk", "--shapes=check", "--conformance-entry",
             "RMSNorm{4}.apply", "--dim", "batch=2"],
    "attention": ["tutorial/03_attention.psk", "--shapes=check", "--conformance-entry",
                  "attend", "--dim", "B=2", "--dim", "T=3"],
    "grad": ["tutorial/04_grad.psk", "--conformance-entry", "loss_grad", "--dim", "D=3",
             "--dim", "B=2"],
    "tower": ["tutorial/06_tower.psk", "--shapes=check", "--conformance-entry", "Tower.apply",
              "--dim", "batch=2"],
    "tower_unrolled": ["tutorial/06_tower.psk", "--stack=unroll", "--conformance-entry",
                       "Tower.apply", "--dim", "batch=2"],
    "minigpt": [GPT + "minigpt.psk", *MINI, "--shapes=check", "--conformance-entry",
                "MiniGPT.apply", "--dim", "B=2", "--dim", "T=8"],
    "minigpt_loss": [GPT + "train_minigpt.psk", *MINI, "--conformance-entry", "loss",
                     "--dim", "B=2", "--dim", "T=8"],
}  # fmt: skip


def presk(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PRESK, "export", *argv], cwd=ROOT, capture_output=True, text=True, check=False
    )


def export(args: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    return presk(args[0], "--target", "pytorch", "--mode", "readable", *args[1:], "-o", str(out))


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_passes_its_conformance_test(case: str, tmp_path: Path) -> None:
    out = tmp_path / case
    done = export(CASES[case], out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("presk export: wrote ") and "test_conformance.py" in done.stdout
    for source in out.glob("*.py"):
        py_compile.compile(str(source), doraise=True)
    ruff = Path(sys.executable).parent / "ruff"
    if ruff.exists():
        lint = subprocess.run(
            [str(ruff), "check", "--isolated", "--line-length", "100", str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert lint.returncode == 0, lint.stdout
    stdout = exported_tests_pass(out)
    # The entry's call, and with a module's θ presk_random's draw of it (test_presk_init).
    assert ("2 passed" if "def test_presk_init" in (out / "test_conformance.py").read_text()
            else "1 passed") in stdout  # fmt: skip


def test_tower_reads_like_the_source(tmp_path: Path) -> None:
    assert export(CASES["tower"], tmp_path / "t").returncode == 0
    text = (tmp_path / "t" / "_06_tower.py").read_text(encoding="utf-8")
    assert '"""Generated from `module Tower` (06_tower.psk:16). Do not edit by hand."""' in text
    assert "self.blocks = nn.ModuleList([Block() for _ in range(3)])" in text
    assert "for block in self.blocks:  # stack{3}" in text
    assert "import _01_linear as lin" in text and "self.final = norm.RMSNorm(4)" in text
    unrolled = tmp_path / "u"
    assert export(CASES["tower_unrolled"], unrolled).returncode == 0
    text = (unrolled / "_06_tower.py").read_text(encoding="utf-8")
    assert "self.blocks[2](_stack0)" in text and "for block" not in text


def test_minigpt_takes_its_sequence_length(tmp_path: Path) -> None:
    assert export(CASES["minigpt"], tmp_path / "g").returncode == 0
    text = (tmp_path / "g" / "minigpt.py").read_text(encoding="utf-8")
    assert "def __init__(self, T):" in text and "PositionEmbedding(T, 16)" in text
    assert "σ2 = " in text  # σ² is not a Python identifier
    assert "MiniGPT(8)" in (tmp_path / "g" / "test_conformance.py").read_text(encoding="utf-8")


def test_unsupported_construct_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "s"
    done = export(["tests/export_pytorch/unsupported.psk"], out)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "cannot export to PyTorch yet" in done.stderr
    assert not out.exists()


def test_bad_targets_are_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("mine\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine\n")
    for target in (a_file, other):
        done = export(CASES["linear"], target)
        assert done.returncode != 0 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert a_file.read_text() == "mine\n" and (other / "keep.txt").read_text() == "mine\n"


def test_other_modes_are_not_built() -> None:
    done = presk("tutorial/01_linear.psk", "--target", "pytorch", "-o", "x")
    assert done.returncode == 2 and done.stderr.startswith("presk export: not built yet")
    done = presk("tutorial/01_linear.psk", "--shapes=check", "--entry", "x", "-o", "x")
    assert done.returncode == 2 and "--target pytorch" in done.stderr
