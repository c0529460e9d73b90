"""`presk export FILE --target c --entry E --dim … [--realize T] [--threads N] -o DIR`."""

from __future__ import annotations

import argparse
import sys

import gmpy2

from presk.commands.common import (
    Chosen,
    choose_entry,
    const_overrides,
    entry_args,
    file_args,
    guard,
    later_flag,
    realization_of,
    refuse_later_flags,
)
from presk.diagnostics import UsageError
from presk.entries import concrete_type, natural
from presk.export.c import ExportPlan
from presk.host.realization import Realization
from presk.interp.run import reference_inputs
from presk.pipeline import Request, compile_entry, core_module, front_end, run_back_end

NAME = "export"
HELP = "Export a program to another framework, or an entry as a C program"
TARGETS = ("c",)
LATER_TARGETS = ("pytorch", "onnx")


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(export)
    entry_args(export)
    export.add_argument("--target", default="c", help="c (a standalone C program)")
    export.add_argument(
        "--mode",
        default="program",
        help="program (default): the entry as one program; scop: each nest alone, at point zero",
    )
    export.add_argument(
        "--realize", default="f64", help="f64 (default), f32, bf16 or @FILE (a JSON realization)"
    )
    later_flag(export, "--plan", "a layout plan of `presk plan`")
    later_flag(export, "--conformance-entry", "a conformance test of the PyTorch export")
    later_flag(export, "--train", "a training script", takes_value=False)
    later_flag(export, "--serve", "a token generator", takes_value=False)
    export.add_argument("--threads", default=None, help="workers of split launches (default 1)")
    export.add_argument("-o", dest="output", default=None, metavar="DIR", help="the directory")
    export.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    return guard(NAME, lambda: _export(args))


def _export(args: argparse.Namespace) -> int:
    from presk.export.c import ExportError
    from presk.host.program import HostError, HostRunError
    from presk.interp.reference import RunError

    if args.target in LATER_TARGETS:
        sys.stderr.write(f"presk export: not built yet: the `{args.target}` target\n")
        return 2
    if args.target not in TARGETS:
        raise UsageError(f"--target {args.target}: expected c (later: pytorch, onnx)")
    refuse_later_flags(args)
    if args.mode not in ("program", "scop"):
        raise UsageError(f"--mode {args.mode}: expected program or scop")
    if args.entry is None:
        raise UsageError("--entry is required")
    if args.output is None:
        raise UsageError("-o DIR is required")
    realization = realization_of(args.realize)
    if realization is None:
        return 1
    if args.mode == "scop" and not realization.uniform:
        raise UsageError("--mode scop writes point zero: one type, f64, f32 or bf16")
    threads = 1 if args.threads is None else natural("--threads", args.threads, 1, 1024)
    if args.mode == "scop" and threads != 1:
        raise UsageError("--mode scop writes each nest at one worker: drop --threads")
    checked, _ = front_end(args.file, const_overrides(args.const))
    chosen = choose_entry(checked, args.entry, args.dim)
    try:
        if args.mode == "scop":
            plan = _scop(args, chosen, realization)
        else:
            plan = _program(args, chosen, realization, threads)
        from presk.export.write import write_plan

        write_plan(plan, args.output, chosen.entry.text)
    except ExportError as error:
        sys.stderr.write(f"presk export: {error}\n")
        return 1
    except HostError as error:
        sys.stderr.write(f"presk export: not built yet: {error}\n")
        return 2
    except HostRunError as error:
        raise RunError(str(error)) from None
    sys.stdout.write(plan.summary + "\n")
    return 0


def _scop(args: argparse.Namespace, chosen: Chosen, realization: Realization) -> ExportPlan:
    from presk.export.scop import plan_scop

    request = Request(chosen.checked, chosen.entry, chosen.binding, realization, tiles=False)
    host = run_back_end(request, until="budget").host
    assert host is not None
    return plan_scop(
        host, chosen.entry.text, args.file, chosen.binding.dims, realization.default, args.output
    )


def _program(
    args: argparse.Namespace, chosen: Chosen, realization: Realization, threads: int
) -> ExportPlan:
    from presk.export.c import CExport, export_banner, plan_export

    info, dims, prefix = chosen.entry.info, chosen.binding.dims, chosen.binding.shown_prefix
    compiled = compile_entry(
        chosen.checked,
        chosen.entry,
        chosen.binding,
        realization,
        threads,
        banner=export_banner(args.file, chosen.entry.text, dims, args.realize),
    )
    with gmpy2.context(precision=256):
        inputs = reference_inputs(info, dims, chosen.binding.prefix, 0)
    assert info.ret is not None
    input_type = "(" + ", ".join(concrete_type(t, dims, prefix) for _, t, _ in info.params) + ")"
    return plan_export(
        CExport(
            compiled,
            core_module(chosen.checked),
            info.name,
            chosen.entry.text,
            args.file,
            dims,
            inputs,
            input_type,
            concrete_type(info.ret, dims, prefix),
            args.realize,
            threads,
            args.output,
        )
    )
