"""`presk refit PROFILE --combine pnorm|sum|max [--out P2]`: the same samples, another form.

Nothing is measured: the layout model is fitted again to the samples the
profile holds, its terms combined as `--combine` says, and the fit printed
as `bench --calibrate --space calib` prints it. `--out` writes the new
profile; without it nothing is written.
"""

from __future__ import annotations

import argparse
import sys

from presk.commands.common import check_out_file, guard, write_out
from presk.commands.plan import layout_profile
from presk.diagnostics import CommandError
from presk.tune.model import FORMS, fit_lines, fitted_profile, write

NAME = "refit"
HELP = "Fit a profile's layout cost model again on its samples, in another form"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help=HELP, description=HELP + ": nothing is measured")
    parser.add_argument("profile", metavar="PROFILE", help="a layout profile")
    parser.add_argument("--combine", required=True, choices=FORMS, help="how the terms combine")
    parser.add_argument("--out", default=None, metavar="P2.json", help="write the new profile")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    return guard(NAME, lambda: _refit(args))


def _refit(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_out_file("--out", args.out)
    old = layout_profile(args.profile, flag="")
    if not old.samples:
        raise CommandError(f"{args.profile}: no samples to fit")
    profile, _ = fitted_profile("layout", old.machine, list(old.samples), args.combine, old.fit)
    out = [
        f"-- {len(old.samples)} samples of {args.profile}, fitted before as {old.form} "
        f"(u = {old.u:.3f}, Spearman {old.spearman:.3f}), again as {args.combine}",
        *fit_lines(profile),
    ]
    if args.out is not None:
        write_out("--out", args.out, lambda: write(profile, args.out))
        out.append(f"-- profile written to {args.out}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


__all__ = ["HELP", "NAME", "add", "main"]
