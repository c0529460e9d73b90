"""Every point of a nest priced by the layout model, building as few kernels as it can.

What `presk plan` and `presk reprice` do for each nest. A tiled point of a
contraction (most of a space) is outlined from its parameters (tiled.py),
its kernel never built. Any other point is lowered once without its split,
and each of its splits is checked on that kernel and priced from the
kernel's outline with the split's workers (a split changes only which loop
the workers share). The prices are those of pricing each point's built
kernels (model.py `price` over harness.py `lower_point`), to the bit:
tests/test_plans_fast.py compares them.
"""

from __future__ import annotations

from dataclasses import replace

from presk.host.program import split_kernel
from presk.kernel import ir
from presk.kernel.layout import Layout, NestKind
from presk.kernel.lower import Launch, lower
from presk.kernel.lower.dispatch import lower_pack
from presk.kernel.lower.layouts import LayoutError, check_point, panel_of, with_pack_input
from presk.tune.capture import Captured
from presk.tune.features import outline_features
from presk.tune.model import Profile, predict
from presk.tune.outline import Outline, of_kernel
from presk.tune.tiled import outline_tiled, split_tiled

# A point's kernels before their split: the pack's outline (if any), and the
# contraction's outline and (where it was built) kernel.
_Unsplit = tuple[tuple[Outline, ...], Outline, ir.Kernel | None]


class Pricer:
    """One nest's points priced, each unsplit kernel outlined (or built) once."""

    def __init__(self, nest: Captured, profile: Profile, threads: int) -> None:
        self.nest, self.profile, self.threads = nest, profile, threads
        self._unsplit: dict[Layout, _Unsplit | None] = {}
        self._pack: tuple[Outline, Launch] | None = None
        # Prices by outline: a split the default makes anyway is the same kernel.
        self._prices: dict[tuple[tuple[int, bool, int, int], ...], float] = {}

    def price(self, point: Layout) -> float | None:
        """The predicted µs of `point`; None for a point the nest cannot take."""
        kernels = self.outlines(point)
        if kernels is None:
            return None
        key = tuple((id(k.body), k.split, k.split_depth, k.workers) for k in kernels)
        found = self._prices.get(key)
        if found is None:
            terms = outline_features(kernels, self.nest.dtype, self.profile.machine, self.threads)
            found = self._prices[key] = predict(terms, self.profile)
        return found

    def outlines(self, point: Layout) -> tuple[Outline, ...] | None:
        """The outlines of the point's kernels, split as it states; None if refused."""
        try:
            check_point(self.nest.nest, point)
        except LayoutError:
            return None
        base = replace(point, split=None)
        if base not in self._unsplit:
            self._unsplit[base] = self._outline(base)
        found = self._unsplit[base]
        if found is None:
            return None
        first, outline, kernel = found
        if kernel is None:
            split = split_tiled(outline, point.split, self.threads)
            return None if split is None else (*first, split)
        try:
            k = split_kernel(kernel, point.split, self.threads, self.threads)
        except LayoutError:
            return None
        return (
            *first,
            replace(outline, split=k.split, split_depth=k.split_depth, workers=k.workers),
        )

    def _outline(self, base: Layout) -> _Unsplit | None:
        launch = self.nest.launch
        first: tuple[Outline, ...] = ()
        try:
            if base.pack:
                pack, launch = self.pack()
                first = (pack,)
            if base.form == "tiled" and self.nest.nest.kind is NestKind.CONTRACTION:
                return first, outline_tiled(launch, base), None
            kernel = lower(launch, self.nest.dtype, True, base)
        except LayoutError:
            return None
        return first, of_kernel(kernel), kernel

    def pack(self) -> tuple[Outline, Launch]:
        """The pack kernel's outline, and the contraction's launch reading its panel."""
        if self._pack is None:
            launch = self.nest.launch
            kernel = lower_pack(launch, self.nest.dtype)
            self._pack = (of_kernel(kernel), with_pack_input(launch, panel_of(launch)))
        return self._pack


def price_points(
    nest: Captured, points: list[Layout], profile: Profile, threads: int
) -> list[float | None]:
    """Each point's predicted µs on `threads` workers (None: refused)."""
    pricer = Pricer(nest, profile, threads)
    return [pricer.price(p) for p in points]


__all__ = ["Pricer", "price_points"]
