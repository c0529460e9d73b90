"""Layouts: how one loop nest is laid out, a point of its layout space.

Every point computes the same bits as point zero (the row-wise form, one
worker, no lanes): each output element still adds its terms one at a time in
increasing k, whatever the tile, the order of the block loops, the lanes,
the pack or the split. Only which memory the loops touch, and when, differs.
So a layout lives in a plan beside the realization and owes no measured gap.

A field left None is the default lowering's own choice, so `Layout()` is
the default point (the kernel the compiler prints without a plan).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import assert_never

KBLOCKS = (32, 128)  # the blocks of K a plan may state (none: one block)
ROW_TILES = (1, 2, 4)
COLUMN_TILES = (4, 8, 16)
# AVX-512 holds 16 floats: a taller or a two-register tile fits its 32 registers.
WIDE_TILES = ((4, 32), (6, 32), (8, 16))
VECTOR_BYTES = 64
ORDERS_2 = ("IJ", "JI")
ORDERS_3 = tuple("".join(p) for p in itertools.permutations("IJK"))


class NestKind(Enum):
    """What a nest's layout may choose."""

    CONTRACTION = "contraction"  # form, tile, k-block, order, lanes, pack, epilogue, split
    SOFTMAX = "softmax"  # passes, split
    ELEMENTWISE = "elementwise"  # lanes, split
    OTHER = "other"  # split


@dataclass(frozen=True)
class Split:
    """The loop at `depth` of a nest's kernel shared among `workers` workers."""

    depth: int
    workers: int

    def text(self) -> str:
        return f"({self.depth}, {self.workers})"


NO_SPLIT = Split(-1, 1)  # "split": "none": the nest stays on one worker


@dataclass(frozen=True)
class Layout:
    """One point of a nest's space; None: the default's choice."""

    form: str | None = None  # "rowwise" | "tiled"
    tile: tuple[int, int] | None = None  # [m_i, n_j] accumulators
    kblock: int | None = None  # 0: no block loop over K
    order: str | None = None  # the block loops, outermost first: IJ, JI, or a permutation of IJK
    lanes: int | None = None  # 1, or vector lanes across the tile's columns
    pack: bool | None = None  # operand 1 copied to a [K, J] panel by a kernel of its own
    split: Split | None = None
    passes: int | None = None  # a softmax's passes over its row: 3, or 2
    epilogue: bool | None = None  # the one add reading a product done in its kernel (a bias)

    @property
    def is_default(self) -> bool:
        return self == Layout()

    def to_json(self) -> dict[str, object]:
        """The plan file's object for this point (only the fields it states)."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, Split):
                out[f.name] = (
                    "none"
                    if value == NO_SPLIT
                    else {"depth": value.depth, "workers": value.workers}
                )
            elif isinstance(value, tuple):
                out[f.name] = list(value)
            else:
                out[f.name] = value
        return out

    def text(self) -> str:
        """One line for a reader, as `presk plan` and `autotune` print a point."""
        if self.is_default:
            return "default"
        parts: list[str] = []
        if self.form is not None:
            parts.append(self.form)
        if self.tile is not None:
            parts.append(f"tile [{self.tile[0]}, {self.tile[1]}]")
        if self.kblock is not None:
            parts.append(f"kblock {self.kblock or 'none'}")
        if self.order is not None:
            parts.append(f"order {self.order}")
        if self.lanes is not None:
            parts.append(f"lanes {self.lanes}")
        if self.split is not None:
            parts.append("split none" if self.split == NO_SPLIT else f"split {self.split.text()}")
        if self.passes is not None:
            parts.append(f"passes {self.passes}")
        if self.pack is not None:
            parts.append("pack" if self.pack else "no pack")
        if self.epilogue is not None:
            parts.append("epilogue" if self.epilogue else "no epilogue")
        return ", ".join(parts)


@dataclass(frozen=True)
class Nest:
    """What the space of one nest depends on: its kind, type and contraction shape."""

    kind: NestKind
    dtype: str  # the storage type of its output
    m: int = 0
    n: int = 0
    k: int = 0
    contiguous: bool = True  # operand 1 is consecutive along J (lanes need no pack)


def point_zero(nest: Nest) -> Layout:
    """The point every other is checked against: the row-wise form, one worker, no lanes."""
    match nest.kind:
        case NestKind.CONTRACTION:
            return Layout(form="rowwise", split=NO_SPLIT)
        case NestKind.ELEMENTWISE:
            return Layout(lanes=1, split=NO_SPLIT)
        case NestKind.SOFTMAX | NestKind.OTHER:
            return Layout(split=NO_SPLIT)
        case _:
            assert_never(nest.kind)


def register_lanes(dtype: str) -> int:
    """Lanes of one 64-byte register in the type a kernel of `dtype` computes in."""
    return VECTOR_BYTES // (8 if dtype == "f64" else 4)


def lane_choices(dtype: str, columns: int) -> tuple[int, ...]:
    """One lane, or the register's width across the tile's columns (capped by them)."""
    wide = min(columns, register_lanes(dtype))
    return (1,) if wide <= 1 else (1, wide)


def tiles() -> tuple[tuple[int, int], ...]:
    return ((1, 1), *itertools.product(ROW_TILES, COLUMN_TILES), *WIDE_TILES)


def contraction_points(nest: Nest, full: bool = True) -> list[Layout]:
    """A contraction's tiled points, tile × k-block × order × lanes × pack (splits apart)."""
    out: list[Layout] = []
    kblocks: tuple[int, ...] = (0, *(b for b in KBLOCKS if b < nest.k))
    for tile in tiles():
        if not full and tile not in ((1, 1), (1, 8), (2, 8), (4, 16)):
            continue
        for kblock in kblocks:
            orders = ORDERS_3 if kblock else ORDERS_2
            if not full:
                orders = orders[:2]
            for order in orders:
                if kblock and nest.dtype == "bf16" and not order.endswith("K"):
                    continue  # bf16 partial sums stored and reloaded: refused
                for lanes in lane_choices(nest.dtype, tile[1]):
                    packs = (False,) if nest.contiguous else (False, True)
                    for pack in packs:
                        if lanes > 1 and not nest.contiguous and not pack:
                            continue  # lanes read operand 1 consecutively: a pack is needed
                        out.append(Layout("tiled", tile, kblock, order, lanes, pack))
    return out


def space(nest: Nest, splits: tuple[Split, ...] = (), full: bool = True) -> list[Layout]:
    """Every point of a nest's space, point zero first, then the default.

    `splits` are the splits to try on each point (their legality at a depth is
    the kernel's, checked once it is lowered: see sched/split.py).
    """
    base: list[Layout] = [Layout()]
    match nest.kind:
        case NestKind.CONTRACTION:
            base += contraction_points(nest, full)
        case NestKind.SOFTMAX:
            if nest.dtype in ("f64", "f32"):
                base.append(Layout(passes=2))
        case NestKind.ELEMENTWISE:
            base.append(Layout(lanes=1))
        case NestKind.OTHER:
            pass
        case _:
            assert_never(nest.kind)
    points = [point_zero(nest), *base]
    for point in base:
        points += [replace(point, split=s) for s in splits]
    return points


__all__ = [
    "NO_SPLIT",
    "WIDE_TILES",
    "Layout",
    "Nest",
    "NestKind",
    "Split",
    "contraction_points",
    "lane_choices",
    "point_zero",
    "register_lanes",
    "space",
]
