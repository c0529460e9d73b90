"""`presk dump FILE --stage STAGE`: an intermediate representation, as text."""

from __future__ import annotations

import argparse
import sys

from presk.commands.common import (
    choose_entry,
    const_overrides,
    entry_args,
    file_args,
    guard,
    later_flag,
    plan_arg,
    planned_of,
    realization_arg,
    refuse_later_flags,
    remat_arg,
)
from presk.core import ir, unroll
from presk.diagnostics import CommandError, Sink, Source, UsageError, print_diagnostics
from presk.elab.program import LoadError, read_source
from presk.pipeline import NotDifferentiable, Request, core_module, front_end, run_back_end

NAME = "dump"
HELP = "Print an intermediate representation (development aid)"
STAGES = ("tokens", "ast", "elab", "core", "core-after-ad", "sched", "kernel")
LATER_STAGES = ("core-opt", "sensitivity", "network")


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dump = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(dump)
    dump.add_argument("--stage", required=True, help=", ".join(STAGES))
    entry_args(dump)
    realization_arg(dump, "machine types for --stage kernel")
    remat_arg(dump)
    dump.add_argument(
        "--unroll-stack", action="store_true", help="write a stack as L calls instead of a fold"
    )
    plan_arg(dump)
    later_flag(dump, "--format", "derivatives as equations")
    dump.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    return guard(NAME, lambda: _dump(args))


def _source(path: str) -> Source:
    try:
        return read_source(path)
    except LoadError as error:
        raise CommandError(str(error)) from None


def _dump(args: argparse.Namespace) -> int:
    refuse_later_flags(args)
    stage = args.stage
    if stage in LATER_STAGES:
        sys.stderr.write(f"presk dump: stage `{stage}` is not built yet\n")
        return 2
    if stage not in STAGES:
        raise UsageError(f"--stage {stage}: unknown stage ({', '.join(STAGES)})")
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
    checked, sink = front_end(args.file, const_overrides(args.const))
    print_diagnostics(sink.diagnostics, sys.stderr)
    if stage == "elab":
        from presk.types.elab_dump import elab_dump

        sys.stdout.write(elab_dump(checked))
        return 0
    if stage == "core":
        from presk.core.text import module_text

        core = _unrolled(checked.core) if args.unroll_stack else checked.core
        sys.stdout.write(module_text(core))
        return 0
    try:
        module = core_module(checked, args.remat)
    except NotDifferentiable as error:
        sys.stderr.write(f"presk dump: not built yet: {error}\n")
        return 2
    if stage == "core-after-ad":
        from presk.core.text import module_text

        sys.stdout.write(module_text(_unrolled(module) if args.unroll_stack else module))
        return 0
    if stage == "sched":
        from presk.sched.fusion import sched_text

        sys.stdout.write(sched_text(module))
        return 0
    return _kernels(args, checked)


def _kernels(args: argparse.Namespace, checked: object) -> int:
    """`--stage kernel`: the kernels an entry launches, after its fusion summary."""
    from presk.host.program import HostError
    from presk.interp.reference import RunError
    from presk.kernel.text import kernel_text
    from presk.types.check import CheckedProgram

    assert isinstance(checked, CheckedProgram)
    if args.entry is None:
        raise UsageError("--stage kernel needs --entry (and its --dim values)")
    planned = planned_of(args)
    if planned is None:
        return 1
    realization = planned.realization
    try:
        chosen = choose_entry(checked, args.entry, args.dim)
        request = Request(
            checked,
            chosen.entry,
            chosen.binding,
            realization,
            remat=args.remat,
            layouts=planned.plan.layouts,
            machine_threads=0,
        )
        host = run_back_end(request, until="budget").host
    except (RunError, HostError, TypeError) as error:
        sys.stderr.write(f"presk dump: {getattr(error, 'message', error)}\n")
        return 1
    assert host is not None
    saved = host.launches_unfused - host.launches
    share = round(100 * saved / host.launches_unfused) if host.launches_unfused else 0
    default = realization.default
    out = [
        f"-- {len(host.kernels)} kernels, {host.launches} launches, "
        + (default if realization.uniform else f"{args.realize or args.plan} (default {default})"),
        f"-- fusion: {host.launches_unfused} launches without it, {saved} saved ({share}%)",
    ]
    sys.stdout.write("\n".join(out) + "\n" + "".join(kernel_text(k) for _, k in host.kernels))
    return 0


def _unrolled(module: ir.Module) -> ir.Module:
    """`--unroll-stack`: the module with its folds written out, or one line (exit 1)."""
    try:
        return unroll.run(module)
    except unroll.UnrollError as error:
        raise CommandError(str(error)) from None
