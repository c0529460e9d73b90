"""`presk serve FILE`: text from the file's `inference` block, streamed token by token.

The prompt, then each generated token decoded with the vocabulary, go to standard
output as they come; `presk serve: N tokens in X ms (Y tokens/s)` goes to standard
error at the end.
"""

from __future__ import annotations

import argparse
import sys
import time

from presk.commands.common import (
    file_args,
    guard,
    program_of,
    refuse_later_flags,
    run_flags,
)
from presk.diagnostics import UsageError, printable
from presk.entries import natural
from presk.serve.generate import Step, generate, native_step, prepare, reference_step

NAME = "serve"
HELP = (
    "Generate tokens with the file's `inference serve`: its model, weights and generation function"
)


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(serve)
    given = serve.add_mutually_exclusive_group()
    given.add_argument("--prompt", help="the text to continue (characters of the vocabulary)")
    given.add_argument("--ids", help="the prompt as token ids: 1,2,3")
    serve.add_argument("--tokens", default="64", help="tokens to generate (default 64)")
    serve.add_argument("--temperature", default="1.0", help="sampling temperature (default 1)")
    serve.add_argument("--greedy", action="store_true", help="take the most likely token")
    serve.add_argument("--seed", default="0", help="the seed of the sampler's keys (default 0)")
    serve.add_argument("--weights", metavar="F.psk.d", help="weights other than the block's")
    serve.add_argument("--vocab", metavar="V.json", help="a vocabulary other than the block's")
    serve.add_argument("--backend", default="interp", help="interp (the exact reference) or native")
    serve.add_argument("--realize", default="f64", help="native: f64 (default), f32, bf16 or @FILE")
    serve.add_argument("--threads", default=None, help="native workers (default: the machine's)")
    serve.add_argument("--bits", default="256", help="the reference's MPFR precision (default 256)")
    serve.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    return guard(NAME, lambda: _serve(args))


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    # scores / T stays finite in every realization for scores up to 2^64; a T that f32
    # rounds to 0 or inf gave NaN scores, and the backends drew different tokens.
    if not 2.0**-64 <= value <= 2.0**64:
        raise UsageError(f"--temperature {text}: expected a number in [2^-64, 2^64] (or --greedy)")
    return value


def _serve(args: argparse.Namespace) -> int:
    refuse_later_flags(args)
    flags = run_flags(args)
    if flags is None:
        return 1
    seed, bits, realization, threads = flags.seed, flags.bits, flags.realization, flags.threads
    tokens = natural("--tokens", args.tokens, 1)
    temperature = 1.0 if args.greedy else _temperature(args.temperature)
    checked = program_of(args)
    if not checked.serves:
        raise UsageError(f"{printable(args.file)} has no `inference` block")
    block = checked.serves[0]
    if args.greedy and block.greedy is None:
        raise UsageError(f"--greedy: the `inference {block.name}` block names no `greedy` function")
    served = prepare(block, args.weights, args.vocab)
    vocab, dims, weights, classes = served.vocab, served.dims, served.weights, served.classes
    if args.ids is not None:
        prompt = _ids(args.ids, classes)
    else:
        prompt = vocab.encode(args.prompt if args.prompt is not None else vocab.tokens[0])
    if not prompt:
        raise UsageError("--prompt: empty (give at least one character)")
    context = dims[block.context]
    step: Step
    if args.backend == "native":
        step = native_step(checked, block, dims, weights, realization, threads, args.greedy)
    else:
        step = reference_step(checked, block, dims, weights, bits, args.greedy)
    out = sys.stdout
    out.write("".join(vocab.decode(t) for t in prompt))
    out.flush()
    start = time.perf_counter()
    count = 0
    for token in generate(step, prompt, tokens, context, temperature, seed, args.greedy):
        out.write(vocab.decode(token))
        out.flush()
        count += 1
    elapsed = time.perf_counter() - start
    out.write("\n")
    rate = count / elapsed if elapsed > 0 else float("inf")
    sys.stderr.write(
        f"presk serve: {count} tokens in {elapsed * 1e3:.0f} ms ({rate:.1f} tokens/s)\n"
    )
    return 0


def _ids(text: str, classes: int) -> list[int]:
    ids = []
    for part in text.split(","):
        try:
            value = int(part.strip(), 10)
        except ValueError:
            raise UsageError(f"--ids {text}: expected ids separated by commas") from None
        if not 0 <= value < classes:
            raise UsageError(f"--ids {text}: {value} is not an id below {classes}")
        ids.append(value)
    return ids
