"""The compiler's stages in order, and the commands built on them.

    syntax/   lex, parse                      -> AST
    elab/     imports, constants, dims        -> Program
    types/    check, lower                    -> CheckedProgram (with PSK-Core)
    interp/   evaluate on MPFR                -> values

Each command function takes parsed arguments and returns an exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

from presk.diagnostics import CompileError, Diagnostic, Sink, Source, print_diagnostics
from presk.elab.program import LoadError, UnknownConstant, load, read_source
from presk.types.check import CheckedProgram, check_program

if TYPE_CHECKING:
    from presk.host.realization import Realization


class CommandError(Exception):
    """A failure to report as one line and exit code 1 (a file that cannot be read)."""


def parse_number(text: str) -> Fraction:
    """An exact number from the command line: `3`, `0.5`, `1e-3`, `8/3`."""
    try:
        return Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(text) from None


def parse_bindings(items: list[str], flag: str) -> dict[str, str]:
    """`NAME=V` pairs from a repeatable flag, in order."""
    from presk.cli import UsageError

    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or not value.strip():
            raise UsageError(f"{flag} {item!r}: expected NAME=VALUE")
        out[name] = value.strip()
    return out


def const_overrides(items: list[str]) -> dict[str, Fraction]:
    from presk.cli import UsageError

    out: dict[str, Fraction] = {}
    for name, value in parse_bindings(items, "--const").items():
        try:
            out[name] = parse_number(value)
        except ValueError:
            raise UsageError(
                f"--const {name}={value}: not a number (give an integer, a decimal or a fraction)"
            ) from None
    return out


def front_end(path: str, overrides: dict[str, Fraction]) -> tuple[CheckedProgram, Sink]:
    """Load and check a program; raises CompileError (warnings included) on errors."""
    sink = Sink()
    try:
        return _front_end(path, overrides, sink)
    except RecursionError:
        raise CommandError(f"{path}: the program is nested too deeply to compile") from None


def _front_end(
    path: str, overrides: dict[str, Fraction], sink: Sink
) -> tuple[CheckedProgram, Sink]:
    try:
        program = load(path, overrides, sink)
    except LoadError as error:
        raise CommandError(str(error)) from None
    except UnknownConstant as error:
        from presk.cli import UsageError

        raise UsageError(str(error)) from None
    checked = check_program(program, sink)
    sink.check()
    return checked, sink


def _data_file_type(path: str) -> str | None:
    """The sample type a `.psk.d` file holds, for the training summary."""
    from presk.data.format import DataError, read

    try:
        return read(path).type
    except (DataError, OSError):
        return None


def guard(command: str, body: Callable[[], int]) -> int:
    """Run a command's body; a CommandError is one line and exit 1."""
    try:
        return body()
    except CommandError as error:
        sys.stderr.write(f"presk {command}: {error}\n")
        return 1
    except RecursionError:
        sys.stderr.write(f"presk {command}: the program is nested too deeply to compile\n")
        return 1


def check(args: argparse.Namespace) -> int:
    """`presk check FILE [--summary]`."""

    def body() -> int:
        from presk.types.summary import summary

        checked, sink = front_end(args.file, const_overrides(args.const))
        print_diagnostics(sink.diagnostics, sys.stderr)
        if args.summary:
            sys.stdout.write(summary(checked, _data_file_type))
        return 0

    return guard("check", body)


def dump(args: argparse.Namespace) -> int:
    """`presk dump FILE --stage STAGE`."""
    from presk.cli import UsageError

    stage = args.stage

    def body() -> int:
        if stage == "tokens":
            from presk.syntax.lexer import lex

            sink = Sink()
            tokens = lex(_source(args.file), sink)
            print_diagnostics(sink.diagnostics, sys.stderr)
            sys.stdout.write("".join(t.dump() + "\n" for t in tokens))
            return 1 if sink.has_errors else 0
        if stage == "ast":
            from presk.syntax import ast
            from presk.syntax.parser import parse

            sink = Sink()
            tree = parse(_source(args.file), sink)
            print_diagnostics(sink.diagnostics, sys.stderr)
            sys.stdout.write(ast.dump(tree))
            return 1 if sink.has_errors else 0
        if stage == "core-after-ad":
            from presk.ad.reverse import NotDifferentiable, differentiate
            from presk.core.text import module_text

            checked, sink = front_end(args.file, const_overrides(args.const))
            print_diagnostics(sink.diagnostics, sys.stderr)
            try:
                module = differentiate(checked.core, args.remat)
            except NotDifferentiable as error:
                sys.stderr.write(f"presk dump: not built yet: {error}\n")
                return 2
            if args.unroll_stack:
                from presk.core import unroll

                module = unroll.run(module)
            sys.stdout.write(module_text(module))
            return 0
        if stage in ("elab", "core"):
            checked, sink = front_end(args.file, const_overrides(args.const))
            print_diagnostics(sink.diagnostics, sys.stderr)
            if stage == "elab":
                from presk.types.elab_dump import elab_dump

                sys.stdout.write(elab_dump(checked))
            else:
                from presk.core import unroll
                from presk.core.text import module_text

                core = unroll.run(checked.core) if args.unroll_stack else checked.core
                sys.stdout.write(module_text(core))
            return 0
        if stage in ("sched", "kernel"):
            return _dump_native(args, stage)
        later = ("core-opt", "sensitivity", "network")
        if stage in later:
            sys.stderr.write(f"presk dump: stage `{stage}` is not built yet\n")
            return 2
        raise UsageError(
            f"--stage {stage}: unknown stage "
            "(tokens, ast, elab, core, core-after-ad, sched, kernel)"
        )

    return guard("dump", body)


def _dump_native(args: argparse.Namespace, stage: str) -> int:
    """`dump --stage sched` (fusion groups) and `--stage kernel` (the kernels an entry launches)."""
    from presk.ad.reverse import NotDifferentiable, differentiate
    from presk.cli import UsageError
    from presk.sched.fusion import sched_text

    checked, sink = front_end(args.file, const_overrides(args.const))
    print_diagnostics(sink.diagnostics, sys.stderr)
    try:
        module = differentiate(checked.core, args.remat)
    except NotDifferentiable as error:
        sys.stderr.write(f"presk dump: not built yet: {error}\n")
        return 2
    if stage == "sched":
        sys.stdout.write(sched_text(module))
        return 0
    from presk.backends.native import layout_of_type
    from presk.host.program import HostError, record
    from presk.interp.reference import RunError
    from presk.interp.run import bind_dims, find_entry
    from presk.kernel.text import kernel_text

    if args.entry is None:
        raise UsageError("--stage kernel needs --entry (and its --dim values)")
    realization = realization_of(args.realize)
    if realization is None:
        return 1
    chosen = realization.default
    entry = find_entry(checked, args.entry)
    try:
        dims, prefix = bind_dims(entry, parse_bindings(args.dim, "--dim"), checked)
        layouts = [
            layout_of_type(ty, dims, prefix or (), chosen, default, realization.params)
            for _, ty, default in entry.info.params
        ]
        host = record(module, entry.info.name, dims, layouts, chosen, realization=realization)
    except (RunError, HostError, TypeError) as error:
        sys.stderr.write(f"presk dump: {getattr(error, 'message', error)}\n")
        return 1
    saved = host.launches_unfused - host.launches
    share = round(100 * saved / host.launches_unfused) if host.launches_unfused else 0
    out = [
        f"-- {len(host.kernels)} kernels, {host.launches} launches, "
        + (chosen if realization.uniform else f"{args.realize} (default {chosen})"),
        f"-- fusion: {host.launches_unfused} launches without it, {saved} saved ({share}%)",
    ]
    text = "\n".join(out) + "\n" + "".join(kernel_text(k) for _, k in host.kernels)
    sys.stdout.write(text)
    return 0


def realization_of(spec: str) -> Realization | None:
    """`--realize` parsed; a refused realization (E7002) is reported and gives None."""
    from presk.cli import UsageError
    from presk.host.realization import RealizationError, parse

    try:
        return parse(spec)
    except RealizationError as error:
        if error.code is None:
            raise UsageError(error.message) from None
        print_diagnostics([Diagnostic(error.code, error.message)], sys.stderr)
        return None


def _source(path: str) -> Source:
    try:
        return read_source(path)
    except LoadError as error:
        raise CommandError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    """`presk run FILE --entry E …` on the reference interpreter."""
    from presk.interp.run import run_command

    return guard("run", lambda: run_command(args))


__all__ = ["CompileError", "check", "dump", "run"]
