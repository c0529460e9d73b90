"""Bad input on the command line: a vocabulary that is not text, sample types nested past
Python's recursion limit, a hyperparameter without a default. Each is one line on stderr and
an exit code of 1 or 2, never a traceback or an "internal error"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_presk
from test_serve import SERVE, TINY, weights  # noqa: F401  (the trained tiny MiniGPT)

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


def assert_one_line(code: int, err: str, *words: str) -> None:
    assert code in (1, 2), (code, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, (word, err)


# ---------------------------------------------------------------- vocabularies


def _letters(count: int) -> list[str]:
    return [chr(256 + i) for i in range(count)]


VOCABULARIES = [
    ("surrogate", ["\ud800", *_letters(63)], "lone surrogate"),
    ("surrogate-late", [*_letters(63), "a\udfffb"], "token 63"),
    ("nul", ["\x00", *_letters(63)], "NUL"),
    ("twice", ["a", *_letters(62), "a"], "twice ('a')"),
    ("empty", [], "empty"),
    ("not-a-list", {"a": 1}, "JSON array of strings"),
    ("numbers", [1, 2, 3], "JSON array of strings"),
    ("short", _letters(10), "10 tokens, the model scores 64"),
]


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("vocab")
    out = {}
    for name, document, _ in VOCABULARIES:
        path = directory / f"{name}.json"
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(document, handle)  # ensure_ascii: a lone surrogate as `\ud800`
        out[name] = str(path)
    deep = directory / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    out["deep"] = str(deep)
    return out


@needs_cc
@pytest.mark.parametrize(("name", "message"), [(n, m) for n, _, m in VOCABULARIES])
def test_serve_refuses_a_bad_vocabulary(
    weights: str,  # noqa: F811
    vocabularies: dict[str, str],
    tmp_path: Path,
    name: str,
    message: str,
) -> None:
    vocab = vocabularies[name]
    common = ("--weights", weights, "--vocab", vocab)
    code, out, err = run_presk("serve", SERVE, *TINY, *common, "--tokens", "3", "--greedy")
    assert_one_line(code, err, message)
    assert out == ""
    for target in (("--target", "c"), ("--target", "pytorch", "--mode", "readable")):
        directory = tmp_path / f"out_{target[1]}"
        code, _, err = run_presk(
            "export", SERVE, *TINY, *target, "--serve", *common, "-o", str(directory)
        )
        assert_one_line(code, err, message)
        assert not directory.exists()


@needs_cc
def test_a_vocabulary_nested_too_deeply_is_one_line(
    weights: str,  # noqa: F811
    vocabularies: dict[str, str],
) -> None:
    code, _, err = run_presk(
        "serve", SERVE, *TINY, "--weights", weights, "--vocab", vocabularies["deep"]
    )
    assert_one_line(code, err)


# ---------------------------------------------------------------- sample types


def _nested_tuple(depth: int) -> str:
    return "(" * depth + "ℝ[4]" + ",ℝ[0])" * depth


@pytest.mark.parametrize(
    "type_text",
    [
        _nested_tuple(300),
        _nested_tuple(5000),
        "ℝ[" + "(" * 5000 + "4" + ")" * 5000 + "]",
        "(" * 300,
        "[" * 5000,
    ],
)
def test_data_pack_refuses_a_type_nested_too_deeply(tmp_path: Path, type_text: str) -> None:
    out = tmp_path / "x.psk.d"
    code, _, err = run_presk(
        "data", "pack", "tutorial/data/pairs.txt", "-o", str(out), "--type", type_text
    )
    assert_one_line(code, err)
    assert "nested" in err and len(err) < 300, err
    assert not out.exists()


def test_a_sample_type_nested_a_little_is_still_read(tmp_path: Path) -> None:
    src = tmp_path / "pairs.txt"
    src.write_text("1 2 3 4 5 6 7 8\n")
    out = tmp_path / "x.psk.d"
    nested = "(" * 20 + "ℝ[4]" + ")" * 20
    code, _, err = run_presk(
        "data", "pack", str(src), "-o", str(out), "--type", f"({nested}, ℝ[4])"
    )
    assert code == 0, err
    code, _, err = run_presk("data", "info", str(out))
    assert code == 0, err


def test_a_file_of_a_deep_type_is_read_as_an_opaque_one(tmp_path: Path) -> None:
    # A type text that is no sample type (a `params M`, or one nested too deeply) is kept
    # as text; parsing it raised RecursionError before, in presk.data and in `data info`.
    import numpy as np

    import presk.data

    path = tmp_path / "x.psk.d"
    presk.data.write(path, [np.zeros(4)], type=_nested_tuple(2000))
    assert len(presk.data.read(path)) == 1
    code, _, err = run_presk("data", "info", str(path))
    assert code == 0, err


# ---------------------------------------------------------------- hyperparameters


@needs_cc
@pytest.mark.parametrize("command", ["run", "bench", "export"])
def test_a_hyperparameter_without_a_default_is_e7001_natively(tmp_path: Path, command: str) -> None:
    src = tmp_path / "h.psk"
    src.write_text("fn f(x : ℝ[3], h : f64) -> ℝ[3] = x * real(h)\n")
    extra = {
        "run": ("--backend", "native"),
        "bench": (),
        "export": ("--target", "c", "-o", str(tmp_path / "out")),
    }[command]
    code, _, err = run_presk(command, str(src), "--entry", "f", *extra)
    assert code == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "hyperparameter" in err and "no default" in err, err


def test_data_never_writes_over_what_it_reads(tmp_path: Path) -> None:
    text = tmp_path / "t.txt"
    text.write_text("abba\n", encoding="utf-8")
    vocab = tmp_path / "v.json"
    code, _, err = run_presk("data", "chars", str(text), "-o", str(vocab))
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for argv in (
        ("chars", str(text), "-o", str(text)),
        ("encode", str(text), "--vocab", str(vocab), "-o", str(vocab)),
        ("encode", str(text), "--vocab", str(vocab), "-o", str(text)),
        ("pack", str(text), "--type", "ℝ[4]", "-o", str(text)),
    ):
        code, out, err = run_presk("data", *argv)
        assert (code, out) == (2, "") and "the file the command reads" in err, argv
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_prompt_is_encoded_by_longest_match_as_the_generators_do(tmp_path: Path) -> None:
    from presk.diagnostics import CommandError
    from presk.serve.vocab import Vocabulary, load

    vocab = Vocabulary(("th", "t", "h", "b", "ab"))
    assert vocab.encode("thb") == [0, 3]  # `th` first, as run.c and serve.py take it
    assert vocab.encode("tab") == [1, 4]
    path = tmp_path / "v.json"
    path.write_text(json.dumps(["a", "", "b"]), encoding="utf-8")
    with pytest.raises(CommandError, match="token 1 is empty"):
        load(str(path))


@pytest.mark.parametrize("context", [0, 2000])
def test_weights_that_fix_a_context_the_file_does_not_allow_are_refused(
    weights: str, tmp_path: Path, context: int  # noqa: F811
) -> None:
    import numpy as np

    import presk.data as data
    from presk.data.format import read

    held = read(weights)
    tree: dict = {}
    for leaf, array in zip(held.leaves, held.arrays, strict=True):
        value = array[0]
        if leaf.path == "pos.table":  # the position table fixes T
            value = np.zeros((context, value.shape[1]))
        node = tree
        *parents, last = leaf.path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    changed = tmp_path / "w.psk.d"
    data.write(str(changed), [tree], type=held.type)
    for backend in ("interp", "native"):
        code, out, err = run_presk(
            "serve", SERVE, *TINY, "--weights", str(changed), "--tokens", "2", "--backend", backend
        )
        assert (code, out) == (1, "") and err.count("\n") == 1, err
        assert ("0 tokens" if context == 0 else "dim T <= 1024") in err
