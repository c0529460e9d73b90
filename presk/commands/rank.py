"""`presk rank DAY1 DAY2 --entry E --out rank.md`: the layout model against two sweeps.

DAY1 and DAY2 are directories `presk autotune` wrote for the same entry;
the report (presk/tune/rank.py) gives the statements table, statement Q per
contraction nest and the close pairs per decision class, as Markdown.
"""

from __future__ import annotations

import argparse
import sys

from presk.commands.common import check_out_file, guard, write_out
from presk.data.format import write_atomically
from presk.diagnostics import CommandError, UsageError
from presk.tune.rank import markdown, profile_u, rank
from presk.tune.sweep import SweepError, read_day

NAME = "rank"
HELP = "Rank the layout cost model's predictions against two days of `presk autotune`"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help=HELP, description=HELP)
    parser.add_argument("day1", help="the first sweep's directory")
    parser.add_argument("day2", help="the second sweep's directory")
    parser.add_argument("--entry", default=None, help="the entry both sweeps measured")
    parser.add_argument("--out", default=None, metavar="F.md", help="the report (else stdout only)")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    return guard(NAME, lambda: _rank(args))


def _rank(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out_file("--out", args.out)
    try:
        day1, day2 = read_day(args.day1), read_day(args.day2)
    except SweepError as error:
        raise CommandError(str(error)) from None
    entries = {str(day1.meta.get("entry")), str(day2.meta.get("entry"))}
    if len(entries) != 1:
        raise UsageError(f"the two sweeps measured different entries: {', '.join(sorted(entries))}")
    entry = entries.pop()
    if args.entry is not None and args.entry != entry:
        raise UsageError(f"--entry {args.entry}: the sweeps measured `{entry}`")
    if day1.meta.get("dims") != day2.meta.get("dims"):
        raise UsageError("the two sweeps measured the entry at different dims")
    text = markdown(rank(day1, day2, entry, profile_u(day1.meta.get("profile"))))
    if args.out is not None:
        write_out("--out", args.out, lambda: write_atomically(args.out, text.encode()))
    sys.stdout.write(text)
    return 0
