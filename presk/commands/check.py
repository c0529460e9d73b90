"""`presk check FILE [--summary]`: shapes, regularity classes and effects."""

from __future__ import annotations

import argparse
import sys

from presk.commands.common import const_overrides, file_args, guard, later_flag, refuse_later_flags
from presk.diagnostics import print_diagnostics
from presk.pipeline import front_end

NAME = "check"
HELP = "Type-check a program: shapes, regularity classes, effects"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(parser)
    parser.add_argument(
        "--summary",
        action="store_true",
        help="print the types of functions and lets, their regularity classes and effects",
    )
    later_flag(parser, "--precision", "check a realization against a precision envelope")
    later_flag(parser, "--realize", "the realization that --precision checks")
    parser.set_defaults(handler=main)


def _data_file_type(path: str) -> str | None:
    """The sample type a `.psk.d` file holds, for the training summary."""
    from presk.data.format import DataError, read

    try:
        return read(path).type
    except (DataError, OSError):
        return None


def main(args: argparse.Namespace) -> int:
    def body() -> int:
        from presk.types.summary import summary

        refuse_later_flags(args)
        checked, sink = front_end(args.file, const_overrides(args.const))
        print_diagnostics(sink.diagnostics, sys.stderr)
        if args.summary:
            sys.stdout.write(summary(checked, _data_file_type))
        return 0

    return guard(NAME, body)
