"""Writing an export's directory without ever deleting what presk did not write.

Every export holds a marker, `.presk-export`: a small JSON object with the
presk version, the entry and the files written. `-o DIR` may name

- a path that does not exist yet, in a parent directory that does;
- an empty directory, which is filled;
- an earlier export (a directory holding the marker), which is replaced.

Anything else is refused with one line: the working directory or one of its
ancestors, `""`, a file, a symbolic link, a directory that is not an export, a
parent that is missing, not a directory, or not writable.

The new tree is always built whole in a staging directory beside the target
(`.NAME.presk-new-*`, same parent, so the same file system) and renamed into
place. Replacing an earlier export exchanges the two directories in one
`renameat2(RENAME_EXCHANGE)` where the kernel and the file system have it, so a
kill at any moment leaves the old export or the new one at DIR. Where it is
missing the fallback is two renames: the old export to `.NAME.presk-old`, then
the new one to DIR. A kill between the two leaves DIR missing and the old
export whole beside it; `recover` (run first by every later export to DIR)
puts it back. Leftover staging directories of a killed export are removed by
the next export to the same DIR.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

from presk import __version__
from presk.export.c import ExportError, ExportPlan

MARKER = ".presk-export"
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def check_target(directory: str) -> None:
    """Refuse a `-o` that write_plan would refuse, before any work (one-line ExportError)."""
    try:
        _target(directory, recovering=False)
    except OSError as error:
        raise ExportError(f"{directory}: {error.strerror or error}") from None


def write_plan(plan: ExportPlan, directory: str, entry: str = "") -> None:
    """Write the plan's files to `directory`, under the rules of this module's docstring."""
    try:
        _write(plan, directory, entry)
    except OSError as error:
        raise ExportError(f"{directory}: {error.strerror or error}") from None


def _target(directory: str, *, recovering: bool) -> tuple[Path, bool]:
    """The target's absolute path, and whether it holds an earlier export to replace."""
    target = _checked_target(directory)
    if recovering:
        recover(target)
    elif not target.exists() and is_export(_aside(target)):
        return target, False  # a killed replacement's old export, which write_plan puts back
    if target.is_symlink():
        raise ExportError(f"{directory}: is a symbolic link; name the directory itself")
    replacing = False
    if target.exists():
        if not target.is_dir():
            raise ExportError(f"{directory}: exists and is not a directory")
        replacing = is_export(target)
        if not replacing and any(target.iterdir()):
            raise ExportError(
                f"{directory}: exists and is not a presk export (no {MARKER}); "
                "refusing to replace it: name a new or empty directory"
            )
    return target, replacing


def _write(plan: ExportPlan, directory: str, entry: str) -> None:
    target, replacing = _target(directory, recovering=True)
    _remove_stale(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.presk-new-", dir=target.parent))
    try:
        _fill(staging, plan, entry)
        if replacing:
            install(staging, target)
        else:
            # rename(2) replaces an empty directory and fails on a non-empty one, so a
            # directory filled meanwhile by someone else is never lost.
            os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def is_export(path: Path) -> bool:
    """Whether `path` is a directory holding a presk export's marker."""
    try:
        data = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "presk" in data


def install(staging: Path, target: Path, *, exchange: bool = True) -> None:
    """Put the whole tree `staging` at `target`, an earlier export, and remove the old one.

    `exchange=False` takes the two-rename path even where the exchange exists.
    """
    if exchange and _exchange(staging, target):
        shutil.rmtree(staging, ignore_errors=True)  # now the old export
        return
    aside = _aside(target)
    os.rename(target, aside)
    # A kill here leaves `target` missing and the old export whole at `aside`: see recover().
    os.rename(staging, target)
    shutil.rmtree(aside, ignore_errors=True)


def recover(target: Path) -> None:
    """Finish what a killed two-rename replacement left: the old export back at `target`."""
    aside = _aside(target)
    if not aside.is_dir() or aside.is_symlink() or not is_export(aside):
        return
    if target.exists() or target.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)  # the new export made it to `target`
    else:
        os.rename(aside, target)


def _checked_target(directory: str) -> Path:
    """The target as an absolute path, after the refusals that need no look inside it."""
    if directory == "":
        raise ExportError('-o "": name a directory')
    target = Path(os.path.abspath(directory))
    if target.parent == target:
        raise ExportError(f"{directory}: is the root directory")
    here = Path(os.path.realpath("."))
    real = Path(os.path.realpath(target))
    if real == here or real in here.parents:
        what = "the working directory" if real == here else "an ancestor of the working directory"
        raise ExportError(f"{directory}: is {what}; name a directory of its own")
    parent = target.parent
    if not parent.exists():
        raise ExportError(f"{directory}: the parent directory {parent} does not exist")
    if not parent.is_dir():
        raise ExportError(f"{directory}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ExportError(f"{directory}: the parent directory {parent} is not writable")
    return target


def _fill(staging: Path, plan: ExportPlan, entry: str) -> None:
    # mkdtemp makes the directory private; an export is as readable as any other directory.
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)
    marker = {"presk": __version__, "entry": entry, "files": sorted(plan.files)}
    (staging / MARKER).write_text(json.dumps(marker, ensure_ascii=False) + "\n", encoding="utf-8")
    for relative, content in plan.files.items():
        path = staging / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    for script in staging.rglob("*.sh"):
        script.chmod(0o755)


def _aside(target: Path) -> Path:
    return target.with_name(f".{target.name}.presk-old")


def _remove_stale(target: Path) -> None:
    """Staging directories a killed export to `target` left behind (marked, or empty)."""
    for stale in target.parent.glob(f".{target.name}.presk-new-*"):
        if stale.is_dir() and not stale.is_symlink() and (is_export(stale) or _empty(stale)):
            shutil.rmtree(stale, ignore_errors=True)


def _empty(path: Path) -> bool:
    try:
        return not any(path.iterdir())
    except OSError:
        return False


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically (Linux renameat2); False where that is not available."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    text, number = ctypes.c_char_p, ctypes.c_int
    renameat2.argtypes = [number, text, number, text, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # this kernel or file system cannot exchange: two renames instead
    raise OSError(code, os.strerror(code))


__all__ = ["MARKER", "check_target", "install", "is_export", "recover", "write_plan"]
