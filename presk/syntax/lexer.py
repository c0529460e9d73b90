"""The lexer: source text to tokens.

Unicode and ASCII spellings lex to the same kinds (ℝ/Real, λ/\\, ·/@).
Comments (`--` to the end of the line) produce no tokens. A NEWLINE token
ends a line that matters: newlines inside ( ) and [ ] are dropped, as is a
newline after a binary operator or before a line that opens with `|>`, so an
expression can continue on the next line. Runs of newlines collapse to one.
"""

from __future__ import annotations

import unicodedata

from presk.diagnostics import Diagnostic, Label, Sink, Source, Span
from presk.syntax.tokens import KEYWORDS, Kind, Token

# Longest spellings first, so that `->` wins over `-`.
_PUNCT: list[tuple[str, Kind]] = [
    ("...", Kind.ELLIPSIS),
    ("->", Kind.ARROW),
    ("==", Kind.EQEQ),
    ("!=", Kind.NE),
    ("<=", Kind.LE),
    (">=", Kind.GE),
    ("|>", Kind.PIPE),
    ("≤", Kind.LE),
    ("≥", Kind.GE),
    ("≠", Kind.NE),
    ("→", Kind.ARROW),
    ("−", Kind.MINUS),
    ("(", Kind.LPAREN),
    (")", Kind.RPAREN),
    ("[", Kind.LBRACKET),
    ("]", Kind.RBRACKET),
    ("{", Kind.LBRACE),
    ("}", Kind.RBRACE),
    (",", Kind.COMMA),
    (":", Kind.COLON),
    (".", Kind.DOT),
    ("=", Kind.EQ),
    ("<", Kind.LT),
    (">", Kind.GT),
    ("+", Kind.PLUS),
    ("-", Kind.MINUS),
    ("*", Kind.STAR),
    ("/", Kind.SLASH),
    ("%", Kind.PERCENT),
    ("^", Kind.CARET),
    ("·", Kind.CONTRACT),
    ("@", Kind.CONTRACT),
    ("λ", Kind.KW_LAMBDA),
    ("ℝ", Kind.KW_REAL),
    ("\\", Kind.KW_LAMBDA),
]

# After one of these a line is not finished: the expression continues.
_CONTINUES = {
    Kind.PLUS,
    Kind.MINUS,
    Kind.STAR,
    Kind.SLASH,
    Kind.PERCENT,
    Kind.CARET,
    Kind.CONTRACT,
    Kind.PIPE,
    Kind.EQ,
    Kind.ARROW,
    Kind.COMMA,
    Kind.EQEQ,
    Kind.LE,
    Kind.LT,
    Kind.GE,
    Kind.GT,
    Kind.NE,
}


def _ident_start(ch: str) -> bool:
    return ch == "_" or (ch.isalpha() and ch not in "λℝ")


def _ident_part(ch: str) -> bool:
    if ch == "_" or ch.isdigit() or ch == "'":
        return True
    if ch in "λℝ·":
        return False
    # Letters, combining marks (a decomposed ŷ), and sub/superscript digits.
    category = unicodedata.category(ch)
    return category[0] in "LM" or category in ("No", "Nd")


class Lexer:
    """Turns one source into a list of tokens, reporting bad characters."""

    def __init__(self, source: Source, sink: Sink) -> None:
        self.source = source
        self.text = source.text
        self.sink = sink
        self.pos = 0
        self.tokens: list[Token] = []
        self.depth = 0  # open ( and [

    def span(self, start: int, end: int) -> Span:
        return Span(self.source, start, end)

    def error(self, code: str, message: str, start: int, end: int, label: str) -> None:
        self.sink.report(Diagnostic(code, message, Label(self.span(start, end), label)))

    def emit(self, kind: Kind, text: str, start: int, end: int) -> None:
        self.tokens.append(Token(kind, text, self.span(start, end)))

    def newline(self, at: int) -> None:
        """Emit a NEWLINE unless the line continues or one was just emitted."""
        if self.depth > 0 or not self.tokens:
            return
        last = self.tokens[-1].kind
        if last in (Kind.NEWLINE, Kind.LBRACE) or last in _CONTINUES:
            return
        if self._next_line_starts_with_pipe(at):
            return
        # The newline that ends a file without one is empty: spans stay in the text.
        self.emit(Kind.NEWLINE, "\n", at, min(at + 1, len(self.text)))

    def _next_line_starts_with_pipe(self, at: int) -> bool:
        i = at + 1
        while i < len(self.text):
            ch = self.text[i]
            if ch in " \t\r\n":
                i += 1
            elif self.text.startswith("--", i):
                end = self.text.find("\n", i)
                if end < 0:
                    return False
                i = end + 1
            else:
                return self.text.startswith("|>", i)
        return False

    def run(self) -> list[Token]:
        """Lex the whole source; always ends with an EOF token."""
        text = self.text
        n = len(text)
        while self.pos < n:
            ch = text[self.pos]
            start = self.pos
            if ch == "\n":
                self.newline(start)
                self.pos += 1
            elif ch in " \t\r\ufeff":
                self.pos += 1
            elif text.startswith("--", start):
                end = text.find("\n", start)
                self.pos = n if end < 0 else end
            elif ch.isdigit() and ch.isascii():
                self.lex_number()
            elif ch == '"':
                self.lex_string()
            elif _ident_start(ch):
                self.pos += 1
                while self.pos < n and _ident_part(text[self.pos]):
                    self.pos += 1
                word = text[start : self.pos]
                word = unicodedata.normalize("NFC", word)
                self.emit(KEYWORDS.get(word, Kind.IDENT), word, start, self.pos)
            else:
                self.lex_punct()
        self.newline(n)
        self.emit(Kind.EOF, "", n, n)
        return self.tokens

    def lex_number(self) -> None:
        text, start = self.text, self.pos
        n = len(text)
        while self.pos < n and text[self.pos].isdigit() and text[self.pos].isascii():
            self.pos += 1
        kind = Kind.INT
        # A `.` followed by a digit continues the number; `x.0` never arises.
        if self.pos + 1 < n and text[self.pos] == "." and text[self.pos + 1].isdigit():
            kind = Kind.FLOAT
            self.pos += 1
            while self.pos < n and text[self.pos].isdigit() and text[self.pos].isascii():
                self.pos += 1
        if self.pos < n and text[self.pos] in "eE":
            j = self.pos + 1
            if j < n and text[j] in "+-":
                j += 1
            if j < n and text[j].isdigit() and text[j].isascii():
                kind = Kind.FLOAT
                self.pos = j
                while self.pos < n and text[self.pos].isdigit() and text[self.pos].isascii():
                    self.pos += 1
        self.emit(kind, text[start : self.pos], start, self.pos)

    def lex_string(self) -> None:
        text, start = self.text, self.pos
        end = start + 1
        while end < len(text) and text[end] not in '"\n':
            end += 1
        if end >= len(text) or text[end] != '"':
            self.error("E0002", "unterminated string", start, end, 'this string has no closing `"`')
            self.pos = end
            return
        self.emit(Kind.STRING, text[start + 1 : end], start, end + 1)
        self.pos = end + 1

    def lex_punct(self) -> None:
        text, start = self.text, self.pos
        for spelling, kind in _PUNCT:
            if text.startswith(spelling, start):
                self.pos = start + len(spelling)
                if kind in (Kind.LPAREN, Kind.LBRACKET):
                    self.depth += 1
                elif kind in (Kind.RPAREN, Kind.RBRACKET):
                    self.depth = max(0, self.depth - 1)
                self.emit(kind, spelling, start, self.pos)
                return
        ch = text[start]
        shown = ch if ch.isprintable() else f"U+{ord(ch):04X}"
        self.error(
            "E0001", f"unexpected character `{shown}`", start, start + 1, "not part of the language"
        )
        self.pos = start + 1


def lex(source: Source, sink: Sink) -> list[Token]:
    """Tokens of `source`; problems go to `sink`."""
    return Lexer(source, sink).run()
