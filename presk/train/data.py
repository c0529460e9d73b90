"""A training run's data: the file checked against the objective, epochs, batches.

Every epoch visits the samples in a permutation drawn from the counter-based
generator (docs/rng.md, "Shuffling"), so a seed gives the same batches on
every backend and machine. The batches of an epoch are consecutive runs of B
samples of that permutation; the last incomplete one is dropped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from presk.data.format import DataError, TypeTextError, parse_sample_type, tensor_types
from presk.data.samples import Samples, read
from presk.diagnostics import CommandError, UsageError, printable
from presk.elab.presburger import Lin
from presk.elab.ty import Tensor, TupleT, Type, subst, subst_lin
from presk.interp import rng
from presk.types.training import sample_type
from presk.types.values import TrainingRun

# The most steps a run takes: its step and horizon are `idx[2^53]` (types/training.py STEP).
MAX_STEPS = 2**53 - 1


@dataclass(frozen=True)
class Batches:
    """The samples of a run and how they are cut: `per_epoch` batches of `size`."""

    samples: Samples
    paths: tuple[str, ...]  # the leaves of a sample, in the order the entry takes them
    size: int
    seed: int | None
    dims: dict[str, int]  # the objective's dimensions, bound by the batch and the file

    @property
    def per_epoch(self) -> int:
        return self.samples.count // self.size

    @property
    def dropped(self) -> int:
        """Samples of each epoch left out by the last incomplete batch."""
        return self.samples.count - self.per_epoch * self.size

    def available(self, epochs: int) -> int:
        """The steps of `epochs` passes over the data; a UsageError past the step counter's
        2^53 − 1 (a step is an `idx[2^53]` of the generated schedule), before any work."""
        steps = epochs * self.per_epoch
        if steps > MAX_STEPS:
            raise UsageError(
                f"{epochs} epochs of {self.per_epoch} batches are {steps} steps, more than a "
                f"run's {MAX_STEPS} (2^53 − 1): give fewer --epochs or --steps"
            )
        return steps

    def horizon(self, epochs: int, steps: int | None) -> int:
        """The schedule's last step: `steps`, but never past `epochs` passes over the data."""
        available = self.available(epochs)
        return available if steps is None else min(steps, available)

    def position(self, step: int) -> tuple[int, int]:
        """Step (1-based) → (epoch, batch within it), both 1-based."""
        return (step - 1) // self.per_epoch + 1, (step - 1) % self.per_epoch + 1

    def order(self, epoch: int) -> npt.NDArray[np.int64]:
        """The permutation of epoch `epoch` (1-based); the identity without a shuffle."""
        n = self.samples.count
        if self.seed is None:
            return np.arange(n, dtype=np.int64)
        return permutation(rng.key_for(self.seed, f"data/epoch/{epoch}"), n)

    def batch(self, step: int, order: npt.NDArray[np.int64]) -> list[npt.NDArray[Any]]:
        """The leaves of step `step`'s batch (f64 reals, i64 indices), given its epoch's order."""
        _, j = self.position(step)
        rows = order[(j - 1) * self.size : j * self.size]
        return [np.ascontiguousarray(self.samples.arrays[p][rows]) for p in self.paths]


def permutation(key: rng.Key, n: int) -> npt.NDArray[np.int64]:
    """Fisher–Yates from the top: for i = n−1 … 1, swap i with randbelow(key, n−1−i, i+1)."""
    out = np.arange(n, dtype=np.int64)
    if n < 2:
        return out
    words = rng.u64_array(key, n - 1).tolist()
    for draw, i in enumerate(range(n - 1, 0, -1)):
        j = (words[draw] * (i + 1)) >> 64
        out[i], out[j] = out[j], out[i]
    return out


def _bind(want: Tensor, have: Tensor, dims: dict[str, Lin], where: str) -> None:
    """Bind `want`'s dimension variables from `have`'s literal sizes; CommandError if they
    cannot agree."""
    if want.elem != have.elem or len(want.axes) != len(have.axes):
        raise CommandError(f"{where}: the file holds {have}, the objective's sample is {want}")
    pairs: list[tuple[Lin, Lin]] = list(
        zip((a.size for a in want.axes), (a.size for a in have.axes), strict=True)
    )
    if want.bound is not None and have.bound is not None:
        pairs.append((want.bound, have.bound))
    for size, got in pairs:
        size = subst_lin(size, dims)
        if not size.is_const and len(size.coeffs) == 1 and size.coeffs[0][1] == 1:
            name = size.coeffs[0][0]
            base = got.const - size.const
            dims[name] = Lin.const_(base)
            size = Lin.const_(got.const)
        if size != got:
            raise CommandError(f"{where}: the file holds {have}, the objective's sample is {want}")
    for a, b in zip(want.axes, have.axes, strict=True):
        if a.name != b.name:
            raise CommandError(
                f"{where}: the axes are named differently: the file holds {have}, "
                f"the objective's sample is {want}"
            )


def load(run: TrainingRun, path: str | None = None) -> Batches:
    """The run's data file, checked against the objective's sample type (dims bound)."""
    file = path or run.data.resolved
    where = printable(file)
    if not os.path.exists(file):
        raise CommandError(f"{where}: no such data file (the run's `stream`)")
    if os.path.isdir(file):
        raise CommandError(f"{where}: a directory, not a data file")
    try:
        samples = read(file)
    except (DataError, OSError) as error:
        raise CommandError(str(error)) from None  # the message names the file
    try:
        have = parse_sample_type(samples.type)
    except TypeTextError as error:
        raise CommandError(f"{where}: {error}") from None
    dims: dict[str, Lin] = {run.data.dim: Lin.const_(Fraction(run.data.batch))}
    want = sample_type(run.objective.params[1][1])
    wanted = _tensors(want)
    held = _tensors(have)
    if len(wanted) != len(held):
        raise CommandError(f"{where}: the file holds {have}, the objective's sample is {want}")
    for w, h in zip(wanted, held, strict=True):
        _bind(w, h, dims, where)
    concrete = {k: int(v.const) for k, v in dims.items() if v.is_const}
    missing = [d for d in run.objective.dims if d not in concrete]
    if missing:
        raise CommandError(f"{where}: nothing binds the objective's dimension `{missing[0]}`")
    if samples.count == 0:
        raise CommandError(f"{where}: the file holds no samples")
    if samples.count < run.data.batch:
        raise CommandError(
            f"{where}: a batch of {run.data.batch} is larger than the file's "
            f"{samples.count} samples"
        )
    paths = tuple(p for p, _ in tensor_types(subst(want, dict(dims))))
    if set(paths) != set(samples.arrays):
        raise CommandError(f"{where}: the file's leaves are not those of {want}")
    return Batches(samples, paths, run.data.batch, run.data.seed, concrete)


def _tensors(ty: Type) -> list[Tensor]:
    match ty:
        case Tensor():
            return [ty]
        case TupleT(items):
            return [t for item in items for t in _tensors(item)]
    return []
