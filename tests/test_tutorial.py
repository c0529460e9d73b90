"""`make tutorial` inside `make test`: the README's and docs/tutorial.md's commands.

The commands run once, in order (an export comes before the `make -C` that builds it),
through tests/tutorial_run.py; each is then one test, comparing its exit code, stdout and
stderr with tests/tutorial/NN.out after the runner's filter (paths; bench's numbers).
`python tests/tutorial_run.py --update` rewrites the goldens.
"""

from __future__ import annotations

import os

import pytest
from tutorial_run import REPO_ROOT, Command, Result, commands, normalise, problems, run_all

PRESK = os.environ.get("PRESK", ".venv/bin/presk")
COMMANDS = commands(PRESK)


@pytest.fixture(scope="module")
def results() -> dict[int, Result]:
    return {result.command.number: result for result in run_all(PRESK)}


def test_commands_found() -> None:
    origins = {c.origin.split(":")[0] for c in COMMANDS}
    assert origins == {"README.md", "docs/tutorial.md"}
    assert any("presk bench" in c.line for c in COMMANDS)


def test_filter() -> None:
    record = "$ presk bench f\n# exit 0\n# stdout\nnative f64    12.5    9e-1   22.5x\n"
    assert normalise(record, "presk bench f", "/c") == (
        "$ presk bench f\n# exit 0\n# stdout\nnative f64 <n> <n> <n>\n"
    )
    path = f"{REPO_ROOT}/out/x and /tmp/c/ab"
    assert normalise(path, "presk run f", "/tmp/c") == "<repo>/out/x and <cache>/ab"
    # A cache whose path is a prefix of the checkout's (as CI's clone may make it).
    prefix = str(REPO_ROOT)[:-2]
    assert normalise(f"{REPO_ROOT}/x {prefix}/y", "presk run f", prefix) == "<repo>/x <cache>/y"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.number:02d}")
def test_tutorial_command(command: Command, results: dict[int, Result]) -> None:
    found = problems(results[command.number])
    if found:
        pytest.fail("\n".join(found), pytrace=False)
