"""The `presk` command line: argparse, one small function per subcommand.

Exit codes: 0 success (warnings allowed), 1 a diagnostic with an error or a
run-time error, 2 a usage error or a command that is not built yet.
Diagnostics and errors go to stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from presk import __version__
from presk.diagnostics import CompileError, CompilerBug, print_diagnostics

BANNER = (
    f"presk {__version__}: a compiler for a typed tensor language "
    "(front end and checker, exact reference interpreter)"
)

# Every command of the manual's list, with its one-line help. Those not built
# yet answer with exit code 2 and say so.
COMMANDS: dict[str, str] = {
    "check": "Type-check a program: shapes, regularity classes, effects",
    "run": "Evaluate an entry point on the exact reference interpreter",
    "export": "Export a program to another framework, or an entry as a C program",
    "dump": "Print an intermediate representation (development aid)",
    "train": "Run the `training run` of a file",
    "serve": "Generate tokens with the file's `inference serve` block",
    "plan": "Choose a realization plan statically from a layout cost model",
    "explain": "Write one compilation as a document: every stage and its reasons",
    "memory": "Count what one call of an entry needs in memory",
    "autotune": "Measure every point of every nest's layout space",
    "reprice": "Price the points of a recorded measurement again under another profile",
    "rank": "Rank the accuracy of the layout cost model on two days of measurement",
    "refit": "Fit a profile's layout cost model again on its samples",
    "bench": "Time an entry on every backend",
    "calibrate": "Measure the magnitude envelope of an entry or a training step",
    "solve": "Solve for a realization under a declared error budget",
    "quantize": "Quantise parameters as a realization says and measure the gap",
    "data": "Produce and inspect `.psk.d` data files",
}

NOT_BUILT = {
    "train": "training needs differentiation and the optimizer, not built yet",
    "serve": "serving is not built yet",
    "plan": "layout planning is not built yet",
    "explain": "the explain document is not built yet",
    "memory": "memory accounting is not built yet",
    "autotune": "autotuning needs the native backend",
    "reprice": "layout cost models are not built yet",
    "rank": "layout cost models are not built yet",
    "refit": "layout cost models are not built yet",
    "calibrate": "calibration is not built yet",
    "solve": "precision budgets are not built yet",
    "quantize": "quantisation is not built yet",
}


class UsageError(Exception):
    """A bad flag or argument value: one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: {message}\n")
        sys.exit(2)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the .psk source file")
    parser.add_argument(
        "--const",
        action="append",
        default=[],
        metavar="NAME=V",
        help="override a constant (exact: integer, decimal or fraction); repeatable",
    )


def _entry_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--entry", help="the function to evaluate, e.g. `attend` or `Linear{3, 2}.apply`"
    )
    parser.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=N",
        help="bind a dimension, or name an axis of an open prefix `...`; repeatable",
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    parser = _Parser(prog="presk", description=BANNER)
    parser.add_argument("-V", "--version", action="version", version=f"presk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)

    check = sub.add_parser("check", help=COMMANDS["check"], description=COMMANDS["check"])
    _common(check)
    check.add_argument(
        "--summary",
        action="store_true",
        help="print the types of functions and lets, their regularity classes and effects",
    )

    run = sub.add_parser("run", help=COMMANDS["run"], description=COMMANDS["run"])
    _common(run)
    _entry_args(run)
    run.add_argument("--seed", default="0", help="the seed of every synthesized input (default 0)")
    run.add_argument("--bits", default="256", help="MPFR precision in bits (default 256)")
    run.add_argument("--digits", default="12", help="significant digits printed (default 12)")
    run.add_argument("--verbose", action="store_true", help="print θ and the inputs first")
    run.add_argument("--json", action="store_true", help="print inputs and outputs as JSON")
    run.add_argument(
        "--remat",
        choices=("store", "recompute"),
        default="store",
        help="derivatives keep their forward values (store) or compute them again",
    )
    run.add_argument(
        "--backend",
        default="interp",
        help="interp (the exact reference, default) or native (compiled C)",
    )
    run.add_argument(
        "--data",
        default=None,
        metavar="F.psk.d",
        help="fill the entry's last argument from a data file instead of synthesizing it",
    )
    run.add_argument(
        "--threads",
        default=None,
        help="native workers (default: PRESK_THREADS, else the machine's cores; 1: no split)",
    )
    run.add_argument(
        "--realize",
        default="f64",
        help="machine type of the native backend: f64 (default), f32 or bf16",
    )

    dump = sub.add_parser("dump", help=COMMANDS["dump"], description=COMMANDS["dump"])
    _common(dump)
    dump.add_argument(
        "--stage",
        required=True,
        help="tokens, ast, elab, core, core-after-ad, sched or kernel",
    )
    _entry_args(dump)
    dump.add_argument(
        "--realize",
        default="f64",
        help="machine types for --stage kernel: f64, f32, bf16 or @FILE (a JSON realization)",
    )
    dump.add_argument(
        "--remat",
        choices=("store", "recompute"),
        default="store",
        help="derivatives keep their forward values (store) or compute them again",
    )
    dump.add_argument(
        "--unroll-stack", action="store_true", help="write a stack as L calls instead of a fold"
    )

    bench = sub.add_parser("bench", help=COMMANDS["bench"], description=COMMANDS["bench"])
    _common(bench)
    _entry_args(bench)
    bench.add_argument("--repeat", default="5", help="timed calls per row (default 5)")
    bench.add_argument("--bits", default="64", help="precision of the reference row (default 64)")
    bench.add_argument("--threads", default=None, help="native workers (default: the cores)")
    bench.add_argument("--native-only", action="store_true", help="skip the reference row")

    export = sub.add_parser("export", help=COMMANDS["export"], description=COMMANDS["export"])
    _common(export)
    _entry_args(export)
    export.add_argument("--target", default="c", help="c (a standalone C program)")
    export.add_argument(
        "--mode",
        default="program",
        help="program (default): the entry as one program; scop: each nest alone, at point zero",
    )
    export.add_argument(
        "--realize", default="f64", help="f64 (default), f32, bf16 or @FILE (a JSON realization)"
    )
    export.add_argument(
        "--plan", default=None, metavar="@FILE", help="a plan of `presk plan` (not built yet)"
    )
    export.add_argument("--threads", default=None, help="workers of split launches (default 1)")
    export.add_argument("-o", dest="output", default=None, metavar="DIR", help="the directory")

    data = sub.add_parser("data", help=COMMANDS["data"], description=COMMANDS["data"])
    actions = data.add_subparsers(
        dest="data_command", metavar="<action>", parser_class=_Parser, required=True
    )
    pack = actions.add_parser("pack", help="a text file, one sample a line, into a .psk.d file")
    pack.add_argument("input", metavar="FILE.txt", help="one sample a line; `-` for stdin")
    pack.add_argument("--type", required=True, help="the sample type, e.g. `(ℝ[4], ℝ[4])`")
    pack.add_argument("-o", dest="output", required=True, metavar="F.psk.d", help="the output")
    pack.add_argument("--real", choices=("f64", "f32", "bf16"), default="f64", help="reals as")
    info = actions.add_parser("info", help="the header, the leaves and the first samples")
    info.add_argument("file", metavar="F.psk.d")
    info.add_argument("--samples", default="3", help="samples shown (default 3)")
    info.add_argument("--digits", default="6", help="significant digits (default 6)")
    diff = actions.add_parser("diff", help="‖a − b‖₂ and ‖a‖₂ over every real of two files")
    diff.add_argument("a", metavar="A.psk.d")
    diff.add_argument("b", metavar="B.psk.d")

    for name, text in COMMANDS.items():
        if name in ("check", "run", "dump", "bench", "export", "data"):
            continue
        other = sub.add_parser(name, help=text, description=f"{text} (not built yet)")
        other.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `presk` script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command in NOT_BUILT:
        sys.stderr.write(f"presk {args.command}: not built yet: {NOT_BUILT[args.command]}\n")
        return 2
    handler: Callable[[argparse.Namespace], int] = _HANDLERS[args.command]
    try:
        return handler(args)
    except UsageError as error:
        sys.stderr.write(f"presk {args.command}: {error}\n")
        return 2
    except CompileError as error:
        print_diagnostics(error.diagnostics, sys.stderr)
        return 1
    except CompilerBug as error:
        sys.stderr.write(
            f"presk {args.command}: internal error (a bug in presk, not in the program): {error}\n"
        )
        return 1
    except BrokenPipeError:
        return 0
    except Exception as error:
        if os.environ.get("PRESK_DEBUG"):
            raise
        sys.stderr.write(
            f"presk {args.command}: internal error (a bug in presk): "
            f"{type(error).__name__}: {error} (PRESK_DEBUG=1 shows the traceback)\n"
        )
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"presk {args.command}: interrupted\n")
        return 130


def _check(args: argparse.Namespace) -> int:
    from presk import pipeline

    return pipeline.check(args)


def _run(args: argparse.Namespace) -> int:
    from presk import pipeline

    return pipeline.run(args)


def _dump(args: argparse.Namespace) -> int:
    from presk import pipeline

    return pipeline.dump(args)


def _bench(args: argparse.Namespace) -> int:
    from presk.bench import bench_command
    from presk.pipeline import guard

    return guard("bench", lambda: bench_command(args))


def _export(args: argparse.Namespace) -> int:
    from presk.export.command import export_command
    from presk.pipeline import guard

    return guard("export", lambda: export_command(args))


def _data(args: argparse.Namespace) -> int:
    from presk.data.command import data_command

    return data_command(args)


_HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "data": _data,
    "export": _export,
    "bench": _bench,
    "check": _check,
    "run": _run,
    "dump": _dump,
}


if __name__ == "__main__":
    sys.exit(main())
