"""Compile one C translation unit into a shared object, cached by content hash.

Takes the full text of one C translation unit (the caller pastes the runtime and
libm into it; it includes only standard headers) and produces the path of a
shared object built from it with `$PRESK_CC` (else `cc`) and `FLAGS`.

The key is a SHA-256 over the compiler's identity (its version line and what
`-march=native` resolves to on this machine), the flags, the presk version and the C
text. The entry's layout, what makes it a hit and how a bad one heals are in `cache.py`.

Invariants:
- Both files of an entry are written by `os.replace` from a private temporary directory
  inside the entry, `unit.so` first and `unit.c` last, so a half-written entry (a
  crash, a concurrent build) is never taken as a hit, and a process that already
  mapped an older `unit.so` keeps its (unlinked) inode.
- Each object is linked with a second, tiny translation unit holding its key
  (`cache.marker_source`), so an object copied into another entry is told apart.
- Builds of one key are serialised by `fcntl.flock` on `<entry>/.lock`; the cache is
  re-checked under the lock, so concurrent builders compile once and all succeed.
- A failed build leaves nothing for its key: no `unit.so`, no `unit.c`, no
  temporaries, and the entry directory is removed.
- A cache that cannot be written is replaced by a private temporary one (`cache.py`);
  every cache problem is an `OSError` handled here or a one-line `CacheError`.
- `build` remembers, for the process, what each object it returned was built from, so
  that `load` can have one rebuilt that the dynamic linker refused (`rebuild`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import presk
from presk.build import cache
from presk.build.cache import LOCK_NAME, OBJECT_NAME, SOURCE_NAME, cache_dir
from presk.build.errors import BuildError, CacheError
from presk.diagnostics import printable

__all__ = [
    "FLAGS",
    "LOCK_NAME",
    "OBJECT_NAME",
    "SOURCE_NAME",
    "BuildError",
    "CacheError",
    "build",
    "cache_dir",
    "cache_key",
    "compiler",
    "compiler_identity",
    "entry_dir",
    "flags",
    "rebuild",
]

# One tuple so the cache key and the command line can never disagree. The FP flags pin
# IEEE semantics: no FMA contraction, no reassociation, so bits match the reference's
# one-rounding-per-operation contract whatever the target ISA.
FLAGS = (
    "-std=c11",
    "-O2",
    "-march=native",
    "-ffp-contract=off",
    "-fno-fast-math",
    "-fPIC",
    "-shared",
)
OPENMP_FLAG = "-fopenmp"
MARCH_NATIVE_FLAG = "-march=native"

# Enough for the first screenful of errors; a generated unit can produce megabytes.
_STDERR_LIMIT = 8000
# Bumped if the layout or key derivation changes, so old entries are never misread.
_KEY_SCHEMA = "presk-build-v1"
# Messages and `--help=target` listings in one language, so parsing and tests are stable.
_ENV_OVERRIDES = {"LC_ALL": "C", "LANG": "C"}
# What _ask_identity writes: one line, the version then what -march=native resolved to.
_IDENTITY_SHAPE = re.compile(r"[^\n]* \| march=[^\n]*")


def compiler() -> str:
    """The compiler command: `$PRESK_CC` if set and non-empty, else `cc`."""
    return os.environ.get("PRESK_CC") or "cc"


def flags(*, openmp: bool = False, march_native: bool = True) -> tuple[str, ...]:
    """The compiler flags for a build: `FLAGS`, less `-march=native` if asked, plus `-fopenmp`."""
    out = tuple(f for f in FLAGS if march_native or f != MARCH_NATIVE_FLAG)
    return (*out, OPENMP_FLAG) if openmp else out


def _argv(cc: str) -> list[str]:
    # `$PRESK_CC` may carry a launcher or options ("ccache cc"), as `$CC` does for make.
    argv = shlex.split(cc)
    if not argv:
        raise BuildError("empty compiler command", [cc])
    return argv


def _env() -> dict[str, str]:
    return {**os.environ, **_ENV_OVERRIDES}


def _trim(text: str) -> str:
    if len(text) <= _STDERR_LIMIT:
        return text
    return text[:_STDERR_LIMIT] + f"\n… ({len(text) - _STDERR_LIMIT} more characters)"


def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run `cmd` capturing text output; a missing or unrunnable program is a BuildError."""
    try:
        return subprocess.run(
            list(cmd), capture_output=True, text=True, errors="replace", env=_env(), check=False
        )
    except OSError as e:  # FileNotFoundError, PermissionError, ENOEXEC
        raise BuildError(
            f"cannot run the C compiler: {e.strerror or e}\ncommand: {shlex.join(cmd)}\n"
            "(set $PRESK_CC to a C compiler)",
            cmd,
        ) from e


def _gcc_native(argv: list[str]) -> str | None:
    # gcc lists every target option as resolved under -march=native, ISA extensions
    # included; hashing the listing tells apart CPUs sharing an -march name but not
    # features (e.g. AVX-512 masked off by a hypervisor).
    res = _run([*argv, MARCH_NATIVE_FLAG, "-Q", "--help=target"])
    if res.returncode != 0:
        return None
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "-march=":
            digest = hashlib.sha256(res.stdout.encode()).hexdigest()[:16]
            return f"march={parts[1]} target-options={digest}"
    return None


def _clang_native(argv: list[str]) -> str | None:
    # clang prints the cc1 command it would run; -target-cpu and the -target-feature list
    # are what -march=native resolved to.
    res = _run([*argv, "-###", MARCH_NATIVE_FLAG, "-x", "c", "-c", os.devnull, "-o", os.devnull])
    if res.returncode != 0:
        return None
    for line in res.stderr.splitlines():
        if "-cc1" not in line:
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        cpu = next((b for a, b in itertools.pairwise(words) if a == "-target-cpu"), None)
        if cpu is None:
            continue
        feats = sorted(b for a, b in itertools.pairwise(words) if a == "-target-feature")
        digest = hashlib.sha256("\n".join(feats).encode()).hexdigest()[:16]
        return f"march={cpu} target-features={digest}"
    return None


def _cpu_fallback() -> str:
    # Neither dialect answered: key on the CPU itself so a cache shared between machines
    # (an NFS home) never hands one CPU's -march=native code to another.
    model = flags_line = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not model:
                model = value.strip()
            elif key in ("flags", "Features") and not flags_line:
                flags_line = value.strip()
    digest = hashlib.sha256(flags_line.encode()).hexdigest()[:16]
    return f"march=? machine={platform.machine()} cpu={model or '?'} cpu-flags={digest}"


@functools.cache
def compiler_identity(cc: str) -> str:
    """The compiler's `--version` first line plus what `-march=native` resolves to.

    Memoised in the process and on disk, keyed by the compiler's path, size and
    modification time and by the CPU's description, so that a run whose unit is
    cached starts no compiler process at all.
    """
    stamp = _identity_stamp(cc)
    directory = cache.root() / cache.IDENTITY_DIR
    stored = directory / f"{stamp}.txt"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = cache.read_regular(stored).decode("utf-8")
        if _IDENTITY_SHAPE.fullmatch(text):
            return text
    # Missing, or not what _ask_identity writes (a torn or foreign file): ask again.
    identity = _ask_identity(cc)
    temp = stored.with_name(f".{stored.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        cache.own_dir(directory)
        cache.remove(stored)  # a directory there would block the rename
        temp.write_text(identity, encoding="utf-8")
        os.replace(temp, stored)
    except OSError:
        # An unwritable cache only costs the question next time.
        with contextlib.suppress(OSError):
            temp.unlink()
    return identity


def _identity_stamp(cc: str) -> str:
    """What the identity depends on, read without starting a process."""
    argv = _argv(cc)
    parts = [json.dumps(argv)]
    for word in argv:
        path = shutil.which(word)
        if path:
            real = os.path.realpath(path)
            info = os.stat(real)
            parts.append(f"{real}:{info.st_size}:{info.st_mtime_ns}")
    parts.append(_cpu_fallback())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _ask_identity(cc: str) -> str:
    argv = _argv(cc)
    res = _run([*argv, "--version"])
    if res.returncode != 0:
        raise BuildError(
            f"the C compiler failed to report its version (exit {res.returncode})\n"
            f"command: {shlex.join([*argv, '--version'])}\n{_trim(res.stderr)}",
            [*argv, "--version"],
            res.stderr,
        )
    lines = res.stdout.strip().splitlines()
    version = lines[0].strip() if lines else "?"
    native = _gcc_native(argv) or _clang_native(argv) or _cpu_fallback()
    return f"{version} | {native}"


def cache_key(c_text: str, build_flags: Sequence[str], identity: str) -> str:
    """The hex SHA-256 naming the cache entry of `c_text` built with these flags and compiler."""
    h = hashlib.sha256()
    # Length-prefixed fields: no two different tuples can hash the same byte stream.
    for field in (_KEY_SCHEMA, presk.__version__, identity, "\0".join(build_flags), c_text):
        data = field.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def entry_dir(key: str) -> Path:
    """The cache directory of one key: `<root>/<key[:2]>/<key>` (see `cache.root`)."""
    return cache.root() / key[:2] / key


def _fsync(path: Path) -> None:
    # A power loss after rename must not leave an empty unit.so behind a valid unit.c.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class _Recipe:
    """What one object was built from: enough to build it again."""

    c_text: str
    openmp: bool
    march_native: bool


# Resolved path of every object `build` returned in this process -> its recipe.
_recipes: dict[str, _Recipe] = {}
_recipes_lock = threading.Lock()


def build(c_text: str, *, openmp: bool = False, march_native: bool = True) -> Path:
    """Compile `c_text` as one translation unit, or find it in the cache; return `unit.so`."""
    return _build(_Recipe(c_text, openmp, march_native), None)


def rebuild(so_path: Path, refused: cache.FileId | None) -> Path | None:
    """Build again the object `build` returned at `so_path`, which `load` refused.

    `refused` is the identity of the file refused (None: it could not be opened): if the
    entry still holds it, it is replaced; if another process already replaced it, that
    build is taken. None if this process did not build `so_path`.
    """
    with _recipes_lock:
        recipe = _recipes.get(os.path.realpath(so_path))
    return None if recipe is None else _build(recipe, refused)


def _build(recipe: _Recipe, refused: cache.FileId | None) -> Path:
    cc = compiler()
    argv = _argv(cc)
    build_flags = flags(openmp=recipe.openmp, march_native=recipe.march_native)
    key = cache_key(recipe.c_text, build_flags, compiler_identity(cc))
    root = cache.root()
    try:
        so_path = _build_in(root, key, recipe.c_text, argv, build_flags, refused)
    except OSError as error:
        # Whatever failed (a root that is a file, a read-only directory, a full disk):
        # the run goes on in a private cache; `fall_back` warns, or raises CacheError.
        root = cache.fall_back(error)
        try:
            so_path = _build_in(root, key, recipe.c_text, argv, build_flags, refused)
        except OSError as again:
            raise CacheError(
                "cannot use the temporary build cache "
                + printable(f"{root}: {cache.reason(again)}")
            ) from None
    with _recipes_lock:
        _recipes[os.path.realpath(so_path)] = recipe
    return so_path


def _build_in(
    root: Path,
    key: str,
    c_text: str,
    argv: list[str],
    build_flags: tuple[str, ...],
    refused: cache.FileId | None,
) -> Path:
    entry = root / key[:2] / key
    so_path = entry / OBJECT_NAME
    # Fast path without the lock: entries are only ever replaced atomically.
    if cache.is_hit(entry, key, c_text, refused):
        return so_path
    with cache.locked(root, entry):
        if cache.is_hit(entry, key, c_text, refused):  # built while we waited
            return so_path
        cache.clear_entry(entry)
        # A private directory keeps the compiler's messages naming `unit.c`, and being
        # inside the entry, on the same file system, makes the renames atomic.
        work = Path(tempfile.mkdtemp(prefix=cache.WORK_PREFIX, dir=entry))
        src, marker, obj = work / SOURCE_NAME, work / "presk_key.c", work / OBJECT_NAME
        cmd = [*argv, *build_flags, str(src), str(marker), "-o", str(obj)]
        try:
            src.write_text(c_text, encoding="utf-8", errors="surrogatepass")
            marker.write_text(cache.marker_source(key), encoding="utf-8")
            res = _run(cmd)
            if res.returncode != 0 or not obj.is_file():
                raise BuildError(
                    f"C compilation failed (exit {res.returncode})\n"
                    f"command: {shlex.join(cmd)}\n{_trim(res.stderr)}",
                    cmd,
                    res.stderr,
                )
            _fsync(obj)
            _fsync(src)
            os.replace(obj, so_path)
            os.replace(src, entry / SOURCE_NAME)  # last: this is what makes it a hit
        except BaseException:
            # Whatever stopped us (compiler, disk, ^C), leave nothing under this key.
            shutil.rmtree(work, ignore_errors=True)
            cache.discard(entry)
            raise
        shutil.rmtree(work, ignore_errors=True)
    return so_path
