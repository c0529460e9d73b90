"""`presk export --target pytorch --mode readable --train` and `--conformance-entry train:K`:
the K-step test passes, train.py trains the tutorial tower and the tiny MiniGPT and writes
checkpoints presk reads; a file without a training run is one line."""

from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRESK = str(Path(sys.executable).parent / "presk")
MINI = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]
GPT = "tests/examples/minigpt/train_minigpt.psk"
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}

pytest.importorskip("torch", reason="torch is needed to run the exported code")


def export(source: str, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [PRESK, "export", source, "--target", "pytorch", "--mode", "readable", *flags]
    return subprocess.run(
        [*argv, "-o", str(out)], cwd=ROOT, capture_output=True, text=True, check=False
    )


def python(out: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=out, capture_output=True, text=True, check=False, env=ENV
    )


def lint(out: Path) -> None:
    for source in out.glob("*.py"):
        py_compile.compile(str(source), doraise=True)
    ruff = Path(sys.executable).parent / "ruff"
    if ruff.exists():
        done = subprocess.run(
            [str(ruff), "check", "--isolated", "--line-length", "100", str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout


def test_tutorial_k_steps_match_the_reference(tmp_path: Path) -> None:
    out = tmp_path / "t"
    done = export("tutorial/07_train.psk", out, "--conformance-entry", "train:10")
    assert done.returncode == 0, done.stderr
    for name in ("train.py", "presk_run.py", "pskd.py", "data.psk.d", "theta0.psk.d"):
        assert (out / name).is_file(), name
    lint(out)
    text = (out / "presk_run.py").read_text(encoding="utf-8")
    assert "torch.optim.AdamW(" in text and "LambdaLR" in text and "WARMUP = 20" in text
    test = python(out, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_conformance.py")
    assert test.returncode == 0, test.stdout + test.stderr
    assert "K-step conformance: 10 steps, worst relative gap" in test.stdout
    gap = float(test.stdout.split("worst relative gap ")[1].split()[0])
    assert gap < 1e-12
    # presk's own machine arithmetic on the same steps, and the four gaps beside each other.
    reference = json.loads((out / "conformance" / "expected.json").read_text())["theta"]
    for real, low, high in (("f64", 0, 1e-12), ("f32", 1e-9, 1e-4)):
        native = json.loads((out / "conformance" / f"native_{real}.json").read_text())
        assert native["realization"] == real and len(native["log"]) == 10
        worst = max(_gap(native["theta"][p], want) for p, want in reference.items())
        assert low < worst < high, (real, worst)
    done = python(ROOT, "experiments/exact_vs_almost.py", str(out))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 5 and lines[0].startswith("10 steps of 160: parameters' worst")
    gaps = {line[:20].strip(): float(line[20:]) for line in lines[1:]}
    names = ["presk native f64", "presk native f32", "PyTorch float64", "PyTorch float32"]
    assert list(gaps) == names
    assert max(gaps["presk native f64"], gaps["PyTorch float64"]) < 1e-12
    assert 1e-9 < min(gaps["presk native f32"], gaps["PyTorch float32"]) < 1e-4


def _gap(got: dict[str, object], want: dict[str, object]) -> float:
    a = [float.fromhex(x) for x in got["data"]]  # type: ignore[attr-defined]
    b = [float.fromhex(x) for x in want["data"]]  # type: ignore[attr-defined]
    scale = max(max(abs(x) for x in b), 1e-300)
    return max(abs(x - y) for x, y in zip(a, b, strict=True)) / scale


def test_conformance_test_fails_on_other_weights(tmp_path: Path) -> None:
    """The test can fail: a reference moved by 1e-6 is caught."""
    import json

    out = tmp_path / "t"
    assert export("tutorial/07_train.psk", out, "--conformance-entry", "train:2").returncode == 0
    path = out / "conformance" / "expected.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    leaf = next(iter(document["theta"].values()))
    leaf["data"][0] = (float.fromhex(leaf["data"][0]) * (1 + 1e-6)).hex()
    path.write_text(json.dumps(document), encoding="utf-8")
    test = python(out, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_conformance.py")
    assert test.returncode != 0


def test_train_py_trains_the_tower(tmp_path: Path) -> None:
    out = tmp_path / "t"
    assert export("tutorial/07_train.psk", out, "--train").returncode == 0
    assert not (out / "test_conformance.py").exists()
    run = python(out, "train.py", "--steps", "40", "--log-every", "20", "--ckpt", "ck",
                 "--dtype", "float64", "--threads", "1")  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("step 20  epoch 2  loss ") and "  lr 1.000e-2  |g| " in lines[0]
    assert lines[1].startswith("step 40  epoch 3  loss ") and "  lr 0.000e0  |g| " in lines[1]
    assert "ms a step, median of 39 (the first excluded)" in lines[2]
    first, last = (float(line.split("loss ")[1].split()[0]) for line in lines[:2])
    assert last < first
    assert (out / "ck" / "final.pt").is_file() and (out / "ck" / "final.psk.d").is_file()
    # presk reads the weights train.py wrote
    check = subprocess.run(
        [PRESK, "run", "tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=1",
         "--weights", str(out / "ck" / "final.psk.d")],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    # Its checkpoint directory is its own: a second run writes there again, and a
    # directory of someone's files is refused before any step.
    again = python(out, "train.py", "--steps", "2", "--ckpt", "ck", "--threads", "1")
    assert again.returncode == 0, again.stderr
    (out / "mine").mkdir()
    (out / "mine" / "final.pt").write_text("my model")
    refused = python(out, "train.py", "--steps", "2", "--ckpt", "mine", "--threads", "1")
    assert refused.returncode == 2 and "presk did not write" in refused.stderr
    assert [p.name for p in (out / "mine").iterdir()] == ["final.pt"]


def test_train_py_trains_tiny_minigpt(tmp_path: Path) -> None:
    out = tmp_path / "g"
    done = export(GPT, out, *MINI, "--train")
    assert done.returncode == 0, done.stderr
    lint(out)
    run = python(out, "train.py", "--steps", "3", "--log-every", "1", "--threads", "1")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [line.split("  ")[0] for line in lines[:3]] == ["step 1", "step 2", "step 3"]
    assert "steps of MiniGPT, final loss" in lines[-1]


def test_train_without_a_training_run_is_one_line(tmp_path: Path) -> None:
    for flags in (["--conformance-entry", "train:10"], ["--train"]):
        out = tmp_path / "x"
        done = export("tutorial/06_tower.psk", out, *flags)
        assert done.returncode in (1, 2) and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "no `training run`" in done.stderr
        assert not out.exists()
    for bad in ("train:0", "train:x", "train:100000"):
        done = export("tutorial/07_train.psk", tmp_path / "y", "--conformance-entry", bad)
        assert done.returncode in (1, 2) and done.stderr.count("\n") == 1
        assert not (tmp_path / "y").exists()
