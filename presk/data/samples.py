"""`.psk.d` files from Python: samples as numpy arrays, dicts and tuples.

`read(path)` gives a `Samples`: its type, its count, every leaf stacked over
the samples (`samples.arrays["w"]`), and one sample by index as the value an
entry takes. `write(path, samples, type=...)` stores a list of such values,
reals as f64, f32 or bf16.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from presk.data.format import (
    DataFile,
    Leaf,
    leaf_types,
    reals_as,
)
from presk.data.format import (
    read as read_file,
)
from presk.data.format import (
    write as write_file,
)
from presk.dtypes import bf16_to_f32


@dataclass(frozen=True)
class Samples:
    """The samples of a `.psk.d` file, leaf by leaf (reals widened exactly to float64)."""

    type: str
    count: int
    arrays: dict[str, npt.NDArray[Any]]

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> Any:
        """Sample `index` as an entry takes it: an array, a dict or a tuple."""
        if not -self.count <= index < self.count:
            raise IndexError(f"sample {index} of {self.count}")
        flat = [(path.split(".") if path else [], a[index]) for path, a in self.arrays.items()]
        return _assemble(flat)


def read(path: str | os.PathLike[str]) -> Samples:
    """Every sample of a `.psk.d` file (raises presk.data.format.DataError for a bad one)."""
    data = read_file(path)
    arrays: dict[str, npt.NDArray[Any]] = {}
    for leaf, array in zip(data.leaves, data.arrays, strict=True):
        if leaf.dtype == "bf16":
            array = bf16_to_f32(array).astype(np.float64)
        elif leaf.dtype == "f32":
            array = array.astype(np.float64)
        arrays[leaf.path] = array
    return Samples(data.type, data.count, arrays)


def write(
    path: str | os.PathLike[str], samples: Sequence[Any], type: str, real: str = "f64"
) -> None:
    """Store `samples` (arrays, dicts of arrays, tuples; all of one structure) as `type`.

    Integers are stored as i64 (indices, masks), reals as `real`. Raises ValueError
    when the samples do not agree with each other or with `type`.
    """
    if real not in ("f64", "f32", "bf16"):
        raise ValueError(f"real={real!r}: expected f64, f32 or bf16")
    if not samples:
        raise ValueError("no samples to write")
    structure = _leaves(samples[0], "")
    paths = [p for p, _ in structure]
    leaves: list[Leaf] = []
    arrays: list[npt.NDArray[Any]] = []
    for i, (leaf_path, first) in enumerate(structure):
        column = []
        for n, sample in enumerate(samples):
            mine = _leaves(sample, "")
            if [p for p, _ in mine] != paths:
                raise ValueError(f"sample {n} has leaves {[p for p, _ in mine]}, not {paths}")
            value = mine[i][1]
            if value.shape != first.shape:
                raise ValueError(
                    f"sample {n}: `{leaf_path}` has shape {value.shape}, not {first.shape}"
                )
            column.append(value)
        stacked = np.stack(column) if column else np.zeros((0, *first.shape))
        if stacked.dtype.kind in "iub":
            leaves.append(Leaf(leaf_path, "i64", first.shape))
            arrays.append(stacked.astype(np.int64))
        elif stacked.dtype.kind == "f":
            leaves.append(Leaf(leaf_path, real, first.shape))
            arrays.append(reals_as(stacked.astype(np.float64), real))
        else:
            raise ValueError(f"`{leaf_path}`: {stacked.dtype} is neither real nor integer")
    data = DataFile(type, len(samples), leaves, arrays)
    leaf_types(data)  # the leaves agree with the type when it is a sample type
    data.validate()
    write_file(path, data)


def flatten(value: Any) -> dict[str, npt.NDArray[Any]]:
    """A sample's leaves by dotted path (`blocks.proj.w`, `0`, `1.0`), in order."""
    return dict(_leaves(value, ""))


def _leaves(value: Any, prefix: str) -> list[tuple[str, npt.NDArray[Any]]]:
    if isinstance(value, Mapping):
        return [x for k, v in value.items() for x in _leaves(v, f"{prefix}.{k}" if prefix else k)]
    if isinstance(value, tuple | list):
        return [
            x
            for i, v in enumerate(value)
            for x in _leaves(v, f"{prefix}.{i}" if prefix else str(i))
        ]
    return [(prefix, np.asarray(value))]


def _assemble(flat: list[tuple[list[str], Any]]) -> Any:
    if len(flat) == 1 and not flat[0][0]:
        return flat[0][1]
    order: list[str] = []
    groups: dict[str, list[tuple[list[str], Any]]] = {}
    for parts, value in flat:
        head = parts[0]
        if head not in groups:
            order.append(head)
            groups[head] = []
        groups[head].append((parts[1:], value))
    items = [_assemble(groups[h]) for h in order]
    if all(h.isdigit() for h in order):
        return tuple(items)
    return dict(zip(order, items, strict=True))
