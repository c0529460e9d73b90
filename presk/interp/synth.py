"""Input synthesis: values built from types, every draw keyed by the seed and a path.

Reals are standard normals, indices uniform below their bound, masks
uniform bits, keys derived, hyperparameters their defaults, and parameter
trees filled by their initializers. Each value draws from its own key,
`rng.key_for(seed, path)`, with paths `input/<name>` for arguments (tuple
items `input/<name>.<i>`) and `theta/<dotted path>` for parameters, so the
same seed gives the same numbers on every machine (docs/rng.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import gmpy2
import numpy as np

from presk.elab.presburger import Lin
from presk.elab.ty import Elem, Hyper, Instance, KeyT, Params, TupleT, Type
from presk.elab.ty import Tensor as TensorT
from presk.interp import rng
from presk.interp.reference import RunError, Tree, Value
from presk.interp.tensor import Axis, Tensor
from presk.syntax import ast
from presk.types.scope import param_leaves


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


def synthesize(
    ty: Type,
    name: str,
    path: str,
    dims: dict[str, int],
    prefix: tuple[Axis, ...] | None,
    seed: int,
    default: Fraction | None,
) -> Value:
    """A value of type `ty` for argument `name`, drawn from the key of `path`."""
    key = rng.key_for(seed, path)
    match ty:
        case TensorT(elem, _, open_, bound):
            if open_ and prefix is None:
                raise RunError(
                    f"cannot synthesize `{name}`: cannot materialize a shape with an open prefix "
                    "`...` (give its axes to `presk run` with extra `--dim` names)"
                )
            axes = axes_of(ty, dims, prefix or ())
            count = 1
            for axis in axes:
                count *= axis.size
            if elem == Elem.REAL:
                return Tensor.real(axes, _shape(rng.normals(key, count), axes))
            if elem == Elem.IDX:
                assert bound is not None
                n = concrete(bound, dims)
                if n == 0:
                    raise RunError(f"cannot synthesize `{name}`: idx[0] has no values")
                return Tensor.idx(axes, _shape(rng.randints(key, count, n), axes), n)
            return Tensor.boolean(axes, _shape([b == 1 for b in rng.randints(key, count, 2)], axes))
        case KeyT():
            return key
        case Hyper(kind):
            if default is None:
                raise RunError(
                    f"cannot synthesize hyperparameter `{name}` of type {kind}: no default"
                )
            return default
        case Params(inst):
            return initialize(inst, dims, seed, "theta/")
        case TupleT(items):
            return tuple(
                synthesize(item, f"{name}.{i}", f"{path}.{i}", dims, prefix, seed, None)
                for i, item in enumerate(items)
            )
    raise RunError(f"cannot synthesize `{name}` of type `{ty}`")


def _shape(flat: Sequence[object], axes: tuple[Axis, ...]) -> object:
    """Nest a flat row-major list by the axes' sizes."""
    if not axes:
        return flat[0]
    # An object array keeps mpfr and int elements as they are, zero sizes included.
    array = np.empty(len(flat), dtype=object)
    array[:] = list(flat)
    return array.reshape(tuple(axis.size for axis in axes))


def initialize(inst: Instance, dims: dict[str, int], seed: int, prefix: str) -> Tree:
    """θ for an instance: every leaf from its initializer, keyed by its path."""
    flat: list[tuple[str, Tensor]] = []
    for path, ty, decl in param_leaves(inst):
        axes = axes_of(ty, dims, ())
        key = rng.key_for(seed, prefix + path)
        flat.append((path, _init_leaf(decl, axes, key)))
    return _nest(flat)


def init_from_key(inst: Instance, dims: dict[str, int], key: rng.Key) -> Tree:
    """θ for `M.init(key)`: as `initialize`, each leaf's key derived from `key`."""
    flat: list[tuple[str, Tensor]] = []
    for path, ty, decl in param_leaves(inst):
        axes = axes_of(ty, dims, ())
        flat.append((path, _init_leaf(decl, axes, rng.derive(key, path))))
    return _nest(flat)


def _init_leaf(decl: ast.ParamDecl, axes: tuple[Axis, ...], key: rng.Key) -> Tensor:
    count = 1
    for axis in axes:
        count *= axis.size
    init = decl.init
    kind = init.name.name if init else "zeros"
    if kind == "zeros":
        return Tensor.real(axes, _shape([0] * count, axes)) if count else Tensor.zeros(axes)
    if kind == "ones":
        return Tensor.real(axes, _shape([1] * count, axes))
    if kind == "xavier_uniform":
        sizes = [a.size for a in axes]
        fan_in, fan_out = (sizes[-2], sizes[-1]) if len(sizes) >= 2 else (sizes[0], sizes[0])
        return Tensor.real(axes, _shape(rng.xavier_uniform(key, count, fan_in, fan_out), axes))
    if kind == "normal":
        std = Fraction(1)
        for kwarg in init.kwargs if init else ():
            if kwarg.name.name == "std" and isinstance(kwarg.value, ast.Num):
                std = kwarg.value.value
        with gmpy2.context(precision=256):
            values = [float(gmpy2.mpfr(z) * gmpy2.mpfr(std)) + 0.0 for z in rng.normals(key, count)]
        return Tensor.real(axes, _shape(values, axes))
    raise RunError(f"unknown initializer `{kind}` for `{decl.name.name}`")


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
