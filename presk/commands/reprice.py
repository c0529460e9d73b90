"""`presk reprice DAY --profile P`: a recorded sweep priced again, nothing measured.

DAY is a directory `presk autotune` wrote (presk/tune/sweep.py). The entry
it swept is captured again from `meta.json` (no kernel compiled or run),
every point of every nest is priced at the recorded shapes under the layout
model of P (tune/pricing.py). Per nest: the model's pick among the points measured
there, its measured median over the best measured one, and Spearman's ρ of
the prices against the medians. `--out DIR` writes the day again with the
new prices and the recorded times, which `presk rank` then reads.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

from presk.commands.common import choose_entry, const_overrides, guard, realization_of
from presk.commands.plan import layout_profile
from presk.data.format import DataError
from presk.diagnostics import CommandError, UsageError
from presk.host.plan import PlanError
from presk.pipeline import Request, front_end
from presk.tune.capture import capture
from presk.tune.model import plan_choice, spearman
from presk.tune.pricing import Pricer
from presk.tune.sweep import META, Day, SweepError, check_day, layout_of, read_day, write_lines

NAME = "reprice"
HELP = "Price the points of a recorded day again under another profile, their times copied"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help=HELP, description=HELP + ": nothing is measured")
    parser.add_argument("day", metavar="DAY", help="a directory presk autotune wrote")
    parser.add_argument("--profile", default=None, metavar="P.json", help="the layout model")
    parser.add_argument(
        "--out", default=None, metavar="DIR", help="write the day again with the new prices"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if args.profile is None:
        raise UsageError("--profile is required: the layout profile to price the day under")
    return guard(NAME, lambda: _reprice(args))


def _meta(day: Day, key: str, kind: type) -> Any:
    value = day.meta.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise CommandError(f"{day.path}/{META}: `{key}` is missing or not a {kind.__name__}")
    return value


def _request(day: Day) -> tuple[Request, int]:
    """The entry the day swept, as it swept it."""
    file, entry = _meta(day, "file", str), _meta(day, "entry", str)
    dims = _meta(day, "dims", dict)
    threads = _meta(day, "threads", int)
    consts = day.meta.get("consts") or []
    if not isinstance(consts, list):
        raise CommandError(f"{day.path}/{META}: `consts` is not a list")
    realization = realization_of(str(_meta(day, "realize", str)))
    if realization is None:
        raise CommandError(f"{day.path}/{META}: its realization is refused")
    checked, _ = front_end(file, const_overrides([str(c) for c in consts]))
    chosen = choose_entry(checked, entry, [f"{k}={v}" for k, v in dims.items()])
    return Request(checked, chosen.entry, chosen.binding, realization, threads), threads


def _reprice(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    profile = layout_profile(args.profile)
    try:
        day = read_day(args.day)
        if args.out is not None:
            check_day(args.out)
    except SweepError as error:
        raise CommandError(str(error)) from None
    request, threads = _request(day)
    nests = {n.site: n for n in capture(request).nests}
    out = [f"{'nest':<29}{'points':>7}  {'pick/best':>9}  {'Spearman':>8}  pick"]
    written: dict[str, list[dict[str, Any]]] = {}
    total = 0
    for site, lines in day.nests.items():
        nest = nests.get(site)
        if nest is None:
            raise CommandError(f"{args.day}: nest {site} is not a nest of {request.entry.text}")
        again: list[dict[str, Any]] = []
        pricer = Pricer(nest, profile, threads)
        for line in lines:
            try:
                point = layout_of(line)
            except PlanError as error:
                raise CommandError(f"{args.day}: {error.message}") from None
            cost = pricer.price(point)
            again.append({**line, "predicted_us": cost})
        written[site] = again
        total += len(again)
        ran = [
            line
            for line in again
            if line.get("same")
            and line["predicted_us"] is not None
            and isinstance(line.get("median_us"), int | float)
        ]
        if not ran:
            out.append(f"{site:<29}{len(again):>7}  {'-':>9}  {'-':>8}  nothing measured")
            continue
        costs = [float(line["predicted_us"]) for line in ran]
        pick = ran[plan_choice([layout_of(line) for line in ran], costs, profile.u)]
        best = min(float(line["median_us"]) for line in ran)
        ratio = float(pick["median_us"]) / best if best > 0 else math.nan
        rho = spearman(
            [float(line["predicted_us"]) for line in ran],
            [float(line["median_us"]) for line in ran],
        )
        out.append(
            f"{site:<29}{len(again):>7}  {ratio:>9.2f}  {rho:>8.3f}  {layout_of(pick).text()}"
        )
    out.append(
        f"-- {len(written)} nests, {total} points of {args.day} priced again under "
        f"{args.profile} in {time.perf_counter() - start:.3f} s; nothing measured"
    )
    if args.out is not None:
        _write(args.out, day, {**day.meta, "profile": args.profile}, written)
        out.append(f"-- the day written again to {args.out}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _write(directory: str, day: Day, meta: dict[str, Any], nests: dict[str, Any]) -> None:
    try:
        write_lines(directory, meta, nests, day.epilogues)
    except (DataError, OSError) as error:
        raise CommandError(f"--out {directory}: {error}") from None
    except SweepError as error:
        raise CommandError(str(error)) from None


__all__ = ["HELP", "NAME", "add", "main"]
