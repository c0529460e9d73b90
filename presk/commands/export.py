"""`presk export FILE --target c --entry E --dim … [--realize T] [--threads N] -o DIR`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

from presk.commands.common import (
    Chosen,
    Planned,
    block_export_flags,
    choose_entry,
    const_overrides,
    entry_args,
    file_args,
    guard,
    plan_arg,
    plan_shares,
    planned_of,
    realization_arg,
    refuse_later_flags,
    say_summary,
    threads_of,
)
from presk.diagnostics import UsageError, printable
from presk.elab.ty import at_dims
from presk.entries import concrete_type, natural
from presk.export.budget import BUDGET_VARIABLE, DEFAULT_BUDGET, Choice, choice_of
from presk.export.c import CExport, ExportPlan, export_banner, plan_export
from presk.export.library import CLibrary, LibraryEntry, library_name, plan_library
from presk.export.scop import plan_scop
from presk.export.train import CTrain, plan_train
from presk.export.write import check_target, write_plan
from presk.host.realization import Realization
from presk.interp.synth import draw_inputs
from presk.kernel.layout import Layout
from presk.pipeline import Request, compile_entry, core_module, front_end, run_back_end
from presk.train.data import load as load_data
from presk.types.check import CheckedProgram

NAME = "export"
HELP = "Export a program to another framework, or an entry as a C program"
TARGETS = ("c",)


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(export)
    entry_args(export, repeatable=True)
    export.add_argument(
        "--target",
        default="c",
        help="c (a standalone C program, default), pytorch (readable modules) or onnx",
    )
    export.add_argument(
        "--mode",
        default="program",
        help="program (default): the entry as one program; scop: each nest alone, at point "
        "zero; library: the entries as libNAME.a, libNAME.so and NAME.h",
    )
    export.add_argument(
        "--name", default=None, help="--mode library: the library's NAME (default: the file's stem)"
    )
    realization_arg(export, "machine types")
    plan_arg(
        export,
        ". It lays out the entry's nests (--mode program, a library of one entry), the "
        "training step's (--train) or the generation functions' (--serve)",
    )
    export.add_argument(
        "--conformance-entry", default=None, help="--target pytorch: a conformance test of E"
    )
    export.add_argument("--shapes", default=None, help="--target pytorch: check (assert shapes)")
    export.add_argument("--stack", default=None, help="--target pytorch: loop (default), unroll")
    export.add_argument(
        "--train",
        action="store_true",
        help="the file's `training run` as a program that trains (C, or PyTorch's train.py)",
    )
    export.add_argument("--steps", default=None, help="--train --target c: the trainer's horizon")
    export.add_argument("--epochs", default=None, help="--train --target c: passes over the data")
    export.add_argument("--seed", default=None, help="--train: the seed of θ₀ (default 0)")
    export.add_argument(
        "--serve",
        action="store_true",
        help="the file's `inference` block as a C program that generates text (--target c)",
    )
    export.add_argument("--weights", default=None, help="--serve: weights other than the block's")
    export.add_argument("--prompt", default=None, help="--serve: the prompt `make check` uses")
    export.add_argument(
        "--vocab", default=None, help="--serve: a vocabulary other than the block's"
    )
    export.add_argument("--threads", default=None, help="workers of split launches (default 1)")
    export.add_argument(
        "--reference",
        action="store_true",
        help="compute the exact reference (conformance/) even where its estimated cost is "
        f"over the budget ({BUDGET_VARIABLE} scalar operations, default {DEFAULT_BUDGET:.2g})",
    )
    export.add_argument(
        "--no-reference",
        action="store_true",
        help="--target c: never compute the exact reference (make check compares natively)",
    )
    export.add_argument("-o", dest="output", default=None, metavar="DIR", help="the directory")
    export.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    return guard(NAME, lambda: _export(args))


def _refuse(args: argparse.Namespace, flags: tuple[str, ...], of: str) -> None:
    """A usage error for the first of `flags` given where it does not apply."""
    for flag in flags:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value not in (None, False):
            raise UsageError(f"{flag} is a flag of {of}")


def _export(args: argparse.Namespace) -> int:
    reference = choice_of(args.reference, args.no_reference)
    if args.target in ("pytorch", "onnx"):
        _refuse(args, ("--no-reference",), "--target c (a conformance test needs the reference)")
        _refuse(args, ("--steps", "--epochs"), "--train --target c")
        # PyTorch's --serve (serve.py) takes --weights and --vocab; only C's takes --prompt.
        c_only: tuple[str, ...] = ("--serve", "--weights", "--prompt", "--vocab")
        if args.target == "pytorch":
            c_only = ("--prompt",)
        _refuse(args, c_only, "--serve --target c")
    if args.target == "pytorch":
        refuse_later_flags(args)
        from presk.commands.export_pytorch import export_pytorch

        return export_pytorch(args)
    if args.target == "onnx":
        refuse_later_flags(args)
        from presk.commands.export_onnx import export_onnx

        return export_onnx(args)
    for flag, value in (("--conformance-entry", args.conformance_entry), ("--shapes", args.shapes),
                        ("--stack", args.stack)):  # fmt: skip
        if value is not None:
            raise UsageError(f"{flag} is a flag of --target pytorch")
    if args.target not in TARGETS:
        raise UsageError(f"--target {args.target}: expected c, pytorch or onnx")
    refuse_later_flags(args)
    if reference is not Choice.AUTO and (args.train or args.serve or args.mode != "program"):
        raise UsageError(f"{reference.value}: only --mode program computes the exact reference")
    if args.train:
        return _train(args)
    if args.serve:
        from presk.commands.export_serve import export_serve

        return export_serve(args)
    _refuse(args, ("--steps", "--epochs", "--seed"), "--train")
    _refuse(args, ("--weights", "--prompt", "--vocab"), "--serve")
    if args.mode not in ("program", "scop", "library"):
        raise UsageError(f"--mode {args.mode}: expected program, scop or library")
    if args.entry is None:
        raise UsageError("--entry is required")
    entries: list[str] = args.entry
    if args.mode != "library" and len(entries) > 1:
        raise UsageError("--entry is given more than once: several entries need --mode library")
    if args.mode != "library" and args.name is not None:
        raise UsageError("--name names a library: give --mode library")
    if args.output is None:
        raise UsageError("-o DIR is required")
    if args.mode == "scop" and args.plan is not None:
        raise UsageError("--mode scop writes every nest at point zero: drop --plan")
    planned = planned_of(args)
    if planned is None:
        return 1
    realization, args.realize = planned.realization, planned.text
    if args.mode == "scop" and not realization.uniform:
        raise UsageError("--mode scop writes point zero: one type, f64, f32 or bf16")
    threads = 1 if args.threads is None else natural("--threads", args.threads, 1, 1024)
    if args.mode == "scop" and threads != 1:
        raise UsageError("--mode scop writes each nest at one worker: drop --threads")
    check_target(args.output)  # refused before any work, as write_plan would refuse it
    checked, _ = front_end(args.file, const_overrides(args.const))
    if args.mode == "library":
        return _library(args, checked, entries, planned, threads)
    chosen = choose_entry(checked, entries[0], args.dim)
    if args.mode == "scop":
        plan = _scop(args, chosen, realization)
    else:
        plan = _program(args, chosen, planned, threads, reference)
    write_plan(plan, args.output, chosen.entry.text)
    for note in plan.notes:
        sys.stderr.write(note + "\n")
    say_summary(plan.summary)
    return 0


def _train(args: argparse.Namespace) -> int:
    """`--train`: the file's training run as a C program (presk/export/train.py)."""
    if args.serve:
        raise UsageError("--train and --serve: one program at a time")
    flags = block_export_flags(args, "--train", "the run's own step")
    if flags is None:
        return 1
    check_target(args.output)
    checked, _ = front_end(args.file, const_overrides(args.const))
    if not checked.trainings:
        raise UsageError(f"{printable(args.file)} has no `training run` block")
    run = checked.trainings[0]
    batches = load_data(run)
    epochs = natural("--epochs", args.epochs, 1) if args.epochs else run.epochs
    available = batches.available(epochs)
    total = batches.horizon(epochs, natural("--steps", args.steps, 1) if args.steps else None)
    request = CTrain(
        checked, run, batches, args.file, flags.realization, flags.realize, flags.threads,
        flags.seed, total, available, args.output, flags.layouts, flags.plan,
    )  # fmt: skip
    plan = plan_train(request)
    write_plan(plan, args.output, "--train")
    say_summary(plan.summary)
    return 0


def _scop(args: argparse.Namespace, chosen: Chosen, realization: Realization) -> ExportPlan:
    request = Request(chosen.checked, chosen.entry, chosen.binding, realization, tiles=False)
    host = run_back_end(request, until="budget").host
    assert host is not None
    return plan_scop(
        host, chosen.entry.text, args.file, chosen.binding.dims, realization.default, args.output
    )


def _program(
    args: argparse.Namespace, chosen: Chosen, planned: Planned, threads: int, reference: Choice
) -> ExportPlan:
    info, dims, prefix = chosen.entry.info, chosen.binding.dims, chosen.binding.shown_prefix
    compiled = compile_entry(
        chosen.checked,
        chosen.entry,
        chosen.binding,
        planned.realization,
        threads,
        banner=export_banner(args.file, chosen.entry.text, dims, args.realize),
        layouts=planned.plan.layouts,
        machine_threads=threads_of(args.threads),
    )
    # Drawn as host arrays: the reference, if it runs, makes them exact (plan_export).
    inputs = draw_inputs(info.params, dims, chosen.binding.prefix, 0)
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
            [at_dims(ty, dims) for _, ty, _ in info.params],
            chosen.binding.prefix,
            input_type,
            concrete_type(info.ret, dims, prefix),
            args.realize,
            threads,
            args.output,
            reference,
        )
    )


def _library(
    args: argparse.Namespace,
    checked: CheckedProgram,
    entries: list[str],
    planned: Planned,
    threads: int,
) -> int:
    """`--mode library`: each entry compiled as the native backend runs it, in one library.

    A plan lays out sites; of several entries, each takes the plan's points at the sites
    it has (entries that call one function share its sites), and a site no entry has is
    refused as it is for one entry."""
    name = library_name(args.name, args.file)
    if len(entries) > 1:
        _unused_dims(checked, entries, args.dim)
    chosen_all = [_library_entry(checked, text, args.dim, len(entries) > 1) for text in entries]
    layouts: list[Mapping[str, Layout]] = [planned.plan.layouts] * len(entries)
    if planned.plan.layouts and len(entries) > 1:
        requests = [
            (c.entry.text, Request(c.checked, c.entry, c.binding, planned.realization, threads))
            for c in chosen_all
        ]
        layouts = list(plan_shares(requests, planned.plan.layouts))
    compiled = []
    for chosen, entry_layouts in zip(chosen_all, layouts, strict=True):
        dims, prefix = chosen.binding.dims, chosen.binding.shown_prefix
        info = chosen.entry.info
        assert info.ret is not None
        entry = compile_entry(
            chosen.checked,
            chosen.entry,
            chosen.binding,
            planned.realization,
            threads,
            banner=export_banner(args.file, chosen.entry.text, dims, args.realize),
            layouts=entry_layouts,
            machine_threads=threads_of(args.threads),
        )
        output_type = concrete_type(info.ret, dims, prefix)
        compiled.append(LibraryEntry(entry, chosen.entry.text, dims, output_type))
    request = CLibrary(name, tuple(compiled), args.file, args.realize, threads, args.output)
    plan = plan_library(request)
    write_plan(plan, args.output, ", ".join(entries))
    say_summary(plan.summary)
    return 0


def _library_entry(checked: CheckedProgram, text: str, dims: list[str], several: bool) -> Chosen:
    """One `--entry` of a library; of several, each takes the `--dim`s it has.

    A `--dim` that no entry has is refused by the first entry's binding."""
    if not several:
        return choose_entry(checked, text, dims)
    from presk.entries import find_entry, has_open_prefix

    info = find_entry(checked, text).info
    known = set(info.dims) | set(info.file.dims)
    mine = [d for d in dims if has_open_prefix(info) or d.partition("=")[0].strip() in known]
    return choose_entry(checked, text, mine)


def _unused_dims(checked: CheckedProgram, entries: list[str], dims: list[str]) -> None:
    """Refuse, as the first entry's binding does, a `--dim` none of several entries has."""
    from presk.entries import find_entry, has_open_prefix

    infos = [find_entry(checked, text).info for text in entries]
    if any(has_open_prefix(info) for info in infos):
        return
    known = {d for info in infos for d in (*info.dims, *info.file.dims)}
    if any(d.partition("=")[0].strip() not in known for d in dims):
        choose_entry(checked, entries[0], dims)
