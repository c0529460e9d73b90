"""`presk autotune FILE --entry E --out DIR`: every point of every nest measured.

The entry's nests are captured from its shapes (no kernel run); every point
of each nest's space (`--space small`, a daily subset, or `full`) is
compiled, all in one C unit, run on the same inputs, compared byte for byte
with point zero and timed `--repeat` times. The inputs are, by default,
those the entry gives each nest when it runs on its drawn inputs (one
capturing build, presk/tune/capture.py); `--inputs drawn` draws them in
each input's type instead.
A product whose add could be its bias epilogue is timed again with the add
in its kernel, against the two launches (presk/tune/epilogue.py).
DIR gets one JSON line per point (presk/tune/sweep.py); `--out-plan`
writes the best measured point of each nest as a plan, a product taking
its epilogue where that measured faster than the two launches.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from presk.commands.common import (
    check_out_file,
    choose_entry,
    const_overrides,
    entry_args,
    file_args,
    guard,
    planned_of,
    realization_arg,
    threads_of,
    write_out,
)
from presk.commands.plan import layout_profile, machine_note
from presk.data.format import DataError
from presk.diagnostics import CommandError, UsageError
from presk.entries import natural
from presk.host.plan import Plan
from presk.host.plan import write as write_plan
from presk.pipeline import Request, front_end
from presk.tune import epilogue
from presk.tune.capture import CaptureError, capture, check_fits, points_of, with_entry_inputs
from presk.tune.model import price
from presk.tune.sweep import Pricer, SweepError, check_day, layout_of, sweep, write_day

NAME = "autotune"
HELP = "Measure every point of every nest's layout space, each checked against point zero's bits"
SPACES = ("small", "full")
INPUTS = ("entry", "drawn")


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tune = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(tune)
    entry_args(tune)
    realization_arg(tune, "machine types")
    tune.add_argument("--space", default="small", help="small (a daily subset, default) or full")
    tune.add_argument("--repeat", default="7", help="timed calls per point (default 7)")
    tune.add_argument("--threads", default=None, help="the machine's workers (default: its cores)")
    tune.add_argument("--profile", default=None, help="a layout cost model's profile: predictions")
    tune.add_argument("--out", default=None, metavar="DIR", help="the sweep's directory (required)")
    tune.add_argument("--out-plan", default=None, metavar="F.json", help="the best as a plan")
    tune.add_argument(
        "--inputs",
        default="entry",
        help="entry (each nest's inputs as the entry gives them, default) or drawn (per type)",
    )
    tune.add_argument(
        "--interp",
        action="store_true",
        help="each point also on the kernel interpreter, its bits against point 0's "
        "(slower than the sweep: attention at B=16, T=256 takes minutes)",
    )
    tune.set_defaults(handler=main, plan=None)


def main(args: argparse.Namespace) -> int:
    return guard(NAME, lambda: _autotune(args))


def _pricer(path: str | None, threads: int) -> Pricer | None:
    """The model's price of each point, from the profile at `path` (None: no prices)."""
    if path is None:
        return None
    profile = layout_profile(path)  # checked before the sweep, not at its first price
    if (note := machine_note(profile)) is not None:
        print(note, file=sys.stderr)
    return lambda nest, lowered: price(nest, lowered, profile, threads)


def _autotune(args: argparse.Namespace) -> int:
    if args.out is None:
        raise UsageError("--out DIR is required (the sweep's directory)")
    if args.space not in SPACES:
        raise UsageError(f"--space {args.space}: expected small or full")
    if args.inputs not in INPUTS:
        raise UsageError(f"--inputs {args.inputs}: expected entry or drawn")
    repeat = natural("--repeat", args.repeat, 1, 1000)
    threads = threads_of(args.threads)
    try:
        check_day(args.out)
    except SweepError as error:
        raise CommandError(str(error)) from None
    if args.out_plan is not None:
        if os.path.abspath(args.out_plan) == os.path.abspath(args.out):
            raise UsageError("--out-plan names the sweep's directory: give the plan another name")
        check_out_file("--out-plan", args.out_plan, [args.file])
    planned = planned_of(args)
    if planned is None:
        return 1
    pricer = _pricer(args.profile, threads)
    start = time.perf_counter()
    checked, _ = front_end(args.file, const_overrides(args.const))
    chosen = choose_entry(checked, args.entry, args.dim)
    request = Request(checked, chosen.entry, chosen.binding, planned.realization, threads)
    captured = capture(request)
    check_fits(captured.nests, "the sweep")
    if args.inputs == "entry":
        try:
            captured = with_entry_inputs(request, captured)
        except CaptureError as error:
            raise CommandError(f"{error}; --inputs drawn draws them instead") from None
    config = ",".join(f"{k}={v}" for k, v in chosen.binding.dims.items())
    dtype = planned.realization.default
    total = sum(len(points_of(n, threads, args.space)) for n in captured.nests)
    with _progress(total) as bar:
        nests, costed, measured, interpreted = sweep(
            captured, args.space, threads, repeat, config, dtype, pricer, bar.update, args.interp
        )
    joined_at = time.perf_counter()
    joined = epilogue.measure(captured, nests, threads, repeat)
    joined_s = time.perf_counter() - joined_at
    meta: dict[str, Any] = {
        "file": os.path.abspath(args.file),  # reprice reads it from wherever it runs
        "entry": chosen.entry.text,
        "dims": chosen.binding.dims,
        "consts": args.const,
        "realize": planned.text,
        "threads": threads,
        "space": args.space,
        "inputs": args.inputs,
        "interp": args.interp,
        "repeat": repeat,
        "profile": args.profile,
        "captured_s": captured.seconds,
        "costed_s": costed,
        "measured_s": measured,
        "interpreted_s": interpreted,
        "epilogues_s": joined_s,
        "wall_s": time.perf_counter() - start,
    }
    try:
        paths = write_day(args.out, meta, nests, joined)
    except SweepError as error:
        raise CommandError(str(error)) from None
    except (DataError, OSError) as error:  # a directory that cannot be written
        raise CommandError(f"--out {args.out}: {error}") from None
    out = []
    for result, path in zip(nests, paths, strict=True):
        n = len(result.lines)
        out.append(
            f"{result.nest.site:<28} {result.nest.operands:<32} "
            f"{result.measured:>5} of {n:>5} points  {path}"
        )
    taken = {}  # a product's site → its epilogue point, where it beat the two launches
    for result in nests:
        mine = [x for x in joined if x["nest"] == result.nest.site]
        if mine:
            found = epilogue.chosen(mine)
            out.append(_epilogue_line(result.nest.site, mine, found))
            if found is not None and found[0]["median_us"] < found[1]:
                taken[result.nest.site] = found[0]
    points = sum(r.measured for r in nests)
    differing = sum(r.differing for r in nests) + sum(1 for x in joined if x["same"] is False)
    interp_differing = sum(r.interp_differing for r in nests)
    where = "natively and on the kernel interpreter" if args.interp else "natively"
    verdict = "yes"
    if differing or interp_differing:
        parts = [f"{differing} points differ natively"]
        if args.interp:
            parts.append(f"{interp_differing} on the kernel interpreter")
        verdict = f"NO ({', '.join(parts)})"
    spent = f"measured in {measured:.1f} s, costed in {costed:.3f} s"
    if args.interp:
        spent += f", interpreted in {interpreted:.1f} s"
    out.append(
        f"-- {points} points of {len(nests)} nests {spent}; every output bit-identical to "
        f"point 0, {where}: {verdict}"
    )
    if args.out_plan is not None:
        best = {r.nest.site: layout_of(b) for r in nests if (b := r.best()) is not None}
        for site, line in taken.items():  # the add launches nothing: no point of its own
            best[site] = layout_of(line)
            best.pop(line["add"], None)
        plan = Plan(planned.realization, best, planned.text)
        write_out("--out-plan", args.out_plan, lambda: write_plan(plan, args.out_plan))
        out.append(f"-- the best measured point of each nest written to {args.out_plan}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0 if differing == 0 and interp_differing == 0 else 1


def _epilogue_line(
    site: str, lines: list[dict[str, Any]], found: tuple[dict[str, Any], float] | None
) -> str:
    """A product's epilogue in a line: its fastest exact point with the add in its kernel
    against the fastest of the same points and the add as two launches (`found`,
    epilogue.chosen's)."""
    same = all(x["same"] for x in lines if x["same"] is not None)
    ran = sum(1 for x in lines if x["same"] is not None)
    head = f"{site:<28} + {lines[0]['add']} as its epilogue:"
    verdict = f"every output bit-identical to the two launches: {'yes' if same else 'NO'}"
    if found is None:
        return f"{head} {ran} of {len(lines)} points ran, none timed; {verdict}"
    fused, apart = found[0]["median_us"], found[1]
    return (
        f"{head} {fused:.1f} µs against {apart:.1f} µs in two launches "
        f"({apart / fused:.2f}×), {ran} of {len(lines)} points; {verdict}"
    )


class _Quiet:
    def update(self, n: int) -> None:
        pass

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _progress(total: int) -> Any:
    """A progress bar over the points, on a terminal only."""
    if not sys.stderr.isatty():
        return _Quiet()
    from tqdm import tqdm  # type: ignore[import-untyped]

    return tqdm(total=total, unit="point", file=sys.stderr, leave=False)
