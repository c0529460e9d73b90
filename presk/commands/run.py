"""`presk run FILE --entry E …`: evaluate an entry on the reference, or natively.

Results print as `type = value` with `--digits` significant digits, or as
JSON with exact decimal strings.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from fractions import Fraction
from typing import Any

import gmpy2

from presk.commands.common import (
    Chosen,
    Planned,
    choose_entry,
    const_overrides,
    entry_args,
    file_args,
    guard,
    later_flag,
    plan_arg,
    plan_shares,
    planned_of,
    realization_arg,
    refuse_later_flags,
    remat_arg,
    threads_of,
)
from presk.data.argument import ArgumentError, argument, file_dims, read_data
from presk.data.format import DataFile
from presk.diagnostics import UsageError, print_diagnostics
from presk.elab.ty import TupleT, Type, dims_env, subst
from presk.entries import (
    bind_dims,
    concrete_type,
    find_entry,
    function_names,
    natural,
    parse_bindings,
)
from presk.interp import rng
from presk.interp.reference import NotBuilt, Tree, Value
from presk.interp.run import reference_interpreter
from presk.interp.synth import draw_inputs, to_reference
from presk.interp.tensor import Axis, Tensor, exact_decimal, format_value
from presk.pipeline import NotDifferentiable, Request, compile_entry, core_module, front_end
from presk.types.check import CheckedProgram

NAME = "run"
HELP = "Evaluate an entry point on the exact reference interpreter"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(run)
    entry_args(run)
    run.add_argument("--seed", default="0", help="the seed of every synthesized input (default 0)")
    run.add_argument("--bits", default="256", help="MPFR precision in bits (default 256)")
    run.add_argument("--digits", default="12", help="significant digits printed (default 12)")
    run.add_argument("--verbose", action="store_true", help="print θ and the inputs first")
    run.add_argument("--json", action="store_true", help="print inputs and outputs as JSON")
    remat_arg(run)
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
    realization_arg(run, "machine types of the native backend")
    run.add_argument(
        "--weights",
        default=None,
        metavar="F.psk.d",
        help="the parameter tree from a checkpoint (`presk train`) instead of the initializers",
    )
    plan_arg(run)
    later_flag(run, "--opt", "the exact rewrites of PSK-Core", takes_value=False)
    run.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    return guard(NAME, lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    refuse_later_flags(args)
    seed = natural("--seed", args.seed, 0, 2**64 - 1)
    bits = natural("--bits", args.bits, 8, 1 << 20)
    digits = natural("--digits", args.digits, 1, 200)
    if args.backend not in ("interp", "native"):
        raise UsageError(f"--backend {args.backend}: expected `interp` or `native`")
    planned = planned_of(args)
    if planned is None:
        return 1
    threads = threads_of(args.threads) if args.backend == "native" else 1
    checked, sink = front_end(args.file, const_overrides(args.const))
    print_diagnostics([d for d in sink.diagnostics if not d.is_error], sys.stderr)
    if args.entry is None and checked.program.main.trainings:
        raise UsageError(
            "this file has a `training run`: use `presk train` to execute it, "
            "or --entry to evaluate one function"
        )
    if args.entry is None:
        raise UsageError("--entry is required; functions: " + ", ".join(function_names(checked)))
    try:
        chosen, data = _choose(checked, args)
    except ArgumentError as error:
        raise UsageError(f"--data {error}") from None
    try:
        module = core_module(checked, args.remat)
    except NotDifferentiable as error:
        sys.stderr.write(f"presk run: not built yet: {error}\n")
        return 2
    try:
        return _evaluate(args, chosen, data, module, planned, threads, seed, bits, digits)
    except ArgumentError as error:
        raise UsageError(f"--data {error}") from None
    except NotBuilt as error:
        sys.stderr.write(f"presk run: not built yet: {error}\n")
        return 2


def _choose(checked: CheckedProgram, args: argparse.Namespace) -> tuple[Chosen, DataFile | None]:
    """The entry and its dimensions; with --data, the file, which binds the dimensions of
    the last argument that no --dim gives (presk/data/argument.py)."""
    if args.data is None:
        return choose_entry(checked, args.entry, args.dim), None
    data = read_data(args.data)
    entry = find_entry(checked, args.entry)
    info = entry.info
    if not info.params:
        raise UsageError(f"--data {args.data}: `{info.name}` takes no argument to fill")
    known = (set(info.dims) | set(info.file.dims)) - set(entry.module_dims)
    found = file_dims(info.params[-1][1], data, args.data)
    dims = {k: str(v) for k, v in found.items() if k in known}
    dims.update(parse_bindings(args.dim, "--dim"))
    return Chosen(checked, entry, bind_dims(entry, dims)), data


def _use_weights(path: str, types: list[Type], drawn: list[Any], dims: dict[str, int]) -> None:
    """--weights: the entry's parameter tree from a checkpoint instead of its initializers."""
    from presk.elab.ty import Params
    from presk.train.checkpoint import read_weights

    where = next((i for i, ty in enumerate(types) if isinstance(ty, Params)), None)
    if where is None:
        raise UsageError(f"--weights {path}: the entry takes no parameter tree")
    theta = types[where]
    assert isinstance(theta, Params)
    drawn[where] = read_weights(path, theta, dims)


def _evaluate(
    args: argparse.Namespace,
    chosen: Chosen,
    data: DataFile | None,
    module: Any,
    planned: Planned,
    threads: int,
    seed: int,
    bits: int,
    digits: int,
) -> int:
    from presk.host.program import HostError, HostRunError
    from presk.interp.reference import RunError

    info = chosen.entry.info
    dims, prefix = chosen.binding.dims, chosen.binding.prefix
    compiled = None
    if args.backend == "native":
        try:
            compiled = compile_entry(
                chosen.checked,
                chosen.entry,
                chosen.binding,
                planned.realization,
                threads,
                remat=args.remat,
                layouts=planned.plan.layouts,
            )
        except HostError as error:
            raise NotBuilt(f"the native backend cannot run this entry yet: {error}") from None
        except HostRunError as error:
            raise RunError(str(error)) from None
    elif planned.plan.layouts:
        # The reference computes a layout's bits without one; its sites are still checked
        # as the native backend checks them, so a misnamed plan is not taken in silence.
        request = Request(
            chosen.checked, chosen.entry, chosen.binding, planned.realization, threads
        )
        with contextlib.suppress(HostError):  # an entry the native backend cannot record
            plan_shares([(chosen.entry.text, request)], planned.plan.layouts)
    env = dims_env(dims)
    types = [subst(ty, env) for _, ty, _ in info.params]
    # Drawn once as arrays: the native call takes them as they are; the reference (and
    # what --verbose and --json show) takes them as exact values at --bits. A --data file
    # gives the last argument as the same arrays, so it is never drawn.
    drawn_params = info.params if data is None else info.params[:-1]
    drawn: list[Any] = draw_inputs(drawn_params, dims, prefix, seed)
    if data is not None:
        drawn.append(argument(data, types[-1], args.data))
    if args.weights is not None:
        _use_weights(args.weights, types, drawn, dims)

    def exact(i: int) -> Value:
        return to_reference(drawn[i], types[i], dims, prefix)

    with gmpy2.context(precision=bits):
        if compiled is not None:
            result = compiled.call_reference(drawn)
            shown = args.verbose or args.json
            values = [exact(i) for i in range(len(drawn))] if shown else []
        else:
            values = [exact(i) for i in range(len(drawn))]
            result = reference_interpreter(module).call(info.name, dims, values)
    inputs = [(name, ty, v) for (name, ty, _), v in zip(info.params, values, strict=False)]
    shown_prefix = prefix or ()
    assert info.ret is not None
    if args.json:
        document = {
            "entry": chosen.entry.text,
            "dims": dims,
            "prefix": [[a.name, a.size] for a in shown_prefix],
            "bits": bits,
            "seed": seed,
            "inputs": {name: to_json(value) for name, _, value in inputs},
            "output": to_json(result),
            "type": concrete_type(info.ret, dims, shown_prefix),
        }
        sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=1) + "\n")
        return 0
    out: list[str] = []
    if args.verbose:
        bound = ", ".join(f"{k} = {v}" for k, v in dims.items())
        with_dims = f" with {bound}" if bound else ""
        out.append(f"-- entry {chosen.entry.text}{with_dims} at {bits} bits, seed {seed}")
        for name, ty, value in inputs:
            if isinstance(value, Tree):
                block = format_result(value, ty, dims, shown_prefix, digits)
                out.append(f"{name} : " + block)
            else:
                shown = concrete_type(ty, dims, shown_prefix)
                out.append(f"{name} : {shown} = {_value_text(value, digits)}")
        out.append("-- result")
    out.append(format_result(result, info.ret, dims, shown_prefix, digits))
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def format_result(
    value: Value, ty: Type, dims: dict[str, int], prefix: tuple[Axis, ...], digits: int
) -> str:
    """`type = value`, or a parameter tree block."""
    if isinstance(value, Tree):
        lines = ["params = {"]
        for path, leaf in value.leaves():
            lines.append(f"  {path} = {format_value(leaf, digits)}")
        lines.append("}")
        return "\n".join(lines)
    if isinstance(value, tuple):
        assert isinstance(ty, TupleT)
        return "\n".join(
            format_result(v, t, dims, prefix, digits) for v, t in zip(value, ty.items, strict=True)
        )
    return f"{concrete_type(ty, dims, prefix)} = {_value_text(value, digits)}"


def _value_text(value: Value, digits: int) -> str:
    if isinstance(value, Tensor):
        return format_value(value, digits)
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, rng.Key):
        return f"key({value.k0:#010x}, {value.k1:#010x})"
    if isinstance(value, tuple):
        return "(" + ", ".join(_value_text(item, digits) for item in value) + ")"
    return str(value)


def to_json(value: Value) -> Any:
    """A value as JSON: tensors with their axes and exact decimal strings."""
    if isinstance(value, Tensor):
        data = value.data.tolist() if value.rank else value.item()
        return {
            "axes": [[a.name, a.size] for a in value.axes],
            "kind": value.kind.name.lower(),
            **({"bound": value.bound} if value.bound is not None else {}),
            "data": _json_data(data),
        }
    if isinstance(value, Tree):
        return {path: to_json(leaf) for path, leaf in value.leaves()}
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, rng.Key):
        return {"key": [value.k0, value.k1]}
    return str(value)


def _json_data(data: Any) -> Any:
    if isinstance(data, list):
        return [_json_data(d) for d in data]
    if isinstance(data, bool | int):
        return data
    return exact_decimal(data)
