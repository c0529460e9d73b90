"""The build cache on disk: where it is, what a valid entry is, and how a bad one is replaced.

Layout: `<root>/<key[:2]>/<key>/` holds `unit.c` (the exact C text), `unit.so` and
`.lock`; `<root>/identity/` holds the compiler identities (see `compile.py`).

Invariants:
- An entry is a hit only if its directories are real directories, `unit.c` is a regular
  file holding exactly the requested text, and `unit.so` is a regular file that looks
  loadable: an ELF (Mach-O on macOS) shared object whose headers and loaded segments lie
  within the file, carrying the marker `presk-build-key:<key>` that the build compiles
  into every object. So an empty, truncated or garbage object, or another entry's object
  copied into this one, is a miss, never handed to `dlopen`.
- A miss is healed under the entry's lock: whatever sits at one of presk's names in the
  entry (a file, a symbolic link, which is unlinked and never followed, or a directory) is
  removed, and the unit is built again. Only those names, inside the root, are ever
  removed: the root itself, and anything not named by the layout, are never touched.
- A root is presk's before anything in it is removed: it is made by presk, marked
  `.presk-cache`, or holds only the layout's names. A directory of other files (a
  `PRESK_CACHE` pointing at someone's work) is a root that cannot be used.
- A root that cannot be used (a file, a path under a file, a directory where writes fail)
  is replaced for the rest of the process by a private temporary root, with a one-line
  warning on stderr; the temporary root is removed at exit. If that fails too, the build
  raises a `CacheError` with a one-line message.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import mmap
import os
import shutil
import stat
import struct
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from presk.build.errors import BuildError, CacheError
from presk.diagnostics import printable

SOURCE_NAME = "unit.c"
OBJECT_NAME = "unit.so"
LOCK_NAME = ".lock"
WORK_PREFIX = ".build-"
IDENTITY_DIR = "identity"
ROOT_MARKER = ".presk-cache"  # a root of presk's (see `claim`)
# Compiled into every object (see `marker_source`), so an object names the entry it is for.
MARKER = b"presk-build-key:"

# What identifies one file on disk: a replaced file (os.replace) gets a new inode, and an
# in-place rewrite a new size or modification time.
FileId = tuple[int, int, int, int]

# O_NONBLOCK: a FIFO where a file should be must not block the open.
OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
_OPEN_FLAGS = OPEN_FLAGS | os.O_NOFOLLOW


def cache_dir() -> Path:
    """The cache root: `$PRESK_CACHE`, else `$XDG_CACHE_HOME/presk`, else `~/.cache/presk`."""
    explicit = os.environ.get("PRESK_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec says a relative value is invalid and must be ignored.
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "presk"
    return Path.home() / ".cache" / "presk"


# Configured root (as a string) -> the private root that replaced it in this process.
_fallbacks: dict[str, Path] = {}
_fallback_lock = threading.Lock()


def _configured() -> tuple[str, Path | None]:
    """The configured root as messages print it (one line), and as a path if there is one."""
    try:
        path = cache_dir()
    except RuntimeError:  # Path.home() without $HOME or a password entry
        return "~/.cache/presk", None
    return printable(str(path)), path


def root() -> Path:
    """The root builds use now: the configured one, or the temporary one that replaced it."""
    name, path = _configured()
    found = _fallbacks.get(name)
    if found is not None:
        return found
    if path is None:
        return fall_back(OSError(errno.ENOENT, "no home directory"))
    if name not in _claimed:
        try:
            claim(path)
        except OSError as error:
            return fall_back(error)
        _claimed.add(name)
    return path


# The roots this process has found to be presk's (or made so).
_claimed: set[str] = set()


def claim(path: Path) -> None:
    """Make `path` a root of presk's, or raise OSError: a missing or empty directory is
    made one, marked with ROOT_MARKER; a marked one is one; so is one holding only the
    layout's names (a cache written before the marker). A directory holding anything else
    is someone's (`PRESK_CACHE=~/work`): healing an entry removes what sits at presk's
    names, and there they would be that someone's files."""
    path.mkdir(parents=True, exist_ok=True)
    if (path / ROOT_MARKER).is_file():
        return
    for child in path.iterdir():
        layout = child.name == IDENTITY_DIR or (
            len(child.name) == 2 and all(c in "0123456789abcdef" for c in child.name)
        )
        if not (layout and _is_dir(child)):
            raise OSError(errno.EEXIST, "it holds files presk did not write", str(path))
    # A read-only cache of presk's still serves its hits: the marker is only a courtesy.
    with contextlib.suppress(OSError):
        (path / ROOT_MARKER).write_text("presk's build cache: presk may remove what is here\n")


def fall_back(error: OSError) -> Path:
    """Replace the configured root by a private temporary one, warning once, and return it.

    Raises `CacheError` if the root already is the temporary one, or none can be made.
    """
    name, _ = _configured()
    with _fallback_lock:
        if name in _fallbacks:
            raise CacheError(
                "cannot use the temporary build cache "
                + printable(f"{_fallbacks[name]}: {reason(error)}")
            )
        try:
            temp = Path(tempfile.mkdtemp(prefix="presk-cache-"))
        except OSError as again:
            raise CacheError(
                f"cannot use the build cache {name} ({reason(error)}) "
                f"nor a temporary one ({reason(again)})"
            ) from None
        atexit.register(shutil.rmtree, temp, ignore_errors=True)
        sys.stderr.write(
            f"presk: warning: cannot use the build cache {name} ({reason(error)}); "
            "using a temporary one for this run\n"
        )
        _fallbacks[name] = temp
        return temp


def reason(error: OSError) -> str:
    """An OSError in a few words, on one line: `Not a directory: /x/y`."""
    text = error.strerror or str(error) or type(error).__name__
    if error.filename is not None:
        text += f": {os.fsdecode(error.filename)}"
    return printable(text)


def file_id(info: os.stat_result) -> FileId:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def key_of(so_path: Path) -> str | None:
    """The key of an object at `<root>/<key[:2]>/<key>/unit.so`, else None."""
    key = so_path.parent.name
    if (
        so_path.name == OBJECT_NAME
        and len(key) == 64
        and all(c in "0123456789abcdef" for c in key)
        and so_path.parent.parent.name == key[:2]
    ):
        return key
    return None


def marker_source(key: str) -> str:
    """A C translation unit holding the marker of `key`, compiled into the entry's object."""
    return (
        "/* Written by presk: the cache entry this object was built for. */\n"
        "#if defined(__GNUC__)\n__attribute__((used)) static\n#endif\n"
        f'const char presk_build_key_marker[] = "{MARKER.decode()}{key}";\n'
    )


def object_problem(fd: int, key: str | None, reject: FileId | None = None) -> str | None:
    """Why the open file `fd` is not a loadable object for `key` (None: it looks fine).

    `reject` is the identity of a file the loader already refused after opening it.
    """
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if reject is not None and file_id(info) == reject:
        return "refused by the loader"
    if info.st_size == 0:
        return "empty"
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
        problem = _format_problem(data)
        if problem is None and key is not None and data.find(MARKER + key.encode()) < 0:
            problem = "built for another key"
        return problem


def path_problem(path: Path, key: str | None, reject: FileId | None = None) -> str | None:
    """`object_problem` of the file at `path`, a symbolic link being a problem too."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        return "a symbolic link" if error.errno == errno.ELOOP else reason(error)
    try:
        return object_problem(fd, key, reject)
    finally:
        os.close(fd)


_MACHO_MAGICS = {b"\xcf\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xce"}


def _format_problem(data: mmap.mmap) -> str | None:
    size = len(data)
    if sys.platform == "darwin":
        return None if data[:4] in _MACHO_MAGICS else "not a Mach-O object"
    if size < 52 or data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return "not an ELF object"
    wide = data[4] == 2
    order = "<" if data[5] == 1 else ">"
    # e_type, then e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize, e_shnum.
    if wide:
        if size < 64:
            return "truncated"
        (e_type,) = struct.unpack_from(order + "H", data, 16)
        phoff, shoff = struct.unpack_from(order + "QQ", data, 32)
        phent, phnum, shent, shnum = struct.unpack_from(order + "HHHH", data, 54)
    else:
        (e_type,) = struct.unpack_from(order + "H", data, 16)
        phoff, shoff = struct.unpack_from(order + "II", data, 28)
        phent, phnum, shent, shnum = struct.unpack_from(order + "HHHH", data, 42)
    if e_type != 3:  # ET_DYN
        return "not a shared object"
    if phnum == 0 or phoff + phnum * phent > size or shoff + shnum * shent > size:
        return "truncated"
    # A loaded segment past the end would map beyond the file: SIGBUS on first touch.
    for i in range(phnum):
        at = phoff + i * phent
        if wide:
            (p_type,) = struct.unpack_from(order + "I", data, at)
            (p_offset,) = struct.unpack_from(order + "Q", data, at + 8)
            (p_filesz,) = struct.unpack_from(order + "Q", data, at + 32)
        else:
            p_type, p_offset = struct.unpack_from(order + "II", data, at)
            (p_filesz,) = struct.unpack_from(order + "I", data, at + 16)
        if p_type == 1 and p_offset + p_filesz > size:  # PT_LOAD
            return "truncated"
    return None


def _is_dir(path: Path) -> bool:
    return stat.S_ISDIR(os.lstat(path).st_mode)


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at `path`; OSError for anything else."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file", str(path))
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def is_hit(entry: Path, key: str, c_text: str, reject: FileId | None = None) -> bool:
    """Whether `entry` holds a complete, valid build of `c_text` (read only, no lock)."""
    # unit.c is written last, so a matching unit.c means unit.so was complete; a different
    # text (collision, corruption, a torn write) is a miss and forces a rebuild.
    try:
        if not (_is_dir(entry.parent) and _is_dir(entry)):
            return False
        if read_regular(entry / SOURCE_NAME) != c_text.encode("utf-8", "surrogatepass"):
            return False
    except OSError:
        return False
    return path_problem(entry / OBJECT_NAME, key, reject) is None


def remove(path: Path) -> None:
    """Remove whatever is at `path`, one of presk's names: a link itself, never its target."""
    try:
        if _is_dir(path):
            shutil.rmtree(path)  # unlinks symbolic links inside, never follows them
        else:
            path.unlink()
    except FileNotFoundError:
        pass  # someone else removed it first


def own_dir(path: Path) -> None:
    """Make `path` a real directory, removing a file or symbolic link in its place."""
    for _ in range(3):
        with contextlib.suppress(FileNotFoundError):
            if _is_dir(path):
                return
            remove(path)
        try:
            path.mkdir()
            return
        except FileExistsError:
            continue  # a concurrent builder made it; look again
    raise FileExistsError(errno.EEXIST, "cannot make a directory", str(path))


def clear_entry(entry: Path) -> None:
    """Remove an invalid entry's files, `unit.c` first (called with the entry's lock held)."""
    remove(entry / SOURCE_NAME)  # first: without it the entry is a miss for everyone
    remove(entry / OBJECT_NAME)
    # Under the lock no one else is building here: a work directory is a leftover of a
    # builder that was killed mid-compile.
    for stale in entry.glob(WORK_PREFIX + "*"):
        remove(stale)


def discard(entry: Path) -> None:
    """Remove every trace of a failed build of `entry` (called with its lock held)."""
    for name in (SOURCE_NAME, OBJECT_NAME, LOCK_NAME):
        with contextlib.suppress(OSError):
            remove(entry / name)
    # Not empty only if someone else is mid-build there, which the lock rules out; the
    # shared prefix directory stays if other keys live in it.
    for d in (entry, entry.parent):
        with contextlib.suppress(OSError):
            d.rmdir()


def _open_lock(lock_path: Path) -> int | None:
    """An fd on the regular file `lock_path`, or None after removing something else there."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(lock_path, flags, 0o644)
    except OSError:
        # A symbolic link, a directory, a socket where the lock should be: remove it. If a
        # regular file is there (or nothing), the error is the cache's: let it rise.
        if stat.S_ISREG(os.lstat(lock_path).st_mode):
            raise
        remove(lock_path)
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        remove(lock_path)
        return None
    return fd


@contextlib.contextmanager
def locked(root_dir: Path, entry: Path) -> Iterator[None]:
    """Create `entry` and hold an exclusive flock on `entry/.lock` for the duration."""
    lock_path = entry / LOCK_NAME
    for _ in range(1000):
        try:
            root_dir.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # a file, or a dangling link, where the root should be
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(root_dir)) from None
        try:
            own_dir(entry.parent)
            own_dir(entry)
            fd = _open_lock(lock_path)
        except FileNotFoundError:
            continue  # a failed builder removed the directory between mkdir and open
        if fd is None:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # A failed builder unlinks the lock file before removing the entry; if ours
            # is no longer the file at that path, whoever waits on it must start over.
            try:
                same = os.path.samestat(os.fstat(fd), os.lstat(lock_path))
            except FileNotFoundError:
                same = False
            if not same:
                continue
            yield
            return
        finally:
            os.close(fd)  # closing releases the flock
    raise BuildError(f"could not lock cache entry {entry}")
