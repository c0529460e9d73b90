"""What every `make bench` comparison shares: compiling an entry, drawing its inputs,
timing two sides in alternation, and checking that they agree before any timing.

Only NumPy is imported here; presk's compile path and gmpy2 load when first used.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

SETTLE_S = 0.3  # longer than the idle spin of OpenBLAS's and OpenMP's worker threads


def median_time(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def best_medians(sides: Sequence[Callable[[], object]], rounds: int, repeat: int) -> list[float]:
    """Each side's least median over `rounds` rounds of `repeat` calls, the sides taking
    turns within every round: the machine is shared, and a neighbour's burst should slow
    both sides' medians or neither's best one.

    Before each turn the process idles a moment: a side's worker threads spin on the
    cores for a while after it returns (OpenBLAS's for about 10⁸ cycles, OpenMP's for its
    spin count), and on a two-core machine that would take a core from the next side.
    """
    for side in sides:
        side()  # a warm-up call each: caches, lazy allocations
    best = [float("inf")] * len(sides)
    for _ in range(rounds):
        for i, side in enumerate(sides):
            time.sleep(SETTLE_S)
            best[i] = min(best[i], median_time(side, repeat))
    return best


def compiled_entry(
    path: str,
    entry: str,
    dims: Mapping[str, int],
    consts: Mapping[str, int],
    dtype: str,
    threads: int = 1,
) -> tuple[Any, Any, Any, Any]:
    """The entry through the one compile path: (compiled, checked, entry, binding)."""
    from presk.host.realization import Realization
    from presk.pipeline import compile_path

    return compile_path(
        path,
        entry,
        dict(dims),
        Realization(dtype),
        threads,
        consts={k: Fraction(v) for k, v in consts.items()},
        banner=f"bench {entry}",
    )


def prepared(
    path: str,
    entry: str,
    dims: dict[str, int],
    consts: dict[str, int],
    dtype: str,
    threads: int = 1,
) -> tuple[object, list[object], object]:
    """The entry compiled, and the inputs `presk run` draws (exact, slow for large θ)."""
    import gmpy2

    from presk.interp.run import reference_inputs

    program, checked, chosen, binding = compiled_entry(path, entry, dims, consts, dtype, threads)
    with gmpy2.context(precision=53):
        inputs: list[object] = list(reference_inputs(chosen.info, binding.dims, binding.prefix, 0))
    return program, inputs, checked


def drawn(
    path: str,
    entry: str,
    dims: dict[str, int],
    consts: dict[str, int],
    dtype: str,
    threads: int = 1,
    seed: int = 0,
) -> tuple[Any, list[Any]]:
    """The entry compiled, and host arrays drawn for its arguments in a moment.

    Unlike `presk run`'s draw, no leaf starts at zero (a zero readout would make every
    loss ln V, whatever the layers before it compute): a leaf of shape (…, m, n) has
    deviation 1/√m, a vector 1/2. Indices are uniform below their bound.
    """
    from presk.elab.ty import dims_env, subst

    program, _, chosen, binding = compiled_entry(path, entry, dims, consts, dtype, threads)
    env = dims_env(binding.dims)
    rng = np.random.default_rng(seed)
    storage = np.float32 if dtype == "f32" else np.float64
    inputs = [
        _draw(layout, subst(ty, env), rng, storage)
        for layout, (_, ty, _) in zip(program.layouts, chosen.info.params, strict=True)
    ]
    return program, inputs


def _draw(layout: Any, ty: Any, rng: np.random.Generator, storage: type) -> Any:
    from presk.host.ir import HTensor, HTree

    match layout:
        case HTree(items):
            return {k: _draw(v, None, rng, storage) for k, v in items}
        case HTensor(dtype="i64", axes=axes):
            bound = ty.bound
            assert bound is not None and not bound.coeffs, "an index argument needs a bound"
            return rng.integers(0, int(bound.const), size=tuple(s for _, s in axes))
        case HTensor(axes=axes):
            shape = tuple(s for _, s in axes)
            scale = 1 / np.sqrt(shape[-2]) if len(shape) >= 2 else 0.5
            return (rng.standard_normal(shape) * scale).astype(storage)
    raise TypeError(f"no draw for an argument laid out as {type(layout).__name__}")


def leaves(tree: Any) -> list[Any]:
    """A host value's arrays in the entry's order (dicts keep their layout's order)."""
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in leaves(v)]
    if isinstance(tree, tuple | list):
        return [x for v in tree for x in leaves(v)]
    return [tree]


def assert_close(what: str, ours: Any, theirs: Any, rel: float, floor: float = 0.0) -> None:
    """Both sides' results agree to `rel` of the largest magnitude of `theirs`, or of
    `floor` where that is larger (a gradient that is zero in exact arithmetic, as a key
    bias's, holds only rounding noise on both sides)."""
    mine, other = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert mine.size == other.size, (what, mine.shape, other.shape)
    error = float(np.max(np.abs(mine.reshape(other.shape) - other), initial=0.0))
    scale = max(float(np.max(np.abs(other), initial=0.0)), floor, 1e-30)
    if error > rel * scale:
        raise SystemExit(f"{what}: the two sides differ by {error:.3g} (scale {scale:.3g})")
