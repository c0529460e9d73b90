"""The default layout of a nest, stated as a plan states it.

`make plan-check` writes, for every example entry, a plan whose every
point states what the default chooses (its split, or none; a softmax's
three passes; the row-wise form where the default is row-wise) and checks
that the entry prints the same C text under it, byte for byte: a plan
that states the defaults is no plan at all.
"""

from __future__ import annotations

from typing import assert_never

from presk.host.plan import Plan
from presk.kernel import ir
from presk.kernel.layout import NO_SPLIT, Layout, NestKind, Split
from presk.kernel.lower import Launch, lower
from presk.kernel.text import kernel_text
from presk.sched.split import splittable
from presk.tune.capture import Capture, Captured


def stated_default(nest: Captured, threads: int) -> Layout:
    """What the default lowering chooses for `nest` on `threads` workers, as a point.

    A choice the default makes differently at the site's shapes is left unstated."""
    launches = [(nest.launch, nest.dtype), *nest.others]
    kernels = [lower(launch, dtype, True) for launch, dtype in launches]
    splits = {threads > 1 and splittable(k) for k in kernels}
    split = None if len(splits) > 1 else Split(0, threads) if splits == {True} else NO_SPLIT
    if split is not None and not _lowers_the_same(launches, kernels, Layout(split=split)):
        # A stated split also states the workers, which a packed product's column
        # blocks follow (one block for one worker), where the default's follow the
        # machine's cores: the default's kernel is not the stated one's.
        split = None
    match nest.nest.kind:
        case NestKind.CONTRACTION:
            row_wise = all(
                kernel_text(lower(launch, dtype, False)) == kernel_text(k)
                for (launch, dtype), k in zip(launches, kernels, strict=True)
            )
            return Layout(form="rowwise" if row_wise else None, split=split)
        case NestKind.SOFTMAX:
            return Layout(passes=3, split=split)
        case NestKind.ELEMENTWISE | NestKind.OTHER:
            return Layout(split=split)
        case _:
            assert_never(nest.nest.kind)


def _lowers_the_same(
    launches: list[tuple[Launch, str]], kernels: list[ir.Kernel], point: Layout
) -> bool:
    """Whether `point` lowers every launch to the default's kernel text."""
    return all(
        kernel_text(lower(launch, dtype, True, point)) == kernel_text(k)
        for (launch, dtype), k in zip(launches, kernels, strict=True)
    )


def defaults_plan(capture: Capture, threads: int) -> Plan:
    """A plan stating the default of every nest of a captured entry."""
    return Plan(layouts={n.site: stated_default(n, threads) for n in capture.nests})


__all__ = ["defaults_plan", "stated_default"]
