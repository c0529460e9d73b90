"""The build cache heals: every way an entry can go bad is detected, replaced and run.

Each test damages a cache that `build` wrote (or the place where it should be), then
calls the public `build(...)` and `load(...)` again and checks that the unit runs, that it
was compiled again (a PRESK_CC wrapper counts compiles), and that nothing outside presk's
names was touched. The unusable-cache tests run as root, so "unwritable" is a path under
a regular file, or `os` functions that fail. The last tests run `presk run --backend
native` in fresh processes around a damaged cache.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from presk.build import cache as bcache
from presk.build import compile as bc
from presk.build import load as bl

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
pytestmark = pytest.mark.skipif(REAL_CC is None, reason="no C compiler (cc, gcc, clang)")

ADD_C = "double presk_cache_add(double a, double b) { return a + b; }\n"
ADD_CDEF = "double presk_cache_add(double a, double b);"
SUB_C = "double presk_cache_sub(double a, double b) { return a - b; }\n"
SUB_CDEF = "double presk_cache_sub(double a, double b);"
COUNT_C = "static int calls;\nint presk_cache_count(void) { return ++calls; }\n"
COUNT_CDEF = "int presk_cache_count(void);"
ENTRY_FILES = {"unit.c", "unit.so", ".lock"}


class CountingCC:
    """A PRESK_CC wrapper that logs its argv, then runs the real compiler."""

    def __init__(self, tmp_path: Path, delay_s: float = 0.0) -> None:
        self.log = tmp_path / "cc.log"
        self.path = tmp_path / "counting-cc"
        sleep = f"sleep {delay_s}\n" if delay_s else ""
        self.path.write_text(f'#!/bin/sh\necho "$*" >> "{self.log}"\n{sleep}exec {REAL_CC} "$@"\n')
        self.path.chmod(self.path.stat().st_mode | stat.S_IEXEC)

    def compiles(self) -> int:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return len([c for c in lines if "-shared" in c.split()])


@pytest.fixture
def cc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingCC]:
    """A fresh cache under tmp_path, a counting compiler, and fallbacks that stay in tmp_path."""
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "cache"))
    counting = CountingCC(tmp_path)
    monkeypatch.setenv("PRESK_CC", str(counting.path))
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(bcache, "_fallbacks", {})
    monkeypatch.setattr(bcache, "_claimed", set())
    yield counting


def _add(so: Path) -> float:
    result: float = bl.load(so, ADD_CDEF).lib.presk_cache_add(1.5, 2.25)
    return result


def _entry_names(so: Path) -> set[str]:
    return {p.name for p in so.parent.iterdir()}


# ------------------------------------------------------------------ a bad unit.so


def _truncate(so: Path, other: Path) -> None:
    data = so.read_bytes()
    so.unlink()  # a new file: this process may have the old one mapped
    so.write_bytes(data[: len(data) // 2])


def _empty(so: Path, other: Path) -> None:
    so.unlink()
    so.write_bytes(b"")


def _garbage(so: Path, other: Path) -> None:
    so.unlink()
    so.write_bytes(os.urandom(5000))


def _elf_header_only(so: Path, other: Path) -> None:
    data = so.read_bytes()
    so.unlink()
    so.write_bytes(data[:64] + b"\0" * 64)


def _swapped(so: Path, other: Path) -> None:
    shutil.copyfile(other, so.with_name("swap"))
    os.replace(so.with_name("swap"), so)


def _directory(so: Path, other: Path) -> None:
    so.unlink()
    (so / "inner").mkdir(parents=True)
    (so / "inner" / "file").write_text("x")


def _dangling_symlink(so: Path, other: Path) -> None:
    so.unlink()
    so.symlink_to(so.parent / "no-such-file")


def _symlink_elsewhere(so: Path, other: Path) -> None:
    so.unlink()
    so.symlink_to(other)


def _missing(so: Path, other: Path) -> None:
    so.unlink()


def _fifo(so: Path, other: Path) -> None:
    so.unlink()
    os.mkfifo(so)  # opening one to read would block


DAMAGES: dict[str, Callable[[Path, Path], None]] = {
    "truncated": _truncate,
    "empty": _empty,
    "garbage": _garbage,
    "elf-header-only": _elf_header_only,
    "swapped": _swapped,
    "directory": _directory,
    "dangling-symlink": _dangling_symlink,
    "symlink-to-another": _symlink_elsewhere,
    "missing": _missing,
    "fifo": _fifo,
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_bad_object_is_rebuilt(cc: CountingCC, damage: str) -> None:
    other = bc.build(SUB_C)
    other_bytes = other.read_bytes()
    so = bc.build(ADD_C)
    assert cc.compiles() == 2
    DAMAGES[damage](so, other)
    assert bc.build(ADD_C) == so
    assert cc.compiles() == 3
    assert so.is_file() and not so.is_symlink()
    assert _add(so) == 3.75
    assert _entry_names(so) == ENTRY_FILES
    assert other.read_bytes() == other_bytes  # a link's target is never touched
    assert bc.build(ADD_C) == so and cc.compiles() == 3  # and it is a hit again


@pytest.mark.parametrize(
    "damage", ["truncated", "garbage", "swapped", "directory", "missing", "fifo"]
)
def test_load_alone_heals_an_object_damaged_after_build(cc: CountingCC, damage: str) -> None:
    # build() returned a good path; the damage happens before load() opens it.
    other = bc.build(SUB_C)
    so = bc.build(ADD_C)
    DAMAGES[damage](so, other)
    assert _add(so) == 3.75
    assert cc.compiles() == 3


def test_missing_symbol_is_rebuilt_and_loaded_from_a_fresh_path(cc: CountingCC) -> None:
    # An object that passes every check before dlopen (an ELF carrying the right key) but
    # lacks the entry symbol: dlopen has opened it under the entry's path, so the rebuilt
    # one must be opened under another name.
    so = bc.build(ADD_C)
    key = so.parent.name
    work = so.parent.parent.parent / "forged"
    work.mkdir()
    (work / "a.c").write_text(SUB_C)
    (work / "k.c").write_text(bcache.marker_source(key))
    cmd = [str(REAL_CC), "-shared", "-fPIC", str(work / "a.c"), str(work / "k.c")]
    subprocess.run([*cmd, "-o", str(work / "unit.so")], check=True)
    os.replace(work / "unit.so", so)
    assert bc.build(ADD_C) == so and cc.compiles() == 1  # it looks like a hit
    lib = bl.load(so, ADD_CDEF)
    assert lib.lib.presk_cache_add(1.5, 2.25) == 3.75
    assert cc.compiles() == 2
    assert _entry_names(so) == ENTRY_FILES  # the fresh copy is gone once opened


def test_a_rebuilt_object_is_a_fresh_load(cc: CountingCC) -> None:
    # The unit keeps a counter in a static: a fresh dlopen starts it again at 1, the
    # handle dlopen keeps for the old path would go on counting.
    so = bc.build(COUNT_C)
    first = bl.load(so, COUNT_CDEF)
    assert [first.lib.presk_cache_count() for _ in range(2)] == [1, 2]
    assert bl.load(so, COUNT_CDEF) is first  # same file: the same library
    (so.parent / "unit.c").unlink()
    so.unlink()
    assert bc.build(COUNT_C) == so and cc.compiles() == 2
    second = bl.load(so, COUNT_CDEF)
    assert second is not first
    assert second.lib.presk_cache_count() == 1
    assert first.lib.presk_cache_count() == 3  # the old mapping lives on, untouched


def test_a_symbol_no_rebuild_provides_is_one_load_error(cc: CountingCC) -> None:
    so = bc.build(ADD_C)
    cdef = ADD_CDEF + "\ndouble presk_cache_nope(double a);"
    with pytest.raises(bc.BuildError) as info:
        bl.load(so, cdef)
    assert isinstance(info.value, bl.LoadError)
    message = str(info.value)
    assert "no symbol presk_cache_nope" in message and len(message.splitlines()) == 1
    # Naming only what the caller calls, the same object loads.
    assert bl.load(so, cdef, symbols=["presk_cache_add"]).lib.presk_cache_add(1.0, 2.0) == 3.0


def test_an_object_presk_did_not_build_is_not_rebuilt(tmp_path: Path, cc: CountingCC) -> None:
    garbage = tmp_path / "lib.so"
    garbage.write_bytes(b"\x7fELF garbage")
    with pytest.raises(bl.LoadError, match="not an ELF object"):
        bl.load(garbage, ADD_CDEF)
    assert garbage.read_bytes() == b"\x7fELF garbage"
    assert cc.compiles() == 0


# ------------------------------------------------------------------ a bad unit.c, .lock, directory


def _source_differs(entry: Path, outside: Path) -> None:
    (entry / "unit.c").write_text(ADD_C + "/* tampered */\n")


def _source_directory(entry: Path, outside: Path) -> None:
    (entry / "unit.c").unlink()
    (entry / "unit.c").mkdir()


def _source_symlink(entry: Path, outside: Path) -> None:
    # Even to a file holding exactly the text: presk never writes links.
    outside.write_text(ADD_C)
    (entry / "unit.c").unlink()
    (entry / "unit.c").symlink_to(outside)


def _lock_directory(entry: Path, outside: Path) -> None:
    (entry / ".lock").unlink()
    (entry / ".lock" / "x").mkdir(parents=True)
    (entry / "unit.c").unlink()  # so that the build takes the lock


def _lock_fifo(entry: Path, outside: Path) -> None:
    (entry / ".lock").unlink()
    os.mkfifo(entry / ".lock")
    (entry / "unit.c").unlink()


def _lock_symlink(entry: Path, outside: Path) -> None:
    (entry / ".lock").unlink()
    (entry / ".lock").symlink_to(outside)
    (entry / "unit.c").unlink()


def _entry_is_a_file(entry: Path, outside: Path) -> None:
    shutil.rmtree(entry)
    entry.write_text("not a directory")


def _entry_is_a_symlink(entry: Path, outside: Path) -> None:
    shutil.rmtree(entry)
    outside.mkdir()
    entry.symlink_to(outside)


def _prefix_is_a_file(entry: Path, outside: Path) -> None:
    shutil.rmtree(entry.parent)
    entry.parent.write_text("not a directory")


def _identity_is_a_file(entry: Path, outside: Path) -> None:
    identity = entry.parent.parent / "identity"
    shutil.rmtree(identity)
    identity.write_text("garbage")
    (entry / "unit.c").unlink()


ENTRY_DAMAGES: dict[str, Callable[[Path, Path], None]] = {
    "source-differs": _source_differs,
    "source-directory": _source_directory,
    "source-symlink": _source_symlink,
    "lock-directory": _lock_directory,
    "lock-fifo": _lock_fifo,
    "lock-symlink": _lock_symlink,
    "entry-is-a-file": _entry_is_a_file,
    "entry-is-a-symlink": _entry_is_a_symlink,
    "prefix-is-a-file": _prefix_is_a_file,
    "identity-is-a-file": _identity_is_a_file,
}


@pytest.mark.parametrize("damage", sorted(ENTRY_DAMAGES))
def test_bad_entry_is_rebuilt(tmp_path: Path, cc: CountingCC, damage: str) -> None:
    so = bc.build(ADD_C)
    outside = tmp_path / "outside"
    ENTRY_DAMAGES[damage](so.parent, outside)
    before = sorted((p, p.read_bytes() if p.is_file() else b"") for p in tmp_path.glob("out*"))
    assert bc.build(ADD_C) == so
    assert cc.compiles() == 2
    assert _add(so) == 3.75
    assert _entry_names(so) == ENTRY_FILES
    assert (so.parent / "unit.c").read_text() == ADD_C
    for d in (so.parent, so.parent.parent):
        assert d.is_dir() and not d.is_symlink()
    after = sorted((p, p.read_bytes() if p.is_file() else b"") for p in tmp_path.glob("out*"))
    assert after == before  # nothing outside the cache is touched


def test_garbage_identity_is_asked_again(cc: CountingCC, tmp_path: Path) -> None:
    so = bc.build(ADD_C)
    (stored,) = (tmp_path / "cache" / "identity").iterdir()
    stored.write_text("garbage\nover two lines")
    bc.compiler_identity.cache_clear()
    try:
        assert bc.build(ADD_C) == so  # the same key: the identity was asked again
    finally:
        bc.compiler_identity.cache_clear()
    assert "| march=" in stored.read_text() and cc.compiles() == 1


def test_foreign_files_in_the_cache_are_left_alone(cc: CountingCC, tmp_path: Path) -> None:
    so = bc.build(ADD_C)
    notes = [tmp_path / "cache" / "README", so.parent.parent / "notes", so.parent / "mine.txt"]
    for note in notes:
        note.write_text("keep me")
    _garbage(so, so)
    assert _add(bc.build(ADD_C)) == 3.75
    assert [n.read_text() for n in notes] == ["keep me"] * 3


# ------------------------------------------------------------------ an unusable cache


def _one_warning(err: str, where: Path) -> None:
    assert err.count("\n") == 1 and err.startswith("presk: warning: "), err
    assert str(where) in err and "temporary" in err


def test_cache_that_is_a_file_falls_back(
    cc: CountingCC, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("mine")
    for root in (blocker, blocker / "under" / "cache"):
        monkeypatch.setattr(bcache, "_fallbacks", {})
        monkeypatch.setenv("PRESK_CACHE", str(root))
        so = bc.build(ADD_C)
        assert so.is_relative_to(tmp_path / "tmp") and _add(so) == 3.75
        _one_warning(capsys.readouterr().err, root)
        assert bc.build(ADD_C) == so  # the temporary cache serves the rest of the process
        assert capsys.readouterr().err == ""  # warned once
    assert blocker.read_text() == "mine"
    monkeypatch.setattr(bcache, "_fallbacks", {})
    monkeypatch.setenv("PRESK_CACHE", str(blocker / "two\nlines"))
    assert _add(bc.build(ADD_C)) == 3.75
    _one_warning(capsys.readouterr().err, blocker / "two\\nlines")  # escaped: one line


def test_a_root_of_someone_else_s_files_is_left_alone(
    cc: CountingCC, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "identity").write_text("my notes")  # at one of presk's names, and a file
    (work / "ab").mkdir()
    (work / "ab" / "draft.txt").write_text("mine")
    monkeypatch.setenv("PRESK_CACHE", str(work))
    so = bc.build(ADD_C)
    assert so.is_relative_to(tmp_path / "tmp") and _add(so) == 3.75
    err = capsys.readouterr().err
    _one_warning(err, work)
    assert "presk did not write" in err
    assert sorted(p.name for p in work.rglob("*")) == ["ab", "draft.txt", "identity"]
    assert (work / "identity").read_text() == "my notes"


def test_a_root_presk_made_is_marked_and_an_older_one_is_adopted(
    cc: CountingCC, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    so = bc.build(ADD_C)
    root = tmp_path / "cache"
    assert (root / bcache.ROOT_MARKER).is_file() and so.is_relative_to(root)
    (root / bcache.ROOT_MARKER).unlink()  # as a cache written before the marker
    monkeypatch.setattr(bcache, "_claimed", set())
    assert bc.build(ADD_C) == so and (root / bcache.ROOT_MARKER).is_file()


def _read_only(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Make writes under `root` fail as on a read-only file system."""
    real_open, real_mkdir = os.open, os.mkdir
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT

    def under(path: Any) -> bool:
        return not isinstance(path, int) and Path(os.fsdecode(path)).is_relative_to(root)

    def fake_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & writing and under(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
        return real_open(path, flags, *args, **kwargs)

    def fake_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if under(path):
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
        real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)


def test_read_only_cache_serves_hits_and_falls_back_on_a_miss(
    cc: CountingCC, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    root = tmp_path / "cache"
    so = bc.build(ADD_C)
    _read_only(monkeypatch, root)
    assert bc.build(ADD_C) == so and _add(so) == 3.75  # a hit needs no write
    assert capsys.readouterr().err == ""
    sub = bc.build(SUB_C)
    assert not sub.is_relative_to(root)
    assert bl.load(sub, SUB_CDEF).lib.presk_cache_sub(1.0, 3.0) == -2.0
    _one_warning(capsys.readouterr().err, root)


def test_read_only_cache_with_a_bad_entry_falls_back(
    cc: CountingCC, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    root = tmp_path / "cache"
    so = bc.build(ADD_C)
    _garbage(so, so)
    _read_only(monkeypatch, root)
    healed = bc.build(ADD_C)
    assert healed != so and _add(healed) == 3.75
    _one_warning(capsys.readouterr().err, root)


def test_no_cache_and_no_temporary_one_is_one_line(
    cc: CountingCC, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("mine")
    monkeypatch.setenv("PRESK_CACHE", str(blocker))

    def no_temp(*args: Any, **kwargs: Any) -> str:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "tmp"))

    monkeypatch.setattr(tempfile, "mkdtemp", no_temp)
    with pytest.raises(bc.CacheError) as info:
        bc.build(ADD_C)
    assert isinstance(info.value, bc.BuildError)  # what the commands already report
    message = str(info.value)
    assert len(message.splitlines()) == 1 and str(blocker) in message
    assert "No space left" in message and capsys.readouterr().err == ""


def test_the_temporary_cache_is_removed_at_exit(tmp_path: Path) -> None:
    script = (
        "import os, sys\n"
        "from presk.build import compile as bc, load as bl\n"
        f"so = bc.build({ADD_C!r})\n"
        f"assert bl.load(so, {ADD_CDEF!r}).lib.presk_cache_add(1.0, 2.0) == 3.0\n"
        "print(so)\n"
    )
    blocker = tmp_path / "blocker"
    blocker.write_text("mine")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PRESK_CACHE": str(blocker), "TMPDIR": str(temp)}
    env.pop("PRESK_CC", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(temp)
    _one_warning(done.stderr, blocker)
    assert list(temp.iterdir()) == []


# ------------------------------------------------------------------ concurrency


def _build_and_call(queue: Any) -> None:
    try:
        queue.put(_add(bc.build(ADD_C)))
    except BaseException as error:  # reported to the parent, which fails the test
        queue.put(repr(error))


@pytest.mark.parametrize("damage", ["fresh", "garbage", "directory"])
def test_two_processes_heal_one_entry_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "cache"))
    slow = CountingCC(tmp_path, delay_s=0.5)  # the second arrives while the first compiles
    monkeypatch.setenv("PRESK_CC", str(slow.path))
    so = bc.build(ADD_C)
    if damage == "fresh":
        shutil.rmtree(so.parent.parent)
    else:
        DAMAGES[damage](so, so)
    before = slow.compiles()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    procs = [context.Process(target=_build_and_call, args=(queue,)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results == [3.75, 3.75]
    assert slow.compiles() == before + 1
    assert _entry_names(so) == ENTRY_FILES


# ------------------------------------------------------------------ presk run, end to end

LINEAR = ["tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4"]


def _presk_run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "presk.cli", "run", *LINEAR, "--backend", "native"]
    return subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _objects(root: Path) -> list[Path]:
    return sorted(root.glob("*/*/unit.so"))


def test_presk_run_heals_a_damaged_cache(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    env = {**os.environ, "PRESK_CACHE": str(root), "TMPDIR": str(tmp_path)}
    env.pop("PRESK_CC", None)
    first = _presk_run(env)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    for damage in ("truncated", "garbage", "swapped", "directory", "dangling-symlink"):
        (so,) = _objects(root)
        other = tmp_path / "other.so"
        shutil.copyfile(so, other)
        if damage == "swapped":  # another unit's object, built by hand
            sub = tmp_path / "sub"
            sub.mkdir(exist_ok=True)
            (sub / "a.c").write_text(SUB_C)
            cmd = [str(REAL_CC), "-shared", "-fPIC", str(sub / "a.c"), "-o", str(other)]
            subprocess.run(cmd, check=True)
        DAMAGES[damage](so, other)
        again = _presk_run(env)
        assert (again.returncode, again.stderr) == (0, ""), (damage, again.stderr)
        assert again.stdout == first.stdout
        assert _objects(root) == [so] and _entry_names(so) == ENTRY_FILES


def test_presk_run_with_an_unusable_cache_warns_once(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("mine")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PRESK_CACHE": str(blocker / "cache"), "TMPDIR": str(temp)}
    env.pop("PRESK_CC", None)
    done = _presk_run(env)
    assert done.returncode == 0, done.stderr
    assert "ℝ[batch: 4, 2]" in done.stdout
    _one_warning(done.stderr, blocker / "cache")
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert blocker.read_text() == "mine" and list(temp.iterdir()) == []
