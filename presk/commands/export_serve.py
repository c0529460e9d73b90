"""`presk export FILE --target c --serve -o DIR`: the file's `inference` block as a C program.

The generation functions are compiled as `presk serve --backend native` compiles them
(batch 1, the weights' context, the realization); the tokens `make check` expects are
generated here, by the native backend, from `--prompt` (default: the vocabulary's first
token), 32 of them, greedy and sampled with `--seed` at temperature 0.8.
"""

from __future__ import annotations

import argparse

from presk.commands.common import block_export_flags, plan_shares, program_of, say_summary
from presk.diagnostics import UsageError, printable
from presk.entries import Binding, Entry
from presk.export.serve import CServe, plan_serve
from presk.export.write import check_target, write_plan
from presk.host.realization import Realization
from presk.kernel.layout import Layout
from presk.pipeline import Request
from presk.serve.generate import generate, native_step, prepare
from presk.types.check import CheckedProgram
from presk.types.scope import param_leaves
from presk.types.values import ServeBlock

CHECK_TOKENS = 32
CHECK_TEMPERATURE = "0.8"


def export_serve(args: argparse.Namespace) -> int:
    flags = block_export_flags(args, "--serve", "the block's generation functions")
    if flags is None:
        return 1
    seed, realization, threads = flags.seed, flags.realization, flags.threads
    check_target(args.output)
    checked = program_of(args)
    if not checked.serves:
        raise UsageError(f"{printable(args.file)} has no `inference` block")
    block = checked.serves[0]
    served = prepare(block, args.weights, args.vocab)
    vocab = served.vocab
    prompt = vocab.encode(args.prompt if args.prompt is not None else vocab.tokens[0])
    if not prompt:
        raise UsageError("--prompt: empty (give at least one character)")
    context = served.dims[block.context]
    temperature = float(CHECK_TEMPERATURE)
    planned = _planned(checked, block, served.dims, realization, flags.layouts)

    def tokens(greedy: bool) -> tuple[object, str]:
        step = native_step(
            checked, block, served.dims, served.weights, realization, threads, greedy,
            planned[greedy],
        )  # fmt: skip
        out = generate(step, prompt, CHECK_TOKENS, context, temperature, seed, greedy)
        text = "".join(vocab.decode(t) for t in [*prompt, *out]) + "\n"
        return step, text

    sampler, sampled = tokens(False)
    greedy_entry, greedy_text = None, None
    if block.greedy is not None:
        stepper, greedy_text = tokens(True)
        greedy_entry = stepper.greedy  # type: ignore[attr-defined]
    with open(served.weights_path, "rb") as handle:
        weights_bytes = handle.read()
    dims = {**served.dims, block.batch: 1}
    shapes = dict(served.leaves)
    order = [path for path, _, _ in param_leaves(block.params.inst)]  # the entry's θ leaves
    request = CServe(
        sampler.sample,  # type: ignore[attr-defined]
        greedy_entry,
        block.generate.name,
        block.greedy.name if block.greedy is not None else None,
        dims,
        context,
        vocab.tokens,
        tuple((path, shapes[path]) for path in order),
        weights_bytes,
        args.file,
        flags.realize,
        threads,
        args.output,
        tuple(prompt),
        CHECK_TOKENS,
        seed,
        CHECK_TEMPERATURE,
        greedy_text,
        sampled,
    )
    plan = plan_serve(request)
    write_plan(plan, args.output, "--serve")
    say_summary(plan.summary)
    return 0


def _planned(
    checked: CheckedProgram,
    block: ServeBlock,
    dims: dict[str, int],
    realization: Realization,
    layouts: dict[str, Layout],
) -> dict[bool, dict[str, Layout]]:
    """`--plan`'s points for the sampling function (False) and the greedy one (True).

    Both call the model, so most sites are nests of both; a site of one only (the
    sampler's division by the temperature) lays out that one. A site that is a nest of
    neither is refused, as `presk run --plan` refuses it. Each function's sites are read
    from its host program, recorded without compiling."""
    functions = {False: block.generate, True: block.greedy}
    if not layouts:
        return {False: {}, True: {}}
    binding = Binding({**dims, block.batch: 1}, None)
    named = [
        (greedy, info.name, Request(checked, Entry(info, info.name, {}), binding, realization))
        for greedy, info in functions.items()
        if info is not None
    ]
    shares = plan_shares([(name, request) for _, name, request in named], layouts)
    planned = {greedy: share for (greedy, _, _), share in zip(named, shares, strict=True)}
    planned.setdefault(True, {})
    return planned
