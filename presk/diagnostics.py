"""Diagnostics: source files, spans, labels, codes, and their rendering.

Every stage reports problems in the program as `Diagnostic`s collected into a
`Sink`; at the end of a stage the sink raises `CompileError` if any error was
reported. Past the type checker a failure is a `CompilerBug`, never a user
diagnostic. Rendering (`render`) draws the box format of the manual:
`[E2003] Error: …`, a `,-[ file:line:col ]` box with labelled source lines,
then `Help:` and `Note:` lines.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


class Source:
    """A source file's display path and text, with line tables for spans.

    Spans index characters of `text`; `byte_offset` converts for the token
    dump, which shows UTF-8 byte offsets.
    """

    __slots__ = ("_byte_prefix", "_line_starts", "path", "text")

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self._line_starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
        self._byte_prefix: list[int] | None = None

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and character column of a character offset."""
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def line_text(self, line: int) -> str:
        """The text of 1-based line `line`, without its newline."""
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    def line_start(self, line: int) -> int:
        """Character offset of the first character of 1-based `line`."""
        return self._line_starts[line - 1]

    @property
    def line_count(self) -> int:
        """Number of lines (a trailing newline does not open a new line)."""
        n = len(self._line_starts)
        return n - 1 if self.text.endswith("\n") else n

    def byte_offset(self, offset: int) -> int:
        """UTF-8 byte offset of a character offset."""
        if self._byte_prefix is None:
            prefix = [0]
            for ch in self.text:
                prefix.append(prefix[-1] + len(ch.encode("utf-8", "surrogatepass")))
            self._byte_prefix = prefix
        return self._byte_prefix[offset]


@dataclass(frozen=True, slots=True, eq=False)
class Span:
    """A half-open range of characters [start, end) in a source."""

    source: Source
    start: int
    end: int

    def to(self, other: Span) -> Span:
        """The span covering this one and `other` (same source)."""
        return Span(self.source, min(self.start, other.start), max(self.end, other.end))

    def __repr__(self) -> str:
        return f"Span({self.source.path}:{self.start}..{self.end})"


@dataclass(frozen=True, slots=True)
class Label:
    """A span of source with a short message drawn under it."""

    span: Span
    text: str


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One error or warning. The code's first letter gives the severity.

    `primary` is None for run-time errors, which print as one header line.
    """

    code: str
    message: str
    primary: Label | None = None
    secondary: tuple[Label, ...] = ()
    help: str | None = None
    note: str | None = None

    @property
    def is_error(self) -> bool:
        return self.code.startswith("E")


class CompileError(Exception):
    """Raised at the end of a stage that reported errors."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__("; ".join(f"[{d.code}] {d.message}" for d in diagnostics))
        self.diagnostics = diagnostics


class CompilerBug(Exception):
    """An internal inconsistency past the type checker: our fault, not the program's."""


@dataclass
class Sink:
    """Collects diagnostics during a stage."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def report(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)

    def check(self) -> None:
        """Raise CompileError carrying everything reported if any is an error."""
        if self.has_errors:
            raise CompileError(list(self.diagnostics))
