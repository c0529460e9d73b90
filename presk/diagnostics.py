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
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TextIO


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


def printable(text: str) -> str:
    """Text from a file or a flag as one line: control characters as escapes."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class UsageError(Exception):
    """A bad flag or argument value: the command prints one line and exits 2."""


class NotBuiltYet(Exception):
    """A command, flag or option of the manual that presk does not have yet: exit 2."""


class CommandError(Exception):
    """A failure outside the program, such as a file that cannot be read: one line, exit 1."""


class _Twice(ValueError):
    """An object of a JSON document naming a key twice."""


def _once(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """An object whose keys are each named once: of two, json would keep the last
    silently, and a plan or profile meant the other as often as not."""
    doc: dict[str, object] = {}
    for key, value in pairs:
        if key in doc:
            raise _Twice(f"the key {json.dumps(key)} twice in one object")
        doc[key] = value
    return doc


def read_json(path: str, where: str, error: Callable[[str], Exception]) -> object:
    """The JSON document in the file at `path`. If it cannot be read or is not JSON,
    raises `error` of one line that starts with `where` (the flag and the file)."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc: object = json.load(handle, object_pairs_hook=_once)
    except OSError as failure:
        raise error(f"{where}: {failure.strerror or failure}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as failure:
        raise error(f"{where}: not JSON ({failure})") from None
    except _Twice as failure:
        raise error(f"{where}: not JSON that presk reads ({failure})") from None
    except ValueError:  # a number past Python's limit of digits
        raise error(f"{where}: not JSON that presk reads (a number of too many digits)") from None
    except RecursionError:
        raise error(f"{where}: not JSON that presk reads (nested too deeply)") from None
    return doc


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


# --- Rendering -------------------------------------------------------------------------------
#
# Layout, fixed by the manual's examples (docs/diagnostics-rendering.md has the full rules):
#
#     [E2003] Error: message                 header
#        ,-[ file:line:col ]                 box top, indented gutter+2
#        |
#      3 |   a + b                           numbered source row: " {n:>w} | " + text
#        |   ^^|^^                           underline: `^` over the span, `|` at the mark
#        |     `---- label                   dashes run to the group's text column
#        |
#        | Note: …
#     ---'                                   closing: gutter+2 dashes
#
# Every row is "gutter prefix" + "area"; the area is the rail columns (width W, 0 without a
# multi-line span) followed by the source text, so source column c sits at area index W + c - 1.

_RESET = "\x1b[0m"
_HEADER_STYLE = {True: "\x1b[1;31m", False: "\x1b[1;33m"}  # keyed by is_error
_PRIMARY_STYLE = {True: "\x1b[31m", False: "\x1b[33m"}
_SECONDARY_STYLE = "\x1b[36m"

# Unlabelled lines inside a multi-line span: runs longer than this are elided to their first
# and last line around a `:` row, so a whole-function span stays a few lines tall.
_MAX_RUN = 3


@dataclass(frozen=True, slots=True)
class _Placed:
    """A label resolved to 1-based line/column positions (last_col is inclusive)."""

    label: Label
    primary: bool
    first_line: int
    first_col: int
    last_line: int
    last_col: int

    @property
    def multi(self) -> bool:
        return self.first_line != self.last_line

    @property
    def mark(self) -> int:
        """Column of the `|` mark: the middle of the underline (index len//2)."""
        return self.first_col + (self.last_col - self.first_col + 1) // 2


@dataclass(slots=True)
class _Group:
    """Lines drawn together: one labelled line, or the lines joined by multi-line spans."""

    first: int
    last: int
    rails: list[_Placed] = field(default_factory=list)
    singles: dict[int, list[_Placed]] = field(default_factory=dict)


class _Row:
    """One output row as styled character cells, so overlapping marks can overwrite."""

    __slots__ = ("cells",)

    def __init__(self) -> None:
        self.cells: list[tuple[str, str | None]] = []

    def put(self, pos: int, ch: str, style: str | None) -> None:
        if pos >= len(self.cells):
            self.cells.extend([(" ", None)] * (pos + 1 - len(self.cells)))
        self.cells[pos] = (ch, style)

    def write(self, pos: int, text: str, style: str | None) -> None:
        for i, ch in enumerate(text):
            self.put(pos + i, ch, style)

    def get(self, pos: int) -> str:
        return self.cells[pos][0] if pos < len(self.cells) else " "

    def text(self, color: bool) -> str:
        n = len(self.cells)
        while n and self.cells[n - 1][0] == " ":  # no trailing blanks, styled or not
            n -= 1
        if not color:
            return "".join(ch for ch, _ in self.cells[:n])
        out: list[str] = []
        current: str | None = None
        for ch, style in self.cells[:n]:
            if style != current:
                if current is not None:
                    out.append(_RESET)
                if style is not None:
                    out.append(style)
                current = style
            out.append(ch)
        if current is not None:
            out.append(_RESET)
        return "".join(out)


def _display(line: str) -> str:
    """Text made safe to print on one row: one cell per character.

    Tabs and other control characters become spaces so that character columns line up with
    the underline (a raw tab would jump to the terminal's tab stop), and so that escape codes
    in a source file or in a message quoting it cannot reach the terminal.
    """
    return "".join(" " if ch < " " or ch == "\x7f" else ch for ch in line)


def _rows(text: str) -> list[str]:
    """A message, label or help text as display-safe rows, split at its newlines."""
    return [_display(row) for row in text.split("\n")]


def _locate(source: Source, offset: int) -> tuple[int, int]:
    """Line and column of an offset, clamped into the text.

    An offset at the very end of a text ending in a newline would fall on a line that does
    not exist; it points just past the end of the last line instead.
    """
    offset = min(max(offset, 0), len(source.text))
    line, col = source.line_col(offset)
    last = max(source.line_count, 1)
    if line > last:
        return last, len(source.line_text(last)) + 1
    return line, col


def _place(label: Label, primary: bool) -> _Placed:
    """Resolve a label's span; an empty span becomes a one-column mark at its start."""
    span = label.span
    n = len(span.source.text)
    start = min(max(span.start, 0), n)
    end = min(max(span.end, start), n)
    first_line, first_col = _locate(span.source, start)
    if end == start:
        last_line, last_col = first_line, first_col
    else:
        last_line, last_col = _locate(span.source, end - 1)
    return _Placed(label, primary, first_line, first_col, last_line, last_col)


def _group(placed: list[_Placed]) -> list[_Group]:
    """Partition one source's labels into groups, in line order."""
    # Outer spans (earlier start, later end) get the leftmost rails.
    multi = sorted(
        (p for p in placed if p.multi), key=lambda p: (p.first_line, -p.last_line, not p.primary)
    )
    groups: list[_Group] = []
    for p in multi:
        if groups and p.first_line <= groups[-1].last:
            groups[-1].last = max(groups[-1].last, p.last_line)
            groups[-1].rails.append(p)
        else:
            groups.append(_Group(p.first_line, p.last_line, [p]))
    by_line: dict[int, _Group] = {}
    for p in placed:
        if p.multi:
            continue
        line = p.first_line
        home = next((g for g in groups if g.first <= line <= g.last), None) or by_line.get(line)
        if home is None:
            home = by_line[line] = _Group(line, line)
        home.singles.setdefault(line, []).append(p)
    return sorted([*groups, *by_line.values()], key=lambda g: g.first)


def _plan(group: _Group) -> list[int | None]:
    """The line numbers a group prints, with None for an elided run of lines."""
    if not group.rails:
        return [group.first]
    keep = (
        set(group.singles)
        | {p.first_line for p in group.rails}
        | {p.last_line for p in group.rails}
    )
    plan: list[int | None] = []
    run: list[int] = []
    for line in range(group.first, group.last + 1):
        if line not in keep:
            run.append(line)
            continue
        plan.extend(run if len(run) <= _MAX_RUN else [run[0], None, run[-1]])
        run = []
        plan.append(line)
    return plan


class _Painter:
    """Draws the groups of one diagnostic into text lines."""

    def __init__(self, diag: Diagnostic, width: int, color: bool) -> None:
        self.width = width
        self.color = color
        self.primary_style = _PRIMARY_STYLE[diag.is_error]
        self.lines: list[str] = []

    def style(self, p: _Placed) -> str:
        return self.primary_style if p.primary else _SECONDARY_STYLE

    def emit(self, prefix: str, row: _Row | None = None) -> None:
        body = row.text(self.color) if row is not None else ""
        self.lines.append((prefix + body).rstrip(" "))

    def blank(self) -> None:
        self.emit(" " * (self.width + 2) + "|")

    @property
    def plain_prefix(self) -> str:
        return " " * (self.width + 2) + "| "

    def rails_row(self, group: _Group, started_by: int) -> _Row:
        """A row holding `|` for each rail that started on or before line `started_by`."""
        row = _Row()
        for i, p in enumerate(group.rails):
            if p.first_line <= started_by:
                row.put(2 * i, "|", self.style(p))
        return row

    def group(self, source: Source, group: _Group) -> None:
        rails = group.rails
        w_rails = 2 * len(rails) + 2 if rails else 0
        # Label texts of a group share one column: two past the rightmost labelled column,
        # three when rails are drawn (the manual's examples 5 and 7). A multi-line span's end
        # is clamped to its line's text so that covering the newline changes nothing.
        ends = [p.last_col for ps in group.singles.values() for p in ps]
        ends += [min(p.last_col, len(source.line_text(p.last_line))) for p in rails]
        text_col = max(ends) + (3 if rails else 2)

        prev = group.first
        for line in _plan(group):
            if line is None:
                self.emit(" " * (self.width + 2) + ": ", self.rails_row(group, prev))
                continue
            prev = line
            self.emit(f" {line:>{self.width}} | ", self.source_row(source, group, line, w_rails))
            self.singles(group, line, w_rails, text_col)
        if rails:
            self.blank_rails(group)
            # Bottom labels, innermost rail first; the rails left of it are still open.
            for i in reversed(range(len(rails))):
                p = rails[i]
                row = self.outer_rails(rails, i)
                row.put(2 * i, "`", self.style(p))
                for pos in range(2 * i + 1, w_rails + text_col):
                    row.put(pos, "-", self.style(p))
                self.label_text(row, w_rails + text_col, p, partial(self.outer_rails, rails, i))

    def blank_rails(self, group: _Group) -> None:
        self.emit(self.plain_prefix, self.rails_row(group, group.last))

    def outer_rails(self, rails: list[_Placed], i: int) -> _Row:
        row = _Row()
        for j in range(i):
            row.put(2 * j, "|", self.style(rails[j]))
        return row

    def source_row(self, source: Source, group: _Group, line: int, w_rails: int) -> _Row:
        row = _Row()
        arrow: _Placed | None = None
        arrow_col = 0
        for i, p in enumerate(group.rails):
            if line == p.first_line:
                row.put(2 * i, ",", self.style(p))
            elif line > p.first_line:
                row.put(2 * i, "|", self.style(p))
            if arrow is None and line in (p.first_line, p.last_line):
                arrow, arrow_col = p, 2 * i
        if arrow is not None:
            # `,->` where a span starts, `|->` where it ends; other rails it crosses stay.
            for pos in range(arrow_col + 1, w_rails - 2):
                if row.get(pos) == " ":
                    row.put(pos, "-", self.style(arrow))
            row.put(w_rails - 2, ">", self.style(arrow))
        row.write(w_rails, _display(source.line_text(line)), None)
        return row

    def singles(self, group: _Group, line: int, w_rails: int, text_col: int) -> None:
        labels = group.singles.get(line)
        if not labels:
            return
        under = self.rails_row(group, line)
        # Wider spans first so a narrower one drawn inside it keeps its own colour; marks last.
        for p in sorted(labels, key=lambda p: p.first_col - p.last_col):
            for col in range(p.first_col, p.last_col + 1):
                under.put(w_rails + col - 1, "^", self.style(p))
        for p in labels:
            under.put(w_rails + p.mark - 1, "|", self.style(p))
        self.emit(self.plain_prefix, under)
        # The rightmost label is drawn first; the marks to its left continue down as `|`.
        order = sorted(labels, key=lambda p: (-p.mark, not p.primary))
        for k, p in enumerate(order):
            rest = order[k + 1 :]

            def base(rest: list[_Placed] = rest) -> _Row:
                row = self.rails_row(group, line)
                for q in rest:
                    row.put(w_rails + q.mark - 1, "|", self.style(q))
                return row

            row = base()
            row.put(w_rails + p.mark - 1, "`", self.style(p))
            for col in range(p.mark + 1, text_col + 1):
                row.put(w_rails + col - 1, "-", self.style(p))
            self.label_text(row, w_rails + text_col, p, base)

    def label_text(self, row: _Row, pos: int, p: _Placed, base: Callable[[], _Row]) -> None:
        """Finish a label row with ` text`; further lines of the text align under the first."""
        first, *more = _rows(p.label.text)
        row.write(pos, " " + first, self.style(p))
        self.emit(self.plain_prefix, row)
        for extra in more:
            cont = base()
            cont.write(pos + 1, extra, self.style(p))
            self.emit(self.plain_prefix, cont)


def _styled(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{_RESET}" if color else text


def render(diag: Diagnostic, color: bool = False) -> str:
    """Render a diagnostic in the manual's box format; the text ends with a newline.

    With `color`, the header's `[CODE] Error:` and the labels' marks and texts carry ANSI
    colours; nothing else changes, so stripping the escapes gives the plain rendering.
    """
    severity = "Error" if diag.is_error else "Warning"
    header = _styled(f"[{diag.code}] {severity}:", _HEADER_STYLE[diag.is_error], color)
    message = "\n".join(_rows(diag.message))
    out = [f"{header} {message}"]
    extras = [(word, text) for word, text in (("Help", diag.help), ("Note", diag.note)) if text]
    if diag.primary is None:
        # Run-time errors have no source box; a help or note still follows, unboxed.
        out += [f"{word}: {row}" for word, text in extras for row in _rows(str(text))]
        return "\n".join(out) + "\n"

    # Labels grouped by source file (identity), the primary's file first.
    placed = [_place(diag.primary, True)] + [_place(lab, False) for lab in diag.secondary]
    sources: list[tuple[Source, list[_Placed]]] = []
    for p in placed:
        src = p.label.span.source
        entry = next((e for e in sources if e[0] is src), None)
        if entry is None:
            sources.append((src, [p]))
        else:
            entry[1].append(p)
    layout = [(src, ps, _group(ps)) for src, ps in sources]
    numbers = [n for _, _, gs in layout for g in gs for n in _plan(g) if n is not None]
    width = len(str(max(numbers)))

    painter = _Painter(diag, width, color)
    for index, (src, ps, groups) in enumerate(layout):
        where = f"{printable(src.path)}:{ps[0].first_line}:{ps[0].first_col}"
        if index == 0:
            painter.emit(" " * (width + 2) + f",-[ {where} ]")
        else:
            painter.blank()
            painter.emit(" " * (width + 2) + f"|-[ {where} ]")
        for g in groups:
            painter.blank()
            painter.group(src, g)
    # Help and Note move right past the rails, when a group drew any.
    indent = " " * max((2 * len(g.rails) + 2 if g.rails else 0) for *_, gs in layout for g in gs)
    for word, text in extras:
        first, *more = _rows(str(text))
        painter.blank()
        painter.emit(painter.plain_prefix + indent + f"{word}: {first}")
        for extra in more:
            painter.emit(painter.plain_prefix + indent + " " * (len(word) + 2) + extra)
    painter.emit("-" * (width + 2) + "'")
    return "\n".join(out + painter.lines) + "\n"


def use_color(stream: TextIO) -> bool:
    """Whether to colour output to `stream`: it is a terminal and NO_COLOR is unset or empty."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def print_diagnostics(diags: Iterable[Diagnostic], stream: TextIO) -> None:
    """Write each diagnostic's rendering to `stream`, coloured as `use_color` decides."""
    color = use_color(stream)
    for diag in diags:
        stream.write(render(diag, color))
