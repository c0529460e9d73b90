"""The lowering's entry point: a launch at concrete shapes to a kernel.

A fused launch (several steps) or an elementwise primitive is one nest
(elementwise.py); any other primitive has one rule in `RULES`. Every
`PrimName` is in exactly one of `ELEMENTWISE` and `RULES` (a unit test says
so). The options are `tiles` (whether a contraction may take a tiled form) and
a plan's `layout` for the nest (kernel/layout.py, built by layouts.py).
"""

from __future__ import annotations

import presk.kernel.lower.contractions as contractions
import presk.kernel.lower.gathers as gathers
import presk.kernel.lower.layouts as layouts
import presk.kernel.lower.reductions as reductions
import presk.kernel.lower.softmax as softmax
from presk.kernel import ir
from presk.kernel.layout import Layout
from presk.kernel.lower.base import Launch, LoweringError, Names, PrimName, Rule, prim_name
from presk.kernel.lower.elementwise import ELEMENTWISE, dropout, elementwise

RULES: dict[PrimName, Rule] = {
    PrimName.SUM: reductions.reduce,
    PrimName.MEAN: reductions.reduce,
    PrimName.MAX: reductions.reduce,
    PrimName.SUM_TO: reductions.sum_to,
    PrimName.REDUCE_VJP: reductions.reduce_vjp,
    PrimName.ZEROS_LIKE: reductions.fill,
    PrimName.DOT: contractions.dot,
    PrimName.EIN: contractions.ein,
    PrimName.DOT_VJP_L: contractions.dot_vjp_l,
    PrimName.DOT_VJP_R: contractions.dot_vjp_r,
    PrimName.EIN_VJP_L: contractions.ein_vjp_l,
    PrimName.EIN_VJP_R: contractions.ein_vjp_r,
    PrimName.SOFTMAX: softmax.softmax,
    PrimName.LOG_SOFTMAX: softmax.softmax,
    PrimName.SOFTMAX_VJP: softmax.softmax_vjp,
    PrimName.LOG_SOFTMAX_VJP: softmax.softmax_vjp,
    PrimName.CROSS_ENTROPY: softmax.cross_entropy,
    PrimName.CROSS_ENTROPY_VJP: softmax.cross_entropy_vjp,
    PrimName.ARGMAX: softmax.argmax,
    PrimName.SAMPLE: softmax.sample,
    PrimName.DROPOUT: dropout,
    PrimName.EMBED: gathers.embed,
    PrimName.EMBED_VJP: gathers.embed_vjp,
    PrimName.ONE_HOT: gathers.one_hot,
    PrimName.CAUSAL_MASK: gathers.causal_mask,
    PrimName.POSITIONS: gathers.positions,
    PrimName.MERGE: gathers.copy,
    PrimName.SPLIT: gathers.copy,
    PrimName.SPLIT_HEADS: gathers.copy,
    PrimName.MERGE_HEADS: gathers.copy,
    PrimName.SHAPE_VJP: gathers.copy,
}


def lower(
    launch: Launch, dtype: str, tiles: bool = True, layout: Layout | None = None
) -> ir.Kernel:
    """The kernel of a launch, computing in `dtype` (f64, f32 or bf16).

    `tiles=False` gives point zero (row-wise contractions, no lanes); True lets a
    contraction take its tiled forms. A `layout` (a plan's point for this nest,
    checked by `layouts.check_point`) chooses among them; its split is the
    caller's (sched/split.py).
    """
    root = launch.steps[-1]
    outputs = tuple(launch.outputs) if launch.outputs else (launch.output,)
    point = layout or Layout()
    names = Names(
        tiles=tiles and point.form != "rowwise",
        passes=point.passes or 3,
        workers=None if point.split is None else max(1, point.split.workers),
        epilogue=launch.epilogue,
    )
    if point.form == "tiled":
        body = layouts.tiled(root, launch, names, point)
    elif len(launch.steps) > 1:
        body = elementwise(launch, names)
    else:
        prim = prim_name(root.name)
        rule = RULES.get(prim)
        body = elementwise(launch, names) if rule is None else rule(root, launch, names)
    if launch.epilogue is not None and not names.finished:
        raise LoweringError(f"`{root.name}` has no form that finishes with the bias epilogue")
    lanes = point.lanes != 1 or point.form == "tiled"
    # A point of one lane is scalar code, and so is a tiled point whose lanes its columns
    # cannot fill (eight lanes over four output columns): its tile is written in scalars.
    scalar = not ir.has_vectors(body) if point.form == "tiled" else point.lanes == 1
    return ir.Kernel(
        launch.name, dtype, tuple(launch.inputs), outputs, body, lanes=lanes, vectorize=not scalar
    )


def lower_pack(launch: Launch, dtype: str) -> ir.Kernel:
    """The kernel that copies a contraction's operand 1 into its [batch…, K, J] panel."""
    panel = layouts.panel_of(launch)
    body = layouts.pack_body(launch, panel, Names(tiles=False))
    return ir.Kernel("pack", dtype, (layouts.operand_1(launch),), (panel,), body)


__all__ = ["ELEMENTWISE", "RULES", "lower", "lower_pack"]
