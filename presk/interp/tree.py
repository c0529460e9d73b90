"""Values of the reference interpreter beyond tensors: parameter trees, and the value union.

`Tree` is a parameter tree (named leaves and subtrees in declaration order); `Value` is
everything a Core operand may hold at run time. They sit below both the interpreter
(reference.py) and the adjoint rules (adjoints.py), so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from presk.interp import rng
from presk.interp.tensor import Tensor


@dataclass(frozen=True)
class Tree:
    """A parameter tree: named leaves (tensors) and subtrees, in declaration order."""

    items: tuple[tuple[str, Value], ...]

    def __getitem__(self, name: str) -> Value:
        for key, value in self.items:
            if key == name:
                return value
        raise KeyError(name)

    def leaves(self, prefix: str = "") -> list[tuple[str, Tensor]]:
        """Every leaf with its dotted path."""
        out: list[tuple[str, Tensor]] = []
        for key, value in self.items:
            if isinstance(value, Tree):
                out.extend(value.leaves(f"{prefix}{key}."))
            elif isinstance(value, Tensor):
                out.append((prefix + key, value))
        return out

    def layer(self, index: int) -> Tree:
        """Layer `index` of a stacked tree: every leaf's first axis fixed."""
        items: list[tuple[str, Value]] = []
        for key, value in self.items:
            if isinstance(value, Tree):
                items.append((key, value.layer(index)))
            elif isinstance(value, Tensor):
                items.append(
                    (key, Tensor(value.kind, value.axes[1:], value.data[index], value.bound))
                )
            else:
                items.append((key, value))
        return Tree(tuple(items))


Value = Tensor | Tree | tuple[Any, ...] | Fraction | rng.Key
