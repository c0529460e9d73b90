"""Number literals to exact rationals, within the range a program can mean.

A literal is `digits [. digits] [(e|E) [+-] digits]` (the lexer's INT and FLOAT
tokens) and denotes an exact rational: `1e-6` is exactly 1/10⁶. Converting the text
naively is unbounded work (`1e1000000000` is a billion-digit integer), so the value's
size is read off the text first and a literal beyond the limits below is refused
(E0016) before any arithmetic. The limits are far past any tensor program's constants
(binary64 spans 10^±308) and keep every literal a few thousand bits at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

__all__ = ["MAX_LITERAL_DIGITS", "MAX_LITERAL_EXPONENT", "LiteralRange", "parse_literal"]

# Significant digits of a literal (leading zeros not counted).
MAX_LITERAL_DIGITS = 1000
# The decimal exponent of a nonzero literal's leading digit lies in [-this, this].
MAX_LITERAL_EXPONENT = 1000


@dataclass
class LiteralRange(Exception):
    """A literal outside the limits; `message` and `label` are for E0016."""

    message: str
    label: str


def parse_literal(text: str) -> Fraction:
    """The exact value of a literal's text, or LiteralRange when it is out of range."""
    mantissa, _, exponent_text = text.lower().partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    if len(digits) > MAX_LITERAL_DIGITS:
        raise LiteralRange(
            "number literal too long",
            f"{len(digits)} significant digits; at most {MAX_LITERAL_DIGITS} are allowed",
        )
    sign = -1 if exponent_text.startswith("-") else 1
    exponent_digits = exponent_text.lstrip("+-").lstrip("0") or "0"
    # The leading digit's decimal exponent: the digits stand for digits * 10**scale.
    too_far = len(exponent_digits) > len(str(MAX_LITERAL_EXPONENT)) + 1
    scale = 0 if too_far else sign * int(exponent_digits) - len(frac)
    lead = scale + len(digits) - 1
    if too_far or (digits and abs(lead) > MAX_LITERAL_EXPONENT):
        raise LiteralRange(
            "number literal out of range",
            f"its magnitude must lie between 1e-{MAX_LITERAL_EXPONENT} "
            f"and 1e{MAX_LITERAL_EXPONENT}",
        )
    if not digits:
        return Fraction(0)
    value = int(digits)
    return Fraction(value * 10**scale) if scale >= 0 else Fraction(value, 10**-scale)
