"""`make bench-export`: the exported PyTorch `train.py` step beside `presk train --backend
native` on the same run, in the same session. Printed, with no goal: it tells a user
what each path costs.

The run is tests/examples/minigpt/train_minigpt.psk at V64 D64 H4 L4 on the example
tokens (batches of 16 windows of 8, the data the example ships), f32, one thread, 30 steps;
each side reports its median step with the first left out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = "tests/examples/minigpt/train_minigpt.psk"
CONSTS = ("--const", "V=64", "--const", "D=64", "--const", "H=4", "--const", "L=4")
STEPS = "30"
MEDIAN = re.compile(r"([\d.]+) (m?s) a step, median")


def _median_ms(text: str) -> float | None:
    match = MEDIAN.search(text)
    if match is None:
        return None
    value = float(match.group(1))
    return value * 1000 if match.group(2) == "s" else value


def main() -> int:
    os.chdir(ROOT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PRESK_THREADS": "1"}
    presk = str(ROOT / ".venv" / "bin" / "presk")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "export"
        made = subprocess.run(
            [presk, "export", PROGRAM, *CONSTS, "--target", "pytorch", "--mode", "readable",
             "--train", "-o", str(out)],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        if made.returncode != 0:
            print(f"bench-export: the export failed: {made.stderr.strip()}")
            return 1
        native = subprocess.run(
            [presk, "train", PROGRAM, *CONSTS, "--steps", STEPS, "--epochs", "2",
             "--log-every", "1000", "--backend", "native", "--realize", "f32", "--threads",
             "1", "--ckpt", str(Path(tmp) / "native")],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        exported = subprocess.run(
            [sys.executable, "train.py", "--steps", STEPS, "--log-every", "1000", "--dtype",
             "float32", "--threads", "1", "--device", "cpu"],
            capture_output=True, text=True, env=env, cwd=out,
        )  # fmt: skip
    ours, theirs = _median_ms(native.stdout), _median_ms(exported.stdout + exported.stderr)
    if ours is None or theirs is None:
        print("bench-export: a side printed no median:")
        print(native.stdout + native.stderr + exported.stdout + exported.stderr)
        return 1
    print(
        f"MiniGPT V64 D64 H4 L4, B16 T8, f32, 1 thread: presk train --backend native "
        f"{ours:.2f} ms a step, the exported train.py {theirs:.2f} ms a step "
        f"(train.py / presk {theirs / ours:.2f}×; no goal)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
