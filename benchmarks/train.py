"""`make bench-train`: a native training step against PyTorch's, measured in the same run.

Prints ratios with their goals, never absolute claims (the machines are shared and noisy;
the sides alternate and each keeps its best median):

1. the mid MiniGPT (V64 D64 H4 L4, B32 T32) f32 training step — presk's `run.step`, one
   foreign call — against PyTorch eager's zero_grad + forward + backward +
   `torch.optim.AdamW.step` on the same θ₀ and batch, on 1 and 2 threads (goal ≤ 0.8×);
2. the share of a step spent outside the compiled entry (batches, conversions), mid size
   (goal under 5 %);
3. twenty steps of the tiny MiniGPT (V64 D16 H2 L2, B16 T8) through the training loop
   (goal under 0.4 s of steps);
4. the course GPT (V92 D384 H6 L6, B16 T256) f32 step, one call each side, 1 thread
   (goal ≤ 1.0×). Set PRESK_BENCH_COURSE=0 to skip it (it compiles for minutes).

Both sides compute the same loss (f32 tolerance) before anything is timed.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from benchtools import best_medians, median_time

from presk.data.samples import flatten

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = "tests/examples/minigpt/train_minigpt.psk"
MID = ({"V": 64, "D": 64, "H": 4, "L": 4}, {"B": 32, "T": 32})
TINY = {"V": 64, "D": 16, "H": 2, "L": 2}
COURSE = ({"V": 92, "D": 384, "H": 6, "L": 6}, {"B": 16, "T": 256})


def _zeros(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _zeros(v) for k, v in tree.items()}
    return np.zeros_like(tree)


class Step:
    """The run's step compiled at `dims`, with θ₀, zero moments and one batch."""

    def __init__(self, consts: dict[str, int], dims: dict[str, int], threads: int) -> None:
        from presk.entries import Binding, Entry
        from presk.host.realization import Realization
        from presk.interp import rng
        from presk.pipeline import compile_entry, front_end
        from presk.train.loop import initial_weights, optimizer_scalars_in_f64

        checked, _ = front_end(PROGRAM, {k: Fraction(v) for k, v in consts.items()})
        self.run = run = checked.trainings[0]
        self.compiled = compile_entry(
            checked,
            Entry(run.step, run.step.name, {}),
            Binding(dict(dims), None),
            optimizer_scalars_in_f64(Realization("f32"), run),
            threads,
            banner="bench-train step",
        )
        theta = initial_weights(run, dims, 0)
        self.theta = {k: np.asarray(v, dtype=np.float32) for k, v in flatten(theta).items()}
        shape = (dims["B"], dims["T"])
        count = dims["B"] * dims["T"]
        ids = rng.randints_array(rng.key_for(0, "bench/ids"), count, consts["V"])
        targets = rng.randints_array(rng.key_for(0, "bench/targets"), count, consts["V"])
        self.ids = ids.astype(np.int64).reshape(shape)
        self.targets = targets.astype(np.int64).reshape(shape)
        self.args = [
            theta,
            _zeros(theta),
            _zeros(theta),
            np.int64(1),
            np.int64(1000),
            (self.ids, self.targets),
        ]
        self.invoke = self.compiled.bind(self.args).invoke

    def loss(self) -> float:
        return float(self.compiled(*self.args)[0])

    def adamw(self) -> dict[str, float]:
        opt = self.run.optimizer
        keys = ("beta1", "beta2", "eps", "weight_decay")
        lr = float(opt.lr) / opt.warmup if opt.cosine and opt.warmup else float(opt.lr)
        return {"lr": lr, **{k: float(getattr(opt, k)) for k in keys}}


def torch_side(step: Step, consts: dict[str, int]) -> tuple[Any, Callable[[], None]] | None:
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from torch_minigpt import train_step

    loss, run = train_step(step.theta, step.ids, step.targets, consts, step.adamw())
    ours, theirs = step.loss(), float(loss().detach())
    assert abs(ours - theirs) <= 1e-4 * abs(theirs), (ours, theirs)
    return loss, run


def mid_vs_torch() -> None:
    consts, dims = MID
    for threads in (1, 2):
        step = Step(consts, dims, threads)
        side = torch_side(step, consts)
        if side is None:
            print("mid MiniGPT training step f32: torch not installed: no ratio")
            return
        import torch

        torch.set_num_threads(threads)
        _, eager_step = side
        native, eager = best_medians([step.invoke, eager_step], 5, 3)
        print(
            f"mid MiniGPT training step f32, {threads} thread(s): presk {native * 1e3:.1f} "
            f"ms, torch eager zero_grad+forward+backward+AdamW {eager * 1e3:.1f} ms: "
            f"presk / torch {native / eager:.2f}×  (goal ≤ 0.8×)"
        )
    import torch

    torch.set_num_threads(1)


def host_share() -> None:
    """The loop's own work around the foreign call (batches, arguments, results), timed
    inside the same steps as the call itself."""
    from presk.host.realization import Realization
    from presk.pipeline import front_end
    from presk.train.loop import NativeStepper, initial_weights

    consts, dims = MID
    checked, _ = front_end(PROGRAM, {k: Fraction(v) for k, v in consts.items()})
    run = checked.trainings[0]
    theta = initial_weights(run, dims, 0)
    stepper = NativeStepper(checked, run, dims, theta, Realization("f32"), 1)
    inner = stepper.compiled._call
    spent = [0.0]

    def timed(buffers: Any) -> Any:
        start = time.perf_counter()
        try:
            return inner(buffers)
        finally:
            spent[0] += time.perf_counter() - start

    object.__setattr__(stepper.compiled, "_call", timed)
    shape = (dims["B"], dims["T"])
    batch = [np.zeros(shape, dtype=np.int64), np.ones(shape, dtype=np.int64)]
    stepper.step(1, 1000, batch)
    spent[0] = 0.0
    start = time.perf_counter()
    for t in range(2, 12):
        stepper.step(t, 1000, batch)
    whole = time.perf_counter() - start
    share = (whole - spent[0]) / whole
    print(
        f"mid MiniGPT training step: the host's share {share:.2%} of {whole * 100:.1f} ms a step "
        "(goal under 5%)"
    )


def tiny_loop() -> None:
    from presk.host.realization import Realization
    from presk.pipeline import front_end
    from presk.train.checkpoint import Meta
    from presk.train.data import load
    from presk.train.loop import NativeStepper, Plan, Trainer, initial_weights

    checked, _ = front_end(PROGRAM, {k: Fraction(v) for k, v in TINY.items()})
    run = checked.trainings[0]
    batches = load(run)
    theta = initial_weights(run, batches.dims, 0)
    stepper = NativeStepper(checked, run, batches.dims, theta, Realization("f32"), 1)
    meta = Meta(0, 20, "", "native", "f32", 256, 0)
    trainer = Trainer(run, batches, stepper, Plan(20, 0, 20), meta, "f32")
    start = time.perf_counter()
    records = list(trainer.steps())
    wall = time.perf_counter() - start
    print(
        f"tiny MiniGPT, 20 training steps natively (f32): {wall:.3f} s of steps, "
        f"final loss {records[-1].loss:.4f} (goal under 0.4 s)"
    )


def course_vs_torch() -> None:
    consts, dims = COURSE
    start = time.perf_counter()
    step = Step(consts, dims, 1)
    compiled = time.perf_counter() - start
    side = torch_side(step, consts)
    if side is None:
        print("course GPT training step f32: torch not installed: no ratio")
        return
    import torch

    torch.set_num_threads(1)
    _, eager_step = side
    eager_step()  # one warm-up each
    native = median_time(step.invoke, 1)
    eager = median_time(eager_step, 1)
    print(
        f"course GPT training step f32, 1 thread: presk {native:.2f} s (compiled in "
        f"{compiled:.0f} s), torch eager {eager:.2f} s: presk / torch {native / eager:.2f}×  "
        "(goal ≤ 1.0×)"
    )


def main() -> int:
    os.chdir(ROOT)
    tiny_loop()
    mid_vs_torch()
    host_share()
    if os.environ.get("PRESK_BENCH_COURSE", "1") != "0":
        course_vs_torch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
