"""Open a built shared object through cffi (ABI mode) and pass numpy arrays to it.

Takes the path of a `unit.so` from `presk.build.compile.build` and the C declarations
of the functions to call (a cffi `cdef`), and produces a `Library` whose `lib`
attribute exposes those functions.

Invariants:
- A (resolved path, cdef) pair is opened once per process; later `load` calls return the
  same `Library`. The dynamic linker also keys loaded objects by path, so a `unit.so`
  rebuilt in place after being loaded is not reloaded by this process; cache entries
  are content-addressed, so a path only ever names one unit's code.
- `pointer` hands C a view of a numpy array's own memory, no copy: the array must be
  C-contiguous and of exactly the dtype matching the C type (`double` float64,
  `float` float32, `uint16_t` uint16, `int64_t` int64, native byte order). Anything
  else is a TypeError rather than a silent conversion, since C would then read or
  write a copy, or misread the bytes. An array C is to write (`writable=True`) must be
  writeable.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cffi
import numpy as np
import numpy.typing as npt

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


_loaded: dict[tuple[str, str], Library] = {}
# Two threads loading the same library must not both dlopen it and race on the dict.
_loaded_lock = threading.Lock()


def load(so_path: Path, cdef: str) -> Library:
    """Open `so_path` with the declarations `cdef`, once per process per (path, cdef)."""
    path = Path(so_path).resolve()
    key = (str(path), cdef)
    with _loaded_lock:
        found = _loaded.get(key)
        if found is None:
            ffi = cffi.FFI()
            ffi.cdef(cdef)
            # ABI mode: no C compiler at load time; the cdef must match the unit exactly.
            found = Library(ffi=ffi, lib=ffi.dlopen(str(path)), path=path)
            _loaded[key] = found
        return found


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
