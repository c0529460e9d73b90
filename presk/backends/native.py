"""The native backend: an entry recorded as C, compiled, cached and called through cffi.

`prepare(module, entry, dims, inputs, dtype)` records the entry at the
shapes of its inputs (the reference's synthesized values), prints one C
translation unit, builds it (cached by hash) and returns a `Prepared` whose
`call(inputs)` converts the inputs to the realization's buffers, makes one
cffi call, and converts the outputs back to reference values for printing.

Realizations: f64, f32, or bf16 (uint16 storage, f32 arithmetic). An input
reaches f32 from its double, and bf16 from that f32 (two roundings).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
import numpy.typing as npt

from presk.build.compile import build
from presk.build.load import Library, load
from presk.cgen.program import Unit, print_unit
from presk.core import ir
from presk.data.format import bf16_to_f32, f32_to_bf16
from presk.host.program import HConst, HKey, HostProgram, HTensor, HTree, HValue, record
from presk.host.realization import Realization
from presk.interp import rng
from presk.interp.reference import Tree, Value
from presk.interp.tensor import Axis, Kind, Tensor

REALIZATIONS = ("f64", "f32", "bf16")


# One bf16 rounding for the whole project: the data format's (and the runtime's in C).
to_bf16 = f32_to_bf16
from_bf16 = bf16_to_f32


_NUMPY = {"f64": np.float64, "f32": np.float32, "bf16": np.uint16, "i64": np.int64}


def _array(value: Tensor, dtype: str) -> npt.NDArray[Any]:
    """A reference tensor as a buffer of the realization's type."""
    if value.kind != Kind.REAL:
        return np.array(value.data.tolist(), dtype=np.int64).reshape(value.shape)
    doubles = np.array([float(x) for x in value.data.reshape(-1)], dtype=np.float64)
    if dtype == "f64":
        return doubles.reshape(value.shape)
    singles = doubles.astype(np.float32)
    if dtype == "f32":
        return singles.reshape(value.shape)
    return to_bf16(singles).reshape(value.shape)


def _tensor(array: npt.NDArray[Any], leaf: HTensor) -> Tensor:
    """A buffer back as a reference tensor (exact values of the machine numbers)."""
    axes = tuple(Axis(name, size) for name, size in leaf.axes)
    if leaf.dtype == "i64":
        return Tensor(Kind.IDX, axes, np.array(array.tolist(), dtype=object).reshape(array.shape))
    if leaf.dtype == "bf16":
        array = from_bf16(array)
    with gmpy2.context(precision=64):
        data = np.empty(array.shape, dtype=object)
        for idx, x in np.ndenumerate(array):
            data[idx] = gmpy2.mpfr(float(x))
    return Tensor(Kind.REAL, axes, data)


def host_value(
    value: Value, dtype: str, params: dict[str, str] | None = None, path: str = ""
) -> HValue:
    """The layout of a reference value: what the recording specialises on.

    `params` gives a parameter leaf (by dotted path in a tree) its own storage type.
    """
    match value:
        case Tensor():
            storage = dtype if value.kind == Kind.REAL else "i64"
            if params and value.kind == Kind.REAL and path in params:
                storage = params[path]
            return HTensor("", storage, tuple((a.name, a.size) for a in value.axes))
        case Tree(items):
            return HTree(
                tuple(
                    (k, host_value(v, dtype, params, f"{path}.{k}" if path else k))
                    for k, v in items
                )
            )
        case tuple():
            return tuple(host_value(v, dtype, params, path) for v in value)
        case Fraction():
            return HConst(value)
        case rng.Key():
            return HKey("")
    raise TypeError(f"no native layout for {type(value).__name__}")


def layout_of_type(
    ty: object,
    dims: dict[str, int],
    prefix: tuple[Axis, ...],
    dtype: str,
    default: Fraction | None = None,
    params: dict[str, str] | None = None,
) -> HValue:
    """The layout of an argument from its type alone (no values drawn).

    `params` gives a parameter leaf (by dotted path) its own storage type.
    """
    from presk.elab.presburger import Lin
    from presk.elab.ty import Elem, Hyper, KeyT, Params, TupleT, subst
    from presk.elab.ty import Tensor as TensorT
    from presk.interp.synth import axes_of
    from presk.types.scope import param_leaves

    env = {k: Lin.const_(Fraction(v)) for k, v in dims.items()}
    match ty:
        case TensorT():
            concrete = subst(ty, env)
            assert isinstance(concrete, TensorT)
            axes = axes_of(concrete, dims, prefix)
            storage = dtype if ty.elem == Elem.REAL else "i64"
            return HTensor("", storage, tuple((a.name, a.size) for a in axes))
        case Params():
            concrete_params = subst(ty, env)
            assert isinstance(concrete_params, Params)
            flat = [
                (path, layout_of_type(leaf, dims, (), (params or {}).get(path, dtype)))
                for path, leaf, _ in param_leaves(concrete_params.inst)
            ]
            return _nest_layout(flat)
        case TupleT(items):
            return tuple(layout_of_type(i, dims, prefix, dtype) for i in items)
        case KeyT():
            return HKey("")
        case Hyper():
            if default is None:
                raise TypeError("a hyperparameter without a default")
            return HConst(default)
    raise TypeError(f"no native layout for `{ty}`")


def _nest_layout(flat: list[tuple[str, HValue]]) -> HTree:
    order: list[str] = []
    groups: dict[str, list[tuple[str, HValue]]] = {}
    leaves_: dict[str, HValue] = {}
    for path, value in flat:
        head, dot, rest = path.partition(".")
        if head not in order:
            order.append(head)
        if dot:
            groups.setdefault(head, []).append((rest, value))
        else:
            leaves_[head] = value
    return HTree(tuple((h, leaves_[h] if h in leaves_ else _nest_layout(groups[h])) for h in order))


def _leaf_values(value: Value) -> list[Tensor | rng.Key]:
    match value:
        case Tensor() | rng.Key():
            return [value]
        case Tree(items):
            return [x for _, v in items for x in _leaf_values(v)]
        case tuple():
            return [x for v in value for x in _leaf_values(v)]
    return []


@dataclass
class Bound:
    """An entry with its inputs in buffers.

    `invoke()` makes one cffi call (what a benchmark times); `outputs` are the
    output buffers as the call leaves them; `finish()` converts them back to
    reference values. `keep` holds what the C side reads through raw pointers.
    """

    invoke: Callable[[], int]
    finish: Callable[[], Value]
    outputs: list[npt.NDArray[Any]]
    keep: list[Any]


@dataclass
class Prepared:
    """A compiled entry ready to be called."""

    unit: Unit
    host: HostProgram
    library: Library
    dtype: str
    threads: int = 1

    def call(self, inputs: list[Value]) -> Value:
        """One call of the entry on reference values; the result as reference values."""
        bound = self.bind(inputs)
        status = bound.invoke()
        if status != 0:
            raise RuntimeError(f"{self.unit.symbol} returned {status}")
        return bound.finish()

    def bind(self, inputs: list[Value]) -> Bound:
        """Convert the inputs once into buffers, ready for repeated calls."""
        ffi, lib = self.library.ffi, self.library.lib
        keep: list[Any] = []
        arena_buf = np.zeros(max(self.unit.arena_bytes, 1), dtype=np.uint8)
        arena = ffi.new("presk_arena *")
        arena.base = ffi.cast("char *", ffi.from_buffer(arena_buf))
        arena.size = self.unit.arena_bytes
        arena.threads = self.threads
        c_in = ffi.new(f"{self.unit.symbol}_in *")
        values = [leaf for v in inputs for leaf in _leaf_values(v)]
        for (field, ctype, leaf), value in zip(self.unit.inputs, values, strict=True):
            if isinstance(leaf, HKey):
                assert isinstance(value, rng.Key)
                key = ffi.new("presk_key *")
                key.k[0], key.k[1] = value.k0, value.k1
                keep.append(key)
                setattr(c_in, field, key)
                continue
            assert isinstance(value, Tensor)
            array = np.ascontiguousarray(_array(value, leaf.dtype))
            keep.append(array)
            setattr(c_in, field, ffi.cast(ctype, ffi.from_buffer(array)))
        c_out = ffi.new(f"{self.unit.symbol}_out *")
        outs: list[npt.NDArray[Any]] = []
        for field, ctype, leaf in self.unit.outputs:
            array = np.zeros(tuple(s for _, s in leaf.axes), dtype=_NUMPY[leaf.dtype])
            outs.append(array)
            setattr(c_out, field, ffi.cast(ctype, ffi.from_buffer(array)))
        entry = getattr(lib, self.unit.symbol)
        # The C side reads these through raw pointers: they live as long as the closures.
        keep.extend([arena_buf, arena, c_in, c_out, outs])

        def invoke() -> int:
            # The closure holds `keep`: the buffers C reads through raw pointers live
            # as long as this function does, even if the Bound is dropped.
            assert keep
            status: int = entry(arena, c_in, c_out)
            return status

        def finish() -> Value:
            pairs = zip(outs, self.unit.outputs, strict=True)
            tensors = [_tensor(a, leaf) for a, (_, _, leaf) in pairs]
            return _rebuild(self.host.entry.result, tensors)

        return Bound(invoke, finish, outs, keep)


def _rebuild(template: HValue, tensors: list[Tensor]) -> Value:
    match template:
        case HTensor():
            return tensors.pop(0)
        case HTree(items):
            return Tree(tuple((k, _rebuild(v, tensors)) for k, v in items))
        case tuple():
            return tuple(_rebuild(v, tensors) for v in template)
    raise TypeError("unexpected result layout")


def prepare(
    module: ir.Module,
    entry: str,
    dims: dict[str, int],
    inputs: list[Value],
    dtype: str,
    banner: str,
    threads: int = 1,
    realization: Realization | None = None,
) -> Prepared:
    """Record, print, build and load an entry for these inputs' layouts."""
    chosen = realization or Realization(dtype)
    args = [host_value(v, chosen.default, chosen.params) for v in inputs]
    host = record(module, entry, dims, args, chosen.default, threads, chosen)
    fn = next(f for f in module.functions if f.name == entry)
    names = ["theta" if p.name == "θ" else p.name for p in fn.params]
    unit = print_unit(host, entry, names, banner)
    so_path = build(unit.text, openmp=host.splits > 0)
    return Prepared(unit, host, load(so_path, unit.cdef), dtype, threads)
