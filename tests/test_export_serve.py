"""`presk export --target c --serve`: the generator as a C program, token for token
`presk serve --backend native` (its own `make check`, and a prompt of the test's)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_presk

SERVE = "tests/examples/minigpt/serve_minigpt.psk"
TRAIN = "tests/examples/minigpt/train_minigpt.psk"
TINY = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("make") is None, reason="no C compiler or make"
)


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("ckpt")
    code, _, err = run_presk(
        "train",
        TRAIN,
        *TINY,
        "--steps",
        "20",
        "--log-every",
        "100",
        "--backend",
        "native",
        "--realize",
        "f32",
        "--ckpt",
        str(directory),
    )
    assert code == 0, err
    return str(directory / "final.psk.d")


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_the_generator_gives_presk_serves_tokens(
    weights: str, realize: str, tmp_path: Path
) -> None:
    out = tmp_path / "gen"
    code, summary, err = run_presk(
        "export",
        SERVE,
        *TINY,
        "--target",
        "c",
        "--serve",
        "--weights",
        weights,
        "--realize",
        realize,
        "-o",
        str(out),
    )
    assert code == 0, err
    assert "a generator of `next_token` at context 8" in summary
    build = subprocess.run(
        ["make", "-s", "-C", str(out), "check"], capture_output=True, text=True, timeout=600
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert "greedy: 32 tokens, the same as presk serve" in build.stdout
    assert "sampled (seed 0, temperature 0.8): 32 tokens, the same as presk serve" in build.stdout
    prompt = "a compiler: "
    for flags, run_flags in (
        (("--greedy",), ("-g",)),
        (("--seed", "5", "--temperature", "1.3"), ("-s", "5", "-t", "1.3")),
    ):
        code, served, err = run_presk(
            "serve",
            SERVE,
            *TINY,
            "--weights",
            weights,
            "--prompt",
            prompt,
            "--tokens",
            "15",
            "--backend",
            "native",
            "--realize",
            realize,
            *flags,
        )
        assert code == 0, err
        ran = subprocess.run(
            [str(out / "run"), str(out / "weights.psk.d"), "-p", prompt, "-n", "15", *run_flags],
            capture_output=True,
            text=True,
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == served
        assert "run: 15 tokens in" in ran.stderr


def test_the_generator_refuses_bad_input(weights: str, tmp_path: Path) -> None:
    out = tmp_path / "gen"
    code, _, err = run_presk(
        "export", SERVE, *TINY, "--target", "c", "--serve", "--weights", weights, "-o", str(out)
    )
    assert code == 0, err
    assert subprocess.run(["make", "-s", "-C", str(out)], capture_output=True).returncode == 0
    run = str(out / "run")
    for args, message in (
        ([str(out / "weights.psk.d"), "-p", "ABC"], "the vocabulary does not cover the prompt"),
        ([str(out / "weights.psk.d"), "-n", "0"], "expected a positive number of tokens"),
        ([str(out / "weights.psk.d"), "-t", "0"], "expected a positive temperature"),
        ([str(out / "weights.psk.d"), "-i", "1,64"], "token ids below"),
        (["tutorial/data/pairs.psk.d"], "not the parameter tree"),
    ):
        ran = subprocess.run([run, *args], capture_output=True, text=True)
        assert ran.returncode != 0 and message in ran.stderr, (args, ran.stderr)
    code, _, err = run_presk(
        "export", "tutorial/07_train.psk", "--target", "c", "--serve", "-o", str(tmp_path / "x")
    )
    assert code == 2 and "has no `inference` block" in err
