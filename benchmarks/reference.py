"""`make bench-reference`: time the reference interpreter on the tiny MiniGPT loss.

Prints the median of a few runs of `presk run` on
tests/examples/minigpt/train_minigpt.psk (V=64 D=16 H=2 L=2, B=2 T=8) at 256
and 64 bits, against a NumPy float64 evaluation of the same entry's matrix
products as a scale for the machine. The goal is under 2 s at 256 bits.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "tests/examples/minigpt/train_minigpt.psk")
CONSTS = ["V=64", "D=16", "H=2", "L=2"]


def _time_run(bits: int, repeat: int) -> list[float]:
    """`presk run` as the command line runs it, its output sent to /dev/null."""
    import contextlib

    from presk.cli import main

    argv = ["run", EXAMPLE, "--entry", "loss", "--dim", "B=2", "--dim", "T=8"]
    argv += [f for c in CONSTS for f in ("--const", c)] + ["--bits", str(bits)]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            code = main(argv)
        times.append(time.perf_counter() - start)
        if code != 0:
            raise SystemExit(f"presk run failed with exit code {code}")
    return times


def _numpy_scale(repeat: int) -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, 64)), rng.standard_normal((64, 64))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(100):
            a @ b
        times.append((time.perf_counter() - start) / 100)
    return statistics.median(times)


def main() -> int:
    """Print the timings."""
    print("tiny MiniGPT loss (V=64 D=16 H=2 L=2, B=2 T=8) on the reference interpreter")
    scale = _numpy_scale(5)
    for bits in (256, 64):
        times = _time_run(bits, 3)
        median = statistics.median(times)
        print(
            f"  {bits:>3} bits: median {median:.3f} s, best {min(times):.3f} s "
            f"({median / scale:,.0f}× a 16×64·64×64 numpy float64 matmul)"
        )
    print("goal: under 2 s at 256 bits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
