"""`presk check FILE [--summary]`: shapes, regularity classes and effects."""

from __future__ import annotations

import argparse
import os
import sys

from presk.commands.common import const_overrides, file_args, guard, later_flag, refuse_later_flags
from presk.diagnostics import CommandError, print_diagnostics, printable
from presk.pipeline import front_end
from presk.types.values import ServeBlock, TrainingRun

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


def _data_file_type(path: str, run: TrainingRun | None) -> str:
    """What a run's `.psk.d` file holds, for the training summary: its sample type, and
    how the run's batches cut it (or why they cannot)."""
    from presk.data.format import DataError, read
    from presk.train.data import load

    try:
        held = f"file holds {read(path).type}"
    except FileNotFoundError:
        return "file not found"
    except (DataError, OSError):
        return "not a data file"
    if run is None:
        return held
    try:
        batches = load(run, path)
    except CommandError as error:
        return f"{held}, which does not fit: {str(error).split(': ', 1)[-1]}"
    left = f", the last {batches.dropped} left out" if batches.dropped else ""
    return (
        f"{held}, {batches.samples.count} samples: {batches.per_epoch} batches "
        f"of {batches.size} an epoch{left}"
    )


def _serve_files(block: ServeBlock) -> tuple[str, str]:
    """What a serve block's weights and vocabulary hold, or why they cannot serve."""
    from presk.serve import vocab
    from presk.serve.generate import prepare

    shown_w, shown_v = printable(block.weights), printable(block.vocab)
    if os.path.isfile(block.weights):
        try:
            served = prepare(block, block.weights)
            context = served.dims[block.context]
            return (
                f"{shown_w} — holds params {block.model}, context {block.context} = {context}",
                f"{shown_v} — {len(served.vocab)} tokens, the model scores {served.classes}",
            )
        except CommandError as error:
            weights = f"{shown_w} — does not fit: {str(error).split(': ')[-1]}"
    else:
        weights = f"{shown_w} — file not found"
    try:
        size = f"{len(vocab.load(block.vocab))} tokens"
    except CommandError as error:
        size = str(error).split(": ", 1)[-1]
    return weights, f"{shown_v} — {size}"


def main(args: argparse.Namespace) -> int:
    def body() -> int:
        from presk.types.summary import summary

        refuse_later_flags(args)
        checked, sink = front_end(args.file, const_overrides(args.const))
        print_diagnostics(sink.diagnostics, sys.stderr)
        if args.summary:
            sys.stdout.write(summary(checked, _data_file_type, _serve_files))
        return 0

    return guard(NAME, body)
