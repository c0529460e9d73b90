"""The native backend: a compiled entry, called on arrays through cffi.

`presk.pipeline.compile_entry` records an entry at concrete shapes, prints
one C translation unit, builds it (cached by hash) and returns a
`CompiledEntry`. Calling it converts the arguments to the realization's
buffers, makes one foreign call in an arena of its own, and returns the
outputs as arrays: the same tree of tuples and parameter records the entry
returns, with dicts for records.

Arguments are host values: numpy arrays (or anything `np.asarray` takes) for
tensors, dicts (or reference trees) for parameter trees, tuples, `rng.Key`s.
A real reaches f32 from its double and bf16 from that f32 (two roundings), as
the reference's synthesized doubles always have; bf16 outputs come back
widened, exactly, to float32.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
import numpy.typing as npt

from presk.build.load import Library
from presk.cgen.program import Unit
from presk.diagnostics import UsageError
from presk.dtypes import Dtype, bf16_to_f32, f32_to_bf16
from presk.elab.ty import dims_env
from presk.host.program import HConst, HKey, HostProgram, HTensor, HTree, HValue
from presk.host.realization import Realization
from presk.interp import rng
from presk.interp.reference import RunError, Tree, Value
from presk.interp.tensor import Axis, Kind, Tensor

REALIZATIONS = ("f64", "f32", "bf16")


# One bf16 rounding for the whole project: presk/dtypes.py's (and the runtime's in C).
to_bf16 = f32_to_bf16
from_bf16 = bf16_to_f32


# What a host tree holds: arrays, records as dicts (or reference trees), tuples, keys.
HostArg = Any


def layout_of_type(
    ty: object,
    dims: dict[str, int],
    prefix: tuple[Axis, ...],
    realization: Realization,
    default: Fraction | None = None,
    path: str | None = None,
) -> HValue:
    """The buffers of an argument of type `ty` at these dims, in the realization's types.

    A parameter leaf is stored in the type the realization gives its dotted path.
    """
    from presk.elab.ty import Elem, Hyper, KeyT, Params, TupleT, subst
    from presk.elab.ty import Tensor as TensorT
    from presk.interp.synth import axes_of
    from presk.interp.synth import concrete as concrete_size
    from presk.types.scope import param_leaves

    env = dims_env(dims)
    match ty:
        case TensorT():
            concrete = subst(ty, env)
            assert isinstance(concrete, TensorT)
            axes = axes_of(concrete, dims, prefix)
            storage = "i64"
            if ty.elem == Elem.REAL:
                storage = realization.default if path is None else realization.param(path)
            bound = None
            if ty.elem == Elem.IDX and concrete.bound is not None:
                bound = concrete_size(concrete.bound, dims)
            return HTensor("", storage, tuple((a.name, a.size) for a in axes), bound)
        case Params():
            concrete_params = subst(ty, env)
            assert isinstance(concrete_params, Params)
            flat = [
                (leaf_path, layout_of_type(leaf, dims, (), realization, path=leaf_path))
                for leaf_path, leaf, _ in param_leaves(concrete_params.inst)
            ]
            return _nest_layout(flat)
        case TupleT(items):
            return tuple(layout_of_type(i, dims, prefix, realization) for i in items)
        case KeyT():
            return HKey("")
        case Hyper():
            if default is None:
                # An entry runs its hyperparameters at their defaults (as `presk run` draws).
                raise RunError(f"cannot compile hyperparameter of type {ty}: no default")
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


# ---------------------------------------------------------------- values in and out


def from_reference(value: Value) -> HostArg:
    """A reference value as host arrays: reals as the doubles they hold (exact for
    synthesized values), indices and masks as int64."""
    match value:
        case Tensor():
            if value.kind != Kind.REAL:
                return np.array(value.data.tolist(), dtype=np.int64).reshape(value.shape)
            flat = [float(x) for x in value.data.reshape(-1)]
            return np.array(flat, dtype=np.float64).reshape(value.shape)
        case Tree(items):
            return {k: from_reference(v) for k, v in items}
        case tuple():
            return tuple(from_reference(v) for v in value)
    return value


def _storage(value: HostArg, leaf: HTensor, where: str) -> npt.NDArray[Any]:
    """An argument leaf as the contiguous buffer C reads: shape checked, type converted."""
    try:
        if hasattr(value, "__dlpack__") and not hasattr(value, "__array__"):
            array = np.from_dlpack(value)  # a tensor of another library, without a copy
        else:
            array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError, BufferError) as error:
        raise UsageError(f"{where}: not an array ({error})") from None
    shape = tuple(s for _, s in leaf.axes)
    if array.shape != shape:
        named = ", ".join(f"{n}: {s}" if n else str(s) for n, s in leaf.axes)
        got = ", ".join(str(s) for s in array.shape)
        axis = _first_mismatch(array.shape, leaf.axes)
        raise UsageError(f"{where}: expected shape [{named}], got [{got}]{axis}")
    if leaf.dtype == "i64":
        if array.dtype.kind not in "iub":
            raise UsageError(f"{where}: expected integers (indices or a mask), got {array.dtype}")
        if array.dtype.kind == "u" and array.size and int(array.max()) > 2**63 - 1:
            raise UsageError(f"{where}: {int(array.max())} is too large for an index")
        indices = np.ascontiguousarray(array, dtype=np.int64)
        outside = _outside(indices, leaf.bound)
        if outside is not None:
            raise UsageError(f"{where}: index {outside} out of range for idx[{leaf.bound}]")
        return indices
    if array.dtype.kind not in "fiub":
        raise UsageError(f"{where}: expected real numbers, got {array.dtype}")
    if leaf.dtype == "f64":
        return np.ascontiguousarray(array, dtype=np.float64)
    singles = np.ascontiguousarray(array, dtype=np.float32)
    return singles if leaf.dtype == "f32" else to_bf16(singles)


def _outside(indices: npt.NDArray[Any], bound: int | None) -> int | None:
    """The first index outside [0, bound), or None: C reads tables at these indices
    without checking them, so none outside may reach it."""
    if bound is None or not indices.size:
        return None
    if int(indices.min()) >= 0 and int(indices.max()) < bound:
        return None
    flat = indices.reshape(-1)
    return int(flat[np.flatnonzero((flat < 0) | (flat >= bound))[0]])


def _first_mismatch(shape: tuple[int, ...], axes: tuple[tuple[str | None, int], ...]) -> str:
    if len(shape) != len(axes):
        return f" (rank {len(shape)}, expected {len(axes)})"
    for (name, size), got in zip(axes, shape, strict=True):
        if size != got:
            label = f"axis `{name}`" if name else "an unnamed axis"
            return f" ({label} has {got}, expected {size})"
    return ""


def _flatten(layout: HValue, value: HostArg, where: str) -> list[npt.NDArray[Any] | rng.Key]:
    """The pointer leaves of an argument, in the order of the entry's `_in` struct."""
    match layout:
        case HTensor():
            if isinstance(value, Tensor):
                value = from_reference(value)
            return [_storage(value, layout, where)]
        case HKey():
            if not isinstance(value, rng.Key):
                raise UsageError(f"{where}: expected a random key, got {type(value).__name__}")
            return [value]
        case HTree(items):
            if isinstance(value, Tree):
                value = dict(value.items)
            if not isinstance(value, Mapping):
                raise UsageError(f"{where}: expected a parameter tree (a dict)")
            missing = [k for k, _ in items if k not in value]
            if missing:
                raise UsageError(f"{where}: no `{missing[0]}` in the parameter tree")
            extra = [k for k in value if k not in {k for k, _ in items}]
            if extra:
                raise UsageError(f"{where}: the parameter tree has no leaf `{extra[0]}`")
            return [x for k, sub in items for x in _flatten(sub, value[k], f"{where}.{k}")]
        case tuple():
            if not isinstance(value, tuple | list) or len(value) != len(layout):
                raise UsageError(f"{where}: expected a tuple of {len(layout)}")
            return [
                x
                for i, (sub, v) in enumerate(zip(layout, value, strict=True))
                for x in _flatten(sub, v, f"{where}.{i}")
            ]
        case HConst():
            return []  # a hyperparameter's value is part of the compiled code
    raise TypeError(f"unexpected layout {layout!r}")


def check_arguments(
    layouts: tuple[HValue, ...], args: list[HostArg]
) -> list[npt.NDArray[Any] | rng.Key]:
    """Arguments against the entry's layouts: their count, every tree's keys, every
    tensor's shape, element kind and index range; a wrong one is a UsageError naming
    it (`argument 2.w`). The pointer leaves, as buffers in the layouts' types.

    Both backends of `presk.Entry` check their arguments here."""
    if len(args) != len(layouts):
        raise UsageError(f"the entry takes {len(layouts)} arguments, got {len(args)}")
    return [
        x
        for i, (layout, value) in enumerate(zip(layouts, args, strict=True))
        for x in _flatten(layout, value, f"argument {i + 1}")
    ]


def _rebuild(
    template: HValue, leaves: list[Any], record: Callable[[tuple[tuple[str, Any], ...]], Any]
) -> Any:
    match template:
        case HTensor():
            return leaves.pop(0)
        case HTree(items):
            return record(tuple((k, _rebuild(v, leaves, record)) for k, v in items))
        case tuple():
            return tuple(_rebuild(v, leaves, record) for v in template)
    raise TypeError("unexpected result layout")


def _reference_tensor(array: npt.NDArray[Any], leaf: HTensor) -> Tensor:
    """An output buffer as a reference tensor (the exact values of the machine numbers)."""
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


def _widened(array: npt.NDArray[Any], leaf: HTensor) -> npt.NDArray[Any]:
    return from_bf16(array) if leaf.dtype == "bf16" else array


# ---------------------------------------------------------------- the fast call

Access = tuple[int | str, ...]  # argument index, then dict keys and tuple indices


@dataclass(frozen=True)
class _Leaf:
    """Where a pointer leaf sits in the arguments, and the buffer C reads there."""

    access: Access
    key: bool  # a random key, else a tensor
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    strides: tuple[int, ...]  # row-major: a contiguous array has exactly these
    bound: int | None = None  # an index tensor's values lie in [0, bound)


def _plan(layouts: tuple[HValue, ...]) -> tuple[list[_Leaf], list[tuple[Access, int]]]:
    """Every pointer leaf's access path, and every record's path with its key count."""
    leaves: list[_Leaf] = []
    records: list[tuple[Access, int]] = []

    def walk(layout: HValue, at: Access) -> None:
        match layout:
            case HTensor(_, dtype, axes, bound):
                shape = tuple(s for _, s in axes)
                kind = np.dtype(Dtype(dtype).numpy)
                strides = np.zeros(shape, dtype=kind).strides if 0 not in shape else ()
                leaves.append(_Leaf(at, False, shape, kind, strides, bound))
            case HKey():
                leaves.append(_Leaf(at, True, (), np.dtype(np.int64), ()))
            case HTree(items):
                records.append((at, len(items)))
                for k, sub in items:
                    walk(sub, (*at, k))
            case tuple():
                records.append((at, -len(layout)))  # a tuple: its length, negated
                for i, sub in enumerate(layout):
                    walk(sub, (*at, i))
            case HConst():
                pass

    for i, layout in enumerate(layouts):
        walk(layout, (i,))
    return leaves, records


class _Slow(Exception):
    """Arguments the fast path does not take as they are: the checked path converts them."""


def _fetch(args: tuple[Any, ...], access: Access) -> Any:
    value: Any = args
    for step in access:
        value = value[step]
    return value


def _as_given(
    args: tuple[Any, ...], leaves: list[_Leaf], records: list[tuple[Access, int]]
) -> list[Any]:
    """The leaves, when every one is already the exact buffer C reads (else _Slow)."""
    try:
        for access, count in records:
            node = _fetch(args, access)
            kind = tuple if count < 0 else dict
            if type(node) is not kind or len(node) != abs(count):
                raise _Slow
        out = []
        for leaf in leaves:
            value = _fetch(args, leaf.access)
            if leaf.key:
                if not isinstance(value, rng.Key):
                    raise _Slow
            elif not (
                type(value) is np.ndarray
                and value.shape == leaf.shape
                and value.strides == leaf.strides
                and (value.dtype is leaf.dtype or value.dtype == leaf.dtype)
                and _outside(value, leaf.bound) is None
            ):
                raise _Slow
            out.append(value)
        return out
    except (KeyError, IndexError, TypeError):
        raise _Slow from None


# ---------------------------------------------------------------- the compiled entry


@dataclass
class Bound:
    """An entry with its arguments in buffers, for repeated calls (what a benchmark times).

    `invoke()` makes one foreign call; `outputs` are the output buffers as the
    call leaves them (storage types: bf16 as uint16). `keep` holds what the C
    side reads through raw pointers.
    """

    invoke: Callable[[], int]
    outputs: list[npt.NDArray[Any]]
    keep: list[Any]


@dataclass(frozen=True)
class CompiledEntry:
    """An entry compiled once, to be called many times.

    Each call runs in an arena of its own, so one `CompiledEntry` may be called
    from several threads at once.
    """

    unit: Unit
    host: HostProgram
    library: Library
    realization: Realization
    threads: int
    layouts: tuple[HValue, ...]
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)
    _plan: tuple[list[_Leaf], list[tuple[Access, int]]] = field(
        init=False, repr=False, compare=False
    )

    _outputs: list[tuple[str, str, tuple[int, ...], type]] = field(
        init=False, repr=False, compare=False
    )

    _single: bool = field(init=False, repr=False, compare=False)  # one tensor, as stored

    def __post_init__(self) -> None:
        object.__setattr__(self, "_plan", _plan(self.layouts))
        outputs = [
            (name, ctype, tuple(s for _, s in leaf.axes), Dtype(leaf.dtype).numpy)
            for name, ctype, leaf in self.unit.outputs
        ]
        object.__setattr__(self, "_outputs", outputs)
        result = self.host.entry.result
        single = isinstance(result, HTensor) and result.dtype != "bf16"
        object.__setattr__(self, "_single", single)

    @property
    def c_text(self) -> str:
        return self.unit.text

    @property
    def kernels(self) -> int:
        return len(self.host.kernels)

    @property
    def launches(self) -> int:
        return self.host.launches

    @property
    def arena_bytes(self) -> int:
        return self.unit.arena_bytes

    def input_bounds(self) -> list[int | None]:
        """Each input leaf's index bound (its values lie in [0, bound)), in the `_in`
        struct's order; None for a leaf that is not an index tensor of a known bound."""
        bounds = [leaf.bound for leaf in self._plan[0]]
        assert len(bounds) == len(self.unit.inputs)
        return bounds

    def buffers(self, args: list[HostArg]) -> list[npt.NDArray[Any] | rng.Key]:
        """The arguments as the buffers C reads, in the `_in` struct's order (checked)."""
        flat = check_arguments(self.layouts, args)
        assert len(flat) == len(self.unit.inputs)
        return flat

    def bind(self, args: list[HostArg]) -> Bound:
        """Convert the arguments once into buffers, ready for repeated calls."""
        ffi, lib = self.library.ffi, self.library.lib
        keep: list[Any] = []
        arena_buf = np.zeros(max(self.unit.arena_bytes, 1), dtype=np.uint8)
        arena = ffi.new("presk_arena *")
        arena.base = ffi.cast("char *", ffi.from_buffer(arena_buf))
        arena.size = self.unit.arena_bytes
        arena.threads = self.threads
        c_in = ffi.new(f"{self.unit.symbol}_in *")
        for (name, ctype, _), value in zip(self.unit.inputs, self.buffers(args), strict=True):
            if isinstance(value, rng.Key):
                key = ffi.new("presk_key *")
                key.k[0], key.k[1] = value.k0, value.k1
                keep.append(key)
                setattr(c_in, name, key)
                continue
            keep.append(value)
            setattr(c_in, name, ffi.cast(ctype, ffi.from_buffer(value)))
        c_out = ffi.new(f"{self.unit.symbol}_out *")
        outs: list[npt.NDArray[Any]] = []
        for name, ctype, leaf in self.unit.outputs:
            array = np.zeros(tuple(s for _, s in leaf.axes), dtype=Dtype(leaf.dtype).numpy)
            outs.append(array)
            setattr(c_out, name, ffi.cast(ctype, ffi.from_buffer(array)))
        entry = getattr(lib, self.unit.symbol)
        # The C side reads these through raw pointers: they live as long as the closure.
        keep.extend([arena_buf, arena, c_in, c_out, outs])

        def invoke() -> int:
            assert keep
            status: int = entry(arena, c_in, c_out)
            return status

        return Bound(invoke, outs, keep)

    def raw(self, args: list[HostArg]) -> list[npt.NDArray[Any]]:
        """One call; the output buffers in their storage types."""
        return self._call(self.buffers(args))

    def __call__(self, *args: HostArg) -> Any:
        """One call on host values; the result as arrays, dicts and tuples.

        Arguments already in the buffers' types and shapes go to C as they are;
        any other is checked and converted first (`buffers`).
        """
        try:
            given = _as_given(args, *self._plan) if len(args) == len(self.layouts) else None
        except _Slow:
            given = None
        outs = self._call(self.buffers(list(args)) if given is None else given)
        if self._single:
            return outs[0]
        pairs = zip(outs, self.unit.outputs, strict=True)
        return _rebuild(
            self.host.entry.result, [_widened(a, leaf) for a, (_, _, leaf) in pairs], dict
        )

    def _call(self, buffers: list[Any]) -> list[npt.NDArray[Any]]:
        """One foreign call in this thread's arena; fresh output arrays."""
        ffi = self.library.ffi
        state = self._local
        if not hasattr(state, "arena"):
            state.arena_buf = np.zeros(max(self.unit.arena_bytes, 1), dtype=np.uint8)
            state.arena = ffi.new("presk_arena *")
            state.arena.base = ffi.cast("char *", ffi.from_buffer(state.arena_buf))
            state.arena.size = self.unit.arena_bytes
            state.arena.threads = self.threads
            state.c_in = ffi.new(f"{self.unit.symbol}_in *")
            state.c_out = ffi.new(f"{self.unit.symbol}_out *")
            state.entry = getattr(self.library.lib, self.unit.symbol)
            state.seen = [None] * len(self.unit.inputs)
        c_in, c_out, seen = state.c_in, state.c_out, state.seen
        keys: list[Any] = []  # keys made here live until C returns
        # An argument given again (the same object) is at the same address, so its
        # pointer is set already; `seen` holds the objects, so their ids stay theirs.
        for i, (name, ctype, _) in enumerate(self.unit.inputs):
            value = buffers[i]
            if seen[i] is value:
                continue
            if isinstance(value, rng.Key):
                key = ffi.new("presk_key *")
                key.k[0], key.k[1] = value.k0, value.k1
                keys.append(key)
                setattr(c_in, name, key)
                seen[i] = None
            else:
                setattr(c_in, name, ffi.cast(ctype, ffi.from_buffer(value)))
                seen[i] = value
        outs = []
        for name, ctype, shape, dtype in self._outputs:
            array: npt.NDArray[Any] = np.zeros(shape, dtype=dtype)
            outs.append(array)
            setattr(c_out, name, ffi.cast(ctype, ffi.from_buffer(array)))
        status = state.entry(state.arena, c_in, c_out)
        if status != 0:
            raise RuntimeError(f"{self.unit.symbol} returned {status}")
        return outs

    def call_reference(self, values: list[Value]) -> Value:
        """One call on reference values; the result as reference values (for printing)."""
        outs = self.raw(list(values))
        pairs = zip(outs, self.unit.outputs, strict=True)
        tensors = [_reference_tensor(a, leaf) for a, (_, _, leaf) in pairs]
        result: Value = _rebuild(self.host.entry.result, tensors, Tree)
        return result
