"""The generation loop: a window of the context, one call of the generation function, a token.

The sequence is the prompt, then each token generated. Before every step the window is
the sequence's last T tokens (T, the context, comes from the weights' shapes), padded
with zeros after its end when the sequence is shorter, and `last` is the position of its
final token. Step i (from 0) draws with the key `key_for(seed, "serve/i")`, so a seed
gives the same tokens on every backend; greedy steps take no key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import gmpy2
import numpy as np

from presk.data.samples import flatten
from presk.diagnostics import CommandError
from presk.dtypes import f32_to_bf16
from presk.elab.ty import Params, Type, dims_env, subst
from presk.entries import Binding, Entry
from presk.host.realization import Realization
from presk.interp import rng
from presk.interp.reference import Interpreter, Value
from presk.interp.run import reference_interpreter
from presk.interp.synth import to_reference
from presk.interp.tensor import Kind, Tensor
from presk.kernel.layout import Layout
from presk.pipeline import compile_entry, core_module
from presk.serve.vocab import Vocabulary
from presk.serve.vocab import load as load_vocab
from presk.types.check import CheckedProgram
from presk.types.scope import param_leaves
from presk.types.values import FnInfo, ServeBlock


def context_of(block: ServeBlock, weights: dict[str, Any]) -> dict[str, int]:
    """The dimensions the weights' shapes fix (the context T among them)."""
    flat = flatten(weights)
    dims: dict[str, int] = {}
    for path, ty, _ in param_leaves(block.params.inst):
        if path not in flat:
            raise CommandError(f"the weights have no `{path}`")
        shape = flat[path].shape
        if len(shape) != len(ty.axes):
            raise CommandError(f"the weights' `{path}` has rank {len(shape)}, not {len(ty.axes)}")
        for axis, got in zip(ty.axes, shape, strict=True):
            size = axis.size
            if len(size.coeffs) == 1 and size.coeffs[0][1] == 1 and size.const == 0:
                name = size.coeffs[0][0]
                if dims.setdefault(name, got) != got:
                    raise CommandError(f"the weights give `{name}` both {dims[name]} and {got}")
    if block.context not in dims:
        raise CommandError(
            f"nothing in the weights' shapes fixes the context `{block.context}` of {block.model}"
        )
    return dims


@dataclass(frozen=True)
class Served:
    """A serve block's files, read and checked against each other and the model."""

    vocab: Vocabulary
    dims: dict[str, int]  # fixed by the weights' shapes: the context among them
    weights: dict[str, Any]
    classes: int  # the vocabulary's size in the model (V)
    weights_path: str  # the file they were read from (an export copies it)

    @property
    def leaves(self) -> list[tuple[str, tuple[int, ...]]]:
        return [(path, array.shape) for path, array in flatten(self.weights).items()]


def prepare(
    block: ServeBlock, weights_path: str | None = None, vocab_path: str | None = None
) -> Served:
    """The vocabulary and the weights (the block's, or the paths given; one-line errors
    when they do not fit). The dimensions the weights fix keep the `dim` bounds of the
    generation function's file, and the context holds a token at least, as `--dim` would
    have to."""
    from presk.data.format import DataError
    from presk.data.samples import read
    from presk.diagnostics import printable
    from presk.train.checkpoint import read_weights

    for flag, given in (("--weights", weights_path), ("--vocab", vocab_path)):
        if given == "":  # not the block's file: a name the user left empty
            raise CommandError(f"{flag}: an empty name; name the file to read")
    weights_path = block.weights if weights_path is None else weights_path
    vocab_path = block.vocab if vocab_path is None else vocab_path
    vocab = load_vocab(vocab_path)
    where = printable(weights_path)
    try:
        held = read(weights_path)
    except (OSError, DataError, ValueError) as error:
        raise CommandError(f"--weights {where}: {error}") from None
    if held.count != 1 or not isinstance(held[0], dict):
        raise CommandError(f"--weights {where}: not one parameter tree")
    try:
        dims = context_of(block, held[0])
    except CommandError as error:
        raise CommandError(f"--weights {where}: {error}") from None
    if dims[block.context] < 1:
        raise CommandError(f"--weights {where}: a context `{block.context}` of 0 tokens")
    for name, value in dims.items():
        bound = block.generate.file.dim_bounds.get(name)
        if bound is not None and value > bound:
            raise CommandError(
                f"--weights {where}: they fix {name} = {value}, past the file's "
                f"`dim {name} <= {bound}`"
            )
    weights = read_weights(weights_path, block.params, dims)
    classes = int(block.classes.subst({k: Fraction(v) for k, v in dims.items()}).const)
    if len(vocab) != classes:
        raise CommandError(
            f"{printable(vocab_path)}: {len(vocab)} tokens, the model scores {classes}"
        )
    return Served(vocab, dims, weights, classes, weights_path)


class Step(Protocol):
    """A backend's generation function: window, last, key, temperature -> the next id."""

    def __call__(
        self, window: np.ndarray, last: np.ndarray, key: rng.Key | None, temperature: float
    ) -> int: ...


@dataclass
class NativeStep:
    """The generation functions compiled at batch 1 and the context; θ converted once."""

    sample: Any
    greedy: Any
    theta: Any

    def __call__(
        self, window: np.ndarray, last: np.ndarray, key: rng.Key | None, temperature: float
    ) -> int:
        if key is None:
            out = self.greedy(self.theta, window, last)
        else:
            scale = _real(self.sample.layouts[4], temperature)
            out = self.sample(self.theta, window, last, key, scale)
        return int(np.asarray(out).reshape(-1)[0])


def native_step(
    checked: CheckedProgram,
    block: ServeBlock,
    dims: dict[str, int],
    weights: dict[str, Any],
    realization: Realization,
    threads: int,
    greedy: bool,
    layouts: Mapping[str, Layout] | None = None,
) -> NativeStep:
    """The generation function (or with `greedy` the greedy one) compiled at batch 1,
    its nests laid out by `layouts` (a plan's, each naming a nest of it)."""
    binding = Binding({**dims, block.batch: 1}, None)

    def compiled(info: FnInfo) -> Any:
        return compile_entry(
            checked,
            Entry(info, info.name, {}),
            binding,
            realization,
            threads,
            banner=f"serve {info.name}",
            layouts=layouts,
        )

    fn = block.greedy if greedy and block.greedy is not None else block.generate
    entry = compiled(fn)
    theta = _storage(entry, weights)
    if greedy:
        return NativeStep(None, entry, theta)
    return NativeStep(entry, None, theta)


def _storage(entry: Any, weights: dict[str, Any]) -> Any:
    """θ in the buffers' own types, so that each call passes it as it is."""
    from presk.host.ir import HTensor, HTree

    def convert(node: Any, value: Any) -> Any:
        if isinstance(node, HTree):
            return {k: convert(sub, value[k]) for k, sub in node.items}
        assert isinstance(node, HTensor)
        return _real(node, value)

    return convert(entry.layouts[0], weights)


def _real(leaf: Any, value: Any) -> np.ndarray:
    """Reals as a buffer of `leaf`'s type (f64, f32, or bf16's bits)."""
    # np.array, not ascontiguousarray: that makes a scalar (a temperature) one-dimensional.
    array = np.array(value, dtype=np.float64, order="C")
    if leaf.dtype == "f64":
        return array
    singles = np.array(array, dtype=np.float32, order="C")
    return singles if leaf.dtype == "f32" else f32_to_bf16(singles)


@dataclass
class ReferenceStep:
    """The generation function on the reference interpreter at `bits`."""

    interp: Interpreter
    block: ServeBlock
    dims: dict[str, int]
    theta: Value
    bits: int
    greedy: bool

    def __call__(
        self, window: np.ndarray, last: np.ndarray, key: rng.Key | None, temperature: float
    ) -> int:
        interp = self.interp
        fn = self.block.greedy if self.greedy and self.block.greedy else self.block.generate
        t = self.dims[self.block.context]
        ids = Tensor(Kind.IDX, _axes(window.shape, ("batch", "seq")), _objects(window), None)
        at = Tensor(Kind.IDX, _axes(last.shape, ("batch",)), _objects(last), t)
        args: list[Value] = [self.theta, ids, at]
        dims = {**self.dims, self.block.batch: 1}
        with gmpy2.context(precision=self.bits):
            if key is not None:
                from presk.interp import prims

                args += [key, prims.real(Fraction(temperature))]
            out = interp.call(fn.name, dims, args)
        assert isinstance(out, Tensor)
        return int(out.data.reshape(-1)[0])


def _axes(shape: tuple[int, ...], names: tuple[str, ...]) -> tuple[Any, ...]:
    from presk.interp.tensor import Axis

    return tuple(Axis(n, s) for n, s in zip(names, shape, strict=True))


def _objects(array: np.ndarray) -> np.ndarray:
    out = np.empty(array.shape, dtype=object)
    for index, value in np.ndenumerate(array):
        out[index] = int(value)
    return out


def reference_step(
    checked: CheckedProgram,
    block: ServeBlock,
    dims: dict[str, int],
    weights: dict[str, Any],
    bits: int,
    greedy: bool,
) -> ReferenceStep:
    env = dims_env(dims)
    ty: Type = subst(block.params, env)
    assert isinstance(ty, Params)
    with gmpy2.context(precision=bits):
        theta = to_reference(weights, ty, dims, None)
    interp = reference_interpreter(core_module(checked))
    return ReferenceStep(interp, block, dims, theta, bits, greedy)


def generate(
    step: Step,
    prompt: list[int],
    tokens: int,
    context: int,
    temperature: float,
    seed: int,
    greedy: bool,
) -> Iterator[int]:
    """The tokens that follow `prompt`, one at a time."""
    sequence = list(prompt)
    for i in range(tokens):
        window = sequence[-context:]
        last = len(window) - 1
        padded = np.zeros((1, context), dtype=np.int64)
        padded[0, : len(window)] = window
        key = None if greedy else rng.key_for(seed, f"serve/{i}")
        token = step(padded, np.array([last], dtype=np.int64), key, temperature)
        sequence.append(token)
        yield token
