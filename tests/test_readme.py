"""Every command of README.md works as written, from the repository's root.

The README's indented lines are its commands. They run in order, through sh, in a
copy of the repository's root (so that `out/` and the like land in a temporary
directory), with `.venv` standing for this checkout's environment. A command that
is the test suite itself, rewrites goldens or takes minutes is listed in SKIPPED
with its reason; any other README command must run and exit 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

SKIPPED = {
    "make test": "the test suite itself",
    "make check": "ruff and mypy over the whole package: `make check` is CI's own step",
    "make golden-update": "rewrites the golden files",
    "make bench-reference": "minutes of the reference interpreter",
    "make bench": "minutes of timing",
    "make bench-train": "minutes of timing, the course GPT's compile among them",
    "make train-examples": "minutes of the reference interpreter training the tiny MiniGPT",
    "make bench-serve": "minutes of timing, a course-size GPT among them",
    "make bench-export": "a minute of timing, torch among it",
    "make serve-examples": "trains, then builds and runs a C program: a minute",
    "make conformance": "minutes: every primitive in three types",
    "make c-conformance": "minutes: every program on two compilers",
    "make libm-check": "minutes: 10⁶ inputs per function",
    "make tutorial": "tests/test_tutorial.py runs the same commands against their goldens",
    "make fuzz": "minutes: ten times the fuzz test of make test",
    "make layout-check": "minutes: every point of four spaces in three types",
    "make plan-check": "tests/test_layouts.py runs its subset",
    "make bench-plans": "minutes of timing, a 1024³ GEMM's space among them",
}

# What a command must print (beyond exiting 0), where the README promises it.
PRINTS = {
    "make -C out/tut_c check PRESK=.venv/bin/presk": "against the exact reference:",
    "make -C out/tut_scop check": "compute the native backend's bits",
}


def readme_commands() -> list[str]:
    """The README's indented lines, in order, without their trailing comments."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    lines = [line[4:] for line in text.splitlines() if re.match(r" {4}\S", line)]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in lines]


def test_the_skip_list_names_readme_commands() -> None:
    assert set(SKIPPED) <= set(readme_commands()), set(SKIPPED) - set(readme_commands())
    assert set(PRINTS) <= set(readme_commands())


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                    reason="no C compiler or make")
def test_every_readme_command_runs_from_the_root(tmp_path: Path) -> None:
    root = tmp_path / "presk"
    root.mkdir()
    for name in ("Makefile", "pyproject.toml", "README.md"):
        shutil.copy2(REPO_ROOT / name, root / name)
    for name in ("tutorial", "tests/examples"):
        shutil.copytree(REPO_ROOT / name, root / name)
    # `.venv` is this environment: its bin/ and a fresh stamp, so make reinstalls nothing.
    venv = root / ".venv"
    venv.mkdir()
    (venv / "bin").symlink_to(Path(sys.executable).parent)
    if (Path(sys.prefix) / "pyvenv.cfg").exists():
        (venv / "pyvenv.cfg").symlink_to(Path(sys.prefix) / "pyvenv.cfg")
    (venv / ".installed").touch()
    env = {**os.environ, "PRESK_CACHE": str(tmp_path / "cache")}
    ran = []
    for command in readme_commands():
        if command in SKIPPED:
            continue
        done = subprocess.run(command, shell=True, cwd=root, env=env, capture_output=True,
                              text=True, timeout=300)
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{command}\n{output}"
        assert "Traceback" not in output and "internal error" not in output, command
        assert PRINTS.get(command, "") in done.stdout, f"{command}\n{output}"
        ran.append(command)
    assert "make -C out/tut_c check PRESK=.venv/bin/presk" in ran
    assert len(ran) >= 10, ran
