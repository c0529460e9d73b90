"""A seeded, bounded fuzz test of the commands as a user runs them: no crash, no hang.

A few hundred mutants of the tutorial and example programs (tests/fuzz/mutate.py: extreme
numbers and powers, deep nesting, identifiers that are C keywords or macros or that mangle
alike, operators, lines duplicated or deleted; dims of 0, 1 and beyond memory, unknown
`--dim` names, bad `--realize`, `--threads` and `PRESK_THREADS`; `.psk.d` files truncated,
flipped, emptied or valid with wrong contents) go through `presk check`, `presk run` and
`presk run --backend native` (data files through `presk data info` too), each a subprocess
with a timeout, two at a time, sharing one PRESK_CACHE so that native builds are cached.
Every outcome must be an exit code 0, 1 or 2 with no Python traceback, no "internal
error", no raw escape character and no timeout; a flag or data file the mutant makes
invalid must be refused with exit 1 or 2 and one line on stderr. Source mutants that
`check` rejects are not run.

The mutants are fixed (mutant i is a function of i alone). `PRESK_FUZZ_SCALE=N` (or
`make fuzz`) runs N times as many; `PRESK_FUZZ_KEEP=DIR` keeps the mutants' directories and
the report there. A failure lists each distinct class once, with its smallest reproducer.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from fuzz.mutate import Mutant, materialise, mutant

SCALE = max(1, int(os.environ.get("PRESK_FUZZ_SCALE", "1")))
# 150 under `make test` (about four minutes of its twenty on two cores), ten times as many
# under `make fuzz`.
COUNT = 150 * SCALE
WORKERS = 2
TIMEOUT = {"check": 8.0, "info": 8.0, "run": 10.0, "native": 30.0}
"""Seconds per command; a native run includes its C build (cached across mutants)."""
PRESK = os.environ.get("PRESK_BIN") or str(Path(sys.executable).parent / "presk")


@dataclass(frozen=True)
class Outcome:
    command: str
    code: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    seconds: float


@dataclass(frozen=True)
class Failure:
    mutant: Mutant
    command: str
    reason: str  # why it fails, one line
    cls: str  # the failure class: the reason with numbers and names abstracted
    output: str  # the first lines of stdout and stderr
    directory: Path


def _call(m: Mutant, command: str, directory: Path, env: dict[str, str]) -> Outcome:
    proc = subprocess.Popen(
        [PRESK, *m.argv(command)],
        cwd=directory,
        env={**env, **m.env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a timeout kills the compiler it started too
    )
    started = time.monotonic()
    try:
        out, err = proc.communicate(timeout=TIMEOUT[command])
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    else:
        code = proc.returncode
    text = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    return Outcome(command, code, *text, time.monotonic() - started)


def _abstract(line: str) -> str:
    """A message with its particulars (numbers, quoted names, paths) abstracted."""
    line = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", "…", line)
    line = re.sub(r"(/[\w.@+-]+)+", "PATH", line)
    return re.sub(r"-?\d+", "N", line)[:140]


_WARNING = re.compile(r"^\[W\d{4}\] Warning:.*?^-+'$\n?", re.M | re.S)


def _problems(m: Mutant, o: Outcome) -> Iterator[tuple[str, str]]:
    """(reason, class) for each property the outcome breaks."""
    text = o.stdout + o.stderr
    if o.code is None:
        yield f"no answer in {TIMEOUT[o.command]:g} s", f"hang ({m.kind})"
        return
    if o.code not in (0, 1, 2):
        yield f"exit code {o.code}", f"exit {o.code} ({m.kind})"
    if "Traceback (most recent call last)" in text:
        last = [line for line in text.splitlines() if line.strip()][-1]
        yield f"traceback: {last}", f"traceback {_abstract(last)}"
    for line in text.splitlines():
        if "internal error" in line:
            yield line, _abstract(line)
            break
    if "\x1b" in text:
        yield "a raw escape character in the output", f"escape ({m.kind})"
    if o.command in m.refuse:
        # The warnings of the program itself (mlp.psk has two) may come first.
        lines = _WARNING.sub("", o.stderr).strip().splitlines()
        if o.code not in (1, 2):
            yield f"accepted (exit {o.code}) but must be refused", f"accepted ({m.kind})"
        elif len(lines) != 1:
            yield f"refused in {len(lines)} lines, not one", f"not one line ({m.kind})"


def _fuzz_one(m: Mutant, root: Path, env: dict[str, str]) -> tuple[list[Failure], list[Outcome]]:
    directory = materialise(m, root / f"m{m.index:05d}")
    failures, outcomes = [], []
    for command in m.commands:
        o = _call(m, command, directory, env)
        outcomes.append(o)
        head = "\n".join([*o.stdout.splitlines()[:3], *o.stderr.splitlines()[:6]])
        for reason, cls in _problems(m, o):
            failures.append(Failure(m, command, reason, f"{command}: {cls}", head, directory))
        if command == "check" and o.code != 0:
            break  # a rejected program is rejected by `run` too
    return failures, outcomes


def _report(failures: list[Failure]) -> str:
    classes: dict[str, list[Failure]] = {}
    for f in failures:
        classes.setdefault(f.cls, []).append(f)
    parts = [f"{len(classes)} failure classes in {len(failures)} failures:"]
    for cls, group in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        f = min(group, key=lambda f: (sum(map(len, f.mutant.files.values())), f.mutant.index))
        m = f.mutant
        parts.append(
            f"\n== {cls}  [{len(group)}×]\n"
            f"mutant {m.index} ({m.seed.name}, {m.kind}): {m.description}\n"
            f"  {f.reason}\n"
            f"  cd {f.directory} && {m.shell(f.command)}\n"
            f"  (again: python tests/fuzz/mutate.py {m.index} --out DIR)\n"
            + "".join(f"  | {line[:200]}\n" for line in f.output.splitlines())
        )
    return "".join(parts)


def test_fuzz_commands(tmp_path_factory: pytest.TempPathFactory) -> None:
    keep = os.environ.get("PRESK_FUZZ_KEEP")
    root = Path(keep) if keep else tmp_path_factory.mktemp("fuzz")
    root.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PRESK_DEBUG", "PRESK_THREADS")}
    env |= {"NO_COLOR": "1", "PRESK_CACHE": str(root / "cache")}
    started = time.monotonic()
    failures: list[Failure] = []
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(WORKERS) as pool:
        jobs = [pool.submit(_fuzz_one, mutant(i), root, env) for i in range(COUNT)]
        for job in jobs:
            found, seen = job.result()
            failures += found
            outcomes += seen
    seconds = time.monotonic() - started
    report = _report(failures)
    (root / "report.txt").write_text(report, encoding="utf-8")
    spent = {c: sum(o.seconds for o in outcomes if o.command == c) for c in TIMEOUT}
    print(
        f"{COUNT} mutants, {len(outcomes)} commands in {seconds:.0f} s "
        f"({', '.join(f'{c} {t:.0f} s' for c, t in spent.items())}); report in {root}"
    )
    # The mutants must reach the back end, or the test proves little.
    native_ok = sum(o.command == "native" and o.code == 0 for o in outcomes)
    assert native_ok >= COUNT // 10, f"only {native_ok} native runs succeeded"
    if failures:
        pytest.fail(report, pytrace=False)
