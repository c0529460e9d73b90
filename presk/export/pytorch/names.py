"""Python spellings of presk names: identifiers, file stems, literals and comments.

presk identifiers may hold characters Python refuses (`σ²`), so every name that lands in
generated code goes through `ident`, which keeps what Python accepts after NFKC (as
Python's own tokenizer normalises) and replaces the rest by `_`.
"""

from __future__ import annotations

import keyword
import unicodedata
from fractions import Fraction

from presk.export.escape import one_line

# Names the generated files use for themselves; a presk name equal to one gets a `_`.
RESERVED = frozenset({"torch", "nn", "F", "math", "self", "super", "range", "float", "int"})


def ident(name: str) -> str:
    """`name` as a Python identifier (NFKC, invalid characters as `_`, no keyword)."""
    text = unicodedata.normalize("NFKC", name)
    out = "".join(ch if (ch + "a").isidentifier() or ch.isdigit() else "_" for ch in text)
    if not out or not out.isidentifier():
        out = "_" + out
    if not out.isidentifier():
        out = "_" + "".join(ch if ch.isalnum() else "_" for ch in out)
    if keyword.iskeyword(out) or out in RESERVED:
        out += "_"
    return out


def module_name(basename: str) -> str:
    """A presk file's Python module: its stem made an identifier (`01_linear` → `_01_linear`)."""
    stem = basename.rsplit(".", 1)[0]
    return ident(stem)


def number(value: Fraction) -> str:
    """An exact literal as Python text: whole numbers as ints, the rest as the nearest float."""
    if value.denominator == 1:
        return str(value.numerator)
    return repr(float(value))


def comment(text: str) -> str:
    """Text for after `# `: one line."""
    return one_line(text)


def docstring(text: str) -> str:
    """A one-line docstring literal holding `text` (quotes and backslashes escaped)."""
    inner = one_line(text).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if inner.endswith('"'):
        inner = inner[:-1] + '\\"'
    return f'"""{inner}"""'


__all__ = ["comment", "docstring", "ident", "module_name", "number"]
