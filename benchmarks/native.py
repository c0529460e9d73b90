"""`make bench`: the native backend against NumPy and PyTorch, measured in the same run.

Prints ratios with their goals (issue 11), never absolute claims: these machines are
shared and noisy, so the two sides of a comparison alternate and each keeps its best
median (benchtools.best_medians). Every PyTorch comparison first checks that both sides
compute the same output, loss or gradient (f32 tolerance); its PyTorch side is a small
script here (torch_minigpt.py, torch_attention.py) on the very arrays presk reads.
1. gemm N×N·N×N in f32 (N=1024 by default), one thread, against NumPy's BLAS
   on one thread; and two threads against our own one.
2. The tiny MiniGPT forward (V=64 D=16 H=2 L=2, B=2 T=8, f32) against PyTorch eager.
3. The mid MiniGPT (V=64 D=64 H=4 L=4, B=32 T=32, f32): the loss against PyTorch's
   forward (1 thread), the loss gradient against PyTorch eager's zero_grad + forward +
   backward (1 and 2 threads).
4. tutorial/03's causal attention (B=16 T=256, f32, 1 thread) against
   `scaled_dot_product_attention(is_causal=True)` and the eager steps.
5. The course GPT (corpus/05_gpt.psk at V=92 D=384 H=6 L=6, B=16 T=256, f32) loss
   gradient against PyTorch's zero_grad + forward + backward, one call each, 1 thread
   (PRESK_BENCH_COURSE=0 skips it).
6. Host overhead: an entry of about fifty small launches, per call; a Python API call.
7. The exported attention against the native call; a cached run starts no compiler;
   the cold compile of the tiny MiniGPT loss gradient.
(No ratio without torch 2.13.0: the line says so.)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# One BLAS thread for the NumPy reference, on the kernel OpenBLAS picks for this machine
# (the command unsets the two variables that would force another); set before
# NumPy loads.
os.environ.pop("OPENBLAS_CORETYPE", None)
os.environ.pop("OPENBLAS_L2_SIZE", None)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from benchtools import assert_close, best_medians, compiled_entry, drawn, median_time, prepared

ROOT = Path(__file__).resolve().parent.parent
# The mid and the course model: (consts, dims), as the table names them.
MID = ({"V": 64, "D": 64, "H": 4, "L": 4}, {"B": 32, "T": 32})
COURSE = ({"V": 92, "D": 384, "H": 6, "L": 6}, {"B": 16, "T": 256})
MINIGPT = "tests/examples/minigpt/minigpt.psk"
MINIGPT_GRAD = "tests/ad/minigpt_grad.psk"
COURSE_GPT = "benchmarks/course_gpt.psk"  # corpus/05_gpt.psk's loss and its gradient
ATTENTION = "tutorial/03_attention.psk"


def gemm(n: int) -> None:
    """n³ GEMM in f32 and f64 against NumPy's OpenBLAS on as many BLAS threads as ours.

    The sides take turns (best_medians): one thread against one BLAS thread, two
    against two, on the BLAS kernel threadpoolctl reports for this machine.
    """
    from threadpoolctl import threadpool_info, threadpool_limits

    blas = [
        f"{i.get('internal_api')} {i.get('version')} kernel {i.get('architecture')}"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    print(f"gemm {n}³: numpy's BLAS: {'; '.join(blas) or 'none found'}")
    src = Path(tempfile.mkdtemp()) / "gemm.psk"
    src.write_text("dim N\nfn gemm(a : ℝ[N, N], b : ℝ[N, N]) -> ℝ[N, N] = a · b\n")
    flops = 2 * n**3
    rng = np.random.default_rng(0)
    for dtype, np_type in (("f32", np.float32), ("f64", np.float64)):
        a = rng.standard_normal((n, n)).astype(np_type)
        b = rng.standard_normal((n, n)).astype(np_type)
        ours: list[float] = []
        for threads in (1, 2):
            p, inputs, _ = prepared(str(src), "gemm", {"N": n}, {}, dtype, threads)
            invoke = p.bind(inputs).invoke  # type: ignore[attr-defined]

            def numpy_side(threads: int = threads, a: Any = a, b: Any = b) -> object:
                with threadpool_limits(limits=threads, user_api="blas"):
                    return a @ b

            t_presk, t_numpy = best_medians([invoke, numpy_side], rounds=3, repeat=5)
            ours.append(t_presk)
            print(
                f"  {dtype} {threads} thread{'s' if threads > 1 else ''}: presk "
                f"{flops / t_presk / 1e9:.1f} GFLOP/s, numpy ({threads} BLAS thread"
                f"{'s' if threads > 1 else ''}) {flops / t_numpy / 1e9:.1f}: "
                f"{t_numpy / t_presk:.2f}×  (goal ≥ 0.85×)"
            )
        print(f"  {dtype} presk 2 threads / 1 thread: {ours[0] / ours[1]:.2f}×  (goal ≥ 1.8×)")


def _torch(what: str) -> Any:
    """PyTorch on one thread, or None after a line saying there is no ratio."""
    try:
        import torch
    except ImportError:
        print(f"{what}: torch not installed: no ratio")
        return None
    torch.set_num_threads(1)
    return torch


def _gradients_agree(what: str, ours: list[Any], torch_leaves: list[Any]) -> None:
    """presk's gradient buffers against the `.grad` of PyTorch's leaves, leaf by leaf, each
    to 1e-3 of its own largest magnitude or of a thousandth of the largest of all."""
    assert len(ours) == len(torch_leaves), (what, len(ours), len(torch_leaves))
    theirs = []
    for i, leaf in enumerate(torch_leaves):
        assert leaf.grad is not None, (what, i)
        theirs.append(leaf.grad.numpy())
    largest = max(float(np.max(np.abs(g))) for g in theirs)
    for i, (mine, other) in enumerate(zip(ours, theirs, strict=True)):
        assert_close(f"{what}, leaf {i}", mine, other, 1e-3, floor=1e-3 * largest)


def _ratio(what: str, presk_s: float, torch_s: float, torch_side: str, goal: str) -> None:
    unit, scale = ("s", 1.0) if min(presk_s, torch_s) > 1 else ("ms", 1e3)
    print(
        f"{what}: presk {presk_s * scale:.2f} {unit}, {torch_side} {torch_s * scale:.2f} {unit}:"
        f" presk / torch {presk_s / torch_s:.2f}×  ({goal})"
    )


def minigpt_vs_torch() -> None:
    """The tiny MiniGPT forward against PyTorch eager's, on one thread."""
    consts = {"V": 64, "D": 16, "H": 2, "L": 2}
    program, inputs = drawn(MINIGPT, "MiniGPT.apply", {"B": 2, "T": 8}, consts, "f32", 1)
    torch = _torch("tiny MiniGPT forward f32")
    if torch is None:
        return
    from torch_minigpt import forward_from_presk

    forward = forward_from_presk(inputs, consts)
    bound = program.bind(inputs)
    bound.invoke()
    assert_close("tiny MiniGPT logits", bound.outputs[0], forward().numpy(), 1e-4)
    t_presk, t_torch = best_medians([bound.invoke, forward], 5, 50)
    print(
        f"tiny MiniGPT forward f32, 1 thread: presk {t_presk * 1e6:.0f} µs, "
        f"torch eager {t_torch * 1e6:.0f} µs: {t_torch / t_presk:.1f}× faster  (goal ≥ 15×)"
    )


def minigpt_mid_vs_torch() -> None:
    """The mid MiniGPT's loss (1 thread) and its gradient (1 and 2 threads) against
    PyTorch eager's forward and its zero_grad + forward + backward."""
    consts, dims = MID
    torch = _torch("mid MiniGPT loss and gradient f32")
    if torch is None:
        return
    from torch_minigpt import loss_step_from_presk

    loss_entry, inputs = drawn(MINIGPT_GRAD, "loss", dims, consts, "f32", 1)
    grads = {
        t: compiled_entry(MINIGPT_GRAD, "loss_grad", dims, consts, "f32", t)[0] for t in (1, 2)
    }
    t_loss, t_step, torch_leaves = loss_step_from_presk(inputs, consts)
    # Both sides compute the same loss and gradient (f32 tolerance) before any timing.
    with torch.no_grad():
        assert_close("mid MiniGPT loss", loss_entry.raw(inputs)[0], t_loss().numpy(), 1e-4)
    t_step()
    _gradients_agree("mid MiniGPT gradient", grads[1].raw(inputs), torch_leaves)
    loss_call = loss_entry.bind(inputs).invoke
    with torch.no_grad():
        native, eager = best_medians([loss_call, t_loss], 5, 5)
    _ratio("mid MiniGPT loss f32, 1 thread", native, eager, "torch eager forward", "goal ≤ 1.0×")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        native, eager = best_medians([grads[threads].bind(inputs).invoke, t_step], 5, 3)
        _ratio(
            f"mid MiniGPT loss gradient f32, {threads} thread(s)",
            native,
            eager,
            "torch eager zero_grad+forward+backward",
            "goal ≤ 1.0×",
        )
    torch.set_num_threads(1)


def attention_vs_torch() -> None:
    """tutorial/03's causal attention (B16 T256, f32, 1 thread) against SDPA and eager."""
    program, inputs = drawn(ATTENTION, "attend", {"B": 16, "T": 256}, {}, "f32", 1)
    torch = _torch("attention B16 T256 f32")
    if torch is None:
        return
    from torch_attention import attention_from_presk

    sdpa, eager = attention_from_presk(inputs)
    bound = program.bind(inputs)
    bound.invoke()
    assert_close("attention, against SDPA", bound.outputs[0], sdpa().numpy(), 1e-4)
    assert_close("attention, against eager", bound.outputs[0], eager().numpy(), 1e-4)
    native, t_sdpa, t_eager = best_medians([bound.invoke, sdpa, eager], 5, 11)
    what = "attention B16 T256 f32, 1 thread"
    _ratio(what, native, t_sdpa, "torch SDPA is_causal", "goal ≤ 1.0×")
    _ratio(what, native, t_eager, "torch eager", "no goal of its own: SDPA's is the one")


def course_vs_torch() -> None:
    """The course GPT's loss gradient (one call each side, 1 thread) against PyTorch
    eager's zero_grad + forward + backward."""
    consts, dims = COURSE
    torch = _torch("course GPT loss gradient f32")
    if torch is None:
        return
    from torch_minigpt import COURSE_NAMES, loss_step_from_presk

    start = time.perf_counter()
    loss_entry, inputs = drawn(COURSE_GPT, "loss", dims, consts, "f32", 1)
    grad = compiled_entry(COURSE_GPT, "loss_grad", dims, consts, "f32", 1)[0]
    compile_s = time.perf_counter() - start
    t_loss, t_step, torch_leaves = loss_step_from_presk(inputs, consts, COURSE_NAMES)
    with torch.no_grad():
        assert_close("course GPT loss", loss_entry.raw(inputs)[0], t_loss().numpy(), 1e-4)
    bound = grad.bind(inputs)
    # One warm-up call a side (presk's first call faults in its arena's pages), then two
    # rounds of one call each, taking turns; each side's best call.
    native, eager = best_medians([bound.invoke, t_step], 2, 1)
    # The timed call's gradient is the one checked: the ratio prints only if it agrees.
    _gradients_agree("course GPT gradient", bound.outputs, torch_leaves)
    _ratio(
        f"course GPT loss gradient f32, 1 thread (compiled in {compile_s:.0f} s)",
        native,
        eager,
        "torch eager zero_grad+forward+backward",
        "goal ≤ 1.0×",
    )


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
    build._run = original
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
    minigpt_mid_vs_torch()
    attention_vs_torch()
    if os.environ.get("PRESK_BENCH_COURSE", "1") != "0":
        course_vs_torch()
    host_overhead()
    python_call_overhead()
    export_vs_native()
    compile_times()
    return 0


if __name__ == "__main__":
    sys.exit(main())
