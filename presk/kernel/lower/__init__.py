"""Lowering: a primitive (or a fused group) at concrete shapes to a PSK-Kernel kernel.

`lower(launch, dtype, tiles, layout)` takes a `Launch` (the primitive steps of one
fusion group, with the concrete buffers they read and the buffer the root
writes) and returns an `ir.Kernel`. The loop nests follow the reference
interpreter's semantics rule for rule. One module per family:

  base.py          Launch, Step, PrimName, Names, loop nests and alignment
  dispatch.py      lower(): a launch to the rule of its root (RULES)
  elementwise.py   fused chains and elementwise primitives (ELEMENTWISE), dropout
  power.py         pow: the chain of multiplications, or repeated squaring
  reductions.py    sum, mean, max, sum_to, reduce_vjp, zeros_like
  contractions.py  dot, ein and their adjoints, row-wise
  tiles.py         the tiled and packed forms of a matrix product
  adjoint_tiles.py contractions as products over views, and their packed form
  layouts.py       one builder for every tiled point of a plan's layout space
  softmax.py       softmax, log_softmax, cross_entropy, argmax, sample
  gathers.py       embed, one_hot, causal_mask, positions, layout copies
"""

from presk.kernel.lower.base import Launch, LoweringError, Names, PrimName, Step
from presk.kernel.lower.dispatch import ELEMENTWISE, RULES, lower

__all__ = ["ELEMENTWISE", "RULES", "Launch", "LoweringError", "Names", "PrimName", "Step", "lower"]
