"""`presk export --target c --serve`: the generator as a C program, token for token
`presk serve --backend native` (its own `make check`, and a prompt of the test's)."""

from __future__ import annotations

import json
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
        ([str(out / "weights.psk.d"), "-n", "0"], "expected a whole number of tokens"),
        ([str(out / "weights.psk.d"), "-n", "5abc"], "expected a whole number of tokens"),
        ([str(out / "weights.psk.d"), "-n", "-1"], "expected a whole number of tokens"),
        ([str(out / "weights.psk.d"), "-t", "0"], "expected a temperature in [2^-64, 2^64]"),
        ([str(out / "weights.psk.d"), "-t", "inf"], "expected a temperature in [2^-64, 2^64]"),
        ([str(out / "weights.psk.d"), "-s", "-1"], "expected a whole number in [0, 2^64)"),
        ([str(out / "weights.psk.d"), "-s", "abc"], "expected a whole number in [0, 2^64)"),
        ([str(out / "weights.psk.d"), "-i", "1,64"], "token ids below"),
        (["tutorial/data/pairs.psk.d"], "not the parameter tree"),
    ):
        ran = subprocess.run([run, *args], capture_output=True, text=True)
        assert ran.returncode > 0 and message in ran.stderr, (args, ran.stderr)
    # Past the context, the program keeps only the tokens it reads again: many tokens run
    # in the memory of a few (before, -n 2^61 overflowed the buffer's size and crashed).
    ran = subprocess.run([run, str(out / "weights.psk.d"), "-p", "the ", "-n", "200", "-s", "3"],
                         capture_output=True, text=True)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    code, ours, err = run_presk("serve", SERVE, *TINY, "--weights", weights, "--prompt", "the ",
                                "--tokens", "200", "--seed", "3", "--temperature", "1",
                                "--backend", "native")  # fmt: skip
    assert code == 0 and ours == ran.stdout, err
    code, _, err = run_presk(
        "export", "tutorial/07_train.psk", "--target", "c", "--serve", "-o", str(tmp_path / "x")
    )
    assert code == 2 and "has no `inference` block" in err


# The model's dots tiled in vectors, its softmax in two passes, and a site of the sampler
# alone (its division by the temperature): each function takes the points of its nests.
PLAN = {
    "realization": "f32",
    "layout": {
        "Linear.apply/%3": {"tile": [2, 4], "lanes": 4},
        "SelfAttention.apply/%15": {"passes": 2},
        "next_token/%6": {"lanes": 1},
    },
}


def _plan(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return f"@{path}"


def test_a_plan_lays_out_the_generator_and_keeps_its_tokens(weights: str, tmp_path: Path) -> None:
    out = tmp_path / "gen"
    code, summary, err = run_presk("export", SERVE, *TINY, "--target", "c", "--serve",
                                   "--weights", weights, "--plan", _plan(tmp_path, PLAN),
                                   "-o", str(out))  # fmt: skip
    assert code == 0, err
    assert "at context 8 in f32" in summary
    assert "<v=" in (out / "model_kernels0.c").read_text()
    build = subprocess.run(
        ["make", "-s", "-C", str(out), "check"], capture_output=True, text=True, timeout=600
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert "sampled (seed 0, temperature 0.8): 32 tokens, the same as presk serve" in build.stdout
    # Every point computes point zero's bits: the tokens of presk serve without the plan.
    prompt = "a compiler: "
    code, served, err = run_presk("serve", SERVE, *TINY, "--weights", weights, "--prompt",
                                  prompt, "--tokens", "15", "--backend", "native", "--realize",
                                  "f32", "--greedy")  # fmt: skip
    assert code == 0, err
    ran = subprocess.run(
        [str(out / "run"), str(out / "weights.psk.d"), "-p", prompt, "-n", "15", "-g"],
        capture_output=True,
        text=True,
    )
    assert (ran.returncode, ran.stdout) == (0, served), ran.stderr


def test_a_plan_naming_no_nest_of_the_generator_is_one_line(weights: str, tmp_path: Path) -> None:
    plan = _plan(tmp_path, {"layout": {"Linear.apply/%3": {"tile": [2, 4]}, "nowhere/%9": {}}})
    code, out, err = run_presk("export", SERVE, *TINY, "--target", "c", "--serve", "--weights",
                               weights, "--plan", plan, "-o", str(tmp_path / "e"))  # fmt: skip
    assert (code, out) == (1, "") and err.count("\n") == 1, err
    assert "names `nowhere/%9`, which is no nest of `next_token` or `greedy_token`" in err
    assert not (tmp_path / "e").exists()
