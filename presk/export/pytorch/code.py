"""Python expression text with its precedence, and what a Core value is in the export.

A Core value becomes a `Code` (an expression), a `ModRef` (a parameter tree held by an
`nn.Module`, reached as attributes: `self.proj`) or a `Tree` (a parameter tree passed as a
dict of tensors beside the module it belongs to, as `torch.func` wants it).
"""

from __future__ import annotations

from dataclasses import dataclass

ATOM = 0  # names, calls, subscripts, attributes
POWER = 1
UNARY = 2
PRODUCT = 3
SUM = 4
COMPARE = 5
LAMBDA = 9


@dataclass(frozen=True, slots=True)
class Code:
    """An expression; `scalar` when it is a Python number rather than a tensor."""

    text: str
    prec: int = ATOM
    scalar: bool = False

    def atom(self) -> str:
        return self.text if self.prec == ATOM else f"({self.text})"

    def at(self, prec: int) -> str:
        """The text as an operand of an operator of precedence `prec` (left side)."""
        return self.text if self.prec <= prec else f"({self.text})"


@dataclass(frozen=True, slots=True)
class ModRef:
    """A parameter tree held by a module: `self.proj`, `self.blocks` (a stack)."""

    obj: str
    stacked: bool = False


@dataclass(frozen=True, slots=True)
class Tree:
    """A parameter tree as a dict `params` of the module `module`; keys under `prefix`."""

    module: str
    params: str
    prefix: str = ""


Bound = Code | ModRef | Tree


def binary(op: str, prec: int, a: Code, b: Code) -> Code:
    """`a op b`, parenthesised as Python needs (left-associative except `**`)."""
    if prec == POWER:
        left, right = (a.atom(), b.at(UNARY))
    else:
        left, right = (a.at(prec), b.text if b.prec < prec else f"({b.text})")
    return Code(f"{left} {op} {right}", prec, a.scalar and b.scalar)


__all__ = ["ATOM", "COMPARE", "LAMBDA", "POWER", "PRODUCT", "SUM", "UNARY", "Bound", "Code"]
__all__ += ["ModRef", "Tree", "binary"]
