"""`make bench-train` (its last lines): the exported C trainer's step against `presk train`'s.

For each run below, `presk export --target c --train` writes the trainer, `make` builds
it, and both sides train the same steps on one thread: `presk train --backend native`'s
loop (the `Trainer` and `NativeStepper` the command uses, one foreign call a step) and
`./train --times FILE` (each step's milliseconds). Each side's time of a step is the
median over the steps after the first; the sides alternate for a few rounds and each keeps
its best median. Printed as a ratio with the goal (within 1.05×), never as a claim about
absolute speed. Both sides' final weights are compared byte for byte first.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MINIGPT = "tests/examples/minigpt/train_minigpt.psk"
TINY = {"V": 64, "D": 16, "H": 2, "L": 2}
MID = {"V": 64, "D": 64, "H": 4, "L": 4}
RUNS: list[tuple[str, str, dict[str, int], str]] = [
    ("tutorial 07 (the tower), f64", "tutorial/07_train.psk", {}, "f64"),
    ("tiny MiniGPT (V64 D16 H2 L2, B16 T8), f32", MINIGPT, TINY, "f32"),
    ("mid MiniGPT (V64 D64 H4 L4, B16 T8), f32", MINIGPT, MID, "f32"),
]  # fmt: skip
STEPS = 30
ROUNDS = 3


def native_median(source: str, consts: dict[str, int], realize: str, ckpt: Path) -> float:
    """presk train --backend native's loop, STEPS steps on one thread: the median step (ms)."""
    from presk.elab.presburger import Lin
    from presk.elab.ty import subst
    from presk.host.realization import parse
    from presk.pipeline import front_end
    from presk.train.checkpoint import Meta
    from presk.train.data import load
    from presk.train.loop import NativeStepper, Plan, Trainer, initial_weights

    checked, _ = front_end(source, {k: Fraction(v) for k, v in consts.items()})
    run = checked.trainings[0]
    batches = load(run)
    theta = initial_weights(run, batches.dims, 0)
    stepper = NativeStepper(checked, run, batches.dims, theta, parse(realize), 1)
    model = str(subst(run.params, {k: Lin.const_(Fraction(v)) for k, v in batches.dims.items()}))
    meta = Meta(0, STEPS, model, "native", realize, 256, 0)
    trainer = Trainer(run, batches, stepper, Plan(STEPS, 0, STEPS), meta, realize)
    times = [record.ms for record in trainer.steps()]
    trainer.save_final(ckpt)
    return statistics.median(times[1:])


def c_median(out: Path, ckpt: Path) -> float:
    times = ckpt / "times.txt"
    subprocess.run(
        [str(out / "train"), "--steps", str(STEPS), "--log-every", str(STEPS), "--ckpt",
         str(ckpt), "--times", str(times)],
        check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    return statistics.median(float(x) for x in times.read_text().split()[1:])


def measure(label: str, source: str, consts: dict[str, int], realize: str, tmp: Path) -> None:
    out = tmp / "export"
    flags = [f for k, v in consts.items() for f in ("--const", f"{k}={v}")]
    subprocess.run(
        [sys.executable, "-m", "presk.cli", "export", source, *flags, "--target", "c", "--train",
         "--realize", realize, "--threads", "1", "--steps", str(STEPS), "-o", str(out)],
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip
    subprocess.run(["make", "-s", "-C", str(out), "train"], check=True, capture_output=True)
    native, exported = float("inf"), float("inf")
    for r in range(ROUNDS):
        mine, theirs = tmp / f"c{r}", tmp / f"n{r}"
        theirs.mkdir()
        native = min(native, native_median(source, consts, realize, theirs))
        exported = min(exported, c_median(out, mine))
        if (mine / "final.psk.d").read_bytes() != (theirs / "final.psk.d").read_bytes():
            print(f"{label}: the weights differ: no ratio")
            return
    print(
        f"exported C trainer, {label}: {exported:.4g} ms a step, presk train --backend native "
        f"{native:.4g} ms: C / native {exported / native:.2f}×  (goal within 1.05×)"
    )


def main() -> int:
    os.chdir(ROOT)
    for label, source, consts, realize in RUNS:
        with tempfile.TemporaryDirectory() as tmp:
            measure(label, source, consts, realize, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
