"""`presk export -o`: nothing deleted that presk did not write, nothing injected into Make or sh.

The rules are in presk/export/write.py's docstring. The kill test stops a writer
with SIGKILL at random moments and requires the target to be a whole export
(the old one or the new one) every time.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_presk

from presk.export.c import ExportError, ExportPlan
from presk.export.escape import make_comment, make_word, sh_comment, sh_word
from presk.export.write import MARKER, check_target, recover, write_plan

ATTEND = ("tutorial/03_attention.psk", "--target", "c", "--entry", "attend",
          "--dim", "B=1", "--dim", "T=3")


def _plan(tag: str, count: int = 3) -> ExportPlan:
    files: dict[str, str | bytes] = {f"f{i}.txt": tag for i in range(count)}
    files["sub/g.txt"] = tag
    files["conformance/check.sh"] = "#!/bin/sh\n"
    return ExportPlan(files, "")


def _tree(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): p.read_bytes().decode("latin-1")
        for p in sorted(path.rglob("*")) if p.is_file()
    }


def _whole(path: Path) -> str:
    """The tag of the whole export at `path`; fails unless every file is there, of one tag."""
    marker = json.loads((path / MARKER).read_text())
    tree = _tree(path)
    assert sorted(tree) == sorted([*marker["files"], MARKER]), "files missing or extra"
    tags = {text.split("\n")[0] for name, text in tree.items() if name.endswith(".txt")}
    assert len(tags) == 1, tags
    return tags.pop()


def test_an_export_is_marked_and_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "e"
    write_plan(_plan("old", 5), str(target), "attend")
    marker = json.loads((target / MARKER).read_text())
    assert marker["entry"] == "attend" and "presk" in marker
    assert os.access(target / "conformance/check.sh", os.X_OK)
    assert oct(target.stat().st_mode & 0o777) != oct(0o700)  # not mkdtemp's private mode
    write_plan(_plan("new", 2), str(target))
    assert _whole(target) == "new"
    assert not (target / "f4.txt").exists()  # the old export's files went with it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e"]  # no staging left behind


def test_an_empty_directory_is_filled(tmp_path: Path) -> None:
    target = tmp_path / "empty"
    target.mkdir()
    check_target(str(target))
    write_plan(_plan("x"), str(target))
    assert _whole(target) == "x"


@pytest.mark.parametrize("name", [".", "", "..", "/"])
def test_the_working_directory_its_ancestors_and_nothing_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    work = tmp_path / "a" / "work"
    work.mkdir(parents=True)
    (work / "keep.txt").write_text("mine")
    (tmp_path / "a" / "keep.txt").write_text("mine too")
    monkeypatch.chdir(work)
    with pytest.raises(ExportError) as error:
        write_plan(_plan("x"), name)
    assert "\n" not in str(error.value)
    with pytest.raises(ExportError):
        check_target(name)
    assert (work / "keep.txt").read_text() == "mine"
    assert (tmp_path / "a" / "keep.txt").read_text() == "mine too"
    assert sorted(p.name for p in work.iterdir()) == ["keep.txt"]


def test_an_ancestor_named_absolutely_is_refused(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "w"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(ExportError, match="an ancestor of the working directory"):
        write_plan(_plan("x"), str(tmp_path))


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (".", ".: is the working directory; name a directory of its own"),
        ("", '-o "": name a directory'),
        ("..", "..: is an ancestor of the working directory; name a directory of its own"),
    ],
)
def test_the_command_refuses_dot_empty_and_dotdot_in_one_line(tmp_path: Path, option: str,
                                                             message: str) -> None:
    work = tmp_path / "w"
    shutil.copytree(REPO_ROOT / "tutorial", work / "tutorial")
    before = _tree(work)
    code, out, err = run_presk("export", *ATTEND, "-o", option, cwd=work)
    assert (code, out, err) == (1, "", f"presk export: {message}\n")
    assert _tree(work) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]


def test_a_directory_that_is_not_an_export_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "thesis.tex").write_text("years of work")
    code, _, err = run_presk("export", *ATTEND, "-o", str(target))
    assert code == 1 and err.count("\n") == 1 and "not a presk export" in err, err
    assert _tree(target) == {"thesis.tex": "years of work"}


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        ("file_parent", "is not a directory"),
        ("missing_parent", "does not exist"),
        ("file_target", "exists and is not a directory"),
        ("symlink_target", "symbolic link"),
    ],
)
def test_bad_targets_are_one_line_errors(tmp_path: Path, make: str, needle: str) -> None:
    (tmp_path / "file").write_text("data")
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x").write_text("data")
    target = {
        "file_parent": tmp_path / "file" / "out",
        "missing_parent": tmp_path / "nope" / "out",
        "file_target": tmp_path / "file",
        "symlink_target": tmp_path / "link",
    }[make]
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ExportError, match=needle) as error:
        write_plan(_plan("x"), str(target))
    assert "\n" not in str(error.value)
    with pytest.raises(ExportError, match=needle):
        check_target(str(target))  # the same refusal, before any work
    assert (tmp_path / "file").read_text() == "data"
    assert (tmp_path / "real" / "x").read_text() == "data"
    assert not (tmp_path / "nope").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to any directory: no unwritable one")
def test_an_unwritable_parent_is_a_one_line_error(tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        with pytest.raises(ExportError, match="not writable"):
            write_plan(_plan("x"), str(parent / "out"))
    finally:
        parent.chmod(0o755)


# The kill test's writer: imports once, then forks a child per write (a fresh interpreter
# per kill would spend its time starting). Each child writes many files, so that the
# write lasts long enough to be hit; it stays a zombie until the test says `reap`, so the
# pid the test kills is never another process's.
WRITER = r"""
import os, sys
from pathlib import Path
from presk.export.c import ExportPlan
from presk.export import write
target, mode = Path(sys.argv[1]), sys.argv[2]
print("ready", flush=True)
for line in sys.stdin:
    tag = line.strip()
    pid = os.fork()
    if pid == 0:
        files = {f"d{i % 7}/f{i}.txt": (tag + "\n") * 4000 for i in range(300)}
        plan = ExportPlan(files, "")
        if mode == "exchange":
            write.write_plan(plan, str(target))
        else:
            staging = target.with_name(f".e.presk-new-{tag}")
            staging.mkdir()
            write._fill(staging, plan, "")
            write.install(staging, target, exchange=False)
        os._exit(0)
    print(pid, flush=True)
    sys.stdin.readline()  # reap
    print(os.waitpid(pid, 0)[1], flush=True)
"""


class _Writer:
    def __init__(self, tmp_path: Path, target: Path, mode: str) -> None:
        script = tmp_path / "writer.py"
        script.write_text(WRITER)
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        self.proc = subprocess.Popen([sys.executable, str(script), str(target), mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        assert self._line() == "ready"

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def _send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def write(self, tag: str, kill_after: float | None) -> int:
        """Start a write; SIGKILL it after `kill_after` seconds; its wait status."""
        self._send(tag)
        pid = int(self._line())
        if kill_after is not None:
            time.sleep(kill_after)
            os.kill(pid, signal.SIGKILL)  # at worst a zombie: not reaped before `reap`
        self._send("reap")
        return int(self._line())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.mark.parametrize("mode", ["exchange", "two renames"])
def test_a_kill_at_any_moment_leaves_a_whole_export(tmp_path: Path, mode: str) -> None:
    target = tmp_path / "e"
    write_plan(_plan("t0"), str(target))
    writer = _Writer(tmp_path, target, mode)
    try:
        start = time.monotonic()
        assert writer.write("t1", None) == 0
        span = time.monotonic() - start  # how long one write takes, to spread the kills over
        assert _whole(target) == "t1"
        rng = random.Random(10)
        previous, killed, kept = "t1", 0, 0
        # Until ten kills have landed (at most 60 writes): on a loaded machine a write
        # takes longer than the first one measured, and more kills come after it.
        for n in range(2, 62):
            if killed >= 10 and kept >= 1:
                break
            tag = f"t{n}"
            status = writer.write(tag, rng.uniform(0, span * 1.2))
            killed += os.WIFSIGNALED(status)
            if mode != "exchange":
                recover(target)  # what the next export to `target` does first
            got = _whole(target)
            assert got in (previous, tag), (got, previous, tag)
            kept += got == previous and os.WIFSIGNALED(status)
            previous = got
            for stale in tmp_path.glob(".e.presk-new-*"):
                shutil.rmtree(stale)  # a killed writer's staging (the next export's job)
    finally:
        writer.close()
    # Most kills landed while the writer ran, some before the new tree was in place.
    assert killed >= 10 and kept >= 1, (killed, kept)


def test_stale_staging_of_a_killed_export_is_removed_by_the_next(tmp_path: Path) -> None:
    target = tmp_path / "e"
    stale = tmp_path / ".e.presk-new-abc"
    stale.mkdir()
    (stale / MARKER).write_text('{"presk": "0"}')
    foreign = tmp_path / ".e.presk-new-notours"
    foreign.mkdir()
    (foreign / "x").write_text("someone's")
    write_plan(_plan("x"), str(target))
    assert not stale.exists() and (foreign / "x").exists()


def test_escaping_for_make_and_sh() -> None:
    assert make_comment("a\nb\\") == "a?b?" and make_comment("a\\b") == "a\\b"
    assert make_comment("x\u202ey\r") == "x?y?"  # bidi overrides and returns too
    assert make_word("nests/f_1.c") == "nests/f_1.c" and make_word("a$b") == "a$$b"
    with pytest.raises(ValueError):
        make_word("a b")
    assert sh_comment("a\nrm -rf ~") == "a?rm -rf ~"
    assert sh_word("out/tut_c") == "out/tut_c"
    assert sh_word("it's $(x)") == "'it'\\''s $(x)'"
    assert sh_word("") == "''"


HOSTILE_DIR = "x*"  # with the file name below, the path holds `*/`
HOSTILE_FILE = "n\n$(shell touch PWNED1)\n`touch PWNED2`$(touch PWNED3)'\"\\.psk"
HOSTILE_SOURCE = "dim B\nfn f(x : ℝ[B, 4]) -> ℝ[B, 4] =\n  tanh(x) * 2\n"


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                    reason="no C compiler or make")
def test_hostile_file_names_reach_no_makefile_or_script(tmp_path: Path) -> None:
    src_dir = tmp_path / HOSTILE_DIR
    src_dir.mkdir()
    source = src_dir / HOSTILE_FILE
    source.write_text(HOSTILE_SOURCE, encoding="utf-8")
    realize = tmp_path / "r\n$(shell touch PWNED4)\n`touch PWNED5`.json"
    realize.write_text('{"default": "f32"}')
    env = {**os.environ, "PRESK_CACHE": str(tmp_path / "cache")}
    presk = str(Path(sys.executable).parent / "presk")
    for mode, out in (("program", tmp_path / "c"), ("scop", tmp_path / "s")):
        flags = ["--realize", f"@{realize}"] if mode == "program" else []
        done = subprocess.run(
            [presk, "export", str(source), "--entry", "f", "--dim", "B=2", "--mode", mode,
             *flags, "-o", str(out)], cwd=tmp_path, capture_output=True, text=True, env=env,
        )
        assert done.returncode == 0, done.stderr
        made = subprocess.run(["make", "-s", "-C", str(out), "check",
                               f"PRESK={presk}"],
                              cwd=tmp_path, capture_output=True, text=True, env=env)
        assert made.returncode == 0, made.stderr
        assert "warning" not in made.stderr
    pwned = [p for p in tmp_path.rglob("PWNED*")]
    pwned += [p for p in (tmp_path / "c").glob("*PWNED*")]
    assert pwned == []
    makefile = (tmp_path / "c" / "Makefile").read_text()
    assert makefile.splitlines()[0].startswith("# ") and "$(shell" in makefile.splitlines()[0]
