"""Broadcasting: how two operands' axes align (`align`) and how data is expanded to them (`expand`).

The rule is stated with the invariants in presk/interp/prims.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from presk.interp.tensor import Arr, Axis, PrimError, format_axes


@dataclass(frozen=True, slots=True)
class Alignment:
    """The result of broadcasting two operands.

    `axes` are the result's axes; `a_pos[i]` (`b_pos[i]`) is the result position of the
    first (second) operand's axis i.
    """

    axes: tuple[Axis, ...]
    a_pos: tuple[int, ...]
    b_pos: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        """The result's sizes."""
        return tuple(a.size for a in self.axes)


def _align_small(
    small: tuple[Axis, ...], large: tuple[Axis, ...]
) -> tuple[tuple[Axis, ...], tuple[int, ...]] | None:
    """Align `small` (rank <= large's) into `large`; None if the rule refuses."""
    off = len(large) - len(small)
    merged = list(large)
    for i, s in enumerate(small):
        big = large[off + i]
        if s.size != big.size or (
            s.name is not None and big.name is not None and s.name != big.name
        ):
            break
        merged[off + i] = Axis(big.name if big.name is not None else s.name, big.size)
    else:
        return tuple(merged), tuple(range(off, len(large)))
    if off == 0:
        # Equal rank aligns by position only: a permutation by names is not broadcasting.
        return None
    names = [s.name for s in small]
    if any(n is None for n in names) or len(set(names)) != len(names):
        return None
    pos: list[int] = []
    for s in small:
        hits = [i for i, big in enumerate(large) if big.name == s.name]
        if len(hits) != 1 or large[hits[0]].size != s.size:
            return None
        pos.append(hits[0])
    return large, tuple(pos)


def align(a_axes: Sequence[Axis], b_axes: Sequence[Axis]) -> Alignment:
    """Broadcast two operands' axes by the language's rule (see the module docstring)."""
    a_t, b_t = tuple(a_axes), tuple(b_axes)
    swapped = len(a_t) > len(b_t)
    small, large = (b_t, a_t) if swapped else (a_t, b_t)
    found = _align_small(small, large)
    if found is None:
        raise PrimError(f"cannot broadcast {format_axes(a_t)} with {format_axes(b_t)}")
    axes, small_pos = found
    large_pos = tuple(range(len(large)))
    if swapped:
        return Alignment(axes, large_pos, small_pos)
    return Alignment(axes, small_pos, large_pos)


def expand(data: Arr, pos: Sequence[int], shape: Sequence[int]) -> Arr:
    """A read-only view of `data` laid out in a result of `shape`.

    Axis i of `data` lands at result position `pos[i]`; the other result positions repeat
    it. (A view: nothing is copied, and elements are shared, which is safe because they
    are immutable.)
    """
    order = sorted(range(len(pos)), key=lambda i: pos[i])
    arr = np.transpose(data, order)
    target = [1] * len(shape)
    for i in order:
        target[pos[i]] = data.shape[i]
    return np.broadcast_to(arr.reshape(target), tuple(shape))
