"""A gradient runs each forward kernel once, and calls return without copying their results.

Counted on the recorded host program (no C compiler runs): each function's
`.fwd` is called as often in the gradient as the function in the forward
pass, no function of the source runs as it is, and the only copies left are
the folds' starting values. `--remat recompute` runs forward kernels again.
"""

from __future__ import annotations

from fractions import Fraction

from presk.entries import bind_dims, find_entry
from presk.host.ir import executed, total
from presk.host.realization import Realization
from presk.pipeline import Request, front_end, run_back_end

TINY = {"V": 64, "D": 16, "H": 2, "L": 2}
DERIVED = (".fwd", ".bwd", ".vjp", ".grad", ".value_vjp")


def counts(path: str, entry: str, remat: str = "store") -> dict[tuple[str, str], int]:
    checked, _ = front_end(path, {k: Fraction(v) for k, v in TINY.items()})
    chosen = find_entry(checked, entry)
    binding = bind_dims(chosen, {"B": "2", "T": "8"})
    request = Request(checked, chosen, binding, Realization("f32"), 1, remat)  # type: ignore[arg-type]
    state = run_back_end(request, until="record")
    assert state.host is not None
    return executed(state.host.entry)


def test_the_minigpt_gradient_runs_its_forward_kernels_once() -> None:
    grad = counts("tests/ad/minigpt_grad.psk", "loss_grad")
    forward = counts("tests/ad/minigpt_grad.psk", "loss")
    for (what, fn), n in forward.items():
        if what == "calls":
            fwd = [m for (w, f), m in grad.items() if w == what and f.startswith(fn + ".fwd")]
            assert sum(fwd) == n, (fn, n, fwd)
    # Kept values are outputs, so fewer are fused: at least the forward's launches.
    in_fwd = sum(n for (what, fn), n in grad.items() if what == "launches" and ".fwd" in fn)
    assert in_fwd >= total(forward, "launches") > 0
    # Nothing of the source runs undifferentiated inside the gradient.
    plain = {fn for (what, fn), n in grad.items() if n and not any(d in fn for d in DERIVED)}
    assert not plain, plain
    # No callee's `.vjp` (which would run its forward pass again) is called.
    assert not [fn for _, fn in grad if ".vjp" in fn and "lambda" not in fn]


def test_results_are_written_in_place() -> None:
    grad = counts("tests/ad/minigpt_grad.psk", "loss_grad")
    # The starting values of the fold over the blocks and of its reverse, and the
    # cotangent the reverse starts from: nothing per call.
    assert total(grad, "copies") <= 3, {k: n for k, n in grad.items() if k[0] == "copies"}
    assert total(grad, "calls") > 50


def test_recompute_runs_the_forward_kernels_again() -> None:
    store = counts("tests/ad/minigpt_grad.psk", "loss_grad")
    again = counts("tests/ad/minigpt_grad.psk", "loss_grad", "recompute")
    assert total(again, "launches") > total(store, "launches")
