"""`make bench-serve`: tokens per second of presk serve and of the exported C generator
against an eager PyTorch loop with the same model and weights, in the same run.

Batch 1, greedy, f32, one thread, from a prompt that fills the context: every step then
reads a whole window on both sides, the steady state of a long generation (a loop that
grows its input from one token would time shorter windows on the PyTorch side than the
fixed window presk compiles). The weights are the initializers' at seed 0 with a
random head (the initialized head is zero, and all-equal scores would make argmax a
matter of tie-breaking). Before timing, both sides' first tokens are compared.

1. tiny MiniGPT (V64 D16 H2 L2, context 8): goal at least 5× PyTorch's tokens/s;
2. course-size GPT (V92 D384 H6 L6, context 256): goal at least 1×.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from presk.data.samples import flatten

ROOT = Path(__file__).resolve().parent.parent
SERVE = "tests/examples/minigpt/serve_minigpt.psk"
TRAIN = "tests/examples/minigpt/train_minigpt.psk"
SIZES = (
    ("tiny MiniGPT", {"V": 64, "D": 16, "H": 2, "L": 2}, 8, 400, 5.0),
    ("course-size GPT", {"V": 92, "D": 384, "H": 6, "L": 6}, 256, 40, 1.0),
)


def weights(consts: dict[str, int], context: int, path: Path) -> dict[str, Any]:
    """θ₀ at seed 0 with a head of normals (std 0.5), written to `path`."""
    import presk.data
    from presk.interp import rng
    from presk.pipeline import front_end
    from presk.train.loop import initial_weights

    checked, _ = front_end(TRAIN, {k: Fraction(v) for k, v in consts.items()})
    run = checked.trainings[0]
    theta = initial_weights(run, {"B": 1, "T": context}, 0)
    shape = theta["head"]["w"].shape
    draws = rng.normals_array(rng.key_for(0, "bench/head"), int(np.prod(shape)))
    theta["head"]["w"] = (0.5 * draws).reshape(shape)
    presk.data.write(path, [theta], str(run.params))
    return theta


def _prompt(context: int, classes: int) -> list[int]:
    return [(7 * i + 1) % classes for i in range(context)]


def vocabulary(size: int, path: Path) -> Path:
    """A vocabulary of `size` one-character tokens (what they print does not matter here)."""
    import json

    path.write_text(json.dumps([chr(0x100 + i) for i in range(size)]), encoding="utf-8")
    return path


def presk_rate(
    consts: dict[str, int], weights_path: Path, vocab: Path, tokens: int
) -> tuple[float, list[int]]:
    from presk.host.realization import Realization
    from presk.pipeline import front_end
    from presk.serve.generate import generate, native_step, prepare

    checked, _ = front_end(SERVE, {k: Fraction(v) for k, v in consts.items()})
    block = checked.serves[0]
    served = prepare(block, str(weights_path), str(vocab))
    step = native_step(checked, block, served.dims, served.weights, Realization("f32"), 1, True)
    context = served.dims[block.context]
    prompt = _prompt(context, served.classes)
    list(generate(step, prompt, 2, context, 1.0, 0, True))  # warm: the first call loads
    start = time.perf_counter()
    out = list(generate(step, prompt, tokens, context, 1.0, 0, True))
    return tokens / (time.perf_counter() - start), out


def c_rate(
    consts: dict[str, int], context: int, weights_path: Path, vocab: Path, tokens: int, work: Path
) -> float | None:
    presk = ROOT / ".venv" / "bin" / "presk"
    flags = [f"--const={k}={v}" for k, v in consts.items()]
    out = work / "gen"
    made = subprocess.run(
        [str(presk), "export", SERVE, *flags, "--target", "c", "--serve", "--realize", "f32",
         "--weights", str(weights_path), "--vocab", str(vocab), "-o", str(out)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    if (
        made.returncode != 0
        or subprocess.run(["make", "-s", "-C", str(out), "run"], capture_output=True).returncode
        != 0
    ):
        print(f"  the C generator did not build: {made.stderr.strip()}")
        return None
    ran = subprocess.run(
        [str(out / "run"), str(out / "weights.psk.d"), "-i", "1", "-n", str(tokens), "-g"],
        capture_output=True,
        text=True,
    )
    match = re.search(r"\(([\d.]+) tokens/s\)", ran.stderr)
    return float(match.group(1)) if match else None


def torch_rate(
    theta: dict[str, Any], consts: dict[str, int], context: int, tokens: int
) -> tuple[float, list[int]] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from torch_minigpt import generate_greedy

    flat = flatten(theta)
    prompt = _prompt(context, consts["V"])
    generate_greedy(flat, prompt, 2, consts, context)
    start = time.perf_counter()
    out = generate_greedy(flat, prompt, tokens, consts, context)
    return tokens / (time.perf_counter() - start), out


def main() -> int:
    os.chdir(ROOT)
    for label, consts, context, tokens, goal in SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            path = work / "weights.psk.d"
            theta = weights(consts, context, path)
            vocab = vocabulary(consts["V"], work / "vocab.json")
            ours, our_tokens = presk_rate(consts, path, vocab, tokens)
            exported = c_rate(consts, context, path, vocab, tokens, work)
            theirs = torch_rate(theta, consts, context, tokens)
            line = f"{label}, batch 1, greedy, f32, 1 thread: presk serve {ours:.0f} tokens/s"
            if exported is not None:
                line += f", exported C {exported:.0f} tokens/s"
            if theirs is None:
                print(line + "; torch not installed: no ratio")
                continue
            rate, torch_tokens = theirs
            agree = sum(1 for a, b in zip(our_tokens, torch_tokens, strict=True) if a == b)
            line += f", torch eager {rate:.0f} tokens/s: presk / torch {ours / rate:.1f}×"
            if exported is not None:
                line += f", C / torch {exported / rate:.1f}×"
            print(f"{line}  (goal ≥ {goal:g}×; {agree} of {tokens} tokens the same)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
