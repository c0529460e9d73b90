"""A vocabulary: a JSON array of strings, token id i decoding to element i.

`presk data chars` writes one (characters of a text); encoding a prompt maps each
character to its id, and a character the vocabulary lacks is a one-line error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from presk.diagnostics import CommandError, printable


@dataclass(frozen=True)
class Vocabulary:
    tokens: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        """The prompt's tokens: at each place the longest token that starts there, the
        rule of the exported generators (C and PyTorch), so that every one of them
        continues the same ids."""
        index = {t: i for i, t in enumerate(self.tokens)}
        longest = max(len(t) for t in self.tokens)
        ids, position = [], 0
        while position < len(text):
            length = next(
                (n for n in range(longest, 0, -1) if text[position : position + n] in index), 0
            )
            if length == 0:
                raise CommandError(
                    f"--prompt: the vocabulary has no {printable(repr(text[position]))} "
                    f"(character {position + 1} of the prompt)"
                )
            ids.append(index[text[position : position + length]])
            position += length
        return ids

    def decode(self, token: int) -> str:
        return self.tokens[token]


def load(path: str) -> Vocabulary:
    """The vocabulary at `path` (one-line errors)."""
    where = printable(path)
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        raise CommandError(f"{where}: no such vocabulary") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CommandError(f"{where}: not a vocabulary ({printable(str(error))})") from None
    except RecursionError:
        raise CommandError(f"{where}: not a vocabulary (nested too deeply)") from None
    except ValueError:  # a number past Python's limit of digits
        raise CommandError(f"{where}: not a vocabulary (a number of too many digits)") from None
    if not isinstance(document, list) or not all(isinstance(t, str) for t in document):
        raise CommandError(f"{where}: a vocabulary is a JSON array of strings")
    if not document:
        raise CommandError(f"{where}: the vocabulary is empty")
    for number, token in enumerate(document):
        # JSON may spell a lone surrogate (`"\ud800"`), which no UTF-8 output can print
        # (serve's standard output, the C generator's table, the PyTorch export's file).
        try:
            token.encode("utf-8")
        except UnicodeEncodeError:
            raise CommandError(
                f"{where}: token {number} ({printable(ascii(token))}) is not Unicode text "
                "(a lone surrogate)"
            ) from None
        if "\0" in token:
            raise CommandError(
                f"{where}: token {number} ({printable(ascii(token))}) holds a NUL character, "
                "which the C generator cannot print"
            )
    if "" in document:
        raise CommandError(
            f"{where}: token {document.index('')} is empty; a token prints something"
        )
    seen: set[str] = set()
    for token in document:
        if token in seen:
            raise CommandError(
                f"{where}: the vocabulary lists a token twice ({printable(ascii(token))})"
            )
        seen.add(token)
    return Vocabulary(tuple(document))
