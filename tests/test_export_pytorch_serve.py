"""`presk export --target pytorch --mode readable --serve`: serve.py generates, in float64,
the greedy tokens `presk serve --greedy` generates (on the reference and natively) from a
briefly trained tiny MiniGPT; the exported argmax breaks ties as presk's; refusals."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_presk

pytest.importorskip("torch", reason="torch is needed to run the exported serve.py")

ROOT = Path(__file__).resolve().parent.parent
SERVE = "tests/examples/minigpt/serve_minigpt.psk"
TRAIN = "tests/examples/minigpt/train_minigpt.psk"
TINY = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")
PYTORCH = ("--target", "pytorch", "--mode", "readable")
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("ckpt")
    code, _, err = run_presk(
        "train", TRAIN, *TINY, "--steps", "20", "--epochs", "2", "--log-every", "100",
        "--backend", "native", "--ckpt", str(directory),
    )  # fmt: skip
    assert code == 0, err
    return str(directory / "final.psk.d")


@pytest.fixture(scope="module")
def exported(weights: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "serve"
    code, stdout, err = run_presk(
        "export", SERVE, *TINY, *PYTORCH, "--serve", "--weights", weights, "-o", str(out)
    )
    assert code == 0, err
    assert "serve.py" in stdout
    return out


def serve_py(out: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "serve.py", *argv], cwd=out, capture_output=True, text=True,
        check=False, env=ENV,
    )  # fmt: skip


def presk_serve(weights: str, *argv: str) -> str:
    code, out, err = run_presk("serve", SERVE, *TINY, "--weights", weights, "--greedy", *argv)
    assert code == 0, err
    return out


def test_the_files_and_their_lint(exported: Path) -> None:
    names = {p.name for p in exported.iterdir()}
    assert {"serve.py", "pskd.py", "weights.psk.d", "vocab.json", "minigpt.py"} <= names
    module = (exported / "serve_minigpt.py").read_text(encoding="utf-8")
    assert "def greedy_token(" in module
    assert "`fn next_token` (serve_minigpt.psk:20) draws with a key: not exported" in module
    for source in exported.glob("*.py"):
        py_compile.compile(str(source), doraise=True)
    ruff = Path(sys.executable).parent / "ruff"
    if ruff.exists():
        done = subprocess.run(
            [str(ruff), "check", "--isolated", "--line-length", "100", str(exported)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout


def test_greedy_tokens_are_the_reference_ones(exported: Path, weights: str) -> None:
    done = serve_py(exported, "--greedy", "--prompt", "the compiler", "--tokens", "12")
    assert done.returncode == 0, done.stderr
    assert done.stdout == presk_serve(weights, "--prompt", "the compiler", "--tokens", "12")
    assert len(done.stdout) == len("the compiler") + 12 + 1
    assert done.stderr.startswith("serve.py: 12 tokens in ") and "tokens/s" in done.stderr


def test_greedy_tokens_past_the_context_are_native_f64_ones(exported: Path, weights: str) -> None:
    """The context is 8: 30 tokens after three ids slide the window."""
    args = ("--ids", "1,2,3", "--tokens", "30")
    done = serve_py(exported, "--greedy", *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == presk_serve(weights, *args, "--backend", "native")


def test_serve_py_refuses_sampling_and_bad_prompts(exported: Path) -> None:
    done = serve_py(exported, "--prompt", "the")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "serve.py: samples only greedily yet (presk's counter-based sampler): give --greedy\n"
    )
    for argv, message in (
        (("--prompt", "the\x07"), "the vocabulary has no '\\x07' (character 4)"),
        (("--ids", "1,x"), "--ids 1,x: expected ids separated by commas"),
        (("--ids", "64"), "--ids 64: 64 is not an id below 64"),
        (("--weights", "missing.psk.d"), "--weights missing.psk.d:"),
    ):
        done = serve_py(exported, "--greedy", *argv)
        assert done.returncode == 1, argv
        assert done.stderr.startswith("serve.py: ") and message in done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_exported_argmax_takes_the_last_of_equal_maxima(tmp_path: Path) -> None:
    source = tmp_path / "pick.psk"
    source.write_text(
        "dim B\nfn pick(x : ℝ[batch: B, k: 4]) -> idx[4][batch: B] = argmax(x)\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    code, _, err = run_presk("export", str(source), *PYTORCH, "-o", str(out))
    assert code == 0, err
    check = (
        "import torch, pick\n"
        "print(pick.pick(torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])).tolist())"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=out, capture_output=True, text=True, check=False,
        env=ENV,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[2, 3]\n"


@pytest.mark.parametrize(
    ("source", "flags", "message"),
    [
        ("tutorial/06_tower.psk", ("--serve",), "has no `inference` block"),
        (SERVE, ("--serve", "--train"), "--serve and --train: one program at a time"),
        (SERVE, ("--serve", "--conformance-entry", "train:2"), "--serve and --conformance-entry"),
        (SERVE, ("--serve", "--seed", "3"), "--seed is a flag of --train"),
        (SERVE, ("--serve", "--prompt", "a"), "--prompt is a flag of --serve --target c"),
        (SERVE, ("--weights", "w.psk.d"), "--weights is a flag of --serve"),
        (SERVE, ("--vocab", "v.json"), "--vocab is a flag of --serve"),
        (SERVE, ("--serve", "--weights", "missing.psk.d"), "--weights missing.psk.d:"),
    ],
)
def test_refusals_write_nothing(
    source: str, flags: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    consts = TINY if source == SERVE else ()
    code, stdout, err = run_presk("export", source, *consts, *PYTORCH, *flags, "-o", str(out))
    assert code in (1, 2) and stdout == ""
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_onnx_has_no_serve(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _, err = run_presk("export", SERVE, *TINY, "--target", "onnx", "--serve", "-o", str(out))
    assert code != 0 and "--serve is a flag of --serve --target c" in err
    assert not out.exists()


def test_a_block_without_greedy_is_not_built_yet(weights: str, tmp_path: Path) -> None:
    for name in ("minigpt.psk", "serve_minigpt.psk"):
        text = (ROOT / "tests/examples/minigpt" / name).read_text(encoding="utf-8")
        text = text.replace("  greedy   = greedy_token\n", "")
        (tmp_path / name).write_text(text, encoding="utf-8")
    vocab = str(ROOT / "tests/examples/minigpt/data/vocab.json")
    out = tmp_path / "out"
    code, _, err = run_presk(
        "export", str(tmp_path / "serve_minigpt.psk"), *TINY, *PYTORCH, "--serve",
        "--weights", weights, "--vocab", vocab, "-o", str(out),
    )  # fmt: skip
    assert code == 2 and "block without a `greedy` function" in err and err.count("\n") == 1
    assert not out.exists()
