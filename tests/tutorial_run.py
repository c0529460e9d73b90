"""Run every command of the README and of docs/tutorial.md, in order, against goldens.

`make tutorial` calls this script from the repository's root. The commands are

* the indented lines of the README's section "Using it", run exactly as written;
* the `$ ` lines of the ```console blocks of docs/tutorial.md, where a leading `presk`
  becomes `$PRESK` (default `.venv/bin/presk`). The lines the page shows under a command
  must appear, in that order, in what the command prints.

Each runs through `bash -c` from the repository's root with NO_COLOR=1 and a fresh
PRESK_CACHE, and its exit code, stdout and stderr are compared with
`tests/tutorial/NN.out` (NN counts from 01 in that order). `--update` rewrites the
goldens instead; read the diff before committing.

The filter applied to both sides before comparing (`normalise`):

* the repository's absolute path becomes `<repo>`, the cache directory `<cache>`;
* in the output of `presk bench`, every number of its table (a speedup `22.5x` too)
  becomes `<n>` and every run of blanks one blank: the timings, and the ratios and
  column widths that follow from them, change from run to run;
* in the output of `presk train`, the time of a step becomes `<n> ms`.

Exit 0 when every command matches; 1 otherwise, with a diff per mismatch.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
GOLDEN = REPO_ROOT / "tests" / "tutorial"
TIMEOUT = 600.0
"""Seconds per command: `make -C … check` builds and runs a C program."""


@dataclass(frozen=True)
class Command:
    number: int
    origin: str  # where it is written: "README.md:31"
    line: str  # the command as written
    shell: str  # the command as run
    shown: tuple[str, ...]  # the output lines the page shows under it

    @property
    def golden(self) -> Path:
        return GOLDEN / f"{self.number:02d}.out"


@dataclass(frozen=True)
class Result:
    command: Command
    text: str  # the normalised record: the command, its exit code, stdout and stderr


def readme_commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) of the indented lines of the section "Using it"."""
    found: list[tuple[int, str]] = []
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            if inside:
                break
            inside = line.strip() == "## Using it"
        elif inside and line.startswith("    ") and line.strip():
            found.append((number, line.strip()))
        elif inside and found and line.strip():
            break  # the block of commands has ended
    return found


def tutorial_commands(text: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line number, command, shown output) of the `$ ` lines of ```console blocks."""
    found: list[tuple[int, str, list[str]]] = []
    in_console = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_console = line.strip() == "```console" and not in_console
            continue
        if not in_console:
            continue
        if line.startswith("$ "):
            found.append((number, line[2:].strip(), []))
        elif found and line.strip():
            found[-1][2].append(line)
    return [(n, c, tuple(shown)) for n, c, shown in found]


def commands(presk: str) -> list[Command]:
    """Every command, README first, numbered in order."""
    out: list[Command] = []
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    for line_no, line in readme_commands(readme):
        out.append(Command(len(out) + 1, f"README.md:{line_no}", line, line, ()))
    page = REPO_ROOT / "docs" / "tutorial.md"
    if page.exists():
        for line_no, line, shown in tutorial_commands(page.read_text(encoding="utf-8")):
            shell = re.sub(r"^presk\b", presk, line)
            out.append(Command(len(out) + 1, f"docs/tutorial.md:{line_no}", line, shell, shown))
    return out


_NUMBER = re.compile(r"(?<![\w.])[+-]?\d+(\.\d+)?([eE][+-]?\d+)?x?(?![\w.])")


_STEP_TIME = re.compile(r"\d[\d.e+-]* m?s a step")


def normalise(text: str, line: str, cache: str) -> str:
    """The filter documented above: absolute paths, and the numbers of bench's rows."""
    # The longer path first: either may be a prefix of the other (a cache at /tmp/c,
    # a checkout at /tmp/ci1).
    for path, name in sorted(
        ((cache, "<cache>"), (str(REPO_ROOT), "<repo>")), key=lambda p: -len(p[0])
    ):
        text = text.replace(path, name)
    if re.search(r"(^|\s)(\S*/)?presk bench\b", line):
        rows = text.split("\n")
        for i, row in enumerate(rows):
            if not row.startswith(("$ ", "# ")):
                rows[i] = re.sub(r"  +", " ", _NUMBER.sub("<n>", row))
        text = "\n".join(rows)
    if re.search(r"(^|\s)(\S*/)?presk train\b", line):
        text = _STEP_TIME.sub("<n> ms a step", text)
    return text


def _text(stream: bytes) -> str:
    text = stream.decode("utf-8", "replace")
    return text if not text or text.endswith("\n") else text + "\n# (no newline at the end)\n"


def run(command: Command, cache: str) -> Result:
    env = {**os.environ, "NO_COLOR": "1", "PRESK_CACHE": cache}
    # Under `make tutorial`, a nested make would say `make[1]:` instead of `make:`.
    for name in ("PRESK_DEBUG", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
        env.pop(name, None)
    try:
        proc = subprocess.run(
            ["bash", "-c", command.shell],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT,
        )
        code, out, err = str(proc.returncode), proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as error:
        code, out, err = f"timeout after {TIMEOUT:g} s", error.stdout or b"", error.stderr or b""
    record = f"$ {command.line}\n# exit {code}\n# stdout\n{_text(out)}# stderr\n{_text(err)}"
    return Result(command, normalise(record, command.line, cache))


def problems(result: Result) -> list[str]:
    """What is wrong with a result: its golden differs, or a shown line is missing."""
    found: list[str] = []
    command = result.command
    golden = command.golden
    if not golden.exists():
        found.append(f"{command.origin}: no golden {golden.relative_to(REPO_ROOT)} (--update)")
    elif (expected := golden.read_text(encoding="utf-8")) != result.text:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            result.text.splitlines(keepends=True),
            fromfile=f"{golden.relative_to(REPO_ROOT)} (expected)",
            tofile="actual",
        )
        found.append(f"{command.origin}: `{command.line}` differs:\n{''.join(diff)}")
    lines = result.text.splitlines()
    at = 0
    for shown in command.shown:
        while at < len(lines) and lines[at].rstrip() != shown.rstrip():
            at += 1
        if at == len(lines):
            found.append(f"{command.origin}: `{command.line}` does not print `{shown}`")
            break
    return found


def run_all(presk: str) -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="presk-tutorial-cache-") as cache:
        return [run(command, cache) for command in commands(presk)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--update", action="store_true", help="rewrite the goldens")
    parser.add_argument("--list", action="store_true", help="print the commands, run none")
    parser.add_argument("--presk", default=os.environ.get("PRESK", ".venv/bin/presk"))
    args = parser.parse_args(argv)
    if args.list:
        for command in commands(args.presk):
            print(f"{command.number:02d}  {command.origin:22}  {command.shell}")
        return 0
    failures = 0
    for result in run_all(args.presk):
        command = result.command
        if args.update:
            GOLDEN.mkdir(parents=True, exist_ok=True)
            command.golden.write_text(result.text, encoding="utf-8")
        found = problems(result)
        failures += bool(found)
        status = "FAIL" if found else "ok"
        print(f"{command.number:02d} {status:4}  {command.line}", flush=True)
        for problem in found:
            print(problem)
    stale = sorted(set(GOLDEN.glob("*.out")) - {c.golden for c in commands(args.presk)})
    for path in stale:
        if args.update:
            path.unlink()
        else:
            print(f"a golden without its command: {path.relative_to(REPO_ROOT)}")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
