"""Text from the user, made inert for the file it lands in: Make, sh or Markdown.

Exports put file names, entry text, type text and dims into Makefiles, shell
scripts and READMEs. Each language gets its own rule, because each breaks in
its own way: a newline ends a Make or sh comment and starts a command, a
backslash before the newline continues a Make comment, `$` expands in Make
text, a quote ends an sh word. C text goes through the C printer's own
sanitisers instead (comments, string literals, identifiers).
"""

from __future__ import annotations

import re

# The characters a word may hold unquoted in sh and in Make alike.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def one_line(text: str) -> str:
    """`text` with every character that is not printable (newlines, controls, bidi marks) as `?`."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def make_comment(text: str) -> str:
    """Text for after `# ` in a Makefile: one line, not continued onto the next.

    Make does not expand `$` inside a comment; what could escape is a newline
    (the next line is Make text) or a final backslash (which continues the
    comment, swallowing the line after it).
    """
    line = one_line(text)
    stripped = line.rstrip("\\")
    return stripped + "?" * (len(line) - len(stripped))


def make_word(text: str) -> str:
    """A file name as a word of Make text (a prerequisite or a variable's value).

    `$` becomes `$$`; a name Make cannot hold as one word (blanks, `#`, `%`,
    `:`, `;`, quotes, backslashes, controls) is refused: exports only name their own
    files this way, so such a name is the compiler's bug.
    """
    if not re.fullmatch(r"[A-Za-z0-9_./$+-]+", text):
        raise ValueError(f"not a Make word: {text!r}")
    return text.replace("$", "$$")


def sh_comment(text: str) -> str:
    """Text for after `# ` in a shell script: one line."""
    return one_line(text)


def sh_word(text: str) -> str:
    """`text` as one sh word: as it is when that is safe, else single-quoted (`'` as `'\\''`)."""
    if _PLAIN_WORD.fullmatch(text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def markdown(text: str) -> str:
    """Text for a line of Markdown: inert already, kept to one line."""
    return one_line(text)


__all__ = ["make_comment", "make_word", "markdown", "one_line", "sh_comment", "sh_word"]
