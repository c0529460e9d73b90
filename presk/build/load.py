"""Open a built shared object through cffi (ABI mode) and pass numpy arrays to it.

Takes the path of a `unit.so` from `presk.build.compile.build` and the C declarations
of the functions to call (a cffi `cdef`), and produces a `Library` whose `lib`
attribute exposes those functions.

Invariants:
- A file is checked before `dlopen` sees it (`cache.object_problem`: a regular file, an
  ELF shared object within its size, built for its entry's key), and after: every symbol
  the caller expects (by default every name `cdef` declares) resolves. An object that
  fails either, or that `dlopen` refuses, is rebuilt through `compile.rebuild` and the
  rebuilt one loaded; only one that cannot be rebuilt is a `LoadError`.
- A (resolved path, cdef) pair is opened once per file: later `load` calls return the
  same `Library` while the file at that path is the one that was opened. The dynamic
  linker keys loaded objects by path, so once a path has been opened in this process, a
  different file there (rebuilt, replaced) is opened through a fresh copy under a new
  name, removed right after: otherwise `dlopen` would hand back the old object.
- `pointer` hands C a view of a numpy array's own memory, no copy: the array must be
  C-contiguous and of exactly the dtype matching the C type (`double` float64,
  `float` float32, `uint16_t` uint16, `int64_t` int64, native byte order). Anything
  else is a TypeError rather than a silent conversion, since C would then read or
  write a copy, or misread the bytes. An array C is to write (`writable=True`) must be
  writeable.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cffi
import numpy as np
import numpy.typing as npt

from presk.build import cache, compile
from presk.build.errors import LoadError
from presk.diagnostics import printable

__all__ = ["DTYPES", "Library", "LoadError", "load", "pointer"]

# The C element types buffers may have, with the one numpy dtype each may come from.
DTYPES: dict[str, np.dtype[Any]] = {
    "double": np.dtype(np.float64),
    "float": np.dtype(np.float32),
    "uint16_t": np.dtype(np.uint16),
    "int64_t": np.dtype(np.int64),
}


@dataclass(frozen=True)
class Library:
    """A loaded shared object: its cffi `FFI` (declarations) and `lib` (the functions)."""

    ffi: Any
    lib: Any
    path: Path


@dataclass(frozen=True)
class _Opened:
    library: Library
    file: cache.FileId


_loaded: dict[tuple[str, str], _Opened] = {}
# Path -> the file dlopen opened under that name first: what it will hand back for it.
_linked: dict[str, cache.FileId] = {}
# Two threads loading the same library must not both dlopen it and race on the dicts.
_loaded_lock = threading.Lock()


class _Refused(Exception):
    """The file at a path is not a loadable object (`file` is None if it cannot be opened)."""

    def __init__(self, reason: str, file: cache.FileId | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.file = file


def load(so_path: Path, cdef: str, *, symbols: Sequence[str] | None = None) -> Library:
    """Open `so_path` with the declarations `cdef`, once per process per (path, cdef).

    `symbols` are the names that must resolve (default: every name `cdef` declares). A
    bad object that `build` returned in this process is rebuilt and the new one opened.
    """
    path = Path(os.path.realpath(so_path))
    with _loaded_lock:
        try:
            return _open(path, cdef, symbols)
        except _Refused as first:
            refused = first
        rebuilt = compile.rebuild(path, refused.file)
        if rebuilt is None:
            raise LoadError(printable(f"cannot load {path}: {refused.reason}"))
        try:
            return _open(Path(os.path.realpath(rebuilt)), cdef, symbols)
        except _Refused as again:
            message = f"cannot load {rebuilt}: {again.reason} (after a rebuild)"
            raise LoadError(printable(message)) from None


def _open(path: Path, cdef: str, symbols: Sequence[str] | None) -> Library:
    try:
        fd = os.open(path, cache.OPEN_FLAGS)
    except OSError as error:
        raise _Refused(cache.reason(error), None) from None
    try:
        file = cache.file_id(os.fstat(fd))
        found = _loaded.get((str(path), cdef))
        if found is not None and found.file == file:
            return found.library
        problem = cache.object_problem(fd, cache.key_of(path))
        if problem is not None:
            raise _Refused(problem, file)
        ffi = cffi.FFI()
        ffi.cdef(cdef)
        with _linkable(path, fd, file) as name:
            try:
                # ABI mode: no C compiler at load time; the cdef must match the unit exactly.
                lib = ffi.dlopen(name)
            except OSError as error:
                raise _Refused(_first_line(error), file) from None
            _linked.setdefault(str(path), file)
    finally:
        os.close(fd)
    # Resolve now what the caller will call, so a missing one is found here, not mid-run.
    for symbol in dir(lib) if symbols is None else symbols:
        try:
            getattr(lib, symbol)
        except AttributeError:
            raise _Refused(f"no symbol {symbol}", file) from None
    library = Library(ffi=ffi, lib=lib, path=path)
    _loaded[(str(path), cdef)] = _Opened(library, file)
    return library


@contextlib.contextmanager
def _linkable(path: Path, fd: int, file: cache.FileId) -> Iterator[str]:
    """A name under which dlopen opens the file `fd` itself, not an older one."""
    if _linked.get(str(path), file) == file:
        yield str(path)
        return
    # Beside the original first: its file system is one we may execute from.
    for where in (path.parent, None):
        try:
            copy_dir = Path(tempfile.mkdtemp(prefix=".load-", dir=where))
        except OSError:
            continue
        try:
            copy = copy_dir / path.name
            try:
                with open(copy, "wb") as out, os.fdopen(os.dup(fd), "rb") as src:
                    src.seek(0)
                    shutil.copyfileobj(src, out)
            except OSError:
                continue
            yield str(copy)  # removed once opened: the mapping outlives the name
            return
        finally:
            shutil.rmtree(copy_dir, ignore_errors=True)
    raise _Refused("no directory for a fresh copy of a replaced object", file)


def _first_line(error: OSError) -> str:
    # cffi appends a paragraph about ctypes.util.find_library, which never applies here.
    lines = str(error).split(".  Additionally,")[0].strip().splitlines()
    return lines[0] if lines else "dlopen failed"


def pointer(ffi: Any, array: npt.NDArray[Any], ctype: str, *, writable: bool = False) -> Any:
    """A `ctype *` argument viewing `array`'s memory, keeping `array` alive while it is held."""
    expected = DTYPES.get(ctype)
    if expected is None:
        raise ValueError(f"unsupported C element type {ctype!r}; expected one of {sorted(DTYPES)}")
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected a numpy array for {ctype} *, got {type(array).__name__}")
    if array.dtype != expected:
        raise TypeError(f"{ctype} * needs dtype {expected}, got {array.dtype}")
    if not array.flags.c_contiguous:
        raise TypeError(f"{ctype} * needs a C-contiguous array (use np.ascontiguousarray)")
    if writable and not array.flags.writeable:
        raise TypeError(f"{ctype} * is written by C but the array is read-only")
    # A typed from_buffer, not ffi.cast(ctype + " *", ffi.from_buffer(array)): a cast
    # pointer holds no reference to the buffer, so the array could be freed while C reads
    # it. A `ctype[]` cdata owns the reference and converts to `ctype *` in calls.
    # `require_writable` re-checks writability at the buffer level (a writeable view of a
    # read-only base, say).
    return ffi.from_buffer(ctype + "[]", array, require_writable=writable)
