"""The examples of docs/diagnostics.md, run and compared with the page, byte for byte.

The page gives, per code, small programs (a line `` `name.psk`: `` followed by a ```text
block) and the console output of presk on them (a ```console block: `$ presk …` then the
output). Each console block is run in a fresh directory holding the section's programs,
as the page says the examples were run ("from the directory holding the file").
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_presk

DOC = REPO_ROOT / "docs" / "diagnostics.md"

# Files an example imports that the page describes only in prose.
HELPERS: dict[str, dict[str, str]] = {
    "E1001": {
        "lib/ring_a.psk": 'import "ring_b.psk" as b\n',
        "lib/ring_b.psk": 'import "ring_a.psk" as a\n',
    },
}


@dataclass
class Example:
    section: str
    line: int
    argv: list[str]
    expected: str
    files: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.section}-{self.argv[1] if len(self.argv) > 1 else ''}-L{self.line}"


FILE_LINE = re.compile(r"^`([\w./-]+\.psk)`:$")
HEADING = re.compile(r"^## ([EW]\d{4})\b")


def parse_doc(text: str) -> list[Example]:
    lines = text.splitlines()
    examples: list[Example] = []
    section = ""
    files: dict[str, str] = {}
    pending_name: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = HEADING.match(line)
        if heading:
            section = heading.group(1)
            files = dict(HELPERS.get(section, {}))
        named = FILE_LINE.match(line)
        if named:
            pending_name = named.group(1)
        if line.startswith("```"):
            lang = line[3:].strip()
            start = i
            i += 1
            body: list[str] = []
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            if lang == "text" and pending_name is not None:
                files[pending_name] = "\n".join(body) + "\n"
                pending_name = None
            elif lang == "console" and body and body[0].startswith("$ presk "):
                argv = shlex.split(body[0][2:])[1:]
                expected = "\n".join(body[1:]) + "\n"
                examples.append(Example(section, start + 1, argv, expected, dict(files)))
        i += 1
    return examples


EXAMPLES = parse_doc(DOC.read_text(encoding="utf-8")) if DOC.exists() else []


def test_the_page_has_examples() -> None:
    if not DOC.exists():
        pytest.skip("docs/diagnostics.md is not written yet")
    assert len(EXAMPLES) >= 30
    sections = {e.section for e in EXAMPLES}
    assert "W0001" in sections and "E0001" in sections


# Examples where the page and presk disagree at the time of writing: (section, file) with
# what differs. The page or the implementation must change; until then these are xfail.
DOC_DRIFT: dict[tuple[str, str], str] = {}


def _param(example: Example) -> object:
    key = (example.section, example.argv[1] if len(example.argv) > 1 else "")
    marks = []
    if key in DOC_DRIFT:
        marks.append(pytest.mark.xfail(strict=False, reason=f"page vs presk: {DOC_DRIFT[key]}"))
    return pytest.param(example, id=example.id, marks=marks)


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES])
def test_doc_example(example: Example, tmp_path: Path) -> None:
    for name, text in example.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    code, out, err = run_presk(*example.argv, cwd=tmp_path)
    assert out + err == example.expected, (
        f"docs/diagnostics.md line {example.line}: `presk {' '.join(example.argv)}` differs\n"
        f"--- page\n{example.expected}--- actual\n{out}{err}"
    )
    assert code == (1 if "Error:" in err else 0)
