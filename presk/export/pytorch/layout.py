"""Named axes made positional: where an axis sits in a torch tensor, and how an operand of
an elementwise primitive is laid out so that torch's right-aligned broadcasting gives the
alignment presk's rule chose (presk/types/shapes.py `broadcast`).

A type with an open prefix `...` has an unknown number of leading axes, so positions
inside it are counted from the end (negative), which torch accepts everywhere.
"""

from __future__ import annotations

from presk.elab.ty import Tensor


class Unsupported(Exception):
    """A construct the PyTorch export cannot express yet (one line for the user)."""


def axis_position(ty: Tensor, name: str) -> int:
    """The torch `dim` of the axis called `name` in a tensor of type `ty`."""
    for i, axis in enumerate(ty.axes):
        if axis.name == name:
            return i - len(ty.axes) if ty.open else i
    raise Unsupported(f"no axis `{name}` in {ty}")


def aligned(text: str, operand: Tensor, result: Tensor) -> str:
    """`text` (an atom of type `operand`) laid out to broadcast against `result`."""
    a, r = operand.axes, result.axes
    offset = len(r) - len(a)
    by_position = offset >= 0 and all(
        x.size == y.size and (x.name is None or y.name is None or x.name == y.name)
        for x, y in zip(a, r[offset:], strict=True)
    )
    if by_position:
        if not operand.open or offset == 0:
            return text  # torch aligns from the right, as presk does here
        # The operand's prefix is the result's: new axes go between it and its own axes.
        return text + "[" + ", ".join(["...", *(["None"] * offset), *([":"] * len(a))]) + "]"
    names = [x.name for x in a]
    if operand.open or None in names:
        raise Unsupported(f"the alignment of {operand} with {result}")
    where = {y.name: i for i, y in enumerate(r) if y.name is not None}
    positions = [where[n] for n in names if n is not None]
    order = sorted(range(len(a)), key=lambda i: positions[i])
    if order != list(range(len(a))):
        text = f"{text}.permute({', '.join(str(i) for i in order)})"
    placed = sorted(positions)
    index = [":" if q in placed else "None" for q in range(placed[0], len(r))]
    if all(item == ":" for item in index):
        return text
    return text + "[" + ", ".join(index) + "]"


__all__ = ["Unsupported", "aligned", "axis_position"]
