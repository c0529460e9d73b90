"""The `presk` command line: the parser is built from the modules of presk/commands/.

Exit codes: 0 success (warnings allowed), 1 a diagnostic with an error or a
run-time error, 2 a usage error or a command that is not built yet.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from presk import __version__
from presk.commands import (
    autotune,
    bench,
    check,
    data,
    dump,
    export,
    plan,
    rank,
    refit,
    reprice,
    run,
    serve,
    train,
)
from presk.commands.common import Parser
from presk.diagnostics import (
    CompileError,
    CompilerBug,
    UsageError,
    print_diagnostics,
    printable,
)

BUILT = (check, run, dump, bench, export, data, train, serve, autotune, rank, plan, reprice, refit)

BANNER = (
    f"presk {__version__}: a compiler for a typed tensor language. Built today: check, "
    "run (the exact reference, or native C in f64/f32/bf16), dump, bench, export --target c, "
    "data, train, serve, plan, autotune, rank, reprice and refit; the other commands say "
    "they are not built yet"
)

# Every command of the manual's list, with its one-line help.
COMMANDS: dict[str, str] = {
    "check": check.HELP,
    "run": run.HELP,
    "export": export.HELP,
    "dump": dump.HELP,
    "train": train.HELP,
    "serve": serve.HELP,
    "plan": plan.HELP,
    "explain": "Write one compilation as a document: every stage and its reasons",
    "memory": "Count what one call of an entry needs in memory",
    "autotune": autotune.HELP,
    "reprice": reprice.HELP,
    "rank": rank.HELP,
    "refit": refit.HELP,
    "bench": bench.HELP,
    "calibrate": "Measure the magnitude envelope of an entry or a training step",
    "solve": "Solve for a realization under a declared error budget",
    "quantize": "Quantise parameters as a realization says and measure the gap",
    "data": data.HELP,
    "help": "Show the help of presk or of one command",
}

# What each command of the manual not built yet waits for.
NOT_BUILT = {
    "explain": "the explain document",
    "memory": "memory accounting",
    "calibrate": "magnitude envelopes",
    "solve": "precision budgets",
    "quantize": "quantisation",
}


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    parser = Parser(prog="presk", description=BANNER)
    parser.add_argument("-V", "--version", action="version", version=f"presk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=Parser)
    modules = {m.NAME: m for m in BUILT}
    for name, text in COMMANDS.items():
        if name in modules:
            modules[name].add(sub)
        elif name == "help":
            helper = sub.add_parser(name, help=text, description=text)
            topic = "a command (and its action: `data chars`)"
            helper.add_argument("topic", nargs="*", metavar="COMMAND", help=topic)
        else:
            other = sub.add_parser(name, help=text, description=f"{text} (not built yet)")
            other.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _help(parser: argparse.ArgumentParser, topic: list[str]) -> int:
    if not topic:
        parser.print_help()
        return 0
    if topic[0] not in COMMANDS:
        raise UsageError(f"{topic[0]}: no such command ({', '.join(COMMANDS)})")
    try:
        parser.parse_args([*topic, "--help"])
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `presk` script."""
    words = list(sys.argv[1:] if argv is None else argv)
    # A command not built yet answers so whatever follows it, flags included (but its help).
    if words and words[0] in NOT_BUILT and not {"-h", "--help"} & set(words[1:]):
        sys.stderr.write(f"presk {words[0]}: not built yet: {NOT_BUILT[words[0]]}\n")
        return 2
    parser = build_parser()
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "help":
            return _help(parser, args.topic)
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except UsageError as error:  # a flag's or a file's text, escaped to one line
        sys.stderr.write(f"presk {args.command}: {printable(str(error))}\n")
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
    except KeyboardInterrupt:
        sys.stderr.write(f"presk {args.command}: interrupted\n")
        return 130
    except Exception as error:
        if os.environ.get("PRESK_DEBUG"):
            raise
        sys.stderr.write(
            f"presk {args.command}: internal error (a bug in presk): "
            f"{type(error).__name__}: {error} (PRESK_DEBUG=1 shows the traceback)\n"
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
