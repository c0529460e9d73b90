"""`presk export FILE --target c --entry E --dim … [--realize T] [--threads N] -o DIR`."""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction

import gmpy2

from presk.elab.presburger import Lin
from presk.elab.ty import Params, subst


def export_command(args: argparse.Namespace) -> int:
    """The body of `presk export`."""
    from presk.ad.reverse import differentiate
    from presk.build.compile import BuildError
    from presk.cli import UsageError
    from presk.export.c import ExportError, plan_export
    from presk.export.scop import plan_scop
    from presk.export.write import write_plan
    from presk.host.program import HostError, HostRunError
    from presk.interp.reference import RunError
    from presk.interp.run import _natural, bind_dims, concrete_type, find_entry
    from presk.interp.synth import synthesize
    from presk.pipeline import const_overrides, front_end, parse_bindings, realization_of

    if args.target != "c":
        sys.stderr.write(f"presk export: not built yet: the `{args.target}` target\n")
        return 2
    if args.plan is not None:
        sys.stderr.write("presk export: not built yet: `--plan` (plans come from `presk plan`)\n")
        return 2
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
    threads = 1 if args.threads is None else _natural("--threads", "", args.threads, 1, 1024)
    if args.mode == "scop" and threads != 1:
        raise UsageError("--mode scop writes each nest at one worker: drop --threads")
    checked, _ = front_end(args.file, const_overrides(args.const))
    entry = find_entry(checked, args.entry)
    info = entry.info
    try:
        dims, prefix = bind_dims(entry, parse_bindings(args.dim, "--dim"), checked)
        env = {k: Lin.const_(Fraction(v)) for k, v in dims.items()}
        with gmpy2.context(precision=256):
            inputs = [
                synthesize(
                    subst(ty, env),
                    name,
                    "theta" if isinstance(ty, Params) else f"input/{name}",
                    dims,
                    prefix,
                    0,
                    default,
                )
                for name, ty, default in info.params
            ]
    except RunError as error:
        from presk.diagnostics import Diagnostic, print_diagnostics

        print_diagnostics([Diagnostic("E7001", error.message)], sys.stderr)
        return 1
    shown = prefix or ()
    input_type = "(" + ", ".join(concrete_type(t, dims, shown) for _, t, _ in info.params) + ")"
    assert info.ret is not None
    output_type = concrete_type(info.ret, dims, shown)
    names = ["theta" if n == "θ" else n for n, _, _ in info.params]
    module = differentiate(checked.core)
    try:
        if args.mode == "scop":
            plan = plan_scop(
                module,
                info.name,
                entry.text,
                args.file,
                dims,
                inputs,
                realization.default,
                args.output,
            )
        else:
            plan = plan_export(
                module,
                info.name,
                entry.text,
                args.file,
                dims,
                names,
                inputs,
                input_type,
                output_type,
                args.realize,
                threads,
                args.output,
                realization,
            )
        write_plan(plan, args.output, entry.text)
    except ExportError as error:
        sys.stderr.write(f"presk export: {error}\n")
        return 1
    except HostError as error:
        sys.stderr.write(f"presk export: not built yet: {error}\n")
        return 2
    except HostRunError as error:
        from presk.diagnostics import Diagnostic, print_diagnostics

        print_diagnostics([Diagnostic("E7001", str(error))], sys.stderr)
        return 1
    except BuildError as error:
        sys.stderr.write(f"presk export: the C compiler failed: {error}\n")
        return 1
    sys.stdout.write(plan.summary + "\n")
    return 0
