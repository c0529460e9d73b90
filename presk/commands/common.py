"""What the commands share: the flags of a file and an entry, and how a failure is told.

Every command module has `NAME`, `HELP`, `add(subparsers)` (its argparse
wiring, which sets `handler`) and `main(args) -> int`. Exit codes: 0
success (warnings allowed), 1 a diagnostic with an error or a run-time
error, 2 a usage error or something not built yet. Diagnostics and errors
go to stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, NoReturn

from presk.build.errors import BuildError, CacheError, LoadError
from presk.data.format import DataError
from presk.diagnostics import (
    CommandError,
    Diagnostic,
    NotBuiltYet,
    UsageError,
    print_diagnostics,
    printable,
)
from presk.entries import Binding, Entry, bind_dims, find_entry, natural, parse_bindings
from presk.export.c import ExportError
from presk.host.plan import Plan, PlanError
from presk.host.plan import parse as parse_plan
from presk.host.program import HostError, HostRunError
from presk.host.realization import Realization, RealizationError, parse
from presk.interp.reference import RunError
from presk.kernel.layout import Layout
from presk.machine import MAX_THREADS, default_threads
from presk.syntax.deep import call_deep
from presk.syntax.literals import LiteralRange, parse_literal
from presk.types.check import CheckedProgram

if TYPE_CHECKING:
    from presk.pipeline import Request


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: {message}\n")
        sys.exit(2)


# Flags of the manual not built yet: given, the command answers so (exit 2).
_LATER = "_presk_later"


def later_flag(
    parser: argparse.ArgumentParser, flag: str, what: str, takes_value: bool = True
) -> None:
    """A flag the manual names that is not built yet: accepted, then refused with exit 2."""
    dest = f"later_{flag.lstrip('-').replace('-', '_')}"
    if takes_value:
        parser.add_argument(flag, dest=dest, metavar="…", help=f"{what} (not built yet)")
    else:
        parser.add_argument(
            flag, dest=dest, action="store_const", const=True, help=f"{what} (not built yet)"
        )
    parser.set_defaults(**{_LATER: {**(parser.get_default(_LATER) or {}), flag: what}})


def refuse_later_flags(args: argparse.Namespace) -> None:
    """Raise NotBuiltYet for the first not-built flag given."""
    for flag, what in (getattr(args, _LATER, None) or {}).items():
        if getattr(args, f"later_{flag.lstrip('-').replace('-', '_')}", None) is not None:
            raise NotBuiltYet(f"`{flag}` ({what})")


def file_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the .psk source file")
    parser.add_argument(
        "--const",
        action="append",
        default=[],
        metavar="NAME=V",
        help="override a constant (exact: integer, decimal or fraction); repeatable",
    )


def entry_args(parser: argparse.ArgumentParser, repeatable: bool = False) -> None:
    """`--entry` (a list of the entries given when `repeatable`) and `--dim`."""
    parser.add_argument(
        "--entry",
        action="append" if repeatable else "store",
        help="the function to evaluate, e.g. `attend` or `Linear{3, 2}.apply`"
        + ("; repeatable with --mode library" if repeatable else ""),
    )
    parser.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=N",
        help="bind a dimension, or name an axis of an open prefix `...`; repeatable",
    )


def remat_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--remat",
        choices=("store", "recompute"),
        default="store",
        help="derivatives keep their forward values (store) or compute them again",
    )


_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def parse_number(text: str) -> Fraction:
    """An exact number from the command line: `3`, `-0.5`, `1e-3`, `8/3`.

    Each side is read as a literal of the language is, with its limits (so
    `1e1000000000` is refused at once instead of being expanded)."""
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    numerator, slash, denominator = body.lstrip("+-").partition("/")
    parts = [numerator, denominator] if slash else [numerator]
    if not all(_NUMBER.fullmatch(p) for p in parts):
        raise ValueError(text)
    try:
        values = [parse_literal(p) for p in parts]
    except LiteralRange as error:
        raise ValueError(f"{text} ({error.message})") from None
    if slash and values[1] == 0:
        raise ValueError(text)
    return sign * (values[0] / values[1] if slash else values[0])


def const_overrides(items: list[str]) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, value in parse_bindings(items, "--const").items():
        try:
            out[name] = parse_number(value)
        except ValueError as error:
            why = str(error)[len(value) :].strip(" ()")
            raise UsageError(
                f"--const {name}={value}: "
                + (why if why else "not a number (give an integer, a decimal or a fraction)")
            ) from None
    return out


def realization_of(spec: str) -> Realization | None:
    """`--realize` parsed; a refused realization (E7002) is reported and gives None."""
    try:
        return parse(spec)
    except RealizationError as error:
        if error.code is None:
            raise UsageError(error.message) from None
        print_diagnostics([Diagnostic(error.code, error.message)], sys.stderr)
        return None


def plan_arg(parser: argparse.ArgumentParser, laid_out: str = "") -> None:
    """`--plan @FILE`; `laid_out` says which nests it lays out, where a command has several."""
    parser.add_argument(
        "--plan",
        default=None,
        metavar="@FILE",
        help="a layout plan (JSON, as `presk plan` writes it): a layout per nest and a "
        "realization; the same bits as without it, in another time" + laid_out,
    )


def realization_arg(parser: argparse.ArgumentParser, what: str) -> None:
    """`--realize`, whose default is the plan's realization, else f64."""
    parser.add_argument(
        "--realize",
        default=None,
        help=f"{what}: f64, f32, bf16 or @FILE (default: the --plan's, else f64)",
    )


@dataclass(frozen=True)
class Planned:
    """`--realize` and `--plan` together: the realization and each nest's layout."""

    realization: Realization
    plan: Plan
    text: str  # the realization as the user gave it, for banners: a type, @FILE or the plan


def planned_of(args: argparse.Namespace) -> Planned | None:
    """`--plan` (if given) and `--realize`, which must agree with the plan's when both
    state one; None for a refused realization or point (reported, E7002)."""
    plan = Plan()
    if getattr(args, "plan", None) is not None:
        try:
            plan = parse_plan(args.plan)
        except PlanError as error:
            _plan_refused(error)
            return None
    if args.realize is None:
        realization = plan.realization or Realization("f64")
        stated = plan.realization_json
        text = stated if isinstance(stated, str) else "f64" if stated is None else args.plan
    else:
        text = args.realize
        chosen = realization_of(args.realize)
        if chosen is None:
            return None
        if plan.realization is not None and plan.realization != chosen:
            raise UsageError(
                f"--realize {args.realize} is not the realization of --plan {args.plan}: "
                "drop one of them"
            )
        realization = chosen
    return Planned(realization, plan, text)


def read_plan(spec: str) -> Plan:
    """`--plan @FILE` read: a file that is no plan is a usage error (exit 2), as
    `planned_of` has it; a refused realization stays a PlanError (E7002)."""
    try:
        return parse_plan(spec)
    except PlanError as error:
        if error.code is None:
            raise UsageError(error.message) from None
        raise


def plan_shares(
    named: list[tuple[str, Request]], layouts: Mapping[str, Layout]
) -> list[dict[str, Layout]]:
    """A plan's points for each of several compiled functions: each takes the points at
    the sites its host program has (recorded, not compiled), so a site they share lays
    out every one of them; a site of none is refused, as one entry's plan refuses it."""
    from presk.pipeline import run_back_end

    shares: list[dict[str, Layout]] = []
    for _, request in named:
        host = run_back_end(request, until="record").host
        assert host is not None
        shares.append({site: layouts[site] for site in host.nests if site in layouts})
    unused = sorted(set(layouts) - {site for share in shares for site in share})
    if unused:
        names = " or ".join(f"`{name}`" for name, _ in named)
        raise PlanError(
            f"the plan names `{unused[0]}`, which is no nest of {names} at these dims "
            "(sites are named as `presk dump --stage core` names them)"
        )
    return shares


def _plan_refused(error: PlanError) -> None:
    if error.code is None:
        raise UsageError(error.message) from None
    print_diagnostics([Diagnostic(error.code, error.message)], sys.stderr)
    return None


def check_out_file(flag: str, path: str, inputs: Sequence[str] = ()) -> None:
    """Refuse, before any work, an output file that cannot be written whole: a directory
    (`.` too), a path in a directory that does not exist, or the same file as one of the
    command's `inputs` (the program it reads, say). Nothing there is touched."""
    if path == "":
        raise UsageError(f"{flag}: an empty name; name the file to write")
    said = printable(path)
    if os.path.isdir(path):
        raise UsageError(f"{flag} {said}: a directory, not a file; name the file to write")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"{flag} {said}: no directory {printable(parent)} to write it in")
    for source in inputs:
        if _same_file(path, source):
            raise UsageError(f"{flag} {said}: the file the command reads; name another")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False  # one of them is not there (yet): not the same file


def say_summary(summary: str) -> None:
    """An export's summary on stdout as one line of printable text: it names the entry
    and the directory as the user typed them (a newline, an escape sequence)."""
    sys.stdout.write(printable(summary) + "\n")


def write_out(flag: str, path: str, write: Callable[[], None]) -> None:
    """Run `write` (an atomic write of `path`); a failure is the command's one line."""
    try:
        write()
    except (DataError, OSError) as error:
        raise CommandError(f"{flag} {path}: {error}") from None


def threads_of(flag: str | None, default: int | None = None) -> int:
    """`--threads N`; without it `default`, else `PRESK_THREADS`, else the machine's cores."""
    if flag is not None:
        return natural("--threads", flag, 1, MAX_THREADS)
    if default is not None:
        return default
    return default_threads()


@dataclass(frozen=True)
class Chosen:
    """A checked program, the entry `--entry` names and its `--dim` values."""

    checked: CheckedProgram
    entry: Entry
    binding: Binding


def choose_entry(checked: CheckedProgram, entry: str | None, dims: list[str]) -> Chosen:
    """Resolve `--entry` and bind `--dim`; a missing `--entry` is a usage error."""
    if entry is None:
        from presk.entries import function_names

        raise UsageError("--entry is required; functions: " + ", ".join(function_names(checked)))
    chosen = find_entry(checked, entry)
    return Chosen(checked, chosen, bind_dims(chosen, parse_bindings(dims, "--dim")))


def run_error(error: RunError) -> int:
    """A run-time error of the program: diagnostic E7001, exit 1."""
    message = error.message + (f" (at {error.site})" if error.site else "")
    print_diagnostics([Diagnostic("E7001", message)], sys.stderr)
    return 1


def guard(command: str, body: Callable[[], int]) -> int:
    """Run a command's body; what it raises becomes its one line and exit code.

    The body runs with room for deep programs (presk/syntax/deep.py): every pass
    recurses over what the program nests, the back end's too."""
    try:
        return call_deep(body)
    except CommandError as error:
        _say(command, str(error))
        return 1
    except NotBuiltYet as error:
        _say(command, f"not built yet: {error}")
        return 2
    except RunError as error:
        return run_error(error)
    except PlanError as error:
        if error.code is None:
            _say(command, error.message)
        else:
            print_diagnostics([Diagnostic(error.code, error.message)], sys.stderr)
        return 1
    except HostRunError as error:
        return run_error(RunError(str(error)))
    except HostError as error:
        _say(command, f"not built yet: {error}")
        return 2
    except ExportError as error:
        _say(command, str(error))
        return 1
    except (CacheError, LoadError) as error:
        _say(command, str(error))
        return 1
    except BuildError as error:
        sys.stderr.write(f"presk {command}: the C compiler failed: {error}\n")
        return 1
    except RecursionError:
        sys.stderr.write(f"presk {command}: the program is nested too deeply to compile\n")
        return 1


def _say(command: str, message: str) -> None:
    """A command's failure as one line: what came from a file or a flag (a site's name,
    a path) may hold newlines or escapes, which are shown escaped."""
    sys.stderr.write(f"presk {command}: {printable(message)}\n")


@dataclass(frozen=True)
class RunFlags:
    """What `train` and `serve` take alike: where the step runs, in what, from which seed."""

    backend: str
    seed: int
    bits: int
    realization: Realization
    threads: int
    layouts: dict[str, Layout]  # `--plan`'s (train only)
    realize_text: str  # the realization as the user gave it


def run_flags(args: argparse.Namespace) -> RunFlags | None:
    """`--backend`, `--seed`, `--bits`, `--realize`, `--threads`; None for a realization
    refused with E7002 (already reported)."""
    if args.backend not in ("interp", "native"):
        raise UsageError(f"--backend {args.backend}: expected `interp` or `native`")
    seed = natural("--seed", args.seed, 0, 2**64 - 1)
    bits = natural("--bits", args.bits, 8, 1 << 20)
    planned = planned_of(args)
    if planned is None:
        return None
    threads = threads_of(args.threads) if args.backend == "native" else 1
    layouts = planned.plan.layouts
    return RunFlags(args.backend, seed, bits, planned.realization, threads, layouts, planned.text)


def program_of(args: argparse.Namespace) -> CheckedProgram:
    """The checked program of `FILE` and `--const`; its warnings printed."""
    from presk.pipeline import front_end

    checked, sink = front_end(args.file, const_overrides(args.const))
    print_diagnostics([d for d in sink.diagnostics if not d.is_error], sys.stderr)
    return checked


@dataclass(frozen=True)
class BlockExport:
    """What an export of a block (`--train`, `--serve`) takes: a seed, a type, workers,
    and `--plan`'s layouts (`plan` as the user gave it, None without one)."""

    seed: int
    realization: Realization
    threads: int
    realize: str  # the realization as the user gave it, for banners
    layouts: dict[str, Layout]
    plan: str | None


def block_export_flags(args: argparse.Namespace, flag: str, what: str) -> BlockExport | None:
    """The flags of `export --train`/`--serve`, checked; None for a refused realization."""
    if args.entry is not None or args.dim:
        raise UsageError(f"{flag} exports {what}: drop --entry and --dim")
    if args.mode != "program" or args.name is not None:
        raise UsageError(f"{flag} writes a program: drop --mode and --name")
    if args.output is None:
        raise UsageError("-o DIR is required")
    seed = natural("--seed", args.seed or "0", 0, 2**64 - 1)
    planned = planned_of(args)
    if planned is None:
        return None
    threads = 1 if args.threads is None else natural("--threads", args.threads, 1, 1024)
    layouts = planned.plan.layouts
    return BlockExport(seed, planned.realization, threads, planned.text, layouts, args.plan)
