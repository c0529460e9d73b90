"""Shared test infrastructure: the `--update-golden` option and an in-process `presk`.

`run_presk(*args)` calls `presk.cli.main` in this process with stdout and stderr
captured, NO_COLOR set and the repository root as the working directory, and
returns `(exit_code, stdout, stderr)`. A `SystemExit` raised by argparse
(`--help`, `--version`, a usage error) becomes the exit code.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Plain output everywhere, also for subprocesses the tests start.
os.environ["NO_COLOR"] = "1"
# Kernels shaped for AVX-512's registers on every machine, so goldens and the tests of
# which form a shape takes read alike everywhere (each vector unit's bits are tested in
# test_native_bits_vectors.py, which sets its own).
os.environ.setdefault("PRESK_VECTOR_BYTES", "64")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files (tests/diag/*.out, tests/golden/*.out) instead of comparing",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


class _Capture(io.StringIO):
    """A text stream that is never a terminal, so diagnostics are never coloured."""

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def _chdir(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run_presk(*args: str, cwd: Path | str = REPO_ROOT, debug: bool = False) -> tuple[int, str, str]:
    """Run `presk ARGS…` in process; returns (exit code, stdout, stderr).

    With `debug`, PRESK_DEBUG=1 is set for the call, so an unexpected exception inside
    presk propagates to the caller instead of becoming a one-line "internal error".
    """
    from presk.cli import main

    out, err = _Capture(), _Capture()
    old_env = {name: os.environ.get(name) for name in ("NO_COLOR", "PRESK_DEBUG")}
    os.environ["NO_COLOR"] = "1"
    if debug:
        os.environ["PRESK_DEBUG"] = "1"
    else:
        os.environ.pop("PRESK_DEBUG", None)
    try:
        with (
            _chdir(Path(cwd)),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                code = main(list(args))
            except SystemExit as exit_:
                code = _exit_code(exit_.code)
    finally:
        for name, value in old_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return code, out.getvalue(), err.getvalue()


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1  # sys.exit("message") prints the message and exits 1


@pytest.fixture
def presk() -> Callable[..., tuple[int, str, str]]:
    """The `run_presk` helper as a fixture."""
    return run_presk


def compare_golden(path: Path, actual: str, update: bool) -> None:
    """Compare `actual` with the golden file `path`, or rewrite it with --update-golden."""
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != actual:
            path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"missing golden file {path.relative_to(REPO_ROOT)}; run with --update-golden")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        import difflib

        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"{path.relative_to(REPO_ROOT)} (expected)",
                tofile="actual",
            )
        )
        pytest.fail(f"output differs from {path.relative_to(REPO_ROOT)}:\n{diff}", pytrace=False)


def exported_tests_pass(out: Path) -> str:
    """Run an export's own `test_conformance.py` with pytest; its output, once it passes."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    test = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_conformance.py"],
        cwd=out, capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert test.returncode == 0, test.stdout + test.stderr
    return test.stdout
