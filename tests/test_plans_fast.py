"""`presk plan`'s pricing without kernels gives the prices of pricing the built kernels.

tune/pricing.py outlines a tiled contraction point from its parameters
(tune/tiled.py) and lowers any other point once for all its splits. For the
nests of tests/test_layouts.py (a dot as Linear has it, attention's `ein`s
and softmax, a product's two adjoints, at sizes that are multiples of no
tile) in f64, f32 and bf16, on one worker and two, each point's terms and
price are compared with those read off its built kernels (harness.py
`lower_point`, model.py `price`), and so is the plan's choice. Caches small
enough that every term of the model is exercised.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import test_layouts

from presk.kernel.layout import Layout, NestKind
from presk.tune.capture import Captured, points_of
from presk.tune.features import features, outline_features
from presk.tune.harness import lower_point
from presk.tune.machine import Machine
from presk.tune.model import Fit, Profile, price
from presk.tune.pricing import Pricer, price_points

MACHINE = Machine(
    cpu=0, l1d=4096, l2=1 << 16, l3=1 << 20, l3_shared=2, workers=2, registers=32, vector_bytes=64
)
GROUPS = [f"{t}+lanes{n}+w{w}" for t in ("f64", "f32", "bf16") for n in (1, 8, 16) for w in (1, 2)]
PROFILE = Profile(
    "layout",
    MACHINE,
    (),
    "pnorm",
    Fit(
        0.5,
        2.0,
        (4e10, 2e10, 1e10),
        2.5,
        {g: 1e9 * (1 + i) for i, g in enumerate(GROUPS)},
        {g: 2e9 * (1 + i % 5) for i, g in enumerate(GROUPS)},
    ),
    0.1,
    0.9,
)


def _nests(case: str, dtype: str, tmp_path: Path) -> list[Captured]:
    return test_layouts._nests(case, dtype, tmp_path, tuple(NestKind))


def _sample(points: list[Layout]) -> list[Layout]:
    """The first points (zero, the default, the first tiles), then every seventh."""
    return points[:24] + points[24::7]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("case", sorted(test_layouts.CASES))
def test_prices_without_kernels_are_the_built_kernels(
    case: str, dtype: str, threads: int, tmp_path: Path
) -> None:
    nests = _nests(case, dtype, tmp_path)
    assert any(n.nest.kind is NestKind.CONTRACTION for n in nests)
    compared = tiled = refused = 0
    for nest in nests:
        pricer = Pricer(nest, PROFILE, threads)
        for point in _sample(points_of(nest, threads, "full")):
            built = lower_point(nest, point, threads)
            outlines = pricer.outlines(point)
            assert (outlines is None) == (built.refused is not None), (nest.site, point.text())
            if outlines is None:
                refused += 1
                continue
            want = features(built.kernels, nest.dtype, MACHINE, threads)
            got = outline_features(outlines, nest.dtype, MACHINE, threads)
            assert got == want, (nest.site, point.text())
            assert pricer.price(point) == price(nest, built, PROFILE, threads)
            compared += 1
            tiled += point.form == "tiled"
    assert tiled > 30 and compared > tiled
    if threads == 2:
        assert refused > 0  # splits a nest cannot take are among those compared


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_every_point_of_the_attention_scores_ranks_the_same(dtype: str, tmp_path: Path) -> None:
    """The whole space of one nest: the same prices, so the same plan's choice."""
    nests = [n for n in _nests("attention", dtype, tmp_path) if n.nest.kind is NestKind.CONTRACTION]
    nest = nests[0]
    points = points_of(nest, 2, "full")
    fast = price_points(nest, points, PROFILE, 2)
    slow = [price(nest, lower_point(nest, p, 2), PROFILE, 2) for p in points]
    assert fast == slow
    costed = [(c, i) for i, c in enumerate(fast) if c is not None]
    assert len(costed) > 100
    assert min(costed) == min((c, i) for i, c in enumerate(slow) if c is not None)


@pytest.mark.parametrize("dtype", ["float64", "float32", "uint16", "int32"])
def test_the_harness_places_its_arrays_as_the_arena_does(dtype: str) -> None:
    """Every array a point runs on starts at a 64-byte boundary, as in a native frame."""
    import numpy as np

    from presk.host.program import ALIGN
    from presk.tune.harness import aligned

    for n in (1, 7, 1024 * 1024 + 3):
        x = (np.arange(n) % 251).astype(dtype).reshape(-1, 1)
        y = aligned(x)
        assert y.ctypes.data % ALIGN == 0
        assert y.shape == x.shape and y.dtype == x.dtype and y.tobytes() == x.tobytes()
