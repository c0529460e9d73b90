"""Host values: the leaves of trees and tuples, layouts, layer views, static axis names.

Pure functions over the host IR's values (presk/host/ir.py), shared by the
recording (program.py) and what reads its results.
"""

from __future__ import annotations

from fractions import Fraction

from presk.dtypes import Dtype
from presk.elab.presburger import Lin
from presk.elab.ty import Tensor, Type
from presk.host import ir as h
from presk.host.ir import HConst, HKey, HTensor, HTree, HValue


class HostError(Exception):
    """A construct the native backend does not support yet."""


class HostRunError(Exception):
    """A run-time error the recording can see, since it knows every shape (E7001)."""


def leaves(value: HValue) -> list[HTensor | HKey]:
    """Pointer leaves of a value, in order (constants are not passed)."""
    match value:
        case HTensor() | HKey():
            return [value]
        case HTree(items):
            return [leaf for _, v in items for leaf in leaves(v)]
        case tuple():
            return [leaf for v in value for leaf in leaves(v)]
    return []


def leaf_paths(value: HValue, prefix: str) -> list[tuple[str, HTensor | HKey]]:
    """Leaves with dotted paths, for the entry's struct fields."""
    match value:
        case HTensor() | HKey():
            return [(prefix, value)]
        case HTree(items):
            return [p for k, v in items for p in leaf_paths(v, f"{prefix}.{k}" if prefix else k)]
        case tuple():
            return [p for i, v in enumerate(value) for p in leaf_paths(v, f"{prefix}.{i}")]
    return []


def layout(value: HValue) -> tuple[object, ...]:
    """What a function instance is specialised on: leaf types and shapes, constants."""
    match value:
        case HTensor(_, dtype, axes):
            return ("t", dtype, axes)
        case HConst(v):
            return ("c", v)
        case HKey():
            return ("k",)
        case HTree(items):
            return ("tree", tuple((k, layout(v)) for k, v in items))
        case tuple():
            return ("tuple", tuple(layout(v) for v in value))
    raise HostError(f"no layout for {value!r}")


def rebind(value: HValue, names: list[str]) -> HValue:
    """The same structure with its pointer leaves renamed to `names` (consumed in order)."""
    match value:
        case HTensor(_, dtype, axes):
            return HTensor(names.pop(0), dtype, axes)
        case HKey():
            return HKey(names.pop(0))
        case HConst():
            return value
        case HTree(items):
            return HTree(tuple((k, rebind(v, names)) for k, v in items))
        case tuple():
            return tuple(rebind(v, names) for v in value)
    raise HostError(f"cannot rebind {value!r}")


def member(tree: HTree, name: str) -> HValue:
    try:
        return tree.get(name)
    except KeyError:
        raise HostError(f"tree has no member `{name}`") from None


def conform(value: HValue, ty: Type) -> HValue:
    """Rename a tensor's trailing axes to its static type's names, as the reference does.

    Run-time names must be the ones the checker proved, since by-name
    alignment and named reductions read them.
    """
    if not isinstance(value, HTensor) or not isinstance(ty, Tensor):
        return value
    n = len(ty.axes)
    if len(value.axes) < n:
        return value
    head = value.axes[: len(value.axes) - n]
    tail = tuple(
        (static.name, size)
        for static, (_, size) in zip(ty.axes, value.axes[len(value.axes) - n :], strict=True)
    )
    return HTensor(value.ptr, value.dtype, head + tail)


def layer_of(value: HValue, index: h.Index) -> HValue:
    """Layer `index` of a stacked value: each leaf's first axis fixed (a view)."""
    match value:
        case HTensor(ptr, dtype, axes):
            chunk = 1
            for _, s in axes[1:]:
                chunk *= s
            return HTensor(h.Layer(ptr, index, chunk), dtype, axes[1:])
        case HTree(items):
            return HTree(tuple((k, layer_of(v, index)) for k, v in items))
        case tuple():
            return tuple(layer_of(v, index) for v in value)
    return value


def stacked_like(value: HValue, layers: int) -> HValue:
    """The stacked shape of a per-layer value (a template: pointers are placeholders)."""
    match value:
        case HTensor(ptr, dtype, axes):
            return HTensor(ptr, dtype, ((None, layers), *axes))
        case HTree(items):
            return HTree(tuple((k, stacked_like(v, layers)) for k, v in items))
        case tuple():
            return tuple(stacked_like(v, layers) for v in value)
    return value


def flatten(value: HValue) -> list[HValue]:
    match value:
        case HTree(items):
            return [x for _, v in items for x in flatten(v)]
        case tuple():
            return [x for v in value for x in flatten(v)]
    return [value]


def concrete(size: Lin, dims: dict[str, int]) -> int:
    value = size.subst({k: Fraction(v) for k, v in dims.items()})
    if not value.is_const or value.const.denominator != 1:
        raise HostError(f"size {size} is not a whole number here")
    return int(value.const)


def nbytes(value: HTensor) -> int:
    return value.size * Dtype(value.dtype).size
