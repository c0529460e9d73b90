"""The `.psk.d` container: a typed file of samples (the layout is docs/data-format.md).

A file holds `count` samples of one type. The type is stored as presk prints it; the
samples are stored as a fixed list of *leaves* (the tensors of the type, each with its
dotted path, element type and shape), sample after sample, every leaf's elements row-major,
little-endian, unaligned, followed by an FNV-1a 64 checksum of every preceding byte.

Provides:

* `Leaf`, `DataFile`, `DataError`, `read`, `write`, `encode`, `decode`: the container.
  `read` raises nothing but `DataError` for anything wrong with the file, always one line
  that starts with the file's name. `write` is atomic: a temporary file in the target's
  directory, flushed and fsynced, then renamed over the target, so a failed write leaves
  the target untouched and no temporary behind.
* `parse_sample_type`, `tensor_types`, `leaf_layout`: a sample type (tensor or tuple of
  tensors at literal sizes) from its text, and the leaves it lays out to.
* `to_values`, `from_values` (and the pieces `leaf_types`, `leaf_values`): samples to and
  from the reference interpreter's values (`Tensor` of mpfr or ints, `Tree` for parameter
  trees, tuples).
* `f32_to_bf16`, `bf16_to_f32`, `reals_as`, `as_f64`: the element conversions; bf16 rounds
  as the native runtime does.

Invariants: `decode(encode(d), name)` equals `d` bit for bit; `encode` refuses (ValueError)
exactly what `decode` would refuse, so every written file reads back; `decode` raises only
DataError, whatever the bytes.

The C twin is runtime/c/presk_data.c: for the same content both write the same bytes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import numpy.typing as npt

from presk.diagnostics import Sink, Source, printable
from presk.dtypes import Dtype, bf16_to_f32, f32_to_bf16
from presk.elab.program import ConstError, FileEnv
from presk.elab.ty import Elem, Params, TupleT, Type, lin_int
from presk.elab.ty import Tensor as TensorT
from presk.interp.reference import Tree, Value
from presk.interp.rng import fnv1a64
from presk.interp.tensor import Axis, Kind, Tensor, exact_mpfr
from presk.syntax import ast
from presk.syntax.lexer import lex
from presk.syntax.parser import Parser
from presk.syntax.tokens import Kind as TokenKind

__all__ = [
    "DTYPES",
    "MAGIC",
    "VERSION",
    "DataError",
    "DataFile",
    "Leaf",
    "TypeTextError",
    "bf16_to_f32",
    "decode",
    "encode",
    "f32_to_bf16",
    "from_values",
    "leaf_layout",
    "leaf_types",
    "leaf_values",
    "parse_sample_type",
    "read",
    "tensor_types",
    "to_values",
    "write",
]

MAGIC = b"PSKD"
VERSION = 1

DTYPES = tuple(str(d) for d in sorted(Dtype, key=lambda d: d.code))
"""Element types by their code in the file (the index in this tuple)."""

ITEM_SIZE = {str(d): d.size for d in Dtype}
NUMPY_DTYPE: dict[str, type[np.generic]] = {str(d): d.numpy for d in Dtype}  # bf16: raw bits
# Explicitly little-endian, so that a big-endian host writes the same bytes.
_WIRE = {"f64": "<f8", "f32": "<f4", "bf16": "<u2", "i64": "<i8"}

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_MAX_U32 = 2**32 - 1
MAX_RANK = 31
"""The most axes a leaf may have: with the sample axis, 32 (numpy 1's limit)."""
MAX_SPAN = 2**63 - 1
"""The most bytes one leaf of all samples may span, zero sizes counted as 1 (see `span`)."""


class DataError(Exception):
    """Something wrong with a `.psk.d` file: `message` is one line naming the file."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadContents(DataError, ValueError):
    """A well-formed file whose contents do not fit the type read with, such as an index
    out of range for its `idx[N]`: one line (the caller names the file)."""


class TypeTextError(ValueError):
    """A sample type's text that does not parse or is not a storable sample type."""


@dataclass(frozen=True, slots=True)
class Leaf:
    """One tensor of a sample: its dotted path in the value, element type and shape.

    `path` is `w`, `blocks.proj.w` for a parameter tree, `0`, `1` for a tuple's items,
    and empty for a lone tensor. `dtype` is one of `DTYPES`.
    """

    path: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def elements(self) -> int:
        """The number of elements of one sample's tensor (1 for a scalar)."""
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        """The bytes of one sample's tensor in the file."""
        return self.elements * ITEM_SIZE[self.dtype]

    def describe(self) -> str:
        """`path f64 [4, 2]`, for messages and `presk data info`."""
        shape = "[" + ", ".join(str(d) for d in self.shape) + "]"
        return f"{printable(self.path) if self.path else '(root)'} {self.dtype} {shape}"


def span(count: int, leaf: Leaf) -> int:
    """The bytes of leaf `leaf` over `count` samples, with every zero (count or dim) taken
    as 1: the quantity numpy checks when it makes an array, so a header whose spans are all
    at most MAX_SPAN always reads into numpy arrays (and into C size_t on 64-bit hosts)."""
    return prod(max(d, 1) for d in (count, *leaf.shape)) * ITEM_SIZE[leaf.dtype]


@dataclass(eq=False)
class DataFile:
    """The content of a `.psk.d` file.

    `arrays[i]` holds leaf i of every sample: shape `(count, *leaves[i].shape)`, numpy
    dtype float64, float32, uint16 (bf16 bits) or int64 as `leaves[i].dtype` says.
    """

    type: str
    count: int
    leaves: list[Leaf]
    arrays: list[npt.NDArray[Any]]

    @property
    def sample_bytes(self) -> int:
        """The bytes of one sample in the file."""
        return sum(leaf.nbytes for leaf in self.leaves)

    def validate(self) -> None:
        """Raise ValueError unless this content can be written as a `.psk.d` file."""
        _check_text(self.type, "the type", ValueError)
        if not 0 <= self.count <= MAX_SPAN:
            raise ValueError(f"count {self.count} is not below 2^63")
        if len(self.leaves) > _MAX_U32:
            raise ValueError("more leaves than a u32 counts")
        if len(self.arrays) != len(self.leaves):
            raise ValueError(f"{len(self.leaves)} leaves but {len(self.arrays)} arrays")
        seen: set[str] = set()
        for leaf, array in zip(self.leaves, self.arrays, strict=True):
            if leaf.dtype not in ITEM_SIZE:
                raise ValueError(f"leaf `{printable(leaf.path)}`: unknown dtype `{leaf.dtype}`")
            if len(leaf.shape) > MAX_RANK or not all(d >= 0 for d in leaf.shape):
                raise ValueError(f"leaf `{printable(leaf.path)}`: bad shape {leaf.shape}")
            if span(self.count, leaf) > MAX_SPAN:
                raise ValueError(f"leaf `{printable(leaf.path)}`: more than 2^63 bytes")
            _check_text(leaf.path, f"leaf `{leaf.path}`'s path", ValueError)
            if leaf.path in seen:
                raise ValueError(f"two leaves have the path `{printable(leaf.path)}`")
            seen.add(leaf.path)
            want = np.dtype(NUMPY_DTYPE[leaf.dtype])
            got = np.asarray(array).dtype
            # Byte order is free (the writer converts); kind and width are not: a float
            # array given for bf16 would silently be stored as garbage bits.
            if got.kind != want.kind or got.itemsize != want.itemsize:
                raise ValueError(
                    f"leaf `{printable(leaf.path)}`: array dtype {got}, expected {want}"
                )
            if np.shape(array) != (self.count, *leaf.shape):
                raise ValueError(
                    f"leaf `{printable(leaf.path)}`: array shape {np.shape(array)}, "
                    f"expected {(self.count, *leaf.shape)}"
                )


def _check_text(text: str, what: str, error: type[Exception]) -> None:
    # A NUL would cut the string short in C (presk_data.c keeps NUL-terminated strings), so
    # neither side accepts one; a lone surrogate cannot be encoded as UTF-8 at all.
    if "\0" in text:
        raise error(f"{what} contains a NUL character")
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        raise error(f"{what} is not valid Unicode") from None
    if len(encoded) > _MAX_U32:
        raise error(f"{what} is longer than a u32 counts")


# -- the byte layout --------------------------------------------------------------------


def _record_dtype(leaves: Sequence[Leaf]) -> np.dtype[Any]:
    """One sample as a packed numpy record: leaf i is field `l{i}` at its byte offset."""
    names, formats, offsets = [], [], []
    offset = 0
    for i, leaf in enumerate(leaves):
        names.append(f"l{i}")
        wire = np.dtype(_WIRE[leaf.dtype])
        formats.append(np.dtype((wire, leaf.shape)) if leaf.shape else wire)
        offsets.append(offset)
        offset += leaf.nbytes
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": offset})


def encode_header(type_text: str, count: int, leaves: Sequence[Leaf]) -> bytes:
    """The header bytes: magic, version, type, count, leaves."""
    out = bytearray(MAGIC)
    out += _U32.pack(VERSION)
    text = type_text.encode("utf-8")
    out += _U32.pack(len(text)) + text
    out += _U64.pack(count)
    out += _U32.pack(len(leaves))
    for leaf in leaves:
        out.append(DTYPES.index(leaf.dtype))
        out += _U32.pack(len(leaf.shape))
        for dim in leaf.shape:
            out += _U64.pack(dim)
        path = leaf.path.encode("utf-8")
        out += _U32.pack(len(path)) + path
    return bytes(out)


def encode(data: DataFile) -> bytes:
    """The whole file's bytes. Raises ValueError for content that cannot be stored."""
    data.validate()
    out = bytearray(encode_header(data.type, data.count, data.leaves))
    record = _record_dtype(data.leaves)
    if record.itemsize and data.count:
        samples = np.empty(data.count, dtype=record)
        for i, array in enumerate(data.arrays):
            samples[f"l{i}"] = array
        out += samples.tobytes()
    out += _U64.pack(fnv1a64(bytes(out)))
    return bytes(out)


class _Cursor:
    """Bounds-checked reads of the header; running out is 'truncated header'."""

    def __init__(self, buf: bytes, name: str) -> None:
        self.buf = buf
        self.name = name
        self.pos = 0

    def fail(self, what: str) -> DataError:
        return DataError(f"{printable(self.name)}: {what}")

    def take(self, n: int, what: str) -> bytes:
        left = len(self.buf) - self.pos
        if n > left:
            raise self.fail(
                f"truncated header: {what} at byte {self.pos} needs {n} bytes, {left} remain"
            )
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u32(self, what: str) -> int:
        value: int = _U32.unpack(self.take(4, what))[0]
        return value

    def u64(self, what: str) -> int:
        value: int = _U64.unpack(self.take(8, what))[0]
        return value

    def text(self, what: str) -> str:
        raw = self.take(self.u32(f"the length of {what}"), what)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not valid UTF-8") from None
        if "\0" in text:
            raise self.fail(f"{what} contains a NUL byte")
        return text


def decode(buf: bytes, name: str) -> DataFile:
    """The content of a file's bytes; `name` is the file named in every DataError."""
    cur = _Cursor(buf, name)
    if cur.take(len(MAGIC), "the magic") != MAGIC:
        raise cur.fail(f"not a .psk.d file (bad magic {bytes(buf[:4]).hex()})")
    version = cur.u32("the version")
    if version != VERSION:
        raise cur.fail(f"unsupported format version {version} (this presk reads {VERSION})")
    type_text = cur.text("the type")
    count = cur.u64("the sample count")
    if count > MAX_SPAN:
        raise cur.fail(f"the sample count {count} is 2^63 or more")
    nleaves = cur.u32("the leaf count")
    leaves: list[Leaf] = []
    seen: set[str] = set()
    for i in range(nleaves):
        code = cur.u8(f"leaf {i}'s dtype")
        if code >= len(DTYPES):
            raise cur.fail(f"leaf {i} has an unknown dtype code {code}")
        rank = cur.u32(f"leaf {i}'s rank")
        if rank > MAX_RANK:
            raise cur.fail(f"leaf {i} has rank {rank}, more than {MAX_RANK}")
        shape = tuple(cur.u64(f"leaf {i}'s dims") for _ in range(rank))
        if span(count, Leaf("", DTYPES[code], shape)) > MAX_SPAN:
            raise cur.fail(f"leaf {i} spans more than 2^63 bytes")
        path = cur.text(f"leaf {i}'s path")
        if path in seen:
            raise cur.fail(f"two leaves have the path `{path}`")
        seen.add(path)
        leaves.append(Leaf(path, DTYPES[code], shape))
    sample_bytes = sum(leaf.nbytes for leaf in leaves)
    want = count * sample_bytes + 8
    have = len(buf) - cur.pos
    if want > 2**64 - 1:  # the C reader counts in u64: the same message at the same point
        raise cur.fail(f"truncated data: the samples need more than 2^64 bytes, {have} remain")
    if have < want:
        raise cur.fail(
            f"truncated data: the samples and the checksum need {want} bytes after the "
            f"header, {have} remain"
        )
    if have > want:
        raise cur.fail(f"{have - want} trailing bytes after the checksum")
    stored: int = _U64.unpack(buf[-8:])[0]
    computed = fnv1a64(bytes(buf[:-8]))
    if stored != computed:
        raise cur.fail(
            f"checksum mismatch (stored {stored:016x}, computed {computed:016x}): "
            "the file is corrupt"
        )
    arrays: list[npt.NDArray[Any]] = []
    if sample_bytes and count:
        # Only now: the data is known to be in the file, so the record is of sane size.
        record = _record_dtype(leaves)
        samples = np.frombuffer(buf, dtype=record, count=count, offset=cur.pos)
        for i, leaf in enumerate(leaves):
            # astype copies into native byte order: the result owns writable memory.
            arrays.append(samples[f"l{i}"].astype(NUMPY_DTYPE[leaf.dtype]))
    else:
        arrays = [np.zeros((count, *leaf.shape), NUMPY_DTYPE[leaf.dtype]) for leaf in leaves]
    return DataFile(type_text, count, leaves, arrays)


def read(path: str | os.PathLike[str]) -> DataFile:
    """Read a `.psk.d` file. Every problem is a DataError of one line naming the file."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            buf = f.read()
    except OSError as error:
        raise DataError(f"{name}: cannot read: {error.strerror or error}") from None
    return decode(buf, name)


def write(path: str | os.PathLike[str], data: DataFile) -> None:
    """Write `data` to `path` atomically.

    The bytes go to `PATH.tmp-XXXXXXXXXXXXXXXX` beside the target (same directory, hence
    same filesystem, so the rename is atomic), are fsynced, and the temporary is renamed
    over the target. On any failure the temporary is removed and the target is untouched.
    Raises ValueError for content that cannot be stored, DataError for I/O failures.
    """
    name = os.fspath(path)
    payload = encode(data)  # before any file exists: bad content creates nothing
    write_atomically(name, payload)


def write_atomically(path: str | os.PathLike[str], payload: bytes) -> None:
    """Write `payload` to `path` as `write` does: a temporary beside it, fsynced, renamed;
    on failure the temporary is removed and the target untouched (DataError)."""
    name = os.fspath(path)
    fd, tmp = _create_temp(name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(error, OSError):
            raise DataError(f"{name}: cannot write: {error.strerror or error}") from None
        raise
    # The rename itself is durable only once the directory is synced; best effort, since
    # not every platform lets a directory be opened.
    with contextlib.suppress(OSError):
        dir_fd = os.open(os.path.dirname(os.path.abspath(name)), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _create_temp(name: str) -> tuple[int, str]:
    """A new temporary file beside `name`, opened for writing; created exclusively."""
    for _ in range(100):
        tmp = f"{name}.tmp-{secrets.token_hex(8)}"
        try:
            # 0o666 and the umask, as an ordinary file (mkstemp would force 0o600).
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as error:
            raise DataError(f"{name}: cannot write: {error.strerror or error}") from None
    raise DataError(f"{name}: cannot write: no free temporary name")


# -- bf16 ---------------------------------------------------------------------------------


# `f32_to_bf16` and `bf16_to_f32` live in presk/dtypes.py (imported above).


def reals_as(values: npt.NDArray[np.float64], dtype: str) -> npt.NDArray[Any]:
    """f64 values stored as `dtype` (f64, f32 or bf16), rounded to nearest."""
    if dtype == "f64":
        return np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):  # beyond the f32 range is ±inf, as in C
        singles = np.asarray(values, dtype=np.float64).astype(np.float32)
    return singles if dtype == "f32" else f32_to_bf16(singles)


def as_f64(array: npt.NDArray[Any], dtype: str) -> npt.NDArray[np.float64]:
    """A leaf array of reals (f64, f32 or bf16 bits) as f64, exactly."""
    if dtype == "bf16":
        return bf16_to_f32(array).astype(np.float64)
    return np.asarray(array).astype(np.float64)


# -- sample types -------------------------------------------------------------------------


# How deep a sample type's brackets may nest: tuples in tuples, and sizes in axes. The
# parser, the resolver and every later walk over the type (printing it, its leaves)
# recurse once per level, so a type of a command line or a file's header is bounded
# here rather than by Python's recursion limit.
MAX_TYPE_NESTING = 64


def _bracket_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth = max(depth - 1, 0)
    return deepest


def _shortened(text: str, width: int = 60) -> str:
    shown = printable(text)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def parse_sample_type(text: str) -> Type:
    """The semantic type of a sample type's text: a tensor or a tuple of them (nested
    tuples allowed) at literal sizes, e.g. `(ℝ[model: 4], idx[64][seq: 8])`.

    Uses presk's own lexer and type parser, then resolves in an empty file (so only
    literal sizes and arithmetic on them resolve). `params M` needs the program that
    declares M and is refused here. Raises TypeTextError with a one-line reason.
    """
    depth = _bracket_depth(text)
    if depth > MAX_TYPE_NESTING:
        raise TypeTextError(
            f"`{_shortened(text)}`: brackets nested {depth} deep "
            f"(a sample type nests at most {MAX_TYPE_NESTING})"
        )
    source = Source("<type>", text)
    sink = Sink()
    tokens = lex(source, sink)
    parser = Parser(tokens, sink)
    syn: ast.TypeSyn | None
    try:
        syn = parser.parse_type()
        parser.skip_newlines()
        if not parser.at(TokenKind.EOF):
            syn = None
            if not sink.diagnostics:
                raise TypeTextError(
                    f"`{printable(text)}`: unexpected {parser.tok.found()} after the type"
                )
    except TypeTextError:
        raise
    except Exception:
        # The parser unwinds with a private exception after reporting to the sink; anything
        # else is a bug and goes on.
        if not sink.diagnostics:
            raise
        syn = None
    if sink.diagnostics or syn is None:
        reason = sink.diagnostics[0].message if sink.diagnostics else "not a type"
        raise TypeTextError(f"`{printable(text)}`: {reason}")
    if _has_params(syn):
        raise TypeTextError(
            f"`{text}`: a `params M` type needs the program that declares M; "
            "only tensors and tuples of them stand alone"
        )
    from presk.types.scope import TypeScope, resolve

    env = FileEnv("<type>", source, ast.File((), tokens[0].span))
    try:
        ty = resolve(TypeScope(env), syn)
    except ConstError as error:
        raise TypeTextError(f"`{printable(text)}`: {printable(error.message)}") from None
    tensor_types(ty)  # refuses what cannot be stored
    return ty


def _has_params(syn: ast.TypeSyn) -> bool:
    if isinstance(syn, ast.ParamsType):
        return True
    return isinstance(syn, ast.TupleType) and any(_has_params(item) for item in syn.items)


def tensor_types(ty: Type, prefix: str = "") -> list[tuple[str, TensorT]]:
    """Every tensor of a sample type, with its leaf path, in storage order.

    A tuple's items are `0`, `1`, … (nested: `0.1`); a parameter tree's leaves keep their
    dotted paths (`blocks.proj.w`). Raises TypeTextError for a type that is not a sample
    (functions, keys, hyperparameters, an open `...` prefix, a size that is not a literal
    natural number).
    """
    from presk.types.scope import param_leaves

    match ty:
        case TensorT():
            if ty.open:
                raise TypeTextError(f"`{ty}`: a stored tensor cannot have an open `...` prefix")
            for axis in ty.axes:
                size = lin_int(axis.size)
                if size is None or size < 0:
                    raise TypeTextError(f"`{ty}`: size `{axis.size}` is not a natural number")
            if ty.elem == Elem.IDX:
                bound = None if ty.bound is None else lin_int(ty.bound)
                if bound is None or bound <= 0:
                    raise TypeTextError(f"`{ty}`: the bound is not a positive integer")
            return [(prefix, ty)]
        case TupleT(items):
            out: list[tuple[str, TensorT]] = []
            for i, item in enumerate(items):
                out.extend(tensor_types(item, f"{prefix}.{i}" if prefix else str(i)))
            return out
        case Params(inst):
            # An instance's leaves are already at its arguments; a stack has its layer axis.
            lead = f"{prefix}." if prefix else ""
            leaves = param_leaves(inst, lead)
            for _, leaf_ty, _ in leaves:
                tensor_types(leaf_ty)
            return [(path, leaf_ty) for path, leaf_ty, _ in leaves]
    raise TypeTextError(f"`{ty}` is not a sample type (tensors, tuples, parameter trees)")


def _tensor_leaf(path: str, ty: TensorT, real: str) -> Leaf:
    shape = tuple(int(lin_int(a.size) or 0) for a in ty.axes)
    return Leaf(path, real if ty.elem == Elem.REAL else "i64", shape)


def leaf_layout(ty: Type, real: str = "f64") -> list[Leaf]:
    """The leaves a sample of `ty` is stored as; reals as `real` (f64, f32 or bf16),
    indices and booleans as i64."""
    if real not in ("f64", "f32", "bf16"):
        raise ValueError(f"reals are stored as f64, f32 or bf16, not `{real}`")
    return [_tensor_leaf(path, t, real) for path, t in tensor_types(ty)]


# -- reference values ---------------------------------------------------------------------


def _bound(ty: TensorT | None) -> int | None:
    return None if ty is None or ty.bound is None else lin_int(ty.bound)


def _leaf_tensor(leaf: Leaf, array: npt.NDArray[Any], ty: TensorT | None, index: int = 0) -> Tensor:
    """One leaf of one sample as a reference tensor: axis names and kind from `ty`."""
    names: Sequence[str | None] = [a.name for a in ty.axes] if ty is not None else []
    axes = tuple(
        Axis(names[k] if k < len(names) else None, size) for k, size in enumerate(leaf.shape)
    )
    data = np.empty(leaf.shape, dtype=object)
    flat = data.reshape(-1)
    if leaf.dtype == "i64":
        ints = [int(v) for v in np.asarray(array).reshape(-1)]
        if ty is not None and ty.elem == Elem.BOOL:
            for k, v in enumerate(ints):
                flat[k] = v != 0
            return Tensor(Kind.BOOL, axes, data)
        bound = _bound(ty)
        for k, v in enumerate(ints):
            if bound is not None and not 0 <= v < bound:
                raise BadContents(
                    f"sample {index}, leaf `{printable(leaf.path)}`: index {v} is out of range "
                    f"for idx[{bound}]"
                )
            flat[k] = v
        return Tensor(Kind.IDX, axes, data, bound)
    # Exact: an mpfr of 53 bits holds every f64 (and so every f32 and bf16) value as is.
    for k, x in enumerate(as_f64(array, leaf.dtype).reshape(-1)):
        flat[k] = exact_mpfr(float(x))
    return Tensor(Kind.REAL, axes, data)


def _assemble(flat: list[tuple[list[str], Tensor]], where: str) -> Value:
    """A value from leaves keyed by path components: digits are tuple items, names tree
    keys, the empty path a lone tensor."""
    if len(flat) == 1 and not flat[0][0]:
        return flat[0][1]
    order: list[str] = []
    groups: dict[str, list[tuple[list[str], Tensor]]] = {}
    for parts, tensor in flat:
        if not parts or not parts[0]:
            raise BadContents(
                f"leaf paths under `{printable(where)}` do not form a tree or a tuple"
            )
        if parts[0] not in groups:
            order.append(parts[0])
            groups[parts[0]] = []
        groups[parts[0]].append((parts[1:], tensor))
    sub = [_assemble(groups[h], f"{where}.{h}" if where else h) for h in order]
    if all(h.isdigit() for h in order):
        if order != [str(i) for i in range(len(order))]:
            raise BadContents(f"tuple items under `{printable(where)}` are not 0, 1, … in order")
        return tuple(sub)
    if any(h.isdigit() for h in order):
        raise BadContents(f"leaf paths under `{printable(where)}` mix tuple items and tree keys")
    return Tree(tuple(zip(order, sub, strict=True)))


def leaf_types(data: DataFile, ty: Type | None = None) -> dict[str, TensorT]:
    """The tensor type of each leaf path, from `ty` when given, else from the file's type
    when it parses as a sample type; empty for a `params M` file read without its type.
    Raises ValueError when the leaves do not match the type."""
    if ty is None:
        with contextlib.suppress(TypeTextError):
            ty = parse_sample_type(data.type)
    if ty is None:
        return {}
    expected = tensor_types(ty)
    _match_leaves(data.leaves, [_tensor_leaf(p, t, "f64") for p, t in expected])
    return dict(expected)


def leaf_values(
    data: DataFile, index: int, types: dict[str, TensorT] | None = None
) -> list[tuple[str, Tensor]]:
    """Every leaf of sample `index` as a reference tensor, with its path.

    Axis names, element kinds (idx or bool for i64 leaves) and idx bounds come from
    `types` (see `leaf_types`); a leaf without one gets unnamed axes, REAL or IDX by its
    dtype. Reals become exact mpfr values. Raises IndexError for a bad index.
    """
    if not 0 <= index < data.count:
        raise IndexError(f"sample {index} of {data.count}")
    known = types or {}
    return [
        (leaf.path, _leaf_tensor(leaf, arr[index], known.get(leaf.path), index))
        for leaf, arr in zip(data.leaves, data.arrays, strict=True)
    ]


def to_values(data: DataFile, index: int, ty: Type | None = None) -> Value:
    """Sample `index` as a reference value: a Tensor, a tuple, or a Tree.

    The structure comes from the leaf paths (digits are tuple items, names tree keys, the
    empty path a lone tensor); names, kinds and bounds from `leaf_types(data, ty)`. Raises
    IndexError for a bad index and ValueError when the leaves do not match the type.
    """
    if not 0 <= index < data.count:
        raise IndexError(f"sample {index} of {data.count}")
    flat = [
        (path.split(".") if path else [], tensor)
        for path, tensor in leaf_values(data, index, leaf_types(data, ty))
    ]
    return _assemble(flat, "") if flat else ()


def _match_leaves(have: Sequence[Leaf], want: Sequence[Leaf]) -> None:
    """ValueError unless the leaves agree in path, shape and kind (any real dtype)."""

    def key(leaf: Leaf) -> tuple[str, tuple[int, ...], bool]:
        return leaf.path, leaf.shape, leaf.dtype == "i64"

    if [key(x) for x in have] != [key(x) for x in want]:
        raise BadContents(
            "leaves ["
            + "; ".join(x.describe() for x in have)
            + "] do not match the type's ["
            + "; ".join(x.describe() for x in want)
            + "]"
        )


def _flatten(value: Value, prefix: str) -> list[tuple[str, Tensor]]:
    match value:
        case Tensor():
            return [(prefix, value)]
        case Tree(items):
            return [x for k, v in items for x in _flatten(v, f"{prefix}.{k}" if prefix else k)]
        case tuple():
            return [
                x
                for i, v in enumerate(value)
                for x in _flatten(v, f"{prefix}.{i}" if prefix else str(i))
            ]
    raise ValueError(f"`{prefix or 'the sample'}`: a {type(value).__name__} cannot be stored")


def from_values(type_text: str, samples: Sequence[Value], real: str = "f64") -> DataFile:
    """A DataFile of reference values, reals stored as `real` (f64, f32 or bf16).

    The leaves are those of the first sample (every sample must have the same paths,
    kinds and shapes); when `type_text` parses as a sample type it is stored as presk
    prints it and must agree with the values. A `params M` type is stored as given (its
    module is not known here). Reals are rounded to nearest: mpfr → f64 → f32 → bf16, as
    the native backend narrows. Raises ValueError for values that cannot be stored.
    """
    if real not in ("f64", "f32", "bf16"):
        raise ValueError(f"reals are stored as f64, f32 or bf16, not `{real}`")
    ty: Type | None = None
    with contextlib.suppress(TypeTextError):
        ty = parse_sample_type(type_text)
    flats = [_flatten(s, "") for s in samples]
    if flats:
        leaves = [Leaf(p, real if t.kind == Kind.REAL else "i64", t.shape) for p, t in flats[0]]
    elif ty is not None:
        leaves = leaf_layout(ty, real)
    else:
        raise ValueError(
            f"`{printable(type_text)}`: no samples, and the type alone does not give leaves"
        )
    if ty is not None:
        _match_leaves(leaves, leaf_layout(ty, real))
    for n, flat in enumerate(flats):
        got = [(p, t.shape, t.kind == Kind.REAL) for p, t in flat]
        want = [(x.path, x.shape, x.dtype != "i64") for x in leaves]
        if got != want:
            raise ValueError(f"sample {n} has other leaves than sample 0")
    arrays: list[npt.NDArray[Any]] = []
    for i, leaf in enumerate(leaves):
        shape = (len(flats), *leaf.shape)
        if leaf.dtype == "i64":
            ints = [int(v) for flat in flats for v in flat[i][1].flat()]
            arrays.append(np.array(ints, dtype=np.int64).reshape(shape))
        else:
            doubles = [float(v) for flat in flats for v in flat[i][1].flat()]
            arrays.append(reals_as(np.array(doubles, dtype=np.float64).reshape(shape), real))
    return DataFile(str(ty) if ty is not None else type_text, len(flats), leaves, arrays)
