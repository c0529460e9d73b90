"""`presk plan`: choose every nest's layout statically, from a calibrated cost model.

The entry's launches are captured from its shapes (no kernel compiled or
run), and every point of every nest's space is priced at those shapes by the
layout model of `--profile` (tune/model.py), from its kernels' outlines
(tune/pricing.py: a tiled contraction's is built from the point itself). The
cheapest point of each nest goes into the plan; the table says, per nest,
how many points the model cannot tell from it (within 1 + u of its price).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from presk.commands.common import (
    check_out_file,
    choose_entry,
    const_overrides,
    entry_args,
    file_args,
    guard,
    realization_of,
    threads_of,
    write_out,
)
from presk.diagnostics import CommandError, UsageError, read_json
from presk.host.plan import Plan, write
from presk.kernel.layout import Layout
from presk.pipeline import Request, front_end
from presk.tune.capture import Captured, capture, points_of
from presk.tune.machine import read_machine, unlike
from presk.tune.model import Profile, ProfileError, plan_choice, read
from presk.tune.pricing import price_points

NAME = "plan"
HELP = "Choose a realization plan statically from a layout cost model"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(parser)
    entry_args(parser)
    parser.add_argument("--realize", default="f64", help="the realization: f64, f32, bf16, @FILE")
    parser.add_argument(
        "--profile",
        default=None,
        metavar="P.json",
        help="the layout cost model (presk bench --calibrate --space calib writes one)",
    )
    parser.add_argument("--threads", default=None, help="workers (default: the cores)")
    parser.add_argument("--out", default=None, metavar="PLAN.json", help="where to write the plan")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if args.profile is None:
        raise UsageError(
            "--profile is required: a layout profile (presk bench --calibrate --space calib)"
        )
    return guard(NAME, lambda: _plan(args))


def checked_profile(path: str, flag: str = "--profile") -> Profile:
    """The profile at `path` (CommandError: one line, if it is not one it can price or
    fit with)."""
    try:
        return read(path)
    except ProfileError as error:
        flagged = f"{flag} " if flag else ""  # a positional PROFILE has no flag to name
        raise CommandError(f"{flagged}{error}") from None


def layout_profile(path: str, flag: str = "--profile") -> Profile:
    """The layout profile at `path` (CommandError: one line, if it is not one)."""
    profile = checked_profile(path, flag)
    if profile.kind != "layout":
        raise CommandError(
            f"{flag + ' ' if flag else ''}{path}: a {profile.kind} profile; layouts are "
            "priced by a layout profile (presk bench --calibrate --space calib)"
        )
    return profile


def machine_note(profile: Profile) -> str | None:
    """A line saying the profile was fitted on another machine, and how it differs (None:
    on this one's kind): its rates and caches are that machine's, and so are its prices."""
    said = unlike(profile.machine, read_machine())
    if not said:
        return None
    return (
        f"-- the profile describes another machine ({'; '.join(said)}): its prices are that "
        "machine's; `presk bench --calibrate` fits one here"
    )


def priced(nest: Captured, profile: Profile, threads: int) -> list[tuple[Layout, float]]:
    """Every point of a nest the nest can take, with its price."""
    points = points_of(nest, threads, "full")
    costs = price_points(nest, points, profile, threads)
    return [(p, c) for p, c in zip(points, costs, strict=True) if c is not None]


def _realization_json(spec: str) -> object:
    """The realization as a plan states it: a type, or the file's object."""
    if not spec.startswith("@"):
        return spec
    return read_json(spec[1:], f"--realize {spec}", CommandError)


def _plan(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    if args.out is not None:
        check_out_file("--out", args.out, [args.file, args.profile or ""])
    profile = layout_profile(args.profile)
    realization = realization_of(args.realize)
    if realization is None:
        return 1
    threads = threads_of(args.threads)
    checked, _ = front_end(args.file, const_overrides(args.const))
    chosen = choose_entry(checked, args.entry, args.dim)
    request = Request(checked, chosen.entry, chosen.binding, realization, threads)
    captured = capture(request)
    costing = time.perf_counter()
    u = profile.u
    # The seed's columns, the first widened for a longer site name than its 28 characters.
    wide = max([29, *(len(n.site) + 1 for n in captured.nests)])
    rows: list[str] = [
        f"{'nest':<{wide}}{'operands':<32}{'space':<10}{'predicted':<19}{'undecided':<11}layout"
    ]
    layouts: dict[str, Layout] = {}
    total = 0
    # Every product an add alone reads takes it as its epilogue: the add's launch and its
    # passes over the output go, for one more load an element in the product's kernel.
    finished = {joined.add: product for product, joined in captured.epilogues.items()}
    for nest in captured.nests:
        points = priced(nest, profile, threads)
        if not points:
            continue
        total += len(points)
        costs = [cost for _, cost in points]
        best = min(costs)
        best_point = points[plan_choice([p for p, _ in points], costs, u)][0]
        undecided = sum(cost <= best * (1 + u) for cost in costs)
        if nest.site in captured.epilogues:
            best_point = replace(best_point, epilogue=True)
        if nest.site in finished:
            said = f"none: the epilogue of {finished[nest.site]}"
        else:
            layouts[nest.site] = best_point
            said = best_point.text()
        rows.append(
            f"{nest.site:<{wide}}{nest.operands:<24}{len(points):>6} points{best:>12.2f} µs"
            f"{undecided:>5} within 1 + u  {said}"
        )
    costed = time.perf_counter() - costing
    rows.append(
        f"-- {len(layouts)} nests, {total} points costed in {costed:.3f} s, "
        f"the entry captured in {captured.seconds:.3f} s; u = {u:.3f}"
    )
    plan = Plan(realization, layouts, _realization_json(args.realize))
    if args.out is not None:
        write_out("--out", args.out, lambda: write(plan, args.out))
    if (note := machine_note(profile)) is not None:
        rows.append(note)
    rows.append(f"-- wall time {time.perf_counter() - start:.3f} s")
    if args.out is not None:
        rows.append(f"-- plan written to {args.out}")
    sys.stdout.write("\n".join(rows) + "\n")
    return 0


__all__ = ["HELP", "NAME", "add", "checked_profile", "layout_profile", "main", "priced"]
