"""The `.psk.d` container (presk/data/format.py, runtime/c/presk_data.c) and `presk data`.

* Python round trips: every dtype, scalars, zero sizes, trees, nested tuples, many samples,
  reference values both ways (bf16 rounding as the native runtime rounds).
* Every kind of damage is one `DataError` line naming the file: every truncation and every
  single-byte change of a small file, and a crafted header for each rule of the format.
* Atomic writes: a failure at any step leaves the target as it was and no temporary.
* C against Python (skipped without a C compiler): presk_data.c + presk_rng.c compiled into
  a shared object and loaded with cffi in ABI mode; each reads the other's files, both
  write the same bytes, both reject the same damaged files with the same message, and the
  C code compiles warning-free and runs clean under AddressSanitizer / UBSan.
* The `presk data pack|info|diff` command, and tutorial/data/pairs.psk.d.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import gmpy2
import numpy as np
import pytest
from conftest import REPO_ROOT, run_presk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from presk.data import format as fmt
from presk.data.format import DataError, DataFile, Leaf
from presk.interp.reference import Tree
from presk.interp.rng import fnv1a64
from presk.interp.tensor import Axis, Kind, Tensor

RUNTIME = REPO_ROOT / "runtime" / "c"
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc, gcc, clang)")


# --- helpers ---------------------------------------------------------------------------------


def sample_file(count: int = 3) -> DataFile:
    """A file with every dtype, a scalar, a zero-size leaf and a nested path."""
    rng = np.random.default_rng(5)
    f64 = rng.standard_normal((count, 2, 3))
    f64[0, 0, 0] = -0.0  # signs of zero, infinities and NaN payloads survive
    f64[0, 0, 1] = np.inf
    f64[0, 0, 2] = np.nan
    leaves = [
        Leaf("0", "f64", (2, 3)),
        Leaf("1.a", "f32", ()),
        Leaf("1.b", "bf16", (4,)),
        Leaf("2", "i64", (5,)),
        Leaf("3", "f64", (0, 2)),
    ]
    arrays: list[np.ndarray[Any, Any]] = [
        f64,
        rng.standard_normal(count).astype(np.float32),
        fmt.f32_to_bf16(rng.standard_normal((count, 4)).astype(np.float32)),
        rng.integers(-(2**62), 2**62, (count, 5), dtype=np.int64),
        np.zeros((count, 0, 2)),
    ]
    return DataFile("(ℝ[2, 3], params M, idx[9][5], ℝ[0, 2])", count, leaves, arrays)


def same(a: DataFile, b: DataFile) -> None:
    """Equal content, bit for bit (NaNs included)."""
    assert (a.type, a.count, a.leaves) == (b.type, b.count, b.leaves)
    for x, y in zip(a.arrays, b.arrays, strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert x.tobytes() == y.tobytes()


def one_line_naming(message: str, name: str) -> None:
    assert "\n" not in message and message.startswith(f"{name}: "), message


def header(
    type_text: bytes = "ℝ[2]".encode(),
    count: int = 1,
    leaves: list[tuple[int, list[int], bytes]] | None = None,
    version: int = 1,
    magic: bytes = b"PSKD",
) -> bytes:
    """A header written by hand, so that it can break any rule."""
    leaves = [(0, [2], b"")] if leaves is None else leaves
    out = magic + struct.pack("<I", version) + struct.pack("<I", len(type_text)) + type_text
    out += struct.pack("<QI", count, len(leaves))
    for code, dims, path in leaves:
        out += bytes([code]) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<I", len(path)) + path
    return out


def sealed(body: bytes) -> bytes:
    """`body` with its checksum appended."""
    return body + struct.pack("<Q", fnv1a64(body))


# --- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 3, 40])
def test_round_trip_every_dtype(tmp_path: Path, count: int) -> None:
    data = sample_file(count) if count else sample_file(3)
    if not count:
        data = DataFile(data.type, 0, data.leaves, [a[:0] for a in data.arrays])
    path = tmp_path / "a.psk.d"
    fmt.write(path, data)
    back = fmt.read(path)
    same(data, back)
    assert path.read_bytes() == fmt.encode(data)
    assert back.sample_bytes == 48 + 4 + 8 + 40 + 0
    for array in back.arrays:
        assert array.flags.writeable and array.dtype.isnative


def test_layout_is_the_documented_one() -> None:
    """One lone f32 scalar, two samples: every byte spelled out (docs/data-format.md)."""
    data = DataFile("ℝ[]", 2, [Leaf("", "f32", ())], [np.array([1.0, -2.0], np.float32)])
    body = (
        b"PSKD" + b"\x01\0\0\0" + b"\x05\0\0\0" + "ℝ[]".encode()
        + b"\x02\0\0\0\0\0\0\0" + b"\x01\0\0\0"
        + b"\x01" + b"\0\0\0\0" + b"\0\0\0\0"
        + b"\x00\x00\x80\x3f" + b"\x00\x00\x00\xc0"
    )  # fmt: skip
    assert fmt.encode(data) == sealed(body)
    assert fmt.encode(data)[-8:].hex() == "5f8edcc9c6ac6715"  # as the page shows


def test_no_leaves_and_empty_samples(tmp_path: Path) -> None:
    for data in [
        DataFile("()", 5, [], []),
        DataFile("ℝ[0]", 7, [Leaf("", "f64", (0,))], [np.zeros((7, 0))]),
    ]:
        fmt.write(tmp_path / "e.psk.d", data)
        same(data, fmt.read(tmp_path / "e.psk.d"))


def test_values_round_trip_tuples_scalars_idx_bool() -> None:
    ty = "(ℝ[model: 4], (idx[10][seq: 3], bool[2]), ℝ)"
    samples = []
    for s in range(3):
        samples.append(
            (
                Tensor.real([Axis("model", 4)], [s + 0.5, -1.25, 1e-300, 3 * s]),
                (
                    Tensor.idx([Axis("seq", 3)], [s, 9, 0], 10),
                    Tensor.boolean([Axis(None, 2)], [True, s == 1]),
                ),
                Tensor.scalar(Fraction(1, 3)),
            )
        )
    data = fmt.from_values(ty, samples)
    assert data.type == "(ℝ[model: 4], (idx[10][seq: 3], bool[2]), ℝ[])"
    assert [leaf.path for leaf in data.leaves] == ["0", "1.0", "1.1", "2"]
    assert [leaf.dtype for leaf in data.leaves] == ["f64", "i64", "i64", "f64"]
    back = fmt.decode(fmt.encode(data), "x")
    for s, sample in enumerate(samples):
        value = fmt.to_values(back, s)
        assert isinstance(value, tuple)
        assert value[0] == sample[0]  # f64 is exact for these
        assert value[1][0] == sample[1][0] and value[1][0].bound == 10
        assert value[1][1] == sample[1][1] and value[1][1].kind is Kind.BOOL
        assert value[2].item() == gmpy2.mpfr(1 / 3)  # mpfr → f64, correctly rounded


def test_values_round_trip_parameter_tree() -> None:
    def tree(k: float) -> Tree:
        return Tree(
            (
                ("w", Tensor.real([Axis(None, 3), Axis(None, 2)], [[k, 1], [2, 3], [4, 5]])),
                ("blocks", Tree((("proj", Tree((("b", Tensor.real([Axis(None, 2)], [k, k])),))),))),
            )
        )

    data = fmt.from_values("params Linear{3, 2}", [tree(0.5), tree(-7.0)])
    assert data.type == "params Linear{3, 2}"  # kept as given: the module is not known here
    assert [leaf.path for leaf in data.leaves] == ["w", "blocks.proj.b"]
    back = fmt.decode(fmt.encode(data), "x")
    for s, k in enumerate([0.5, -7.0]):
        value = fmt.to_values(back, s)
        assert isinstance(value, Tree)
        assert [p for p, _ in value.leaves()] == ["w", "blocks.proj.b"]
        for (_, got), (_, want) in zip(value.leaves(), tree(k).leaves(), strict=True):
            assert got == want


def test_values_lone_tensor_and_real_dtypes() -> None:
    t = Tensor.real([Axis("batch", 2), Axis(None, 2)], [[1 / 3, 1e39], [-2.0, 0.1]])
    for real, narrowed in [
        ("f64", np.array([1 / 3, 1e39, -2.0, 0.1])),
        ("f32", np.array([1 / 3, np.inf, -2.0, 0.1], np.float32).astype(np.float64)),
    ]:
        data = fmt.from_values("ℝ[batch: 2, 2]", [t], real)
        assert data.leaves == [Leaf("", real, (2, 2))]
        value = fmt.to_values(data, 0)
        assert isinstance(value, Tensor) and value.axes == t.axes
        assert [float(x) for x in value.flat()] == narrowed.tolist()
    bf = fmt.from_values("ℝ[batch: 2, 2]", [t], "bf16")
    assert bf.arrays[0].dtype == np.uint16
    assert [float(x) for x in fmt.to_values(bf, 0).flat()] == [  # type: ignore[union-attr]
        0.333984375,
        float("inf"),
        -2.0,
        0.10009765625,
    ]


def test_bf16_rounds_to_nearest_even() -> None:
    cases = {
        1.0: 0x3F80,
        -2.0: 0xC000,
        1.00390625: 0x3F80,  # exactly halfway, even below
        1.01171875: 0x3F82,  # exactly halfway, even above
        1.0078125 + 2**-20: 0x3F81,  # above halfway
        3.0e38: 0x7F62,
        float("inf"): 0x7F80,
    }
    got = fmt.f32_to_bf16(np.array(list(cases), np.float32))
    assert got.tolist() == list(cases.values())
    nan = fmt.f32_to_bf16(np.array([np.nan], np.float32))[0]
    assert (nan & 0x7F80) == 0x7F80 and (nan & 0x7F) != 0
    assert fmt.bf16_to_f32(np.array([0x3F80, 0xC000], np.uint16)).tolist() == [1.0, -2.0]


def test_values_refuse_mismatches() -> None:
    t = Tensor.real([Axis(None, 2)], [1, 2])
    with pytest.raises(ValueError, match="do not match"):
        fmt.from_values("ℝ[3]", [t])
    with pytest.raises(ValueError, match="other leaves"):
        fmt.from_values("ℝ[2]", [t, Tensor.real([Axis(None, 3)], [1, 2, 3])])
    with pytest.raises(ValueError, match="cannot be stored"):
        fmt.from_values("x", [Fraction(1)])
    with pytest.raises(ValueError, match="no samples"):
        fmt.from_values("params M", [])
    wrong = DataFile("ℝ[3]", 1, [Leaf("", "f64", (2,))], [np.zeros((1, 2))])
    with pytest.raises(ValueError, match="do not match"):
        fmt.to_values(wrong, 0)
    with pytest.raises(IndexError):
        fmt.to_values(wrong, 1)


@pytest.mark.parametrize(
    "text, message",
    [
        ("ℝ[n]", "unresolved name `n`"),
        ("params Linear{3, 2}", "needs the program"),
        ("ℝ[..., 4]", "open `...` prefix"),
        ("ℝ[2] ℝ", "after the type"),
        ("f64", "not a sample type"),
        ("(ℝ[2]", "expected"),
        ("idx[0][2]", "bound"),
    ],
)
def test_sample_type_errors(text: str, message: str) -> None:
    with pytest.raises(fmt.TypeTextError) as info:
        fmt.parse_sample_type(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_sample_type_spellings() -> None:
    assert str(fmt.parse_sample_type("(Real[model: 2*2], idx[64][seq: 8])")) == (
        "(ℝ[model: 4], idx[64][seq: 8])"
    )
    assert [leaf.path for leaf in fmt.leaf_layout(fmt.parse_sample_type("((ℝ, ℝ), ℝ)"))] == [
        "0.0",
        "0.1",
        "1",
    ]


def test_write_refuses_bad_content(tmp_path: Path) -> None:
    target = tmp_path / "x.psk.d"
    bad = [
        DataFile("a\0b", 0, [], []),
        DataFile("t", 1, [Leaf("", "f16", ())], [np.zeros(1)]),
        DataFile("t", 1, [Leaf("", "bf16", ())], [np.zeros(1)]),  # floats given as bf16 bits
        DataFile("t", 2, [Leaf("", "f64", ())], [np.zeros(1)]),
        DataFile("t", 1, [Leaf("a", "f64", ()), Leaf("a", "f64", ())], [np.zeros(1)] * 2),
        DataFile("t", 1, [Leaf("", "f64", (1,) * 32)], [np.zeros((1,) * 33)]),
        DataFile("t", 0, [Leaf("", "f64", (2**61,))], [np.zeros((0, 0))]),
    ]
    for data in bad:
        with pytest.raises(ValueError):
            fmt.write(target, data)
    assert list(tmp_path.iterdir()) == []


# --- damage ----------------------------------------------------------------------------------


def small_file() -> bytes:
    data = DataFile(
        "(ℝ[2], idx[4][])",
        2,
        [Leaf("0", "f64", (2,)), Leaf("1", "i64", ())],
        [np.array([[1.5, -2.0], [0.25, 8.0]]), np.array([3, 1], np.int64)],
    )
    return fmt.encode(data)


def damaged() -> Iterator[tuple[str, bytes]]:
    """Every truncation and every single-byte change of small_file(), and a byte more."""
    good = small_file()
    for n in range(len(good)):
        yield f"cut{n}", good[:n]
    for i in range(len(good)):
        for flip in (0x01, 0x80, 0xFF):
            yield f"flip{i}_{flip}", good[:i] + bytes([good[i] ^ flip]) + good[i + 1 :]
    yield "extra", good + b"\0"


def spliced(n: int = 1500) -> Iterator[tuple[str, bytes]]:
    """n seeded random splices of small_file() and of a header without its checksum (the
    same kind of damage the hypothesis test draws, but fixed, for the C comparisons)."""
    rng = np.random.default_rng(11)
    for k in range(n):
        blob = bytearray(small_file() if k % 2 else header(leaves=[(0, [2], b"a")] * 2))
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(blob) + 1))
            cut = int(rng.integers(0, 4))
            blob[at : at + cut] = rng.bytes(int(rng.integers(0, 6)))
        yield f"splice{k}", bytes(blob)


def test_every_truncation_and_byte_change_is_one_data_error(tmp_path: Path) -> None:
    for label, blob in damaged():
        path = tmp_path / f"{label}.psk.d"
        path.write_bytes(blob)
        with pytest.raises(DataError) as info:
            fmt.read(path)
        one_line_naming(info.value.message, str(path))


CRAFTED = [
    (b"", "truncated header: the magic at byte 0 needs 4 bytes, 0 remain"),
    (sealed(header(magic=b"PK\3\4")), "not a .psk.d file (bad magic 504b0304)"),
    (sealed(header(version=2)), "unsupported format version 2 (this presk reads 1)"),
    (sealed(header(type_text=b"\xff")), "the type is not valid UTF-8"),
    (sealed(header(type_text=b"\xed\xa0\x80")), "the type is not valid UTF-8"),  # surrogate
    (sealed(header(type_text=b"\xc0\x80")), "the type is not valid UTF-8"),  # overlong NUL
    (sealed(header(type_text=b"\xf4\x90\x80\x80")), "the type is not valid UTF-8"),  # > U+10FFFF
    (sealed(header(type_text=b"a\0")), "the type contains a NUL byte"),
    (sealed(header(leaves=[(4, [2], b"")])), "leaf 0 has an unknown dtype code 4"),
    (sealed(header(leaves=[(0, [1] * 32, b"")])), "leaf 0 has rank 32, more than 31"),
    (sealed(header(leaves=[(0, [2**61], b"")])), "leaf 0 spans more than 2^63 bytes"),
    (sealed(header(count=2**63)), "the sample count 9223372036854775808 is 2^63 or more"),
    (sealed(header(leaves=[(0, [], b"x\x80")])), "leaf 0's path is not valid UTF-8"),
    (sealed(header(leaves=[(0, [], b"a"), (3, [], b"a")])), "two leaves have the path `a`"),
    (header(leaves=[(0, [], b"")] * 2)[:-1], "truncated header: the length of leaf 1's path"),
    (header(leaves=[(0, [], b"")] * 5)[:32], "leaf 0's rank at byte 31 needs 4 bytes, 1 remain"),
    (header() + b"\0" * 10, "the samples and the checksum need 24 bytes after the header, 10"),
    (sealed(header() + b"\0" * 16) + b"\0", "1 trailing bytes after the checksum"),
    (header() + b"\0" * 24, "checksum mismatch (stored 0000000000000000, computed "),
    (
        sealed(header(count=2**59, leaves=[(3, [], bytes([97 + k])) for k in range(5)])),
        "need more than 2^64 bytes",
    ),
    (sealed(header(count=2**59, leaves=[(3, [], b"")])), "need 4611686018427387912 bytes"),
    # Fine: zero samples of a huge leaf, and four billion samples of nothing.
    (sealed(header(count=0, leaves=[(3, [], b"i"), (0, [2**59], b"x")])), ""),
    (sealed(header(count=2**32, leaves=[(2, [0, 2**20], b"")])), ""),
]


@pytest.mark.parametrize("blob, message", CRAFTED)
def test_each_rule_has_its_message(tmp_path: Path, blob: bytes, message: str) -> None:
    path = tmp_path / "f.psk.d"
    path.write_bytes(blob)
    if not message:
        data = fmt.read(path)
        assert data.count * data.sample_bytes == 0
        return
    with pytest.raises(DataError) as info:
        fmt.read(path)
    one_line_naming(info.value.message, str(path))
    assert message in info.value.message


@st.composite
def mangled(draw: st.DrawFn) -> bytes:
    """small_file() with a few random splices: bytes replaced, inserted or removed."""
    blob = bytearray(small_file())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(blob)))
        cut = draw(st.integers(0, 3))
        blob[at : at + cut] = draw(st.binary(max_size=9))
    return bytes(blob)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(mangled(), st.binary(max_size=80).map(lambda b: header()[:12] + b)))
def test_arbitrary_bytes_give_a_file_or_one_data_error(blob: bytes) -> None:
    try:
        data = fmt.decode(blob, "fuzz.psk.d")
    except DataError as error:
        one_line_naming(error.message, "fuzz.psk.d")
    else:
        assert fmt.encode(data) == blob  # whatever reads writes back as it was


def test_unreadable_paths_are_data_errors(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.psk.d", tmp_path):
        with pytest.raises(DataError) as info:
            fmt.read(path)
        one_line_naming(info.value.message, str(path))
        assert "cannot read" in info.value.message


# --- atomic writes ---------------------------------------------------------------------------


@pytest.mark.parametrize("step", ["fsync", "replace", "interrupt"])
def test_failed_write_leaves_target_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    target = tmp_path / "t.psk.d"
    target.write_bytes(b"old content")
    real_fsync = os.fsync

    def failing(*args: Any) -> None:
        if step == "interrupt":
            raise KeyboardInterrupt
        raise OSError(28, "No space left on device")

    def checked_fsync(fd: int) -> None:
        # By fsync time the temporary is written in full, beside the target.
        temps = [p for p in tmp_path.iterdir() if p.name.startswith("t.psk.d.tmp-")]
        assert len(temps) == 1 and temps[0].stat().st_size == len(fmt.encode(sample_file()))
        failing()
        real_fsync(fd)

    if step == "replace":
        monkeypatch.setattr(os, "replace", failing)
    else:
        monkeypatch.setattr(os, "fsync", checked_fsync)
    expected: type[BaseException] = KeyboardInterrupt if step == "interrupt" else DataError
    with pytest.raises(expected) as info:
        fmt.write(target, sample_file())
    if isinstance(info.value, DataError):
        one_line_naming(info.value.message, str(target))
        assert "No space left on device" in info.value.message
    assert target.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.psk.d"]


def test_write_replaces_and_respects_umask(tmp_path: Path) -> None:
    target = tmp_path / "t.psk.d"
    target.write_bytes(b"old")
    old = os.umask(0o027)
    try:
        fmt.write(target, sample_file())
    finally:
        os.umask(old)
    same(fmt.read(target), sample_file())
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.psk.d"]


def test_write_into_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        fmt.write(tmp_path / "no" / "t.psk.d", sample_file())
    one_line_naming(info.value.message, str(tmp_path / "no" / "t.psk.d"))


# --- C ---------------------------------------------------------------------------------------

CDEF = """
typedef struct { uint8_t dtype; uint32_t rank; uint64_t *dims; char *path; } presk_leaf;
typedef struct { char *type; uint64_t count; uint32_t nleaves; presk_leaf *leaves;
                 void **data; } presk_data;
int presk_data_read(const char *path, presk_data *out, char *err, size_t errlen);
int presk_data_write(const char *path, const presk_data *in, char *err, size_t errlen);
void presk_data_free(presk_data *d);
size_t presk_dtype_size(uint8_t dtype);
"""
SOURCES = [str(RUNTIME / "presk_data.c"), str(RUNTIME / "presk_rng.c")]
WARNINGS = ["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Wconversion", "-Wshadow", "-Werror"]


class CData:
    """presk_data.c through cffi (ABI mode)."""

    def __init__(self, library: Path) -> None:
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF)
        self.lib: Any = self.ffi.dlopen(str(library))

    def read(self, path: Path) -> tuple[DataFile | None, str]:
        """The file as C reads it, or None and C's message."""
        ffi, lib = self.ffi, self.lib
        out = ffi.new("presk_data *")
        err = ffi.new("char[]", 512)
        if lib.presk_data_read(str(path).encode(), out, err, 512) != 0:
            assert out.type == ffi.NULL and out.leaves == ffi.NULL and out.nleaves == 0
            return None, ffi.string(err).decode()
        try:
            leaves, arrays = [], []
            for i in range(out.nleaves):
                leaf = out.leaves[i]
                dtype = fmt.DTYPES[leaf.dtype]
                shape = tuple(int(leaf.dims[a]) for a in range(leaf.rank))
                leaves.append(Leaf(ffi.string(leaf.path).decode(), dtype, shape))
                nbytes = out.count * leaves[-1].nbytes
                raw = bytes(ffi.buffer(out.data[i], nbytes)) if nbytes else b""
                array = np.frombuffer(raw, dtype=fmt.NUMPY_DTYPE[dtype]).copy()
                arrays.append(array.reshape((out.count, *shape)))
            return DataFile(ffi.string(out.type).decode(), out.count, leaves, arrays), ""
        finally:
            lib.presk_data_free(out)
            assert out.type == ffi.NULL and out.data == ffi.NULL

    def write(self, path: Path, data: DataFile) -> tuple[int, str]:
        ffi = self.ffi
        keep: list[Any] = []
        d = ffi.new("presk_data *")
        keep.append(type_text := ffi.new("char[]", data.type.encode()))
        d.type, d.count, d.nleaves = type_text, data.count, len(data.leaves)
        keep.append(leaves := ffi.new("presk_leaf[]", max(1, len(data.leaves))))
        keep.append(arrays := ffi.new("void *[]", max(1, len(data.leaves))))
        d.leaves, d.data = leaves, arrays
        for i, (leaf, array) in enumerate(zip(data.leaves, data.arrays, strict=True)):
            leaves[i].dtype = fmt.DTYPES.index(leaf.dtype)
            leaves[i].rank = len(leaf.shape)
            keep.append(dims := ffi.new("uint64_t[]", list(leaf.shape) or [0]))
            keep.append(name := ffi.new("char[]", leaf.path.encode()))
            leaves[i].dims, leaves[i].path = dims, name
            contiguous = np.ascontiguousarray(array)
            keep.append(contiguous)
            arrays[i] = ffi.from_buffer(contiguous) if contiguous.size else ffi.NULL
        err = ffi.new("char[]", 512)
        rc = self.lib.presk_data_write(str(path).encode(), d, err, 512)
        return rc, ffi.string(err).decode()


@pytest.fixture(scope="module")
def c_data(tmp_path_factory: pytest.TempPathFactory) -> CData:
    if CC is None:
        pytest.skip("no C compiler (cc, gcc, clang)")
    pytest.importorskip("cffi")
    library = tmp_path_factory.mktemp("c") / "libpresk_data.so"
    subprocess.run(
        [CC, "-shared", "-fPIC", "-O2", *WARNINGS, "-o", str(library), *SOURCES],
        check=True,
        capture_output=True,
    )
    return CData(library)


@needs_cc
@pytest.mark.parametrize("compiler", ["cc", "gcc", "clang"])
def test_c_compiles_without_warnings(tmp_path: Path, compiler: str) -> None:
    found = shutil.which(compiler)
    if found is None:
        pytest.skip(f"no {compiler}")
    for level in ("-O0", "-O2"):
        result = subprocess.run(
            [found, *WARNINGS, level, "-c", SOURCES[0], "-o", str(tmp_path / "d.o")],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0 and result.stderr == "", result.stderr


def test_c_reads_python_files(c_data: CData, tmp_path: Path) -> None:
    for count in (0, 1, 3, 17):
        data = sample_file(max(count, 1))
        if not count:
            data = DataFile(data.type, 0, data.leaves, [a[:0] for a in data.arrays])
        fmt.write(tmp_path / "p.psk.d", data)
        back, err = c_data.read(tmp_path / "p.psk.d")
        assert back is not None, err
        same(back, data)


def test_c_writes_the_same_bytes(c_data: CData, tmp_path: Path) -> None:
    for data in [
        sample_file(1),
        sample_file(9),
        DataFile("()", 4, [], []),
        fmt.decode(small_file(), "small"),
    ]:
        rc, err = c_data.write(tmp_path / "c.psk.d", data)
        assert rc == 0, err
        assert (tmp_path / "c.psk.d").read_bytes() == fmt.encode(data)
        same(fmt.read(tmp_path / "c.psk.d"), data)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["c.psk.d"]


def test_c_write_failures_leave_nothing(c_data: CData, tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "c.psk.d"
    rc, err = c_data.write(target, sample_file(1))
    assert rc != 0 and err.startswith(f"{target}: cannot write")
    dup = DataFile("t", 1, [Leaf("a", "f64", ()), Leaf("a", "f64", ())], [np.zeros(1)] * 2)
    rc, err = c_data.write(tmp_path / "d.psk.d", dup)
    assert rc != 0 and "two leaves have the path `a`" in err
    assert list(tmp_path.iterdir()) == []


def test_c_rejects_what_python_rejects_with_the_same_message(c_data: CData, tmp_path: Path) -> None:
    for label, blob in [*damaged(), *spliced()]:
        path = tmp_path / f"{label}.psk.d"
        path.write_bytes(blob)
        try:
            want: DataFile | None = fmt.read(path)
            message = ""
        except DataError as error:
            want, message = None, error.message
        back, err = c_data.read(path)
        assert err == message, label
        if want is not None:
            assert back is not None
            same(back, want)
        path.unlink()
    missing = tmp_path / "missing.psk.d"
    back, err = c_data.read(missing)
    assert back is None and err.startswith(f"{missing}: cannot read")


def test_c_and_python_agree_on_crafted_headers(c_data: CData, tmp_path: Path) -> None:
    for blob, _ in CRAFTED:
        path = tmp_path / "h.psk.d"
        path.write_bytes(blob)
        try:
            want: str | None = None
            fmt.read(path)
        except DataError as error:
            want = error.message
        back, err = c_data.read(path)
        assert (back is None) == (want is not None)
        if want is not None:
            assert err == want


SANITIZER_DRIVER = r"""
#include <stdio.h>
#include <string.h>
#include "presk_data.h"
/* Reads every file named; writes back each one that reads, and reads that again. */
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        presk_data d, e;
        char err[256], out[4096];
        if (presk_data_read(argv[i], &d, err, sizeof err) != 0) {
            printf("%s\n", err);
            continue;
        }
        snprintf(out, sizeof out, "%s.again", argv[i]);
        if (presk_data_write(out, &d, err, sizeof err) != 0 ||
            presk_data_read(out, &e, err, sizeof err) != 0) {
            printf("round trip failed: %s\n", err);
            return 1;
        }
        printf("ok %s\n", argv[i]);
        presk_data_free(&d);
        presk_data_free(&e);
        presk_data_free(&e);
    }
    return 0;
}
"""


@needs_cc
def test_c_is_clean_under_sanitizers(tmp_path: Path) -> None:
    assert CC is not None
    driver = tmp_path / "driver.c"
    driver.write_text(SANITIZER_DRIVER)
    exe = tmp_path / "driver"
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1"]
    built = subprocess.run(
        [CC, "-std=c11", *flags, f"-I{RUNTIME}", "-o", str(exe), str(driver), *SOURCES],
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        pytest.skip(f"no sanitizer runtime: {built.stderr.strip().splitlines()[-1:]}")
    files = tmp_path / "files"
    files.mkdir()
    fmt.write(files / "good.psk.d", sample_file(5))
    for label, blob in [*damaged(), *spliced(500)]:
        (files / f"{label}.psk.d").write_bytes(blob)
    names = sorted(str(p) for p in files.iterdir())
    readable = {str(files / "good.psk.d")}
    for name in names:
        try:
            fmt.read(name)
            readable.add(name)
        except DataError:
            pass
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1"}
    result = subprocess.run([str(exe), *names], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == ""
    oks = {line[3:] for line in result.stdout.splitlines() if line.startswith("ok ")}
    assert oks == readable


# --- the command -----------------------------------------------------------------------------


def pack(tmp_path: Path, text: str, type_text: str, *extra: str) -> tuple[int, str, str]:
    (tmp_path / "in.txt").write_text(text)
    out = tmp_path / "out.psk.d"
    return run_presk(
        "data", "pack", "--type", type_text, str(tmp_path / "in.txt"), "-o", str(out), *extra
    )


def test_pack_and_info(tmp_path: Path) -> None:
    text = "# four reals, then an index\n1 2 3 4 5\n\n  -1e-3 5 6 7 0\n"
    code, out, err = pack(tmp_path, text, "(Real[batch: 2, 2], idx[8][])")
    assert (code, err) == (0, "")
    assert out.startswith(f"presk data: wrote {tmp_path / 'out.psk.d'}: 2 samples")
    data = fmt.read(tmp_path / "out.psk.d")
    assert data.type == "(ℝ[batch: 2, 2], idx[8][])"
    assert data.arrays[0].tolist() == [[[1, 2], [3, 4]], [[-1e-3, 5], [6, 7]]]
    assert data.arrays[1].tolist() == [5, 0]
    code, out, err = run_presk("data", "info", str(tmp_path / "out.psk.d"), "--samples", "1")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"file     {tmp_path / 'out.psk.d'}",
        "version  1",
        "type     (ℝ[batch: 2, 2], idx[8][])",
        "count    2",
        "sample   40 bytes",
        "leaves   2",
        "  0  f64   [2, 2]",
        "  1  i64   []",
        "sample 0",
        "  0 = [batch: 2, 2] [[1, 2], [3, 4]]",
        "  1 = 5",
        "... 1 more samples",
    ]


def test_pack_errors_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    cases = [
        ("1 2 3\n1 2\n", "ℝ[3]", f"{path}:2: expected 3 numbers, found 2"),
        ("1 2 x\n", "ℝ[3]", f"{path}:1: leaf `(root)`: `x` is not a real number"),
        ("1_0\n", "ℝ", f"{path}:1: leaf `(root)`: `1_0` is not a real number"),
        ("8\n", "idx[8][]", f"{path}:1: leaf `(root)`: 8 is out of range for idx[8]"),
        ("1.5\n", "idx[8][]", f"{path}:1: leaf `(root)`: `1.5` is not an integer"),
        ("yes\n", "bool[]", f"{path}:1: leaf `(root)`: `yes` is not a boolean (true, false, 1, 0)"),
    ]
    for text, type_text, message in cases:
        code, out, err = pack(tmp_path, text, type_text)
        assert (code, out, err) == (1, "", f"presk data: {message}\n")
        assert not (tmp_path / "out.psk.d").exists()
    code, out, err = run_presk("data", "pack", "--type", "ℝ", str(tmp_path / "nope"), "-o", "x")
    assert code == 1 and err.startswith(f"presk data: {tmp_path / 'nope'}: cannot read")


@pytest.mark.parametrize(
    "args",
    [
        ["data"],
        ["data", "pack", "x.txt", "-o", "y"],
        ["data", "pack", "--type", "ℝ[n]", "x.txt", "-o", "y"],
        ["data", "pack", "--type", "params M", "x.txt", "-o", "y"],
        ["data", "pack", "--type", "ℝ", "x.txt", "-o", "y", "--real", "f16"],
        ["data", "info", "x", "--samples", "-1"],
        ["data", "diff", "a"],
        ["data", "frob"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    code, out, err = run_presk(*args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("presk data")


def test_info_and_diff_refuse_damaged_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.psk.d"
    bad.write_bytes(small_file()[:-1])
    good = tmp_path / "good.psk.d"
    good.write_bytes(small_file())
    for args in (["info", str(bad)], ["diff", str(good), str(bad)], ["info", str(tmp_path)]):
        code, out, err = run_presk("data", *args)
        assert code == 1 and out == "" and err.count("\n") == 1
        assert err.startswith("presk data: ")


def test_diff(tmp_path: Path) -> None:
    a = DataFile(
        "(ℝ[2], idx[4][])",
        2,
        [Leaf("0", "f64", (2,)), Leaf("1", "i64", ())],
        [np.array([[3.0, 0.0], [0.0, 4.0]]), np.array([1, 2], np.int64)],
    )
    b = DataFile(a.type, 2, [Leaf("0", "f32", (2,)), a.leaves[1]], [
        np.array([[3.0, 0.0], [0.0, 4.5]], np.float32), np.array([1, 3], np.int64)
    ])  # fmt: skip
    fmt.write(tmp_path / "a.psk.d", a)
    fmt.write(tmp_path / "b.psk.d", b)
    code, out, err = run_presk("data", "diff", str(tmp_path / "a.psk.d"), str(tmp_path / "b.psk.d"))
    assert (code, err) == (0, "")
    assert out == (
        "presk data: ‖a − b‖₂ = 0.5, ‖a‖₂ = 5, relative 0.1 over 4 reals; 1 of 2 integers differ\n"
    )
    c = DataFile(a.type, 1, a.leaves, [x[:1] for x in a.arrays])
    fmt.write(tmp_path / "c.psk.d", c)
    code, out, err = run_presk("data", "diff", str(tmp_path / "a.psk.d"), str(tmp_path / "c.psk.d"))
    assert code == 1 and out == ""
    assert err == (
        f"presk data: {tmp_path / 'a.psk.d'} and {tmp_path / 'c.psk.d'} differ in count: "
        "2 and 1 samples\n"
    )


def test_info_abbreviates_large_tensors(tmp_path: Path) -> None:
    data = fmt.from_values("ℝ[seq: 20]", [Tensor.real([Axis("seq", 20)], list(range(20)))], "f32")
    fmt.write(tmp_path / "l.psk.d", data)
    code, out, _ = run_presk("data", "info", str(tmp_path / "l.psk.d"))
    assert code == 0
    assert "sample 0 = [seq: 20] [0, 1, 2, 3, 4, 5, 6, 7, ...]" in out.splitlines()


# --- the tutorial's data ---------------------------------------------------------------------


def test_tutorial_pairs(tmp_path: Path) -> None:
    text = (REPO_ROOT / "tutorial" / "data" / "pairs.txt").read_text()
    rows = [[float(t) for t in line.split()] for line in text.splitlines()]
    assert len(rows) == 128 and all(len(r) == 8 for r in rows)
    for r in rows:
        assert r[4:] == [2.0 * x + 1.0 for x in r[:4]]
        assert all(-1.0 <= x < 1.0 for x in r[:4])
    data = fmt.read(REPO_ROOT / "tutorial" / "data" / "pairs.psk.d")
    assert data.type == "(ℝ[model: 4], ℝ[model: 4])" and data.count == 128
    assert data.arrays[0].tolist() == [r[:4] for r in rows]
    assert data.arrays[1].tolist() == [r[4:] for r in rows]
    # Packing the text again gives the committed bytes.
    code, _, err = run_presk(
        "data", "pack", "--type", data.type, "tutorial/data/pairs.txt", "-o", str(tmp_path / "p")
    )
    assert (code, err) == (0, "")
    assert (tmp_path / "p").read_bytes() == (
        REPO_ROOT / "tutorial" / "data" / "pairs.psk.d"
    ).read_bytes()


# -- valid containers with bad contents --------------------------------------------------


def test_index_out_of_range_for_its_bound_is_one_error(tmp_path: Path) -> None:
    good = fmt.from_values("idx[10][seq: 3]", [Tensor.idx([Axis("seq", 3)], [1, 2, 3], 10)])
    for bad in (10, -1, 2**62):
        arrays = [np.array([[1, bad, 3]], dtype=np.int64)]
        path = tmp_path / "bad.psk.d"
        fmt.write(path, DataFile(good.type, 1, good.leaves, arrays))
        data = fmt.read(path)  # the container itself is valid
        with pytest.raises(fmt.BadContents) as info:
            fmt.to_values(data, 0)
        message = str(info.value)
        assert f"index {bad} is out of range for idx[10]" in message and "\n" not in message
        assert isinstance(info.value, DataError) and isinstance(info.value, ValueError)


def test_leaves_that_do_not_fit_the_type_are_bad_contents() -> None:
    data = fmt.from_values("ℝ[3]", [Tensor.real([Axis(None, 3)], [1, 2, 3])])
    with pytest.raises(fmt.BadContents):
        fmt.to_values(data, 0, fmt.parse_sample_type("ℝ[4]"))


@pytest.mark.parametrize("text", ["ℝ[2]\n[E0001] Error: forged", "ℝ[\x1b[31m2]", "ℝ\x00[2]", "\r"])
def test_type_text_in_messages_is_escaped(text: str) -> None:
    with pytest.raises(fmt.TypeTextError) as info:
        fmt.parse_sample_type(text)
    message = str(info.value)
    assert all(ch.isprintable() for ch in message), message


def test_leaf_paths_in_messages_are_escaped() -> None:
    leaf = Leaf("w\nx", "f64", (2,))
    assert leaf.describe() == "w\\nx f64 [2]"
    data = DataFile("ℝ[2]", 1, [leaf], [np.zeros((1, 2))])
    with pytest.raises(fmt.BadContents) as info:
        fmt.to_values(data, 0)
    assert "\n" not in str(info.value)


def test_run_with_bad_contents_is_one_line(tmp_path: Path) -> None:
    # A sample of `idx[10][seq: 3]` holding 12, given to an entry that takes one.
    program = tmp_path / "p.psk"
    program.write_text("fn first(x : idx[10][seq: 3]) -> idx[10][seq: 3] = x\n")
    good = fmt.from_values("idx[10][seq: 3]", [Tensor.idx([Axis("seq", 3)], [1, 2, 3], 10)])
    bad = tmp_path / "bad.psk.d"
    fmt.write(bad, DataFile(good.type, 1, good.leaves, [np.array([[12, 0, 0]], dtype=np.int64)]))
    empty = tmp_path / "empty.psk.d"
    fmt.write(empty, DataFile(good.type, 0, good.leaves, [np.zeros((0, 3), dtype=np.int64)]))
    for path, message in ((bad, "out of range for idx[10]"), (empty, "no samples")):
        code, _, err = run_presk("run", str(program), "--entry", "first", "--data", str(path))
        assert code != 0 and message in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
