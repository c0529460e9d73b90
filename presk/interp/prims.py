"""Every primitive of the language, evaluated exactly on `Tensor` values.

Provides broadcasting (`align`, `expand`), elementwise arithmetic (`add` … `minimum`),
the unary functions (`neg` … `abs_`), reductions (`reduce_sum`, `reduce_mean`,
`reduce_max`), contractions (`dot`, `ein`), the softmax family (`softmax`, `log_softmax`,
`cross_entropy`, `argmax`, `sample`), embeddings (`embed`, `embed_vjp`, `one_hot`),
generated tensors (`positions`, `causal_mask`), `dropout`, shape operations (`merge`,
`split`, `split_heads`, `merge_heads`, `permute`, `transpose`, `rename_axis`, `sum_to`,
`broadcast_like`) and conversion (`real`).

Invariants (the native kernels reproduce them bit for bit, so they are semantics, not
implementation detail):

* Everything is computed in the CURRENT gmpy2 context; the caller sets the precision
  (`gmpy2.context(gmpy2.get_context(), precision=bits)`); nothing here changes it.
* Every elementary operation (+, -, *, /, exp, log, sqrt, tanh, sin, cos, erf, pow) is a
  single correctly rounded MPFR operation. Results that merely select an input (max, min,
  relu, abs, neg, gathers, shape operations) are that input unchanged.
* Every sum adds its terms sequentially in increasing index order, starting from the first
  term: acc = t0; acc = acc + t1; ... . Sums over several axes enumerate them row-major.
  An empty sum is +0.
* NaN never arises: an operation that would produce one (inf - inf, 0 * inf, log or sqrt
  of a negative number, a negative base to a non-integer power) raises `PrimError`, as do
  a division by zero and zero to a negative power. log(0) is -inf (allowed: it is the
  exact limit and only feeds further arithmetic that is itself checked).
* Broadcasting (`align`): the operand with fewer axes is aligned with the trailing axes of
  the other by position when at every aligned position the sizes are equal and the names
  are equal or at least one is None (the result takes the non-None name); otherwise, when
  every axis of the smaller operand is named, its names are distinct and each occurs
  exactly once in the larger operand with the same size, by name (the result is the larger
  operand's axes). Operands of equal rank align by position only. Size-1 axes are never
  stretched. Anything else raises `PrimError("cannot broadcast …")`.

Kind errors (a REAL primitive handed an IDX tensor, say) are compiler bugs, not program
failures, and raise `TypeError`.

The primitives live by concern in the modules beside this one (elementary, broadcast,
elementwise, reductions, contractions, softmax, gathers, shape_ops); this module gathers
them into one namespace, which the interpreter and the adjoints use.
"""

from __future__ import annotations

from presk.interp.broadcast import Alignment, align, expand
from presk.interp.contractions import dot, ein
from presk.interp.elementary import Number as Number
from presk.interp.elementary import real
from presk.interp.elementwise import (
    abs_,
    add,
    cos,
    div,
    dropout,
    erf,
    exp,
    gelu,
    log,
    maximum,
    minimum,
    mul,
    neg,
    pow_,
    relu,
    sin,
    sqrt,
    sub,
    tanh,
)
from presk.interp.gathers import causal_mask, embed, embed_vjp, one_hot, positions
from presk.interp.reductions import axis_index, reduce_max, reduce_mean, reduce_sum
from presk.interp.shape_ops import (
    broadcast_like,
    merge,
    merge_heads,
    permute,
    rename_axis,
    split,
    split_heads,
    sum_to,
    transpose,
)
from presk.interp.softmax import argmax, cross_entropy, log_softmax, sample, softmax

__all__ = [
    "Alignment",
    "abs_",
    "add",
    "align",
    "argmax",
    "axis_index",
    "broadcast_like",
    "causal_mask",
    "cos",
    "cross_entropy",
    "div",
    "dot",
    "dropout",
    "ein",
    "embed",
    "embed_vjp",
    "erf",
    "exp",
    "expand",
    "gelu",
    "log",
    "log_softmax",
    "maximum",
    "merge",
    "merge_heads",
    "minimum",
    "mul",
    "neg",
    "one_hot",
    "permute",
    "positions",
    "pow_",
    "real",
    "reduce_max",
    "reduce_mean",
    "reduce_sum",
    "relu",
    "rename_axis",
    "sample",
    "sin",
    "softmax",
    "split",
    "split_heads",
    "sqrt",
    "sub",
    "sum_to",
    "tanh",
    "transpose",
]
