"""`make bench`: the native backend against NumPy and PyTorch, measured in the same run.

Prints ratios, never absolute claims: these machines are shared and noisy.
1. gemm N×N·N×N in f32 (N=1024 by default), one thread, against NumPy's BLAS
   on one thread; and two threads against our own one.
2. The tiny MiniGPT forward (V=64 D=16 H=2 L=2, B=2 T=8, f32) against
   PyTorch eager on the same thread count (skipped without torch 2.13.0).
   The mid MiniGPT (V=64 D=64 H=4 L=4, B=32 T=32, f32) loss gradient against
   PyTorch eager's zero_grad + forward + backward, on 1 and 2 threads.
3. Host overhead: an entry of about fifty small launches, per call.
4. A cached run starts no compiler; the cold compile of the tiny MiniGPT
   loss gradient.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

# One BLAS thread for the NumPy reference (set before NumPy loads).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import gmpy2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def median_time(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def prepared(
    path: str,
    entry: str,
    dims: dict[str, int],
    consts: dict[str, int],
    dtype: str,
    threads: int = 1,
) -> tuple[object, list[object], object]:
    """The entry compiled through the one compile path, and the inputs `presk run` draws."""
    from presk.host.realization import Realization
    from presk.interp.run import reference_inputs
    from presk.pipeline import compile_path

    compiled, checked, chosen, binding = compile_path(
        path,
        entry,
        dims,
        Realization(dtype),
        threads,
        consts={k: Fraction(v) for k, v in consts.items()},
        banner=f"bench {entry}",
    )
    with gmpy2.context(precision=53):
        inputs = reference_inputs(chosen.info, binding.dims, binding.prefix, 0)
    return compiled, inputs, checked


def gemm(n: int) -> None:
    src = Path(tempfile.mkdtemp()) / "gemm.psk"
    src.write_text("dim N\nfn gemm(a : ℝ[N, N], b : ℝ[N, N]) -> ℝ[N, N] = a · b\n")
    flops = 2 * n**3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    t_numpy = median_time(lambda: a @ b, 5)
    rows = []
    for threads in (1, 2):
        p, inputs, _ = prepared(str(src), "gemm", {"N": n}, {}, "f32", threads)
        invoke = p.bind(inputs).invoke  # type: ignore[attr-defined]
        invoke()
        rows.append(median_time(invoke, 3))
    print(
        f"gemm {n}³ f32: numpy (1 BLAS thread) {flops / t_numpy / 1e9:.1f} GFLOP/s, "
        f"presk 1 thread {flops / rows[0] / 1e9:.1f} GFLOP/s, 2 threads {flops / rows[1] / 1e9:.1f}"
    )
    print(f"  presk / numpy, one thread: {t_numpy / rows[0]:.2f}×  (goal ≥ 0.2×)")
    print(f"  presk 2 threads / 1 thread: {rows[0] / rows[1]:.2f}×  (goal ≥ 1.7×)")


def minigpt_vs_torch() -> None:
    consts = {"V": 64, "D": 16, "H": 2, "L": 2}
    p, inputs, _ = prepared(
        "tests/examples/minigpt/minigpt.psk", "MiniGPT.apply", {"B": 2, "T": 8}, consts, "f32", 1
    )
    invoke = p.bind(inputs).invoke  # type: ignore[attr-defined]
    invoke()
    t_presk = median_time(invoke, 50)
    try:
        import torch
    except ImportError:
        print(
            f"tiny MiniGPT forward f32: presk {t_presk * 1e6:.0f} µs; torch not installed: no ratio"
        )
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from torch_minigpt import forward_from_presk

    torch.set_num_threads(1)
    fwd = forward_from_presk(inputs, consts)
    with torch.no_grad():
        fwd()
        t_torch = median_time(fwd, 50)
    print(
        f"tiny MiniGPT forward f32, 1 thread: presk {t_presk * 1e6:.0f} µs, "
        f"torch eager {t_torch * 1e6:.0f} µs: {t_torch / t_presk:.1f}× faster  (goal ≥ 5×)"
    )


def minigpt_grad_vs_torch() -> None:
    """The mid MiniGPT's loss gradient natively against PyTorch eager's training step."""
    consts = {"V": 64, "D": 64, "H": 4, "L": 4}
    dims = {"B": 32, "T": 32}
    path = "tests/ad/minigpt_grad.psk"
    try:
        import torch
    except ImportError:
        print("mid MiniGPT loss gradient f32: torch not installed: no ratio")
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from torch_minigpt import loss_step_from_presk

    grads = {t: prepared(path, "loss_grad", dims, consts, "f32", t) for t in (1, 2)}
    inputs = grads[1][1]
    loss_entry, _, _ = prepared(path, "loss", dims, consts, "f32", 1)
    t_loss, t_step, leaves = loss_step_from_presk(inputs, consts)
    # Both sides compute the same loss and gradient (f32 tolerance) before any timing.
    ours = float(loss_entry.raw(inputs)[0])  # type: ignore[attr-defined]
    theirs = float(t_loss().detach())
    assert abs(ours - theirs) <= 1e-4 * abs(theirs), (ours, theirs)
    t_step()
    presk_grad = grads[1][0].raw(inputs)  # type: ignore[attr-defined]
    assert len(presk_grad) == len(leaves)
    for mine, leaf in zip(presk_grad, leaves, strict=True):
        assert leaf.grad is not None
        g = leaf.grad.numpy()
        assert np.max(np.abs(mine.reshape(g.shape) - g)) <= 1e-3 * max(np.max(np.abs(g)), 1e-30)
    for threads in (1, 2):
        invoke = grads[threads][0].bind(inputs).invoke  # type: ignore[attr-defined]
        torch.set_num_threads(threads)
        invoke()
        t_step()
        native, eager = [], []
        for _ in range(5):  # the sides alternate; each keeps its least median
            native.append(median_time(invoke, 3))
            eager.append(median_time(t_step, 3))
        print(
            f"mid MiniGPT loss gradient f32, {threads} thread(s): presk {min(native) * 1e3:.1f} "
            f"ms, torch eager zero_grad+forward+backward {min(eager) * 1e3:.1f} ms: presk / "
            f"torch {min(native) / min(eager):.2f}×  (goal ≤ 1.0×)"
        )
    torch.set_num_threads(1)


def host_overhead() -> None:
    # Fifty chained small elementwise launches that fusion cannot merge (each
    # result is used twice), on 8 elements: the time is the host's.
    lines = ["fn chain(x : ℝ[8]) -> ℝ[8] ="]
    lines.append("  let a0 = x")
    for i in range(1, 51):
        lines.append(f"  let a{i} = a{i - 1} * a{i - 1} - a{i - 1}")
    lines.append("  a50")
    src = Path(tempfile.mkdtemp()) / "chain.psk"
    src.write_text("\n".join(lines) + "\n")
    p, inputs, _ = prepared(str(src), "chain", {}, {}, "f64", 1)
    invoke = p.bind(inputs).invoke  # type: ignore[attr-defined]
    invoke()
    t = median_time(invoke, 200)
    print(
        f"host overhead: {p.host.launches} launches of 8 elements, {t * 1e6:.1f} µs a call "  # type: ignore[attr-defined]
        "(goal: under 20 µs beyond the kernels)"
    )


def python_call_overhead() -> None:
    """A call through the Python API beyond its compiled code, against an empty cffi call."""

    import presk
    from presk.build import compile as build
    from presk.build import load as loading

    prog = presk.load("tutorial/01_linear.psk")
    linear = prog.entry("Linear{3, 2}.apply", dims={"batch": 4}, threads=1)
    theta, x = linear.inputs()
    compiled = linear.compiled
    assert compiled is not None
    bound = compiled.bind([theta, x])
    empty_lib = loading.load(
        build.build("int presk_empty(void) { return 0; }\n"), "int presk_empty(void);"
    )
    empty = empty_lib.lib.presk_empty
    api, kernel, nothing = [], [], []
    for _ in range(7):  # the sides alternate; each keeps its least median
        api.append(median_time(lambda: linear(theta, x), 2000))
        kernel.append(median_time(bound.invoke, 2000))
        nothing.append(median_time(empty, 2000))
    beyond = (min(api) - min(kernel)) * 1e6
    print(
        f"Python API call of Linear{{3, 2}}.apply (batch 4): {min(api) * 1e6:.1f} µs, the "
        f"compiled call alone {min(kernel) * 1e6:.1f} µs, an empty cffi call "
        f"{min(nothing) * 1e6:.2f} µs: {beyond:.1f} µs beyond the compiled code (goal under 5 µs)"
    )


def compile_times() -> None:
    from presk.build import compile as build

    cache = tempfile.mkdtemp()
    os.environ["PRESK_CACHE"] = cache
    consts = {"V": 64, "D": 16, "H": 2, "L": 2}
    start = time.perf_counter()
    prepared("tests/ad/minigpt_grad.psk", "loss_grad", {"B": 2, "T": 8}, consts, "f32", 1)
    cold = time.perf_counter() - start
    runs = []
    original = build._run

    def counting(cmd: object) -> object:
        runs.append(cmd)
        return original(cmd)  # type: ignore[arg-type]

    build._run = counting  # type: ignore[assignment]
    start = time.perf_counter()
    prepared("tests/ad/minigpt_grad.psk", "loss_grad", {"B": 2, "T": 8}, consts, "f32", 1)
    warm = time.perf_counter() - start
    build._run = original  # type: ignore[assignment]
    print(
        f"tiny MiniGPT loss gradient: cold compile {cold:.2f} s (goal under 5 s), "
        f"cached {warm:.2f} s starting {len(runs)} compiler process(es) (goal 0)"
    )


def export_vs_native() -> None:
    """The exported attention (B=16 T=256, f32) timed by its own `-r 11` against the native call."""
    import subprocess

    out = Path(tempfile.mkdtemp()) / "attend_c"
    args = ["tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=16", "--dim", "T=256"]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "presk.cli",
            "export",
            *args,
            "--realize",
            "f32",
            "--threads",
            "1",
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(["make", "-s", "-C", str(out), "model"], check=True, capture_output=True)
    p, inputs, _ = prepared(args[0], "attend", {"B": 16, "T": 256}, {}, "f32", 1)
    invoke = p.bind(inputs).invoke  # type: ignore[attr-defined]
    invoke()
    # Rounds alternate the two sides and each keeps its least median: this machine is
    # shared and noisy, and a neighbour's burst should not land on one side only.
    exported, native = [], []
    for _ in range(5):
        timed = subprocess.run(
            [
                str(out / "model"),
                "-r",
                "11",
                str(out / "conformance/inputs.psk.d"),
                str(out / "out.psk.d"),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        exported.append(float(timed.split("median ")[1].split(" ms")[0]))
        native.append(median_time(invoke, 11) * 1e3)
    exported_ms, native_ms = min(exported), min(native)
    print(
        f"exported attention B=16 T=256 f32: model -r 11 median {exported_ms:.3f} ms, native "
        f"call {native_ms:.3f} ms: {exported_ms / native_ms:.2f}×  (goal within 1.05×)"
    )


def main() -> int:
    os.chdir(ROOT)
    n = int(os.environ.get("PRESK_BENCH_N", "1024"))
    gemm(n)
    minigpt_vs_torch()
    minigpt_grad_vs_torch()
    host_overhead()
    python_call_overhead()
    export_vs_native()
    compile_times()
    return 0


if __name__ == "__main__":
    sys.exit(main())
