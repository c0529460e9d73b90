"""`presk export FILE --target pytorch --mode readable [--shapes=check] [--stack=unroll|loop]
[--conformance-entry E --dim … | --train | --serve [--weights F] [--vocab V]] -o DIR`: the
program as readable PyTorch (docs/pytorch.md)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from fractions import Fraction

import gmpy2

from presk.commands.common import choose_entry, const_overrides, say_summary
from presk.commands.run import to_json
from presk.core.unroll import UnrollError
from presk.diagnostics import CommandError, UsageError, printable
from presk.elab.presburger import Lin
from presk.elab.ty import SCALAR, Instance, Params, Type, subst
from presk.entries import natural
from presk.export.budget import Choice, choice_of, decide, entry_ops, over_budget
from presk.export.c import ExportPlan
from presk.export.pytorch.body import Options
from presk.export.pytorch.conformance import Conformance, parameter_paths, test_file
from presk.export.pytorch.files import write_files
from presk.export.pytorch.layout import Unsupported
from presk.export.pytorch.naming import naming
from presk.export.pytorch.serving import serve_files
from presk.export.pytorch.training import train_files
from presk.export.write import check_target, write_plan
from presk.interp.elementwise import mul
from presk.interp.run import reference_inputs, reference_interpreter
from presk.interp.tensor import Tensor
from presk.interp.tree import Tree, Value
from presk.pipeline import core_module, front_end
from presk.serve.generate import prepare
from presk.types.check import CheckedProgram, FnInfo
from presk.types.values import TrainingRun

NAME = "export"


def export_pytorch(args: argparse.Namespace) -> int:
    if args.mode != "readable":
        sys.stderr.write(
            f"presk export: not built yet: the `pytorch` target in --mode {args.mode}\n"
        )
        return 2
    if args.shapes not in (None, "check"):
        raise UsageError(f"--shapes={args.shapes}: expected check")
    if args.stack not in (None, "loop", "unroll"):
        raise UsageError(f"--stack={args.stack}: expected loop or unroll")
    if args.output is None:
        raise UsageError("-o DIR is required")
    if args.conformance_entry is None and args.dim:
        raise UsageError("--dim binds the dimensions of --conformance-entry: give one")
    steps = _train_steps(args.conformance_entry)
    reference = choice_of(args.reference, args.no_reference)
    if reference is not Choice.AUTO and args.conformance_entry is None:
        raise UsageError(f"{reference.value}: only --conformance-entry computes the reference")
    if steps is not None and args.dim:
        raise UsageError("--dim: a training run's dimensions come from its data file")
    _serve_flags(args)
    check_target(args.output)
    checked, _ = front_end(args.file, const_overrides(args.const))
    options = Options(args.shapes == "check", args.stack == "unroll")
    if (args.train or steps is not None) and not checked.trainings:
        raise UsageError(f"{printable(args.file)} has no `training run` block")
    served = None
    if args.serve:
        if not checked.serves:
            raise UsageError(f"{printable(args.file)} has no `inference` block")
        block = checked.serves[0]
        served = (block, prepare(block, args.weights, args.vocab))
        options = replace(options, left_out=frozenset({block.generate.name}))
    try:
        files: dict[str, str | bytes] = {f.name: f.text for f in write_files(checked, options)}
        if served is not None:
            files.update(serve_files(*served, naming(checked)))
        elif args.train or steps is not None:
            seed = natural("--seed", args.seed, 0) if args.seed else 0
            force = reference is Choice.FORCE
            files.update(train_files(checked, checked.trainings[0], seed, steps, force))
        elif args.conformance_entry is not None:
            files.update(_conformance(checked, args.conformance_entry, args.dim, reference))
    except Unsupported as error:
        sys.stderr.write(f"presk export: cannot export to PyTorch yet: {error}\n")
        return 2
    except UnrollError as error:
        raise CommandError(str(error)) from None
    written = ", ".join(f"{args.output.rstrip('/')}/{name}" for name in files)
    plan = ExportPlan(files, f"presk export: wrote {written}")
    write_plan(plan, args.output, args.conformance_entry or "")
    say_summary(plan.summary)
    return 0


def _serve_flags(args: argparse.Namespace) -> None:
    """--serve writes one program: refuse the flags of the others, and its own without it."""
    if args.serve:
        if args.train or args.conformance_entry is not None:
            flag = "--train" if args.train else "--conformance-entry"
            raise UsageError(f"--serve and {flag}: one program at a time")
        if args.seed is not None:
            raise UsageError("--seed is a flag of --train (serve.py generates greedily)")
        return
    for flag, value in (("--weights", args.weights), ("--vocab", args.vocab)):
        if value is not None:
            raise UsageError(f"{flag} is a flag of --serve")


def _train_steps(entry: str | None) -> int | None:
    """K of `--conformance-entry train:K`; None for another entry or none."""
    if entry is None or not entry.startswith("train:"):
        return None
    count = entry.removeprefix("train:")
    if not (count.isascii() and count.isdigit() and int(count) > 0):
        raise UsageError(f"--conformance-entry {entry}: K of train:K is a whole number ≥ 1")
    return int(count)


def _conformance(
    checked: CheckedProgram, text: str, dims: list[str], reference: Choice
) -> dict[str, str | bytes]:
    conformance, inputs, expected = conformance_case(checked, text, dims, reference)
    return {
        "test_conformance.py": test_file(conformance),
        "conformance/inputs.json": _json(inputs),
        "conformance/expected.json": _json(expected),
    }


def conformance_case(
    checked: CheckedProgram, text: str, dims: list[str], reference: Choice = Choice.AUTO
) -> tuple[Conformance, dict[str, object], dict[str, object]]:
    """The entry's call as the test makes it, with inputs.json's and expected.json's
    documents (the inputs `presk run` synthesizes and the 256-bit reference's result).

    A reference estimated over the budget (export/budget.py) is refused, nothing
    computed, unless `reference` forces it: the test is nothing without it."""
    chosen = choose_entry(checked, text, dims)
    info, binding = chosen.entry.info, chosen.binding
    verdict = decide(lambda: entry_ops(checked, chosen.entry, binding), reference, text)
    if not verdict.run:
        raise CommandError(
            f"the conformance test of `{text}` needs its exact reference: "
            + over_budget(verdict.ops, verdict.budget)
        )
    named = [(name, ty) for name, ty, _ in info.params]
    names = naming(checked)
    run = next((r for r in checked.trainings if info in (r.rate, r.update, r.step)), None)
    with gmpy2.context(precision=256):
        values = reference_inputs(info, binding.dims, binding.prefix, 0)
        if run is not None:
            values = _optimizer_inputs(named, values)
        result = reference_interpreter(core_module(checked)).call(info.name, binding.dims, values)
    inputs = {name: to_json(v) for (name, _), v in zip(named, values, strict=True)}
    sizes = dict(binding.dims)
    if info.module is not None:
        module = Instance(
            info.module, tuple(_lin(chosen.entry.module_dims[d]) for d in info.module.dims)
        )
        arguments = [(name, False) for name, _ in named[1:]]
        function = None
    else:
        trees = [ty for _, ty in named if isinstance(ty, Params)]
        if len(trees) > 1 and run is None:
            raise Unsupported(f"a conformance entry with {len(trees)} parameter trees")
        env = {k: Lin.const_(v) for k, v in sizes.items()}
        module = None
        if trees:
            tree = subst(trees[0], env)
            assert isinstance(tree, Params)
            module = tree.inst
        arguments = [(name, isinstance(ty, Params)) for name, ty in named]
        function = names.function(info)
    result_ty = info.ret and subst(info.ret, {k: Lin.const_(v) for k, v in sizes.items()})
    leaves = result_ty.inst if isinstance(result_ty, Params) else module
    conformance = Conformance(
        text,
        info.file.basename,
        module,
        sizes,
        function,
        "forward" if info.module is None else names.method(info),
        arguments,
        names.file(info.file),
        None if module is None else (names.file(module.module.file), names.cls(module.module)),
        [] if leaves is None else parameter_paths(leaves, names),
        _optimizer_args(run, info, arguments) if run is not None and trees else None,
    )
    document = {"entry": text, "dims": sizes, "bits": 256, "seed": 0}
    return conformance, {**document, "inputs": inputs}, {**document, "output": to_json(result)}


# An optimizer entry's state, where presk run's draws make no sense: a second moment v is
# never negative (its draws are squared), and the step and horizon are those of a run past
# its warm-up (a rate, for adamw.step, a plain one).
OPTIMIZER_STATE = {"t": 25, "total": 40, "lr": Fraction(1, 100)}


def _optimizer_inputs(named: list[tuple[str, Type]], values: list[Value]) -> list[Value]:
    out: list[Value] = []
    for (name, ty), value in zip(named, values, strict=True):
        if name == "v" and isinstance(value, Tree):
            value = _squared(value)
        elif name in ("t", "total") and isinstance(value, Tensor):
            value = Tensor.idx((), OPTIMIZER_STATE[name], value.bound)
        elif name == "lr" and ty == SCALAR:
            value = Tensor.real((), OPTIMIZER_STATE["lr"])
        out.append(value)
    return out


def _squared(tree: Tree) -> Tree:
    items: list[tuple[str, Value]] = []
    for key, leaf in tree.items:
        items.append((key, _squared(leaf) if isinstance(leaf, Tree) else mul(leaf, leaf)))
    return Tree(tuple(items))


def _optimizer_args(run: TrainingRun, info: FnInfo, arguments: list[tuple[str, bool]]) -> list[str]:
    """The test's arguments of adamw_step or run_step: trees as dicts (`tree(name)`)."""
    args = [f"tree({n!r})" if is_tree else f"arg({n!r})" for n, is_tree in arguments]
    lead = ["model"] if info is run.step else []
    return [*lead, *args]


def _lin(value: int) -> Lin:
    return Lin.const_(Fraction(value))


def _json(document: object) -> str:
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"
