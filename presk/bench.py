"""`presk bench`: time an entry on the reference and on the native backend.

Rows: `interp B bits` (the reference at --bits, 64 by default), then
`native f64`, `native f32`, `native bf16`. Each row is timed --repeat times
(5 by default) on the same synthesized inputs; the native inputs are
converted to their buffers before the timing, so a row times one cffi call
of the compiled entry. The speedup is against the first row.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from fractions import Fraction

import gmpy2

from presk.elab.presburger import Lin
from presk.elab.ty import Params, subst


def _time(call: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def bench_command(args: argparse.Namespace) -> int:
    """The body of `presk bench`."""
    from presk.ad.reverse import differentiate
    from presk.backends.native import prepare
    from presk.interp.reference import Interpreter
    from presk.interp.run import _natural, bind_dims, default_threads, find_entry
    from presk.interp.synth import synthesize
    from presk.pipeline import const_overrides, front_end, parse_bindings

    repeat = _natural("--repeat", "", args.repeat, 1, 1000)
    bits = _natural("--bits", "", args.bits, 8, 1 << 20)
    threads = (
        default_threads() if args.threads is None else _natural("--threads", "", args.threads, 1)
    )
    checked, _ = front_end(args.file, const_overrides(args.const))
    entry = find_entry(checked, args.entry) if args.entry else None
    if entry is None:
        from presk.cli import UsageError

        raise UsageError("--entry is required")
    dims, prefix = bind_dims(entry, parse_bindings(args.dim, "--dim"), checked)
    module = differentiate(checked.core)
    info = entry.info
    env = {k: Lin.const_(Fraction(v)) for k, v in dims.items()}
    with gmpy2.context(precision=max(bits, 53)):
        inputs = [
            synthesize(
                subst(ty, env),
                name,
                "theta" if isinstance(ty, Params) else f"input/{name}",
                dims,
                prefix,
                0,
                default,
            )
            for name, ty, default in info.params
        ]
    rows: list[tuple[str, list[float]]] = []
    if not args.native_only:
        interp = Interpreter(module)

        def reference() -> object:
            with gmpy2.context(precision=bits):
                return interp.call(info.name, dims, inputs)

        rows.append((f"interp {bits} bits", _time(reference, repeat)))
    for dtype in ("f64", "f32", "bf16"):
        prepared = prepare(module, info.name, dims, inputs, dtype, f"bench {entry.text}", threads)
        bound = prepared.bind(inputs)
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
