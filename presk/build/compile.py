"""Compile one C translation unit into a shared object, cached by content hash.

Takes the full text of one C translation unit (the caller pastes the runtime and
libm into it; it includes only standard headers) and produces the path of a
shared object built from it with `$PRESK_CC` (else `cc`) and `FLAGS`.

Cache layout: `<cache_dir()>/<key[:2]>/<key>/` holds `unit.c` (the exact C text),
`unit.so` and `.lock`. The key is a SHA-256 over the compiler's identity (its
version line and what `-march=native` resolves to on this machine), the flags,
the presk version and the C text.

Invariants:
- An entry is a hit only if `unit.c` holds exactly the requested text and `unit.so`
  exists. Both files are written by `os.replace` from a private temporary directory
  inside the entry, `unit.so` first and `unit.c` last, so a half-written entry (a
  crash, a concurrent build) is never taken as a hit, and a process that already
  mapped an older `unit.so` keeps its (unlinked) inode.
- Builds of one key are serialised by `fcntl.flock` on `<entry>/.lock`; the cache is
  re-checked under the lock, so concurrent builders compile once and all succeed.
- A failed build leaves nothing for its key: no `unit.so`, no `unit.c`, no
  temporaries, and the entry directory is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import itertools
import json
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import presk

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

SOURCE_NAME = "unit.c"
OBJECT_NAME = "unit.so"
LOCK_NAME = ".lock"

# Enough for the first screenful of errors; a generated unit can produce megabytes.
_STDERR_LIMIT = 8000
# Bumped if the layout or key derivation changes, so old entries are never misread.
_KEY_SCHEMA = "presk-build-v1"
# Messages and `--help=target` listings in one language, so parsing and tests are stable.
_ENV_OVERRIDES = {"LC_ALL": "C", "LANG": "C"}


class BuildError(Exception):
    """The C compiler is missing or rejected the unit; the message has the command and stderr."""

    def __init__(self, message: str, command: Sequence[str], stderr: str = "") -> None:
        super().__init__(message)
        self.command = tuple(command)
        self.stderr = stderr


def compiler() -> str:
    """The compiler command: `$PRESK_CC` if set and non-empty, else `cc`."""
    return os.environ.get("PRESK_CC") or "cc"


def flags(*, openmp: bool = False, march_native: bool = True) -> tuple[str, ...]:
    """The compiler flags for a build: `FLAGS`, less `-march=native` if asked, plus `-fopenmp`."""
    out = tuple(f for f in FLAGS if march_native or f != MARCH_NATIVE_FLAG)
    return (*out, OPENMP_FLAG) if openmp else out


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
    stored = cache_dir() / "identity" / f"{stamp}.txt"
    try:
        return stored.read_text(encoding="utf-8")
    except OSError:
        pass
    identity = _ask_identity(cc)
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        temp = stored.with_name(f".{stored.name}.{os.getpid()}")
        temp.write_text(identity, encoding="utf-8")
        os.replace(temp, stored)
    except OSError:
        pass  # an unwritable cache only costs the question next time
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
    """The cache directory of one key: `<cache_dir()>/<key[:2]>/<key>`."""
    return cache_dir() / key[:2] / key


def _is_hit(entry: Path, c_text: str) -> bool:
    # unit.c is written last, so a matching unit.c means unit.so is complete. A different
    # text (collision, corruption, a torn write) is a miss and forces a rebuild.
    try:
        stored = (entry / SOURCE_NAME).read_text(encoding="utf-8", errors="surrogatepass")
    except (OSError, UnicodeDecodeError):
        return False
    return stored == c_text and (entry / OBJECT_NAME).is_file()


@contextlib.contextmanager
def _locked(entry: Path) -> Iterator[None]:
    """Create `entry` and hold an exclusive flock on `entry/.lock` for the duration."""
    lock_path = entry / LOCK_NAME
    for _ in range(1000):
        try:
            entry.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            continue  # a failed builder removed the directory between mkdir and open
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # A failed builder unlinks the lock file before removing the entry; if ours
            # is no longer the file at that path, whoever waits on it must start over.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(lock_path))
            except FileNotFoundError:
                same = False
            if not same:
                continue
            yield
            return
        finally:
            os.close(fd)  # closing releases the flock
    raise BuildError(f"could not lock cache entry {entry}", [])


def _discard(entry: Path) -> None:
    """Remove every trace of a failed build of `entry` (called with its lock held)."""
    for name in (SOURCE_NAME, OBJECT_NAME, LOCK_NAME):
        with contextlib.suppress(FileNotFoundError):
            (entry / name).unlink()
    # Not empty only if someone else is mid-build there, which the lock rules out; the
    # shared prefix directory stays if other keys live in it.
    for d in (entry, entry.parent):
        with contextlib.suppress(OSError):
            d.rmdir()


def _fsync(path: Path) -> None:
    # A power loss after rename must not leave an empty unit.so behind a valid unit.c.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def build(c_text: str, *, openmp: bool = False, march_native: bool = True) -> Path:
    """Compile `c_text` as one translation unit, or find it in the cache; return `unit.so`."""
    cc = compiler()
    argv = _argv(cc)
    build_flags = flags(openmp=openmp, march_native=march_native)
    entry = entry_dir(cache_key(c_text, build_flags, compiler_identity(cc)))
    so_path = entry / OBJECT_NAME
    # Fast path without the lock: entries are only ever replaced atomically.
    if _is_hit(entry, c_text):
        return so_path
    with _locked(entry):
        if _is_hit(entry, c_text):  # another process built it while we waited
            return so_path
        # Under the lock no one else is building here: any work directory is a leftover
        # of a builder that was killed mid-compile.
        for stale in entry.glob(".build-*"):
            shutil.rmtree(stale, ignore_errors=True)
        # A private directory keeps the compiler's messages naming `unit.c`, and being
        # inside the entry, on the same file system, makes the renames atomic.
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=entry))
        src, obj = work / SOURCE_NAME, work / OBJECT_NAME
        cmd = [*argv, *build_flags, str(src), "-o", str(obj)]
        try:
            src.write_text(c_text, encoding="utf-8", errors="surrogatepass")
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
            _discard(entry)
            raise
        shutil.rmtree(work, ignore_errors=True)
    return so_path
