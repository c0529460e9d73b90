"""Text corpora as training data: a character vocabulary, token ids, next-token windows.

Three steps, each the logic of one `presk data` action (presk/commands/data.py wires them):

* `vocabulary(text)`: the sorted distinct characters of a text (code points, not bytes, so
  an accented letter is one token), stored as a JSON array by `write_vocabulary`;
* `encode(text, vocab)`: one id per character, its position in the vocabulary, stored as
  whitespace-separated decimal text by `write_tokens`;
* `windows(ids, seq)`: non-overlapping language-model windows of `seq` inputs and the
  `seq` tokens that follow each of them, stored as a `.psk.d` file of type
  `(idx[N][seq: T], idx[N][seq: T])` by `write_windows`. See Note [Windows].

Every reader raises `TextError`, one line that names the file, for anything wrong with its
input; every writer is atomic (a temporary beside the target, fsynced, renamed over it), so
a failure leaves no output behind and never a half-written one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from typing import Any

import numpy as np
import numpy.typing as npt

from presk.data.format import DataError, DataFile, leaf_layout, parse_sample_type
from presk.data.format import write as write_data
from presk.diagnostics import printable

TOKENS_PER_LINE = 32
"""`write_tokens` puts this many ids on a line, so that the file stays readable."""

# ASCII digits and whitespace only: `int` would also take other scripts' digits, `+` and `_`.
_TOKENS = re.compile(r"[0-9\s]*\Z")
_BAD_TOKEN = re.compile(r"\S*[^0-9\s]\S*")


class TextError(Exception):
    """A problem with a text, vocabulary or tokens file: one line naming the file."""


# -- reading --------------------------------------------------------------------------------


def read_text(path: str) -> str:
    """A file's whole text as UTF-8, line ends kept as they are (`\\r\\n` is two characters)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as error:
        raise TextError(f"{printable(path)}: cannot read: {error.strerror or error}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TextError(f"{printable(path)}: not UTF-8 text (byte {error.start})") from None


def read_vocabulary(path: str) -> list[str]:
    """A vocabulary file: a JSON array of distinct one-character strings (id = position)."""
    where = printable(path)
    try:
        vocab = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise TextError(f"{where}: not JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(vocab, list) or not vocab:
        raise TextError(f"{where}: expected a non-empty JSON array of characters")
    seen: dict[str, int] = {}
    for i, item in enumerate(vocab):
        if not isinstance(item, str) or len(item) != 1:
            raise TextError(f"{where}: item {i} is {_shown(item)}, not one character")
        if item in seen:
            raise TextError(f"{where}: {_shown(item)} is both item {seen[item]} and item {i}")
        seen[item] = i
    return vocab


def read_tokens(path: str, bound: int) -> npt.NDArray[np.int64]:
    """The ids of a tokens file, each an integer in [0, bound)."""
    text = read_text(path)
    where = printable(path)
    if not _TOKENS.match(text):
        bad = _BAD_TOKEN.search(text)
        assert bad is not None  # some character is neither a digit nor whitespace
        line = text.count("\n", 0, bad.start()) + 1
        raise TextError(f"{where}:{line}: `{printable(bad.group())}` is not a token id")
    ids = np.array(text.split(), dtype=np.int64) if text.strip() else np.zeros(0, np.int64)
    over = np.flatnonzero(ids >= bound)
    if over.size:
        k = int(over[0])
        raise TextError(f"{where}: token {k} is {int(ids[k])}, not below the vocabulary's {bound}")
    return ids


def _shown(item: Any) -> str:
    """A JSON value or a character for a message: printable, at most 20 characters."""
    text = json.dumps(item, ensure_ascii=True)
    return printable(text if len(text) <= 20 else text[:17] + "...")


# -- the three steps ------------------------------------------------------------------------


def vocabulary(text: str) -> list[str]:
    """The distinct characters of `text`, sorted by code point."""
    return sorted(set(text))


def encode(text: str, vocab: list[str], path: str) -> npt.NDArray[np.int64]:
    """One id per character of `text` (read from `path`, named in the error for a character
    the vocabulary lacks, with its line and column)."""
    index = {ch: i for i, ch in enumerate(vocab)}
    try:
        return np.fromiter((index[ch] for ch in text), dtype=np.int64, count=len(text))
    except KeyError as error:
        missing = error.args[0]
        at = text.index(missing)
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        name = f"U+{ord(missing):04X}"
        raise TextError(
            f"{printable(path)}:{line}:{column}: the character {_shown(missing)} ({name}) "
            "is not in the vocabulary"
        ) from None


def windows(
    ids: npt.NDArray[np.int64], seq: int, path: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The inputs and targets of every whole window of `seq` tokens, each `(count, seq)`."""
    if ids.size < seq + 1:
        raise TextError(
            f"{printable(path)}: {ids.size} tokens, but a window of {seq} needs {seq + 1} "
            "(its inputs and the token after them)"
        )
    count = (ids.size - 1) // seq
    inputs = ids[: count * seq].reshape(count, seq)
    targets = ids[1 : count * seq + 1].reshape(count, seq)
    return inputs, targets


def window_type(bound: int, seq: int) -> str:
    """The sample type of a windows file, as presk prints it."""
    return str(parse_sample_type(f"(idx[{bound}][seq: {seq}], idx[{bound}][seq: {seq}])"))


# -- writing --------------------------------------------------------------------------------


def write_vocabulary(path: str, vocab: list[str]) -> None:
    """The vocabulary as a JSON array on one line (non-ASCII characters kept as they are)."""
    write_text(path, json.dumps(vocab, ensure_ascii=False) + "\n")


def write_tokens(path: str, ids: npt.NDArray[np.int64]) -> None:
    """The ids as decimal text, TOKENS_PER_LINE to a line."""
    words = ids.astype(str)
    lines = [
        " ".join(words[i : i + TOKENS_PER_LINE]) for i in range(0, words.size, TOKENS_PER_LINE)
    ]
    write_text(path, "".join(line + "\n" for line in lines))


def write_windows(
    path: str, bound: int, inputs: npt.NDArray[np.int64], targets: npt.NDArray[np.int64]
) -> str:
    """The windows as a `.psk.d` file; returns its sample type."""
    count, seq = inputs.shape
    type_text = window_type(bound, seq)
    leaves = leaf_layout(parse_sample_type(type_text))
    try:
        write_data(path, DataFile(type_text, count, leaves, [inputs, targets]))
    except DataError as error:
        raise TextError(error.message) from None
    return type_text


def write_text(path: str, text: str) -> None:
    """`text` as UTF-8 at `path`, atomically: a failure leaves the target as it was."""
    payload = text.encode("utf-8")
    tmp = ""
    try:
        fd, tmp = _create_temp(path)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as error:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise TextError(f"{printable(path)}: cannot write: {error.strerror or error}") from None
    except BaseException:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise


def _create_temp(path: str) -> tuple[int, str]:
    """A new file beside `path`, created exclusively with the ordinary mode (0o666 and the
    umask), so that the renamed result has the permissions a plain write would give."""
    for _ in range(100):
        tmp = f"{path}.tmp-{secrets.token_hex(8)}"
        with contextlib.suppress(FileExistsError):
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
    raise FileExistsError(f"{path}: no free temporary name")


# Note [Windows]
# ~~~~~~~~~~~~~~
# Window k holds the tokens k·T … k·T + T − 1 as inputs and k·T + 1 … k·T + T as targets:
# the windows do not overlap, and their targets are their inputs shifted by one, so the
# last target of one window is the first input of the next. Every pair (t_i, t_{i+1}) with
# i < count·T appears exactly once, as one (input, target) position: a counting model
# summed over every position of every window counts each bigram of the text once, and at
# T = 1 the windows are exactly all the bigrams. count = ⌊(n − 1) / T⌋; the incomplete tail
# (fewer than T + 1 tokens left) is dropped. Overlapping windows (stride 1) would repeat
# every token T times and make the file T times larger for no new pair.
