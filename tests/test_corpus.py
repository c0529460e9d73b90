"""Text corpora: `presk data chars|encode|lm-windows`, `presk run --data`, and the ladder.

The data commands run end to end on a small text with non-ASCII characters and on each
kind of bad input (one line, a non-zero exit, no output left behind). The counting bigram
of corpus/01_bigram_count.psk, evaluated with `--data` on the reference and natively, is
compared with the same loss counted by NumPy from the same tokens.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO_ROOT, run_presk

from presk.data.format import read

TEXT = (
    "Ça ira, ça ira — naïve café au lait.\n"
    "L'été, où l'œil voit: «déjà vu».\r\n"
    "Ça ira encore; the end.\n"
)
RUNGS = ["01_bigram_count.psk", "02_bigram_neural.psk", "03_mlp.psk", "05_gpt.psk"]


def _corpus(tmp_path: Path, seq: int) -> tuple[list[str], np.ndarray, Path]:
    """The three steps on TEXT: the vocabulary, the ids and the windows file."""
    (tmp_path / "t.txt").write_bytes(TEXT.encode("utf-8"))
    for args in (
        ("chars", "t.txt", "-o", "v.json"),
        ("encode", "t.txt", "--vocab", "v.json", "-o", "tok.txt"),
    ):
        code, _, err = run_presk("data", *args, cwd=tmp_path)
        assert code == 0, err
    vocab = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))
    ids = np.array((tmp_path / "tok.txt").read_text().split(), dtype=np.int64)
    windows = tmp_path / f"w{seq}.psk.d"
    code, _, err = run_presk(
        "data", "lm-windows", "--vocab", str(len(vocab)), "--seq", str(seq), "tok.txt",
        "-o", windows.name, cwd=tmp_path,
    )
    assert code == 0, err
    return vocab, ids, windows


def test_the_three_steps_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_bytes(TEXT.encode("utf-8"))
    code, out, err = run_presk("data", "chars", "t.txt", "-o", "v.json", cwd=tmp_path)
    assert (code, err) == (0, "")
    vocab = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))
    # Characters, not bytes: `ç`, `—`, `œ` are one entry each; `\r` is kept as it is.
    assert vocab == sorted(set(TEXT)) and "œ" in vocab and "\r" in vocab
    assert out == f"presk data: wrote v.json ({len(vocab)} characters over {len(TEXT)} of text)\n"

    code, out, err = run_presk(
        "data", "encode", "t.txt", "--vocab", "v.json", "-o", "tok.txt", cwd=tmp_path
    )
    assert (code, err) == (0, "")
    ids = [int(w) for w in (tmp_path / "tok.txt").read_text().split()]
    assert ids == [vocab.index(ch) for ch in TEXT]
    assert out == (
        f"presk data: wrote tok.txt ({len(TEXT)} tokens over a vocabulary of {len(vocab)})\n"
    )

    n, seq = len(vocab), 8
    code, out, err = run_presk(
        "data", "lm-windows", "--vocab", str(n), "--seq", str(seq), "tok.txt", "-o", "w.psk.d",
        cwd=tmp_path,
    )
    assert (code, err) == (0, "")
    count = (len(ids) - 1) // seq
    kind = f"(idx[{n}][seq: {seq}], idx[{n}][seq: {seq}])"
    assert out == (
        f"presk data: wrote w.psk.d ({count} windows of type {kind} from {len(ids)} tokens)\n"
    )
    data = read(tmp_path / "w.psk.d")
    assert (data.type, data.count) == (kind, count)
    # Non-overlapping: window k is ids[k·T : k·T + T], its targets one place later.
    expected = np.array(ids[: count * seq]).reshape(count, seq)
    assert np.array_equal(data.arrays[0], expected)
    assert np.array_equal(data.arrays[1], np.array(ids[1 : count * seq + 1]).reshape(count, seq))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt", "tok.txt", "v.json", "w.psk.d"]


BAD: dict[str, tuple[bytes | None, str | None, str | None, tuple[str, ...], str]] = {
    # name: (text file, vocabulary file, tokens file, arguments, what the line says)
    "missing text": (None, None, None, ("chars", "t.txt", "-o", "out"), "cannot read"),
    "not utf-8": (b"ab\xffcd", None, None, ("chars", "t.txt", "-o", "out"), "not UTF-8"),
    "empty text": (b"", None, None, ("chars", "t.txt", "-o", "out"), "empty"),
    "not in vocab": (
        "abc\nabé".encode(), '["a", "b", "c", "\\n"]', None,
        ("encode", "t.txt", "--vocab", "v.json", "-o", "out"), "t.txt:2:3: the character",
    ),
    "vocab not json": (
        b"ab", "[a, b]", None, ("encode", "t.txt", "--vocab", "v.json", "-o", "out"), "not JSON",
    ),
    "vocab not array": (
        b"ab", '{"a": 0}', None, ("encode", "t.txt", "--vocab", "v.json", "-o", "out"),
        "JSON array",
    ),
    "vocab repeats": (
        b"ab", '["a", "b", "a"]', None, ("encode", "t.txt", "--vocab", "v.json", "-o", "out"),
        "both item 0 and item 2",
    ),
    "vocab item too long": (
        b"ab", '["a", "bb"]', None, ("encode", "t.txt", "--vocab", "v.json", "-o", "out"),
        "not one character",
    ),
    "id too large": (
        None, None, "0 1 2\n3 4 5\n",
        ("lm-windows", "--vocab", "5", "--seq", "2", "k", "-o", "out"),
        "token 5 is 5, not below the vocabulary's 5",
    ),
    "id not a number": (
        None, None, "0 1\n2 x3 4\n", ("lm-windows", "--vocab", "5", "--seq", "2", "k", "-o", "out"),
        "k:2: `x3` is not a token id",
    ),
    "id negative": (
        None, None, "0 -1 2\n", ("lm-windows", "--vocab", "5", "--seq", "1", "k", "-o", "out"),
        "`-1` is not a token id",
    ),
    "too few tokens": (
        None, None, "0 1 2\n", ("lm-windows", "--vocab", "5", "--seq", "3", "k", "-o", "out"),
        "3 tokens, but a window of 3 needs 4",
    ),
    "seq zero": (
        None, None, "0 1 2\n", ("lm-windows", "--vocab", "5", "--seq", "0", "k", "-o", "out"),
        "--seq 0",
    ),
    "vocab not a number": (
        None, None, "0 1 2\n", ("lm-windows", "--vocab", "five", "--seq", "1", "k", "-o", "out"),
        "--vocab five",
    ),
    "no seq": (
        None, None, "0 1 2\n", ("lm-windows", "--vocab", "5", "k", "-o", "out"), "--seq",
    ),
    "unwritable output": (
        b"ab", None, None, ("chars", "t.txt", "-o", "no/such/dir/out"), "no directory",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path: Path, name: str) -> None:
    text, vocab, tokens, args, says = BAD[name]
    if text is not None:
        (tmp_path / "t.txt").write_bytes(text)
    if vocab is not None:
        (tmp_path / "v.json").write_text(vocab, encoding="utf-8")
    if tokens is not None:
        (tmp_path / "k").write_text(tokens)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run_presk("data", *args, cwd=tmp_path)
    assert code != 0 and out == ""
    assert err.startswith("presk data") and err.count("\n") == 1 and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no output, no temporary


def test_a_failed_step_keeps_the_previous_output(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("xyz", encoding="utf-8")
    (tmp_path / "v.json").write_text('["x", "y"]', encoding="utf-8")
    (tmp_path / "tok.txt").write_text("old\n")
    code, _, err = run_presk("data", "encode", "t.txt", "--vocab", "v.json", "-o", "tok.txt",
                             cwd=tmp_path)
    assert code == 1 and "t.txt:1:3" in err
    assert (tmp_path / "tok.txt").read_text() == "old\n"


# -- the counting bigram and `run --data` ---------------------------------------------------


def _bigram_loss(ids: np.ndarray, vocab: int, seq: int, windows: int | None = None) -> float:
    """The counting bigram's loss over the pairs of the first `windows` windows, by NumPy."""
    count = (ids.size - 1) // seq if windows is None else windows
    x, y = ids[: count * seq], ids[1 : count * seq + 1]
    counts = np.zeros((vocab, vocab))
    np.add.at(counts, (x, y), 1.0)
    return float(-np.mean(np.log(counts[x, y] / counts.sum(axis=1)[x])))


def _run_loss(windows: Path, vocab: int, *extra: str) -> tuple[int, str, str]:
    return run_presk(
        "run", str(REPO_ROOT / "corpus" / "01_bigram_count.psk"), "--entry", "loss",
        "--const", f"V={vocab}", "--data", str(windows), "--digits", "16", *extra,
    )


@pytest.mark.parametrize("backend", ["interp", "native"])
@pytest.mark.parametrize("seq", [1, 5])
def test_counting_bigram_equals_numpy(tmp_path: Path, backend: str, seq: int) -> None:
    vocab, ids, windows = _corpus(tmp_path, seq)
    code, out, err = _run_loss(windows, len(vocab), "--backend", backend)
    assert code == 0, err
    assert out.startswith("ℝ[] = ")
    ours, theirs = float(out.split("=")[1]), _bigram_loss(ids, len(vocab), seq)
    assert math.isclose(ours, theirs, rel_tol=1e-10), (ours, theirs)


def test_data_binds_the_batch_and_a_dim_takes_the_first_windows(tmp_path: Path) -> None:
    vocab, ids, windows = _corpus(tmp_path, 4)
    code, out, err = _run_loss(windows, len(vocab), "--dim", "N=3")
    assert code == 0, err
    assert math.isclose(float(out.split("=")[1]), _bigram_loss(ids, len(vocab), 4, 3),
                        rel_tol=1e-10)
    # Too many windows asked for, a sequence length the file does not have, another vocabulary.
    for extra, says in [
        (("--dim", "N=1000"), "the file holds"),
        (("--dim", "T=3"), "the argument is"),
    ]:
        code, _, err = _run_loss(windows, len(vocab), *extra)
        assert code == 2 and err.count("\n") == 1 and "--data" in err and says in err, err
    code, _, err = _run_loss(windows, len(vocab) + 1)
    assert code == 2 and err.count("\n") == 1 and f"idx[{len(vocab)}]" in err, err


def test_data_without_a_batch_axis_is_one_sample(tmp_path: Path) -> None:
    (tmp_path / "f.psk").write_text("fn total(x : ℝ[model: 3]) -> ℝ[] =\n  sum(x)\n")
    (tmp_path / "x.txt").write_text("1 2 3\n10 20 30\n")
    code, _, err = run_presk("data", "pack", "--type", "ℝ[model: 3]", "x.txt", "-o", "x.psk.d",
                             cwd=tmp_path)
    assert code == 0, err
    code, out, err = run_presk("run", "f.psk", "--entry", "total", "--data", "x.psk.d",
                               cwd=tmp_path)
    assert (code, out) == (0, "ℝ[] = 6\n"), err
    code, _, err = run_presk("run", "f.psk", "--entry", "total", "--data", "nope.psk.d",
                             cwd=tmp_path)
    assert code == 2 and err.count("\n") == 1 and "cannot read" in err


@pytest.mark.parametrize("rung", RUNGS)
def test_every_rung_checks(rung: str) -> None:
    code, out, err = run_presk("check", f"corpus/{rung}", "--summary")
    assert code == 0, err
    assert "loss : ℝ[]" in out
