"""`presk serve`: the inference block, and text from a trained tiny MiniGPT on every backend.

One module-scoped checkpoint (30 native steps of the tiny MiniGPT) serves every test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_presk

SERVE = "tests/examples/minigpt/serve_minigpt.psk"
TRAIN = "tests/examples/minigpt/train_minigpt.psk"
TINY = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("ckpt")
    code, _, err = run_presk(
        "train",
        TRAIN,
        *TINY,
        "--steps",
        "30",
        "--epochs",
        "2",
        "--log-every",
        "100",
        "--backend",
        "native",
        "--ckpt",
        str(directory),
    )
    assert code == 0, err
    return str(directory / "final.psk.d")


def _serve(weights: str, *extra: str) -> tuple[int, str, str]:
    return run_presk("serve", SERVE, *TINY, "--weights", weights, *extra)


def test_greedy_tokens_are_the_same_on_every_backend(weights: str) -> None:
    args = ("--prompt", "the compiler", "--tokens", "10", "--greedy")
    outputs = {}
    for name, backend in (
        ("reference", ("--backend", "interp")),
        ("f64", ("--backend", "native")),
        ("f32", ("--backend", "native", "--realize", "f32")),
    ):
        code, out, err = _serve(weights, *args, *backend)
        assert code == 0, err
        assert out.startswith("the compiler") and out.endswith("\n")
        assert len(out) == len("the compiler") + 10 + 1
        assert "presk serve: 10 tokens in" in err and "tokens/s" in err
        outputs[name] = out
    assert outputs["reference"] == outputs["f64"] == outputs["f32"]


def test_seeded_sampling_is_the_same_on_every_backend(weights: str) -> None:
    args = ("--prompt", "a", "--tokens", "12", "--temperature", "0.9", "--seed", "11")
    _, ref, err = _serve(weights, *args)
    assert ref, err
    _, nat, _ = _serve(weights, *args, "--backend", "native")
    assert ref == nat
    _, other, _ = _serve(weights, *args, "--backend", "native", "--seed", "12")
    assert other != nat  # another seed draws other tokens


def test_the_window_slides_past_the_context(weights: str) -> None:
    """The context is 8 (the weights' position table): 20 tokens slide the window."""
    code, out, err = _serve(
        weights, "--ids", "1,2,3", "--tokens", "20", "--greedy", "--backend", "native"
    )
    assert code == 0, err
    assert len(out) == 3 + 20 + 1


def test_summary_shows_the_serve_block(weights: str, tmp_path: Path) -> None:
    code, out, _ = run_presk("check", SERVE, *TINY, "--summary")
    assert code == 0
    assert "inference serve: model MiniGPT, generate next_token, greedy greedy_token" in out
    assert "vocab   : tests/examples/minigpt/data/vocab.json — 64 tokens" in out


def test_bad_input_is_one_line(weights: str, tmp_path: Path) -> None:
    code, _, err = run_presk(
        "train",
        "tutorial/07_train.psk",
        "--steps",
        "2",
        "--backend",
        "native",
        "--ckpt",
        str(tmp_path / "tower"),
    )
    assert code == 0, err
    tower = tmp_path / "tower" / "final.psk.d"
    cases = [
        (("--prompt", "THE"), "the vocabulary has no"),
        (("--tokens", "0"), "--tokens 0"),
        (("--temperature", "0"), "--temperature 0: expected a number in [2^-64, 2^64]"),
        (("--temperature", "-1"), "expected a number in [2^-64, 2^64]"),
        (("--temperature", "1e-300"), "expected a number in [2^-64, 2^64]"),
        (("--temperature", "1e39"), "expected a number in [2^-64, 2^64]"),
        (("--ids", "1,99"), "99 is not an id below 64"),
        (("--weights", "tutorial/data/pairs.psk.d"), "not one parameter tree"),
        (("--weights", str(tower)), "the weights have no `tok.table`"),
        (("--backend", "gpu"), "--backend gpu"),
        (("--weights", ""), "--weights: an empty name"),
        (("--vocab", ""), "--vocab: an empty name"),
    ]
    for extra, message in cases:
        code, _, err = _serve(weights, *extra)
        assert code in (1, 2) and message in err, (extra, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, _, err = run_presk("serve", "tutorial/07_train.psk")
    assert code == 2 and "has no `inference` block" in err
