"""Time input synthesis: 10⁷ standard normals (`rng.normals_array`), against the goal of 2 s.

Also times the other vectorised draws on 10⁷ elements and reports how many normals each
stage leaves undecided (presk/interp/boxmuller.py). Run with `make bench-synth`; a
measurement, never a test.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

from presk.interp import boxmuller, rng

GOAL_S = 2.0
COUNT = 10**7


def timed(label: str, f: Callable[[], object]) -> float:
    # CPU time (all threads) beside the wall time: on a shared machine the wall time
    # mostly measures the neighbours, the CPU time still what the draws cost.
    start, cpu = time.perf_counter(), time.process_time()
    f()
    elapsed = time.perf_counter() - start
    print(f"{label:<34} {elapsed:6.2f} s   cpu {time.process_time() - cpu:6.2f} s")
    return elapsed


def main() -> int:
    key = rng.key_for(0, "theta/bench")
    print(f"{COUNT:,} draws, {rng._workers()} threads, vector path: {rng.VECTOR}")
    m = rng.u64_array(key, 2**20) >> np.uint64(11)
    m1, m2 = m[0::2], m[1::2]
    _, _, bad0, bad1 = boxmuller.first(m1, m2)
    redo = np.flatnonzero(bad0 | bad1)
    _, _, left0, left1 = boxmuller.second(m1[redo], m2[redo])
    left = int((left0 & bad0[redo]).sum() + (left1 & bad1[redo]).sum())
    print(f"normals undecided by the first stage: {(bad0.mean() + bad1.mean()) / 2:.2%}")
    print(f"normals left to MPFR by the second: {left} of {m.size:,}")
    timed("u64", lambda: rng.u64_array(key, COUNT))
    timed("randints below 50257", lambda: rng.randints_array(key, COUNT, 50257))
    timed("xavier_uniform(512, 2048)", lambda: rng.xavier_uniform_array(key, COUNT, 512, 2048))
    timed("normal(std=1/50)", lambda: rng.scaled_normals_array(key, COUNT, 0.02))
    best = min(timed("normals", lambda: rng.normals_array(key, COUNT)) for _ in range(3))
    verdict = "meets" if best < GOAL_S else "MISSES"
    print(f"10⁷ normals: best {best:.2f} s, {verdict} the goal of {GOAL_S:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
