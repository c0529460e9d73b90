"""`presk bench`: time an entry on the reference and on the native backend.

Rows: `interp B bits` (the reference at --bits, 64 by default), then
`native f64`, `native f32`, `native bf16`. Each row is timed --repeat times
(5 by default) on the same synthesized inputs; the native inputs are
converted to their buffers before the timing, so a row times one foreign
call of the compiled entry. The speedup is against the first row.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import gmpy2

from presk.commands.common import (
    choose_entry,
    const_overrides,
    entry_args,
    file_args,
    guard,
    later_flag,
    refuse_later_flags,
    threads_of,
)
from presk.entries import natural
from presk.host.realization import Realization
from presk.interp.run import reference_inputs, reference_interpreter
from presk.interp.synth import draw_inputs
from presk.pipeline import compile_entry, core_module, front_end

NAME = "bench"
HELP = "Time an entry on every backend"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(bench)
    entry_args(bench)
    bench.add_argument("--repeat", default="5", help="timed calls per row (default 5)")
    bench.add_argument("--bits", default="64", help="precision of the reference row (default 64)")
    bench.add_argument("--threads", default=None, help="native workers (default: the cores)")
    bench.add_argument("--native-only", action="store_true", help="skip the reference row")
    later_flag(bench, "--plan", "a row timed under a layout plan")
    later_flag(bench, "--calibrate", "fit the roofline of each kernel")
    later_flag(bench, "--profile", "time with a calibrated profile")
    later_flag(bench, "--opt", "the exact rewrites of PSK-Core", takes_value=False)
    bench.set_defaults(handler=main)


def _time(call: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def main(args: argparse.Namespace) -> int:
    return guard(NAME, lambda: _bench(args))


def _bench(args: argparse.Namespace) -> int:
    refuse_later_flags(args)
    repeat = natural("--repeat", args.repeat, 1, 1000)
    bits = natural("--bits", args.bits, 8, 1 << 20)
    threads = threads_of(args.threads)
    checked, _ = front_end(args.file, const_overrides(args.const))
    chosen = choose_entry(checked, args.entry, args.dim)
    info, dims = chosen.entry.info, chosen.binding.dims
    drawn = draw_inputs(info.params, dims, chosen.binding.prefix, 0)
    rows: list[tuple[str, list[float]]] = []
    if not args.native_only:
        interp = reference_interpreter(core_module(checked))
        with gmpy2.context(precision=max(bits, 53)):
            inputs = reference_inputs(info, dims, chosen.binding.prefix, 0)

        def reference() -> object:
            with gmpy2.context(precision=bits):
                return interp.call(info.name, dims, inputs)

        rows.append((f"interp {bits} bits", _time(reference, repeat)))
    for dtype in ("f64", "f32", "bf16"):
        compiled = compile_entry(
            checked,
            chosen.entry,
            chosen.binding,
            Realization(dtype),
            threads,
            banner=f"bench {chosen.entry.text}",
        )
        bound = compiled.bind(drawn)
        bound.invoke()  # the first call touches the arena's pages
        rows.append((f"native {dtype}", _time(bound.invoke, repeat)))
    base = statistics.median(rows[0][1])
    out = [f"{'backend':<20}{'median ms':>11}{'best ms':>13}{'speedup':>10}"]
    for label, times in rows:
        median = statistics.median(times)
        speedup = base / median if median > 0 else float("inf")
        out.append(f"{label:<20}{median * 1e3:>11.3f}{min(times) * 1e3:>13.3f}{speedup:>9.1f}x")
    sys.stdout.write("\n".join(out) + "\n")
    return 0
