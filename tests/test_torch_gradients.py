"""The programs' gradients against PyTorch autograd, in float64, on the same inputs.

Each model's forward pass is written again in torch, by hand, mirroring the .psk
program operation for operation (RMSNorm as x / sqrt(mean(x²) + eps) · γ, LayerNorm
with the biased variance, exact gelu through erf, causal softmax over the allowed
positions, split_heads as [.., t, h·hd + d] → [.., h, t, d]). θ and the inputs are
those the reference interpreter synthesizes, which are all binary64 numbers, so both
sides start from exactly the same values: presk's gradient (exact to 512 bits) and
torch's (float64) must agree to 1e-10, relative to each leaf's largest entry. The
losses are compared too, which checks that the two forward passes are the same.

Skipped where torch is not installed (`pip install torch`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gmpy2
import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: the float64 autograd cross-check needs it"
)

from test_gradients import (  # noqa: E402  (after the skip)
    BITS,
    MINIGPT_CONSTS,
    inputs_for,
    load,
    minigpt_theta,
    perturbed,
)

from presk.interp.reference import Tree  # noqa: E402
from presk.interp.tensor import Tensor  # noqa: E402

F = torch.nn.functional
RTOL = 1e-10


def to_numpy(t: Tensor) -> np.ndarray:
    return np.array([float(v) for v in t.flat()], dtype=np.float64).reshape(t.shape)


def to_torch(t: Tensor, grad: bool = False) -> Any:
    return torch.tensor(to_numpy(t), dtype=torch.float64, requires_grad=grad)


def compare(
    path: str,
    loss_fn: str,
    grad_fn: str,
    dims: dict[str, int],
    forward: Callable[[dict[str, Any], list[Any]], Any],
    consts: tuple[tuple[str, int], ...] = (),
    prepare: Callable[[Tree], Tree] | None = None,
) -> float:
    """presk's loss and θ-gradient against `forward(θ as torch leaves, other inputs)`;
    returns the largest relative difference seen."""
    prog = load(path, consts)
    interp = prog.interps["store"]
    with gmpy2.context(precision=BITS):
        args = inputs_for(prog, loss_fn, dims)
        theta = args[0]
        assert isinstance(theta, Tree)
        if prepare is not None:
            theta = prepare(theta)
        args = [theta, *args[1:]]
        loss = float(interp.call(loss_fn, dims, args).item())
        grad = interp.call(grad_fn, dims, args)
    assert isinstance(grad, Tree)
    leaves = {p: to_torch(t, grad=True) for p, t in theta.leaves()}
    others = [to_torch(a) if a.kind.value == "real" else a for a in args[1:]]
    value = forward(leaves, others)
    value.backward()
    assert value.dtype == torch.float64
    assert abs(value.item() - loss) <= RTOL * max(1.0, abs(loss)), (value.item(), loss)
    expected = dict(grad.leaves())
    assert list(expected) == list(leaves)
    # Relative to each leaf's largest entry; a leaf whose gradient is zero in exact
    # arithmetic (MiniGPT's k_proj.b: softmax ignores a per-row shift) is measured
    # against the whole gradient instead of its own float64 rounding noise.
    overall = max(float(leaf.grad.abs().max()) for leaf in leaves.values())
    worst = 0.0
    for name, leaf in leaves.items():
        ours = to_numpy(expected[name])
        theirs = leaf.grad.numpy()
        scale = max(float(np.max(np.abs(theirs))), 1e-6 * overall)
        err = float(np.max(np.abs(ours - theirs)))
        assert err <= RTOL * scale, f"{name}: max |presk - torch| {err:.3g}, scale {scale:.3g}"
        worst = max(worst, err / scale)
    assert overall > 0
    return worst


def ids_of(t: Any) -> Any:
    return torch.tensor(np.array(t.data.tolist(), dtype=np.int64))


# ---------------------------------------------------------------- tutorial 04


def linear_loss(p: dict[str, Any], inputs: list[Any]) -> Any:
    x, y = inputs
    y_hat = x @ p["w"] + p["b"]
    return ((y_hat - y) ** 2).mean()


def test_tutorial_04_against_torch() -> None:
    compare("tutorial/04_grad.psk", "loss", "loss_grad", {"D": 3, "B": 2}, linear_loss)


# ---------------------------------------------------------------- the MLP


def gelu(x: Any) -> Any:
    return F.gelu(x)  # the exact form, x · Φ(x) through erf (approximate="none")


def mlp_loss(p: dict[str, Any], inputs: list[Any]) -> Any:
    x, y = inputs
    h = gelu(x @ p["w1"] + p["b1"])
    return ((h @ p["w2"] + p["b2"] - y) ** 2).mean()


def test_mlp_against_torch() -> None:
    compare("tests/examples/mlp/mlp.psk", "mse", "mse_grad", {"D": 2, "B": 2}, mlp_loss)


def test_mlp_against_torch_perturbed_theta() -> None:
    compare(
        "tests/examples/mlp/mlp.psk",
        "mse",
        "mse_grad",
        {"D": 3, "B": 4},
        mlp_loss,
        prepare=perturbed("0.5"),
    )


# ---------------------------------------------------------------- tutorial 06's tower


def rms_norm(x: Any, gamma: Any, eps: float = 1e-6) -> Any:
    ms = (x**2).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(ms + eps) * gamma


def tower_loss(p: dict[str, Any], inputs: list[Any]) -> Any:
    x, y = inputs
    for i in range(p["blocks.norm.γ"].shape[0]):
        h = gelu(rms_norm(x, p["blocks.norm.γ"][i]))
        x = x + (h @ p["blocks.proj.w"][i] + p["blocks.proj.b"][i])
    out = rms_norm(x, p["final.γ"])
    return ((out - y) ** 2).mean()


def test_tower_against_torch() -> None:
    compare("tests/ad/tower_grad.psk", "loss", "loss_grad", {"B": 2}, tower_loss)


def test_tower_against_torch_perturbed_theta() -> None:
    compare(
        "tests/ad/tower_grad.psk", "loss", "loss_grad", {"B": 3}, tower_loss,
        prepare=perturbed("0.5"),
    )  # fmt: skip


# ---------------------------------------------------------------- the tiny MiniGPT


def layer_norm(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> Any:
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # biased
    return (x - mu) / torch.sqrt(var + eps) * gamma + beta


def split_heads(x: Any, heads: int) -> Any:
    b, t, d = x.shape
    return x.reshape(b, t, heads, d // heads).transpose(1, 2)  # [b, h, t, hd]


def merge_heads(x: Any) -> Any:
    b, h, t, hd = x.shape
    return x.transpose(1, 2).reshape(b, t, h * hd)


def self_attention(p: dict[str, Any], i: int, x: Any, heads: int) -> Any:
    def proj(name: str, v: Any) -> Any:
        return v @ p[f"blocks.attn.{name}.w"][i] + p[f"blocks.attn.{name}.b"][i]

    q = split_heads(proj("q_proj", x), heads)
    k = split_heads(proj("k_proj", x), heads)
    v = split_heads(proj("v_proj", x), heads)
    hd = q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)  # [b, h, seq, seq2]
    t = x.shape[1]
    allowed = torch.tril(torch.ones(t, t, dtype=torch.bool))  # seq2 <= seq
    a = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    return proj("o_proj", merge_heads(a @ v))


def minigpt_loss(p: dict[str, Any], inputs: list[Any], heads: int) -> Any:
    ids, targets = (ids_of(t) for t in inputs)
    t = ids.shape[1]
    x = p["tok.table"][ids] + p["pos.table"][torch.arange(t)]
    for i in range(p["blocks.ln1.γ"].shape[0]):
        h = x + self_attention(
            p, i, layer_norm(x, p["blocks.ln1.γ"][i], p["blocks.ln1.β"][i]), heads
        )
        n = layer_norm(h, p["blocks.ln2.γ"][i], p["blocks.ln2.β"][i])
        up = gelu(n @ p["blocks.mlp.up.w"][i] + p["blocks.mlp.up.b"][i])
        x = h + (up @ p["blocks.mlp.down.w"][i] + p["blocks.mlp.down.b"][i])
    logits = layer_norm(x, p["ln_f.γ"], p["ln_f.β"]) @ p["head.w"] + p["head.b"]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def test_minigpt_against_torch() -> None:
    heads = dict(MINIGPT_CONSTS)["H"]
    compare(
        "tests/ad/minigpt_grad.psk",
        "loss",
        "loss_grad",
        {"B": 2, "T": 4},
        lambda p, inputs: minigpt_loss(p, inputs, heads),
        consts=MINIGPT_CONSTS,
        prepare=minigpt_theta,
    )


def test_minigpt_against_torch_perturbed_theta() -> None:
    # Every leaf moved off its initial value (γ = 1, β = b = 0 could hide a dropped term).
    heads = dict(MINIGPT_CONSTS)["H"]
    compare(
        "tests/ad/minigpt_grad.psk",
        "loss",
        "loss_grad",
        {"B": 2, "T": 4},
        lambda p, inputs: minigpt_loss(p, inputs, heads),
        consts=MINIGPT_CONSTS,
        prepare=perturbed("0.25"),
    )
