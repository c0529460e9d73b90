"""An entry's argument from a `.psk.d` file: what `presk run --data F.psk.d` feeds.

`file_dims(ty, data)` reads, from a file's sample type and count, the dimensions of an
argument type `ty` (symbolic, as the checker gives it) that the file fixes: the sizes of
the sample's axes (`T` of `seq: T`, an idx bound `N`), and the size of the `batch` axis,
which is the file's sample count. `argument(data, ty, path)` then gives the argument, at
concrete dimensions, as the host arrays that input synthesis draws (presk/interp/synth.py):
the native backend takes them as they are and `synth.to_reference` makes the reference's
values of them. The argument is either

* a batch: `ty` has an axis named `batch` in every tensor, and the file's sample type is
  `ty` without it. The first B samples (B the batch axis's size, all of them unless a
  `--dim` chose fewer) are stacked along that axis, wherever it stands; or
* one sample: the file's sample type is `ty` itself, and its first sample is taken.

Every mismatch is an `ArgumentError`, one line that names the file and both types.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from presk.data.format import (
    DataError,
    DataFile,
    TypeTextError,
    as_f64,
    leaf_types,
    parse_sample_type,
    read,
)
from presk.diagnostics import printable
from presk.elab.presburger import Lin
from presk.elab.ty import Elem, TupleT, Type, lin_int
from presk.elab.ty import Tensor as TensorT

BATCH = "batch"
"""The axis a batch of samples is stacked along."""


class ArgumentError(Exception):
    """A data file that cannot fill the argument: one line naming the file."""


def sample_type(data: DataFile, path: str) -> Type:
    """The file's sample type, refused unless it is a stored tensor or tuple of them."""
    try:
        ty = parse_sample_type(data.type)
        leaf_types(data, ty)  # the leaves agree with the type
    except (TypeTextError, ValueError) as error:
        raise ArgumentError(f"{printable(path)}: {error}") from None
    return ty


def unbatched(ty: Type) -> Type | None:
    """`ty` without its `batch` axis, or None unless every tensor of it has exactly one."""
    match ty:
        case TensorT():
            kept = tuple(a for a in ty.axes if a.name != BATCH)
            return ty.with_axes(kept) if len(kept) == len(ty.axes) - 1 else None
        case TupleT(items):
            parts = [unbatched(item) for item in items]
            if any(p is None for p in parts):
                return None
            return TupleT(tuple(p for p in parts if p is not None))
    return None


def file_dims(ty: Type, data: DataFile, path: str) -> dict[str, int]:
    """The dimensions of `ty` that the file fixes (see the module's docstring).

    A size that is one dimension (`T`) is bound; a constant or a compound size (`2·T`) is
    only compared once the dimensions are known, by `argument`. Sizes the file gives two
    different values for are an ArgumentError.
    """
    found = sample_type(data, path)
    dims: dict[str, int] = {}
    inner = unbatched(ty)
    if inner is not None and _bind(inner, found, dims):
        for size in _batch_sizes(ty):
            _bind_size(size, data.count, dims)
        return dims
    dims = {}
    _bind(ty, found, dims)  # one sample of the argument's own type
    return dims


def _bind(ty: Type, found: Type, dims: dict[str, int]) -> bool:
    """Bind the dimensions of `ty` against the literal `found`; False where they differ in
    structure, element kind, axis names or a size already bound."""
    match ty, found:
        case TensorT(), TensorT():
            if ty.open or ty.elem != found.elem or len(ty.axes) != len(found.axes):
                return False
            for axis, other in zip(ty.axes, found.axes, strict=True):
                if axis.name != other.name:
                    return False
                if not _bind_size(axis.size, _literal(other.size), dims):
                    return False
            if ty.bound is not None and found.bound is not None:
                return _bind_size(ty.bound, _literal(found.bound), dims)
            return True
        case TupleT(items), TupleT(others):
            return len(items) == len(others) and all(
                _bind(a, b, dims) for a, b in zip(items, others, strict=True)
            )
    return False


def _bind_size(size: Lin, value: int, dims: dict[str, int]) -> bool:
    """Bind a size that is one dimension; any other size is left for the final comparison."""
    if size.const == 0 and len(size.coeffs) == 1 and size.coeffs[0][1] == 1:
        name = size.coeffs[0][0]
        if dims.setdefault(name, value) != value:
            return False
    return True


def _literal(size: Lin) -> int:
    value = lin_int(size)
    assert value is not None  # parse_sample_type refuses anything but literal sizes
    return value


def _batch_sizes(ty: Type) -> list[Lin]:
    match ty:
        case TensorT():
            return [a.size for a in ty.axes if a.name == BATCH]
        case TupleT(items):
            return [size for item in items for size in _batch_sizes(item)]
    return []


def argument(data: DataFile, ty: Type, path: str) -> Any:
    """The argument of concrete type `ty` from the file, as host arrays (see the module's
    docstring): a batch of its first samples, or its first sample."""
    found = sample_type(data, path)
    where = printable(path)
    refused = ArgumentError(
        f"{where}: the file holds {data.count} samples of {found}; the argument is {ty}"
    )
    if data.count == 0:
        raise ArgumentError(f"{where}: the file holds no samples")
    inner = unbatched(ty)
    if inner is not None and str(inner) == str(found):
        sizes = {lin_int(s) for s in _batch_sizes(ty)}
        batch = sizes.pop() if len(sizes) == 1 else None
        if batch is None or batch > data.count:
            raise refused
        return _value(ty, data, iter(range(len(data.leaves))), batch, where)
    if str(ty) != str(found):
        raise refused
    return _value(ty, data, iter(range(len(data.leaves))), None, where)


def _value(ty: Type, data: DataFile, leaf: Any, batch: int | None, where: str) -> Any:
    """The host value of `ty` from the file's next leaves, in storage order."""
    match ty:
        case TupleT(items):
            return tuple(_value(item, data, leaf, batch, where) for item in items)
        case TensorT():
            i = next(leaf)
            array = data.arrays[i]
            if batch is None:
                stacked = array[0]
            else:
                at = [a.name for a in ty.axes].index(BATCH)
                stacked = np.moveaxis(array[:batch], 0, at)
            return _elements(stacked, data.leaves[i].dtype, ty, where)
    raise AssertionError(f"not a sample type: {ty}")  # sample_type refused it


def _elements(array: npt.NDArray[Any], dtype: str, ty: TensorT, where: str) -> npt.NDArray[Any]:
    """A leaf's elements as input synthesis draws them: f64, int64 ids, bool masks."""
    if ty.elem == Elem.REAL:
        return np.ascontiguousarray(as_f64(array, dtype))
    if ty.elem == Elem.BOOL:
        return np.ascontiguousarray(array != 0)
    bound = lin_int(ty.bound) if ty.bound is not None else None
    ids = np.ascontiguousarray(array, dtype=np.int64)
    bad = np.flatnonzero((ids < 0) | (ids >= (bound or 0)))
    if bad.size:
        value = int(ids.reshape(-1)[bad[0]])
        raise ArgumentError(f"{where}: index {value} is out of range for idx[{bound}]")
    return ids


def read_data(path: str) -> DataFile:
    """The data file, its problems as an ArgumentError."""
    try:
        return read(path)
    except DataError as error:
        raise ArgumentError(error.message) from None
