"""MiniGPT written in PyTorch, on presk's synthesized θ, ids and targets.

Mirrors tests/examples/minigpt/minigpt.psk: token and position tables,
pre-norm blocks (causal multi-head attention, a gelu perceptron), a final
LayerNorm and the head; and train_minigpt.psk's loss, the mean
cross-entropy. corpus/05_gpt.psk is the same model under other names
(COURSE_NAMES). Used by benchmarks/native.py for the eager ratios: the
forward, the loss, and zero_grad + forward + backward of the loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

# corpus/05_gpt.psk's names for the same model (benchmarks/course_gpt.psk), as MiniGPT's.
COURSE_NAMES = {
    "tokens": "tok",
    "places": "pos",
    "norm1": "ln1",
    "norm2": "ln2",
    "ff": "mlp",
    "query": "q_proj",
    "key": "k_proj",
    "value": "v_proj",
    "out": "o_proj",
    "norm": "ln_f",
    "readout": "head",
}


def _layer_norm(x: torch.Tensor, g: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + 1e-5) * g + b


def _dotted(tree: Any, names: dict[str, str], prefix: str = "") -> dict[str, np.ndarray]:
    """A host parameter tree (nested dicts of arrays) as MiniGPT's dotted leaves, in order."""
    out: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        path = prefix + names.get(key, key)
        if isinstance(value, dict):
            out.update(_dotted(value, names, path + "."))
        else:
            out[path] = np.ascontiguousarray(value, dtype=np.float32)
    return out


def forward_from_presk(
    inputs: list[Any], consts: dict[str, int], names: dict[str, str] | None = None
) -> Callable[[], torch.Tensor]:
    """A closure computing the logits for presk's host inputs (θ as nested dicts, ids)."""
    theta, ids = inputs
    p = {k: torch.from_numpy(v) for k, v in _dotted(theta, names or {}).items()}
    return _forward(p, torch.from_numpy(np.asarray(ids, dtype=np.int64)), consts)


def loss_step_from_presk(
    inputs: list[Any], consts: dict[str, int], names: dict[str, str] | None = None
) -> tuple[Callable[[], torch.Tensor], Callable[[], None], list[torch.Tensor]]:
    """For presk's host inputs (θ, ids, targets): the loss, a training step's gradient
    work, the leaves.

    The step is zero_grad, forward and `backward()`; the leaves are θ's in presk's order,
    their `.grad` the gradient after a step. `names` renames θ's keys to MiniGPT's.
    """
    theta, ids, targets_array = inputs
    p = {k: torch.from_numpy(v).requires_grad_() for k, v in _dotted(theta, names or {}).items()}
    forward = _forward(p, torch.from_numpy(np.asarray(ids, dtype=np.int64)), consts)
    targets = torch.from_numpy(np.asarray(targets_array, dtype=np.int64)).reshape(-1)
    leaves = list(p.values())

    def loss() -> torch.Tensor:
        logits = forward()
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets)

    def step() -> None:
        for leaf in leaves:
            leaf.grad = None
        loss().backward()  # type: ignore[no-untyped-call]

    return loss, step, leaves


def _forward(
    p: dict[str, torch.Tensor], ids: torch.Tensor, consts: dict[str, int]
) -> Callable[[], torch.Tensor]:
    heads = consts["H"]
    t = ids.shape[1]
    allowed = torch.tril(torch.ones(t, t, dtype=torch.bool))
    gelu = torch.nn.GELU()

    def attention(i: int, x: torch.Tensor) -> torch.Tensor:
        def proj(name: str, v: torch.Tensor) -> torch.Tensor:
            return v @ p[f"blocks.attn.{name}.w"][i] + p[f"blocks.attn.{name}.b"][i]

        b, tt, d = x.shape

        def split(v: torch.Tensor) -> torch.Tensor:
            return v.reshape(b, tt, heads, d // heads).transpose(1, 2)

        q, k, v = split(proj("q_proj", x)), split(proj("k_proj", x)), split(proj("v_proj", x))
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        a = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
        return proj("o_proj", (a @ v).transpose(1, 2).reshape(b, tt, d))

    def forward() -> torch.Tensor:
        x = p["tok.table"][ids] + p["pos.table"][torch.arange(t)]
        for i in range(p["blocks.ln1.γ"].shape[0]):
            h = x + attention(i, _layer_norm(x, p["blocks.ln1.γ"][i], p["blocks.ln1.β"][i]))
            n = _layer_norm(h, p["blocks.ln2.γ"][i], p["blocks.ln2.β"][i])
            up = gelu(n @ p["blocks.mlp.up.w"][i] + p["blocks.mlp.up.b"][i])
            x = h + (up @ p["blocks.mlp.down.w"][i] + p["blocks.mlp.down.b"][i])
        return _layer_norm(x, p["ln_f.γ"], p["ln_f.β"]) @ p["head.w"] + p["head.b"]

    return forward


def train_step(
    theta: dict[str, np.ndarray],
    ids: np.ndarray,
    targets: np.ndarray,
    consts: dict[str, int],
    adamw: dict[str, float],
) -> tuple[Callable[[], torch.Tensor], Callable[[], None]]:
    """For θ as presk's dotted leaves: the loss, and one eager training step
    (zero_grad, forward, backward, `torch.optim.AdamW.step`) with presk's constants."""
    p = {
        path: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).requires_grad_()
        for path, a in theta.items()
    }
    forward = _forward(p, torch.from_numpy(ids), consts)
    flat_targets = torch.from_numpy(targets).reshape(-1)
    opt = torch.optim.AdamW(
        list(p.values()),
        lr=adamw["lr"],
        betas=(adamw["beta1"], adamw["beta2"]),
        eps=adamw["eps"],
        weight_decay=adamw["weight_decay"],
    )

    def loss() -> torch.Tensor:
        logits = forward()
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), flat_targets)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss().backward()  # type: ignore[no-untyped-call]
        opt.step()

    return loss, step


def generate_greedy(
    theta: dict[str, np.ndarray],
    prompt: list[int],
    tokens: int,
    consts: dict[str, int],
    context: int,
) -> list[int]:
    """The eager PyTorch loop: the last `context` tokens in, the argmax of the last row out."""
    p = {
        path: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
        for path, a in theta.items()
    }
    sequence = list(prompt)
    with torch.no_grad():
        for _ in range(tokens):
            ids = torch.tensor([sequence[-context:]], dtype=torch.int64)
            logits = _forward(p, ids, consts)()
            sequence.append(int(torch.argmax(logits[0, -1])))
    return sequence[len(prompt) :]
