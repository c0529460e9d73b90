"""`presk bench`: time an entry on the reference and on the native backend.

Rows: `interp B bits` (the reference at --bits, 64 by default), then
`native f64`, `native f32`, `native bf16`. Each row is timed --repeat times
(5 by default) on the same synthesized inputs; the native inputs are
converted to their buffers before the timing, so a row times one foreign
call of the compiled entry. The speedup is against the first row.

`--by-kernel` times one native build instead (f32, or `--realize`): the same
C text with each launch between two clock reads (Note [Profile] in
presk/cgen/host.py). It prints each kernel's time per call, the sites that
launch it (`fn/%N`, as `dump --stage core` names them) and its share of the
time in launches, then the sites by time, and checks that the instrumented
build's outputs are the plain build's, byte for byte.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import gmpy2
import numpy as np
import numpy.typing as npt

from presk.backends.native import CompiledEntry
from presk.cgen.host import ProfiledLaunch
from presk.commands.calibrate import add_flags as add_calibrate_flags
from presk.commands.calibrate import calibrate
from presk.commands.common import (
    Chosen,
    check_out_file,
    choose_entry,
    const_overrides,
    entry_args,
    file_args,
    guard,
    later_flag,
    read_plan,
    realization_of,
    refuse_later_flags,
    threads_of,
)
from presk.diagnostics import CommandError, UsageError
from presk.entries import natural
from presk.host.plan import Plan
from presk.host.program import HostProgram
from presk.host.realization import Realization
from presk.interp.run import reference_inputs, reference_interpreter
from presk.interp.synth import draw_inputs
from presk.pipeline import Request, compile_entry, core_module, front_end, run_back_end

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
    bench.add_argument(
        "--by-kernel",
        action="store_true",
        help="time each kernel and site of one native build, by an instrumented build",
    )
    bench.add_argument(
        "--realize", default=None, help="the realization --by-kernel times (default f32)"
    )
    bench.add_argument(
        "--plan",
        default=None,
        metavar="@FILE",
        help="add a row timed under a layout plan (and its bits compared with the default's); "
        "with --by-kernel, time the build of the plan",
    )
    add_calibrate_flags(bench)
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
    if args.calibrate is not None:
        check_out_file("--calibrate", args.calibrate)  # before the inputs are drawn
    checked, _ = front_end(args.file, const_overrides(args.const))
    chosen = choose_entry(checked, args.entry, args.dim)
    info, dims = chosen.entry.info, chosen.binding.dims
    drawn = draw_inputs(info.params, dims, chosen.binding.prefix, 0)
    plan = Plan() if args.plan is None else read_plan(args.plan)
    if args.calibrate is not None:
        if args.plan is not None:
            raise UsageError("--calibrate times layouts of its own, not a plan's: drop --plan")
        realization = realization_of(args.realize or "f64")
        if realization is None:
            return 1
        request = Request(checked, chosen.entry, chosen.binding, realization, threads)
        return calibrate(args, chosen, request, repeat)
    if args.space is not None:
        raise UsageError("--space chooses what --calibrate times: give both or neither")
    if args.combine is not None:
        raise UsageError("--combine chooses the layout model's form: give it with --calibrate")
    if args.by_kernel:
        realize = args.realize or ("f32" if plan.realization is None else None)
        return _by_kernel(chosen, realize, plan, threads, repeat, drawn)
    if args.realize is not None:
        raise UsageError("--realize chooses the build of --by-kernel; give both or neither")
    rows: list[tuple[str, list[float]]] = []
    if not args.native_only:
        interp = reference_interpreter(core_module(checked))
        with gmpy2.context(precision=max(bits, 53)):
            inputs = reference_inputs(info, dims, chosen.binding.prefix, 0)

        def reference() -> object:
            with gmpy2.context(precision=bits):
                return interp.call(info.name, dims, inputs)

        rows.append((f"interp {bits} bits", _time(reference, repeat)))
    builds: dict[str, Any] = {}
    for dtype in ("f64", "f32", "bf16"):
        bound = _bound(chosen, Realization(dtype), threads, drawn)
        builds[dtype] = bound
        rows.append((f"native {dtype}", _time(bound.invoke, repeat)))
    notes: list[str] = []
    if args.plan is not None:
        realization = plan.realization or Realization("f64")
        planned = _bound(chosen, realization, threads, drawn, plan)
        rows.append(("native plan", _time(planned.invoke, repeat)))
        default = (
            builds[realization.default]
            if realization.uniform
            else _bound(chosen, realization, threads, drawn)
        )
        same = _same_bits(planned, default)
        notes.append(
            f"-- plan {args.plan[1:]}: {len(plan.layouts)} nests laid out, "
            f"{realization.default if realization.uniform else 'its realization'}; "
            f"every output bit equal to the default layout's: {'yes' if same else 'NO'}"
        )
    base = statistics.median(rows[0][1])
    out = [f"{'backend':<20}{'median ms':>11}{'best ms':>13}{'speedup':>10}"]
    for label, times in rows:
        median = statistics.median(times)
        speedup = base / median if median > 0 else float("inf")
        out.append(f"{label:<20}{median * 1e3:>11.3f}{min(times) * 1e3:>13.3f}{speedup:>9.1f}x")
    sys.stdout.write("\n".join([*out, *notes]) + "\n")
    return 0 if all(not n.endswith("NO") for n in notes) else 1


def _bound(
    chosen: Chosen,
    realization: Realization,
    threads: int,
    drawn: list[Any],
    plan: Plan | None = None,
) -> Any:
    """An entry built and bound to the drawn inputs, called once (its arena's pages touched)."""
    compiled = compile_entry(
        chosen.checked,
        chosen.entry,
        chosen.binding,
        realization,
        threads,
        banner=f"bench {chosen.entry.text}",
        layouts=None if plan is None else plan.layouts,
    )
    bound = compiled.bind(drawn)
    bound.invoke()
    return bound


def _same_bits(a: Any, b: Any) -> bool:
    return all(x.tobytes() == y.tobytes() for x, y in zip(a.outputs, b.outputs, strict=True))


# ---------------------------------------------------------------- --by-kernel


def _counters(compiled: CompiledEntry) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The instrumented build's counters, as arrays over its static storage (writable)."""
    ffi, lib = compiled.library.ffi, compiled.library.lib
    ns, calls = ffi.new("int64_t **"), ffi.new("int64_t **")
    n = int(getattr(lib, f"{compiled.unit.symbol}__profile")(ns, calls))
    assert n == len(compiled.unit.profile)

    def view(p: Any) -> npt.NDArray[np.int64]:
        return np.frombuffer(ffi.buffer(p[0], 8 * max(n, 1)), dtype=np.int64)[:n]

    return view(ns), view(calls)


def site_of(launch: ProfiledLaunch, host: HostProgram) -> str:
    """The `fn/%N` of a launch: the site comment before it, unless the recording says
    otherwise (a launch of a function's result follows its last site's comment)."""
    sites = host.sites.get(launch.kernel, [])
    if launch.site in sites:
        return launch.site
    result = f"{launch.function}/result"
    if result in sites or not sites:
        return result
    return sites[0] if len(sites) == 1 else launch.site or result


def _check(status: int, what: str) -> None:
    if status != 0:
        raise CommandError(f"the {what} build returned {status} (its arena is too small)")


def profile_rows(
    compiled: CompiledEntry, ns: npt.NDArray[np.int64], calls: npt.NDArray[np.int64], repeat: int
) -> tuple[list[tuple[str, list[str], float, float]], list[tuple[str, list[str], float, float]]]:
    """Kernels and sites by time: (name, what it covers, launches per call, ms per call)."""
    kernels: dict[str, tuple[list[str], int, int]] = {}
    sites: dict[str, tuple[list[str], int, int]] = {}
    for launch in compiled.unit.profile:
        site = site_of(launch, compiled.host)
        t, c = int(ns[launch.index]), int(calls[launch.index])
        for table, key, other in ((kernels, launch.kernel, site), (sites, site, launch.kernel)):
            covers, total, count = table.get(key, ([], 0, 0))
            table[key] = ([*covers, other] if other not in covers else covers, total + t, count + c)

    def rows(
        table: dict[str, tuple[list[str], int, int]],
    ) -> list[tuple[str, list[str], float, float]]:
        out = [
            (k, covers, count / repeat, t / repeat / 1e6) for k, (covers, t, count) in table.items()
        ]
        return sorted(out, key=lambda row: (-row[3], row[0]))

    return rows(kernels), rows(sites)


def _by_kernel(
    chosen: Chosen, realize: str | None, plan: Plan, threads: int, repeat: int, drawn: list[Any]
) -> int:
    realization = plan.realization if realize is None else realization_of(realize)
    if realization is None:
        return 1
    if plan.realization is not None and realization != plan.realization:
        raise UsageError("--realize is not the realization of --plan: drop one of them")
    banner = f"bench {chosen.entry.text}"
    request = Request(
        chosen.checked,
        chosen.entry,
        chosen.binding,
        realization,
        threads,
        banner=banner,
        profile=True,
        layouts=plan.layouts,
    )
    state = run_back_end(request)
    assert state.unit is not None and state.host is not None and state.library is not None
    assert state.layouts is not None
    profiled = CompiledEntry(
        state.unit, state.host, state.library, realization, threads, state.layouts
    )
    plain = compile_entry(
        chosen.checked,
        chosen.entry,
        chosen.binding,
        realization,
        threads,
        banner=banner,
        layouts=plan.layouts,
    )
    timed, reference = profiled.bind(drawn), plain.bind(drawn)
    _check(timed.invoke(), "instrumented")  # the first call touches the arena's pages
    _check(reference.invoke(), "plain")
    ns, calls = _counters(profiled)
    ns[:] = 0
    calls[:] = 0
    # Interleaved, so a busy machine slows both builds alike.
    plain_times, wall = [], []
    for _ in range(repeat):
        plain_times += _time(reference.invoke, 1)
        wall += _time(timed.invoke, 1)
    ns, calls = ns.copy(), calls.copy()
    same = _same_bits(timed, reference)
    kernels, sites = profile_rows(profiled, ns, calls, repeat)
    total = sum(ms for *_, ms in kernels)
    wall_ms = statistics.fmean(wall) * 1e3  # a mean, as the counters' sums are

    def share(ms: float) -> str:
        return f"{100 * ms / total:.1f}" if total > 0 else "-"

    out = [
        f"{chosen.entry.text} in {realize}, {threads} worker{'s' if threads > 1 else ''}: "
        f"{len(profiled.unit.profile)} launch statements, {len(kernels)} kernels; "
        f"{repeat} calls after a warm-up; shares of the time in launches",
        f"{'kernel':<12}{'launches':>10}{'ms/call':>11}{'share %':>9}  sites",
    ]
    for name, covers, count, ms in kernels:
        out.append(f"{name:<12}{count:>10g}{ms:>11.3f}{share(ms):>9}  {', '.join(covers)}")
    width = max([len("site"), *(len(name) for name, *_ in sites[:TOP_SITES])]) + 2
    out.append(f"{'site':<{width}}{'launches':>10}{'ms/call':>11}{'share %':>9}  kernels")
    for name, covers, count, ms in sites[:TOP_SITES]:
        out.append(f"{name:<{width}}{count:>10g}{ms:>11.3f}{share(ms):>9}  {', '.join(covers)}")
    if len(sites) > TOP_SITES:
        out.append(f"… {len(sites) - TOP_SITES} more sites")
    out.append(
        f"in launches {total:.3f} ms of {wall_ms:.3f} ms per call (means, instrumented); "
        f"plain build {statistics.fmean(plain_times) * 1e3:.3f} ms"
    )
    out.append(
        f"outputs: the instrumented build's equal the plain build's byte for byte "
        f"({len(timed.outputs)} buffers)"
        if same
        else "outputs: the instrumented build's DIFFER from the plain build's"
    )
    sys.stdout.write("\n".join(out) + "\n")
    return 0 if same else 1


TOP_SITES = 10
