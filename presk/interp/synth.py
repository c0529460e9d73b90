"""Input synthesis: values built from types, every draw keyed by the seed and a path.

Reals are standard normals, indices uniform below their bound, masks
uniform bits, keys derived, hyperparameters their defaults, and parameter
trees filled by their initializers. Each value draws from its own key,
`rng.key_for(seed, path)`, with paths `input/<name>` for arguments (tuple
items `input/<name>.<i>`) and `theta/<dotted path>` for parameters, so the
same seed gives the same numbers on every machine (docs/rng.md).

`draw` gives host arrays (what the native backend takes); `to_reference`
turns them into the reference interpreter's values, and `synthesize` is the
two composed. Sizes are checked from the types before anything is allocated.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
import numpy.typing as npt

from presk.elab.presburger import Lin
from presk.elab.ty import (
    Elem,
    Hyper,
    Instance,
    KeyT,
    Params,
    TupleT,
    Type,
    at_dims,
)
from presk.elab.ty import Tensor as TensorT
from presk.interp import rng
from presk.interp.reference import RunError, Tree, Value
from presk.interp.tensor import Axis, Tensor
from presk.machine import memory_bytes, size_text
from presk.syntax import ast
from presk.types.scope import param_leaves

HostValue = Any
"""A drawn value: an ndarray, a dict of them, a tuple, an `rng.Key` or a Fraction."""

Param = tuple[str, Type, Fraction | None]
"""An entry parameter: name, type (dimensions symbolic), default."""

# What one element of a reference tensor costs beyond its drawn double: the object
# array's slot and the mpfr object (header and limbs at the current precision).
REFERENCE_OVERHEAD = 8 + 80


def concrete(size: Lin, dims: dict[str, int]) -> int:
    """A size at concrete dimensions."""
    value = size.subst({k: Fraction(v) for k, v in dims.items()})
    if not value.is_const:
        missing = ", ".join(value.vars())
        raise RunError(f"dimension {missing} has no value (give it with --dim)")
    if value.const.denominator != 1 or value.const < 0:
        raise RunError(f"size {size} is {value.const} at these dimensions, not a natural number")
    return int(value.const)


def axes_of(ty: TensorT, dims: dict[str, int], prefix: tuple[Axis, ...]) -> tuple[Axis, ...]:
    """The concrete axes of a tensor type, its open prefix replaced by `prefix`."""
    body = tuple(Axis(a.name, concrete(a.size, dims)) for a in ty.axes)
    return (prefix if ty.open else ()) + body


# ---------------------------------------------------------------------------------------------
# Sizes, from types alone


def _tensor_axes(
    ty: TensorT, name: str, dims: dict[str, int], prefix: tuple[Axis, ...] | None
) -> tuple[Axis, ...]:
    if ty.open and prefix is None:
        raise RunError(
            f"cannot synthesize `{name}`: cannot materialize a shape with an open prefix "
            "`...` (give its axes to `presk run` with extra `--dim` names)"
        )
    return axes_of(ty, dims, prefix or ())


def _count(axes: tuple[Axis, ...]) -> int:
    count = 1
    for axis in axes:
        count *= axis.size
    return count


def _tensors(
    ty: Type, name: str, dims: dict[str, int], prefix: tuple[Axis, ...] | None
) -> Iterator[tuple[Elem, int]]:
    """The element kind and count of every tensor a value of `ty` holds."""
    match ty:
        case TensorT():
            yield ty.elem, _count(_tensor_axes(ty, name, dims, prefix))
        case Params(inst):
            for _, leaf, _ in param_leaves(inst):
                yield leaf.elem, _count(axes_of(leaf, dims, ()))
        case TupleT(items):
            for i, item in enumerate(items):
                yield from _tensors(item, f"{name}.{i}", dims, prefix)
        case _:
            pass


def input_elements(
    params: list[Param], dims: dict[str, int], prefix: tuple[Axis, ...] | None
) -> int:
    """How many tensor elements the inputs of `params` hold (nothing is allocated)."""
    return sum(
        count
        for name, ty, _ in params
        for _, count in _tensors(at_dims(ty, dims), name, dims, prefix)
    )


def _input_bytes(tensors: list[tuple[Elem, int]]) -> int:
    return sum(count * (1 if elem == Elem.BOOL else 8) for elem, count in tensors)


def _many(n: int) -> str:
    if n < 10**18:
        return f"{n:,}"
    digits = str(n)
    return f"{digits[0]}.{digits[1:3]}e+{len(digits) - 1}"


def check_fits(elements: int, needed: int, what: str) -> None:
    """Refuse (RunError) when `needed` bytes for `elements` elements exceed physical memory."""
    memory = memory_bytes()
    if needed <= memory:
        return
    raise RunError(
        f"the inputs hold {_many(elements)} elements ({size_text(needed)} {what}); "
        f"this machine has {size_text(memory)} of memory"
    )


# ---------------------------------------------------------------------------------------------
# Host arrays


def draw(
    ty: Type,
    name: str,
    path: str,
    dims: dict[str, int],
    prefix: tuple[Axis, ...] | None,
    seed: int,
    default: Fraction | None,
) -> HostValue:
    """A value of the concrete type `ty` for argument `name`, drawn from the key of `path`.

    Tensors are float64 (reals), int64 (indices; uint64 for bounds above 2**63) or bool
    arrays shaped by their concrete axes; a parameter tree is a dict nested by the dotted
    leaf paths.
    """
    tensors = list(_tensors(ty, name, dims, prefix))
    check_fits(sum(c for _, c in tensors), _input_bytes(tensors), "as f64")
    return _draw(ty, name, path, dims, prefix, seed, default)


def _draw(
    ty: Type,
    name: str,
    path: str,
    dims: dict[str, int],
    prefix: tuple[Axis, ...] | None,
    seed: int,
    default: Fraction | None,
) -> HostValue:
    key = rng.key_for(seed, path)
    match ty:
        case TensorT(elem, _, _, bound):
            axes = _tensor_axes(ty, name, dims, prefix)
            shape = tuple(a.size for a in axes)
            count = _count(axes)
            if elem == Elem.REAL:
                return rng.normals_array(key, count).reshape(shape)
            if elem == Elem.IDX:
                assert bound is not None
                return _indices(key, count, concrete(bound, dims), name).reshape(shape)
            return (rng.u64_array(key, count) >> np.uint64(63)).astype(np.bool_).reshape(shape)
        case KeyT():
            return key
        case Hyper(kind):
            if default is None:
                raise RunError(
                    f"cannot synthesize hyperparameter `{name}` of type {kind}: no default"
                )
            return default
        case Params(inst):
            return _nest_dict([(p, leaf) for p, leaf in _init_leaves(inst, dims, seed)])
        case TupleT(items):
            return tuple(
                _draw(item, f"{name}.{i}", f"{path}.{i}", dims, prefix, seed, None)
                for i, item in enumerate(items)
            )
    raise RunError(f"cannot synthesize `{name}` of type `{ty}`")


def _indices(key: rng.Key, count: int, bound: int, name: str) -> npt.NDArray[Any]:
    if bound == 0:
        raise RunError(f"cannot synthesize `{name}`: idx[0] has no values")
    if bound > rng.MASK64:
        raise RunError(f"cannot synthesize `{name}`: idx[{bound}] is wider than 64 bits")
    drawn = rng.randints_array(key, count, bound)
    # Every value lies below the bound, so int64 holds it whenever the bound does.
    return drawn.astype(np.int64) if bound <= 2**63 else drawn


def draw_inputs(
    params: list[Param], dims: dict[str, int], prefix: tuple[Axis, ...] | None, seed: int
) -> list[HostValue]:
    """The drawn inputs of an entry's `info.params` (paths `theta` for θ, else `input/<name>`).

    Refuses before allocating anything when they cannot fit in this machine's memory.
    """
    typed = [(name, at_dims(ty, dims), default) for name, ty, default in params]
    tensors = [t for name, ty, _ in typed for t in _tensors(ty, name, dims, prefix)]
    check_fits(sum(c for _, c in tensors), _input_bytes(tensors), "as f64")
    return [
        _draw(
            ty, name, "theta" if isinstance(ty, Params) else f"input/{name}", dims, prefix, seed, d
        )
        for name, ty, d in typed
    ]


# ---------------------------------------------------------------------------------------------
# Parameter initializers


def _init_leaves(
    inst: Instance, dims: dict[str, int], seed: int
) -> Iterator[tuple[str, npt.NDArray[np.float64]]]:
    for path, ty, decl in param_leaves(inst):
        axes = axes_of(ty, dims, ())
        yield path, _init_leaf(decl, axes, rng.key_for(seed, "theta/" + path))


def _init_leaf(
    decl: ast.ParamDecl, axes: tuple[Axis, ...], key: rng.Key
) -> npt.NDArray[np.float64]:
    shape = tuple(a.size for a in axes)
    count = _count(axes)
    init = decl.init
    kind = init.name.name if init else "zeros"
    if kind == "zeros":
        return np.zeros(shape, dtype=np.float64)
    if kind == "ones":
        return np.ones(shape, dtype=np.float64)
    if kind == "xavier_uniform":
        if count == 0:  # fans of zero: nothing to draw
            return np.zeros(shape, dtype=np.float64)
        sizes = [a.size for a in axes]
        fan_in, fan_out = (sizes[-2], sizes[-1]) if len(sizes) >= 2 else (sizes[0], sizes[0])
        return rng.xavier_uniform_array(key, count, fan_in, fan_out).reshape(shape)
    if kind == "normal":
        std = Fraction(1)
        for kwarg in init.kwargs if init else ():
            if kwarg.name.name == "std" and isinstance(kwarg.value, ast.Num):
                std = kwarg.value.value
        return rng.scaled_normals_array(key, count, std).reshape(shape)
    raise RunError(f"unknown initializer `{kind}` for `{decl.name.name}`")


def _nest_dict(flat: list[tuple[str, Any]]) -> dict[str, Any]:
    """A dict nested by dotted paths, keeping first-seen order."""
    out: dict[str, Any] = {}
    for path, value in flat:
        *heads, last = path.split(".")
        node = out
        for head in heads:
            node = node.setdefault(head, {})
        node[last] = value
    return out


def _lookup(tree: dict[str, Any], path: str) -> Any:
    node: Any = tree
    for part in path.split("."):
        node = node[part]
    return node


# ---------------------------------------------------------------------------------------------
# Reference values


def to_reference(
    value: HostValue, ty: Type, dims: dict[str, int], prefix: tuple[Axis, ...] | None
) -> Value:
    """The reference interpreter's value of a drawn `value` of concrete type `ty`.

    Reals become mpfr at the current gmpy2 precision (exact from 53 bits on). Refuses,
    like `draw`, when the reference's elements would not fit in memory.
    """
    tensors = list(_tensors(ty, "the value", dims, prefix))
    elements = sum(c for _, c in tensors)
    cost = REFERENCE_OVERHEAD + gmpy2.get_context().precision // 8
    check_fits(elements, _input_bytes(tensors) + elements * cost, "for the reference")
    return _to_reference(value, ty, dims, prefix)


def _to_reference(
    value: HostValue, ty: Type, dims: dict[str, int], prefix: tuple[Axis, ...] | None
) -> Value:
    match ty:
        case TensorT(elem, _, _, bound):
            axes = axes_of(ty, dims, prefix or ())
            return _tensor(value, elem, axes, None if bound is None else concrete(bound, dims))
        case Params(inst):
            return init_tree(inst, dims, lambda path, _: _lookup(value, path))
        case TupleT(items):
            return tuple(
                _to_reference(v, t, dims, prefix) for v, t in zip(value, items, strict=True)
            )
        case KeyT() | Hyper():
            assert isinstance(value, (rng.Key, Fraction))
            return value
    raise RunError(f"no reference value of type `{ty}`")


def _tensor(
    array: npt.NDArray[Any], elem: Elem, axes: tuple[Axis, ...], bound: int | None
) -> Tensor:
    if elem == Elem.REAL:
        return Tensor.real(axes, array) if array.size else Tensor.zeros(axes)
    if elem == Elem.IDX:
        return Tensor.idx(axes, array, bound)
    return Tensor.boolean(axes, array)


def init_tree(inst: Instance, dims: dict[str, int], leaf: Any) -> Tree:
    """A reference θ whose leaf at `path` (axes `axes`) is the array `leaf(path, axes)`."""
    flat: list[tuple[str, Tensor]] = []
    for path, ty, _ in param_leaves(inst):
        axes = axes_of(ty, dims, ())
        flat.append((path, _tensor(leaf(path, axes), Elem.REAL, axes, None)))
    return _nest(flat)


def synthesize(
    ty: Type,
    name: str,
    path: str,
    dims: dict[str, int],
    prefix: tuple[Axis, ...] | None,
    seed: int,
    default: Fraction | None,
) -> Value:
    """The reference value of type `ty` for argument `name`: `to_reference(draw(...))`."""
    return to_reference(draw(ty, name, path, dims, prefix, seed, default), ty, dims, prefix)


def initialize(inst: Instance, dims: dict[str, int], seed: int, prefix: str) -> Tree:
    """θ for an instance: every leaf from its initializer, keyed by `prefix` + its path."""
    decls = {path: decl for path, _, decl in param_leaves(inst)}
    return init_tree(
        inst,
        dims,
        lambda path, axes: _init_leaf(decls[path], axes, rng.key_for(seed, prefix + path)),
    )


def init_from_key(inst: Instance, dims: dict[str, int], key: rng.Key) -> Tree:
    """θ for `M.init(key)`: as `initialize`, each leaf's key derived from `key`."""
    decls = {path: decl for path, _, decl in param_leaves(inst)}
    return init_tree(
        inst, dims, lambda path, axes: _init_leaf(decls[path], axes, rng.derive(key, path))
    )


def _nest(flat: list[tuple[str, Tensor]]) -> Tree:
    """A Tree from dotted paths, keeping first-seen order."""
    groups: dict[str, list[tuple[str, Tensor]]] = {}
    leaves: dict[str, Tensor] = {}
    order: list[str] = []
    for path, value in flat:
        head, dot, rest = path.partition(".")
        if head not in order:
            order.append(head)
        if dot:
            groups.setdefault(head, []).append((rest, value))
        else:
            leaves[head] = value
    items: list[tuple[str, Value]] = []
    for head in order:
        items.append((head, leaves[head] if head in leaves else _nest(groups[head])))
    return Tree(tuple(items))
