"""Writes tokens.psk.d and vocab.json beside this file: next-token windows for the tiny
MiniGPT's training, and the alphabet that decodes its ids (`presk serve`).

The text is text.txt beside this file (a copy of the repository's README, frozen so that
the data stays what the tests were written against), lowercased, each character mapped into a fixed
alphabet of 64 (anything else becomes a space); it is cut into 512 non-overlapping
windows of 9 tokens, each giving 8 inputs and the 8 tokens that follow them.
Run from the repository's root: `.venv/bin/python tests/examples/minigpt/data/tokens.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import presk.data

ALPHABET = " abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"()[]{}-+*/=<>_`#|@\n"
T = 8
WINDOWS = 512


def main() -> None:
    assert len(ALPHABET) == 64, len(ALPHABET)
    here = Path(__file__).resolve().parent
    text = (here / "text.txt").read_text(encoding="utf-8").lower()
    index = {c: i for i, c in enumerate(ALPHABET)}
    ids = np.array([index.get(c, 0) for c in text], dtype=np.int64)
    count = min(WINDOWS, len(ids) // (T + 1))
    windows = ids[: count * (T + 1)].reshape(count, T + 1)
    samples = [(w[:-1], w[1:]) for w in windows]
    presk.data.write(here / "tokens.psk.d", samples, f"(idx[64][seq: {T}], idx[64][seq: {T}])")
    (here / "vocab.json").write_text(json.dumps(list(ALPHABET)) + "\n", encoding="utf-8")
    print(f"wrote {here / 'tokens.psk.d'}: {count} windows from {len(ids)} characters")


if __name__ == "__main__":
    main()
