"""The bias epilogue measured: a product with its add in one kernel, against two launches.

The epilogue is a choice of a contraction's layout that joins two nests (the
product's and that of the add that alone reads it), so a sweep of each nest
alone cannot time it. For each product whose add could be its epilogue,
point zero and the fastest points of the product's sweep are lowered again
on its launch with the add's other operand as an input (`with_epilogue`,
the host's own construction), compiled in one unit and timed; against each
stand the two launches it replaces, the product at that point and the add
at its fastest, timed beside it (the sweep's times are minutes old on a
noisy machine). Every output is compared byte
for byte with the two launches' result: point zero of the product, then
point zero of the add on its output and the other operand, in the add's
order.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

import numpy.typing as npt

from presk.kernel.layout import Layout, point_zero
from presk.kernel.lower.epilogue import with_epilogue
from presk.tune import harness
from presk.tune.capture import Capture, Captured
from presk.tune.sweep import NestSweep, layout_of, mad

FASTEST = 3  # the product's points tried with the epilogue besides point zero


@dataclass(frozen=True)
class Pair:
    """A product, the add its epilogue may do, and their sweeps."""

    product: NestSweep
    add: NestSweep
    first: bool  # whether the add reads its other operand first

    @property
    def other(self) -> int:
        """The position among the add's inputs of its operand that is not the product."""
        return 0 if self.first else 1


def pairs(captured: Capture, swept: list[NestSweep]) -> list[Pair]:
    """Each product whose add could be its epilogue, where both nests ran in the sweep."""
    by_site = {s.nest.site: s for s in swept}
    found = []
    for site, joined in captured.epilogues.items():
        product, add = by_site.get(site), by_site.get(joined.add)
        if product is None or add is None or product.best() is None or add.best() is None:
            continue
        if len(add.nest.launch.inputs) == 2:
            found.append(Pair(product, add, joined.first))
    return found


def candidates(product: NestSweep) -> list[dict[str, Any]]:
    """The product's lines tried with the epilogue: point zero, then its fastest."""
    ran = sorted((x for x in product.lines if x["same"]), key=lambda x: x["median_us"])
    zero = [x for x in product.lines if x["index"] == 0]
    return zero + [x for x in ran if x["index"] != 0][:FASTEST]


@dataclass(frozen=True)
class _Prepared:
    pair: Pair
    lines: list[dict[str, Any]]  # the product's lines its points come from
    joined: Captured  # the product's nest finishing with the add
    product: Captured  # the product alone, on the joined nest's inputs
    add_operand: npt.NDArray[Any]


def _prepare(pair: Pair) -> _Prepared:
    nest = pair.product.nest
    inputs = harness.inputs_for(nest)
    other = harness.inputs_for(pair.add.nest)[pair.other]
    operand = pair.add.nest.launch.inputs[pair.other]
    launch = with_epilogue(nest.launch, operand.dtype, operand.axes, pair.first)
    joined = replace(nest, launch=launch, given=(*inputs, other))
    alone = replace(nest, given=tuple(inputs))
    return _Prepared(pair, candidates(pair.product), joined, alone, other)


def measure(
    captured: Capture, swept: list[NestSweep], threads: int, repeat: int
) -> list[dict[str, Any]]:
    """One line per product point tried with its epilogue (JSON, as the sweep's)."""
    prepared = [_prepare(pair) for pair in pairs(captured, swept)]
    if not prepared:
        return []
    units: list[tuple[Captured, list[Layout]]] = []
    for p in prepared:
        points = [layout_of(x) for x in p.lines]
        best_add = p.pair.add.best()
        assert best_add is not None
        units += [
            (p.joined, points),
            (p.product, points),  # point zero first: the two launches' product
            (p.pair.add.nest, [point_zero(p.pair.add.nest.nest), layout_of(best_add)]),
        ]
    benches = harness.prepare_all(units, threads)
    out: list[dict[str, Any]] = []
    for n, p in enumerate(prepared):
        joined, product, add = benches[3 * n : 3 * n + 3]
        zero_same = harness.same_bytes(joined.run(0, 1), _two_launches(p, product, add))
        checked = harness.check(joined, threads)
        ran = [i for i, m in enumerate(checked) if m.same is not None]
        # The machine is noisy: each side timed right after the other, in two rounds
        # (the second in reverse order), each keeping its faster round.
        fused: dict[int, list[float]] = {}
        alone: dict[int, list[float]] = {}
        added: list[float] = []
        for i in [*ran, *reversed(ran)] if repeat else []:
            fused[i] = _faster(fused.get(i), joined.time(i, threads, repeat))
            alone[i] = _faster(alone.get(i), product.time(i, threads, repeat))
            added = _faster(added, add.time(1, threads, repeat))
        for i, m in enumerate(checked):
            point = replace(m.point, epilogue=True)
            times, apart = fused.get(i, []), _median(alone.get(i, [])) + _median(added)
            out.append(
                {
                    "nest": p.pair.product.nest.site,
                    "add": p.pair.add.nest.site,
                    "index": i,
                    "point": point.to_json(),
                    "text": point.text(),
                    "times_us": times,
                    "median_us": _median(times) if times else None,
                    "mad_us": mad(times) if times else None,
                    "product_us": _median(alone[i]) if i in alone else None,
                    "add_us": _median(added) if added else None,
                    "two_launches_us": apart if i in alone and added else None,
                    # Equal to point zero's epilogue, which equals the two launches.
                    "same": None if m.same is None else m.same and zero_same,
                    "refused": m.refused,
                }
            )
    return out


def _faster(kept: list[float] | None, times: tuple[float, ...]) -> list[float]:
    """The round of the lower median, in µs."""
    got = [t * 1e6 for t in times]
    return got if not kept or _median(got) < _median(kept) else kept


def _median(times: list[float]) -> float:
    return statistics.median(times) if times else 0.0


def _two_launches(
    p: _Prepared, product: harness.Bench, add: harness.Bench
) -> list[npt.NDArray[Any]]:
    """Point zero of the product, then point zero of the add on its output and the other
    operand in the add's order: what every point with the epilogue must equal."""
    (out,) = product.run(0, 1)
    operands = [p.add_operand, out] if p.pair.first else [out, p.add_operand]
    # An output buffer holds at least one element, so an empty output (a dim of 0) is
    # cut to its size before it takes the add's input's shape.
    shaped = [
        harness.aligned(x.reshape(-1)[: math.prod(b.shape)].reshape(b.shape or (1,)))
        for x, b in zip(operands, add.nest.launch.inputs, strict=True)
    ]
    return replace(add, inputs=shaped).run(0, 1)


def chosen(lines: list[dict[str, Any]]) -> tuple[dict[str, Any], float] | None:
    """A product's fastest exact point with the epilogue, and the fastest of its two
    launches (the same points, the add at its fastest); None if none was timed."""
    fused = [x for x in lines if x["same"] and x["median_us"] is not None]
    apart = [x["two_launches_us"] for x in lines if x["two_launches_us"] is not None]
    if not fused or not apart:
        return None
    return min(fused, key=lambda x: x["median_us"]), min(apart)


__all__ = ["FASTEST", "Pair", "candidates", "chosen", "measure", "pairs"]
