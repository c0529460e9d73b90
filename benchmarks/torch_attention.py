"""tutorial/03_attention.psk's `attend` in PyTorch, two ways, on presk's q, k and v.

`attend` scores q·k over `hd` scaled by 1/√HD, takes the softmax over `seq2` where
`causal_mask(seq: T)` holds (position i reads the positions j ≤ i) and contracts the
weights with v over `seq2`. That is exactly `scaled_dot_product_attention` with
`is_causal=True` and its default scale 1/√(last axis); `eager` spells the same steps out.
Used by benchmarks/native.py for the attention ratios.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def attention_from_presk(
    inputs: list[Any],
) -> tuple[Callable[[], torch.Tensor], Callable[[], torch.Tensor]]:
    """For presk's host inputs (q, k, v), each [batch, heads, seq, hd]: SDPA and eager."""
    q, k, v = (torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)) for x in inputs)
    t = q.shape[-2]
    allowed = torch.tril(torch.ones(t, t, dtype=torch.bool))
    scale = 1 / math.sqrt(q.shape[-1])

    def sdpa() -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def eager() -> torch.Tensor:
        s = (q @ k.transpose(-1, -2)) * scale
        return torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1) @ v

    return sdpa, eager
