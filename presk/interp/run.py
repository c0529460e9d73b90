"""`presk run`: pick an entry, bind its dimensions, synthesize inputs, evaluate, print.

The entry is `f`, `M.f` or `M{a, b}.f` (module dimensions given in braces).
`--dim NAME=N` binds a dimension of the entry or of the file; the other
names given become, in order, the axes of an open prefix `...`. Results
print as `type = value` with `--digits` significant digits, or as JSON with
exact decimal strings.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2

from presk.diagnostics import Diagnostic, Sink, Source, print_diagnostics
from presk.elab.presburger import Lin
from presk.elab.program import ConstError, FileEnv, const_eval
from presk.elab.ty import Axis as TyAxis
from presk.elab.ty import Params, TupleT, Type, subst
from presk.elab.ty import Tensor as TensorT
from presk.interp import rng
from presk.interp.reference import Interpreter, NotBuilt, RunError, Tree, Value
from presk.interp.synth import init_from_key, synthesize
from presk.interp.tensor import Axis, Tensor, exact_decimal, format_value
from presk.syntax.parser import parse_expression
from presk.types.check import CheckedProgram, FnInfo

_ENTRY = re.compile(r"^\s*(?:([\w.]+?)\s*(?:\{([^}]*)\})?\s*\.\s*)?(\w+)\s*$")


@dataclass
class Entry:
    """A function chosen by `--entry` and its module dimensions."""

    info: FnInfo
    text: str
    module_dims: dict[str, int]


def _usage(message: str) -> Exception:
    from presk.cli import UsageError

    return UsageError(message)


def _natural(flag: str, name: str, text: str, low: int = 0, high: int | None = None) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        value = -1
    if value < low or (high is not None and value > high):
        bound = f" in [{low}, {high}]" if high is not None else f" ≥ {low}"
        raise _usage(f"{flag} {name}{text}: expected a whole number{bound}")
    return value


def function_names(checked: CheckedProgram) -> list[str]:
    """The main file's declared functions, as `--entry` accepts them."""
    main = checked.program.main
    return [info.name for info in checked.functions if info.file is main and not info.generated]


def find_entry(checked: CheckedProgram, text: str) -> Entry:
    """Resolve `--entry` against the main file (or an imported module by alias)."""
    names = ", ".join(function_names(checked))
    match = _ENTRY.match(text)
    if match is None:
        raise _usage(f"--entry {text!r}: expected `f`, `M.f` or `M{{dims}}.f`; functions: {names}")
    module_path, args_text, fn_name = match.groups()
    main = checked.program.main
    if module_path is None:
        info = next(
            (
                i
                for i in checked.functions
                if i.file is main and i.name == fn_name and not i.generated
            ),
            None,
        )
        if info is None:
            raise _usage(
                f"--entry {text}: no function `{fn_name}` in {main.path}; functions: {names}"
            )
        return Entry(info, text, {})
    parts = module_path.split(".")
    file: FileEnv | None = main
    for alias in parts[:-1]:
        file = file.imports.get(alias) if file else None
    module = file.modules.get(parts[-1]) if file else None
    if module is None:
        raise _usage(f"--entry {text}: no module `{module_path}`; functions: {names}")
    qualified = f"{module.name}.{fn_name}"
    info = next((i for i in checked.functions if i.module is module and i.name == qualified), None)
    if info is None:
        raise _usage(f"--entry {text}: module `{module.name}` has no function `{fn_name}`")
    values: dict[str, int] = {}
    given = [a for a in (args_text or "").split(",") if a.strip()] if args_text is not None else []
    if len(given) != len(module.dims):
        raise _usage(
            f"--entry {text}: `{module.name}` takes {len(module.dims)} dimension argument(s)"
            + (f" {{{', '.join(module.dims)}}}" if module.dims else "")
        )
    for dim, arg in zip(module.dims, given, strict=True):
        values[dim] = _dim_arg(main, dim, arg.strip(), text)
    return Entry(info, text, values)


def _dim_arg(main: FileEnv, dim: str, text: str, entry: str) -> int:
    sink = Sink()
    expr = parse_expression(Source("<entry>", text), sink)
    try:
        if expr is None or sink.has_errors:
            raise ConstError("", "", None, "")  # type: ignore[arg-type]
        value = const_eval(main, expr)
    except ConstError:
        raise _usage(f"--entry {entry}: `{text}` for {dim} is not a constant") from None
    if value.denominator != 1 or value < 0:
        raise _usage(f"--entry {entry}: {dim} = {value} is not a natural number")
    return int(value)


def bind_dims(
    entry: Entry, dim_args: dict[str, str], checked: CheckedProgram
) -> tuple[dict[str, int], tuple[Axis, ...] | None]:
    """Dimension values and the open prefix's axes from `--dim` flags."""
    info = entry.info
    dims = dict(entry.module_dims)
    prefix: list[Axis] = []
    for name, text in dim_args.items():
        value = _natural("--dim", f"{name}=", text)
        if name in info.dims or name in info.file.dims:
            dims[name] = value
        else:
            prefix.append(Axis(name, value))
    for name, value in list(dims.items()):
        bound = info.file.dim_bounds.get(name)
        if bound is not None and value > bound:
            raise RunError(
                f"`dim` bound violated: `{name} <= {bound}` is false for {name} = {value}"
            )
    missing = [d for d in info.dims if d not in dims]
    if missing:
        raise RunError(
            f"dimension `{missing[0]}` of `{info.name}` has no value "
            f"(give it with --dim {missing[0]}=N)"
        )
    has_open = any(isinstance(t, TensorT) and t.open for _, t, _ in info.params)
    return dims, (tuple(prefix) if prefix or not has_open else None)


def concrete_type(ty: Type, dims: dict[str, int], prefix: tuple[Axis, ...]) -> str:
    """A type at concrete dimensions, for printing: `ℝ[batch: 4, 2]`, `params Linear{3, 2}`."""
    env = {k: Lin.const_(Fraction(v)) for k, v in dims.items()}
    match ty:
        case TensorT():
            body = subst(ty, env)
            assert isinstance(body, TensorT)
            prefix_axes = tuple(
                TyAxis(a.name, Lin.const_(Fraction(a.size))) for a in (prefix if ty.open else ())
            )
            return str(TensorT(body.elem, prefix_axes + body.axes, False, body.bound))
        case TupleT(items):
            return "(" + ", ".join(concrete_type(i, dims, prefix) for i in items) + ")"
    return str(subst(ty, env))


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
    if isinstance(data, bool):
        return data
    if isinstance(data, int):
        return data
    return exact_decimal(data)


def run_command(args: argparse.Namespace) -> int:
    """The body of `presk run`."""
    from presk.pipeline import const_overrides, front_end, parse_bindings, realization_of

    seed = _natural("--seed", "", args.seed, 0, 2**64 - 1)
    bits = _natural("--bits", "", args.bits, 8, 1 << 20)
    digits = _natural("--digits", "", args.digits, 1, 200)
    if args.backend not in ("interp", "native"):
        raise _usage(f"--backend {args.backend}: expected `interp` or `native`")
    realization = realization_of(args.realize)
    if realization is None:
        return 1
    args.realization = realization
    dim_args = parse_bindings(args.dim, "--dim")
    checked, sink = front_end(args.file, const_overrides(args.const))
    print_diagnostics([d for d in sink.diagnostics if not d.is_error], sys.stderr)
    if args.entry is None:
        if checked.program.main.trainings:
            raise _usage(
                "this file has a `training run`: use `presk train` to execute it, "
                "or --entry to evaluate one function"
            )
        raise _usage("--entry is required; functions: " + ", ".join(function_names(checked)))
    entry = find_entry(checked, args.entry)
    try:
        return _evaluate(checked, entry, dim_args, seed, bits, digits, args)
    except RunError as error:
        message = error.message + (f" (at {error.site})" if error.site else "")
        print_diagnostics([Diagnostic("E7001", message)], sys.stderr)
        return 1
    except NotBuilt as error:
        sys.stderr.write(f"presk run: not built yet: {error}\n")
        return 2


def _from_file(path: str, ty: Type) -> Value:
    """The entry's last argument from a `.psk.d` file.

    A file of that argument's type gives its first sample; a file of samples
    whose type is the argument's without its `batch` axis gives a batch of
    the first samples, stacked along that axis.
    """
    from presk.data.format import DataError, parse_sample_type, read, to_values

    try:
        data = read(path)
        sample_ty = parse_sample_type(data.type)
    except (DataError, OSError, ValueError) as error:
        raise _usage(f"--data {path}: {error}") from None
    if str(sample_ty) == str(ty):
        return to_values(data, 0, ty)
    batch = _batch_size(ty)
    if batch is None or data.count < batch:
        raise _usage(
            f"--data {path}: the file holds {data.count} samples of {data.type}; "
            f"the argument is {ty}"
        )
    samples = [to_values(data, i, sample_ty) for i in range(batch)]
    return _stack(samples, batch)


def _batch_size(ty: Type) -> int | None:
    match ty:
        case TensorT(axes=axes):
            for axis in axes:
                if axis.name == "batch" and axis.size.is_const:
                    return int(axis.size.const)
        case TupleT(items):
            sizes = {_batch_size(item) for item in items}
            return sizes.pop() if len(sizes) == 1 else None
    return None


def _stack(samples: list[Value], batch: int) -> Value:
    """Samples stacked along a new leading `batch` axis."""
    import numpy as np

    first = samples[0]
    if isinstance(first, tuple):
        return tuple(_stack([s[i] for s in samples], batch) for i in range(len(first)))  # type: ignore[index]
    assert isinstance(first, Tensor)
    data = np.stack([s.data for s in samples])  # type: ignore[union-attr]
    return Tensor(first.kind, (Axis("batch", batch), *first.axes), data, first.bound)


def default_threads() -> int:
    """`PRESK_THREADS`, else the machine's cores."""
    import os

    env = os.environ.get("PRESK_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return os.cpu_count() or 1


def _native(
    module: Any,
    name: str,
    dims: dict[str, int],
    inputs: list[tuple[str, Type, Value]],
    realization: Any,
    text: str,
    threads: int = 1,
) -> Value:
    """The entry compiled to C and called once (see presk/backends/native.py)."""
    from presk.backends.native import prepare
    from presk.build.compile import BuildError
    from presk.host.program import HostError, HostRunError

    values = [v for _, _, v in inputs]
    try:
        prepared = prepare(
            module, name, dims, values, realization.default, f"entry {text}", threads, realization
        )
    except HostError as error:
        raise NotBuilt(f"the native backend cannot run this entry yet: {error}") from None
    except HostRunError as error:
        raise RunError(str(error)) from None
    except BuildError as error:
        raise RunError(f"the C compiler failed: {error}") from None
    return prepared.call(values)


def _evaluate(
    checked: CheckedProgram,
    entry: Entry,
    dim_args: dict[str, str],
    seed: int,
    bits: int,
    digits: int,
    args: argparse.Namespace,
) -> int:
    info = entry.info
    dims, prefix = bind_dims(entry, dim_args, checked)
    from presk.ad.reverse import NotDifferentiable, differentiate

    try:
        module = differentiate(checked.core, args.remat)
    except NotDifferentiable as error:
        raise NotBuilt(str(error)) from None
    interp = Interpreter(module)

    def init_hook(ty: Type, at: dict[str, int], key: rng.Key) -> Tree:
        assert isinstance(ty, Params)
        env = {k: Lin.const_(Fraction(v)) for k, v in at.items()}
        inst = subst(ty, env)
        assert isinstance(inst, Params)
        return init_from_key(inst.inst, at, key)

    interp.init_hook = init_hook
    inputs: list[tuple[str, Type, Value]] = []
    with gmpy2.context(precision=bits):
        for name, ty, default in info.params:
            env = {k: Lin.const_(Fraction(v)) for k, v in dims.items()}
            concrete_ty = subst(ty, env)
            path = "theta" if isinstance(ty, Params) else f"input/{name}"
            value = synthesize(concrete_ty, name, path, dims, prefix, seed, default)
            inputs.append((name, ty, value))
        if getattr(args, "data", None):
            name, ty, _ = inputs[-1]
            env = {k: Lin.const_(Fraction(v)) for k, v in dims.items()}
            inputs[-1] = (name, ty, _from_file(args.data, subst(ty, env)))
        if args.backend == "native":
            threads = (
                default_threads()
                if args.threads is None
                else _natural("--threads", "", args.threads, 1, 1024)
            )
            result = _native(module, info.name, dims, inputs, args.realization, entry.text, threads)
        else:
            result = interp.call(info.name, dims, [v for _, _, v in inputs])
    shown_prefix = prefix or ()
    assert info.ret is not None
    if args.json:
        document = {
            "entry": entry.text,
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
        out.append(f"-- entry {entry.text}{with_dims} at {bits} bits, seed {seed}")
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
