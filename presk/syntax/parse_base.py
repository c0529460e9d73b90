"""The parser's cursor over the tokens, its error reporting and its recovery.

`ParserBase` holds what every `parse_<rule>` method uses: looking at and consuming
tokens, reporting a syntax error (which unwinds with `_Abort` to the nearest recovery
point) and skipping to the next declaration. The rules themselves live in
parse_types.py, parse_exprs.py and parser.py.
"""

from __future__ import annotations

from typing import NoReturn

from presk.diagnostics import Diagnostic, Label, Sink, Span
from presk.syntax import ast
from presk.syntax.deep import MAX_NESTING
from presk.syntax.tokens import Kind, Token, describe


class _Abort(Exception):
    """Unwinds to the nearest recovery point after a reported syntax error."""


class _Nested:
    """One level of nesting (a bracket, a prefix operator, a lambda, a type) while parsed."""

    def __init__(self, parser: ParserBase) -> None:
        self.parser = parser

    def __enter__(self) -> None:
        parser = self.parser
        parser.nesting += 1
        if parser.nesting > MAX_NESTING:
            parser.nesting -= 1  # __exit__ does not run when __enter__ raises
            parser.fail(
                "E0015",
                "expression nested too deeply",
                parser.tok,
                f"more than {MAX_NESTING} levels of brackets and operators",
            )

    def __exit__(self, *exc: object) -> None:
        self.parser.nesting -= 1


class ParserBase:
    """The token cursor and error reporting shared by the parser's rules."""

    def __init__(self, tokens: list[Token], sink: Sink) -> None:
        self.tokens = tokens
        self.pos = 0
        self.sink = sink
        # How many brackets, prefix operators, lambdas and types enclose the current token.
        self.nesting = 0
        self.nested = _Nested(self)

    # ------------------------------------------------------------ helpers

    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def at(self, *kinds: Kind) -> bool:
        return self.tok.kind in kinds

    def at_word(self, word: str) -> bool:
        return self.tok.kind == Kind.IDENT and self.tok.text == word

    def advance(self) -> Token:
        token = self.tok
        if token.kind != Kind.EOF:
            self.pos += 1
        return token

    def skip_newlines(self) -> None:
        while self.tok.kind == Kind.NEWLINE:
            self.pos += 1

    def fail(self, code: str, message: str, token: Token, label: str) -> NoReturn:
        self.sink.report(Diagnostic(code, message, Label(token.span, label)))
        raise _Abort

    def expect(self, kind: Kind, what: str | None = None) -> Token:
        if self.tok.kind == kind:
            return self.advance()
        wanted = what or describe(kind)
        self.fail(
            "E0010",
            f"expected {wanted}, found {self.tok.found()}",
            self.tok,
            f"expected {wanted} here",
        )

    def expect_word(self, word: str) -> Token:
        if self.at_word(word):
            return self.advance()
        self.fail(
            "E0010",
            f"expected `{word}`, found {self.tok.found()}",
            self.tok,
            f"expected `{word}` here",
        )

    def ident(self) -> ast.Ident:
        token = self.expect(Kind.IDENT, "a name")
        return ast.Ident(token.text, token.span)

    def span_from(self, start: Span) -> Span:
        end = self.tokens[self.pos - 1].span if self.pos > 0 else start
        return start.to(end)

    def end_of_line(self) -> None:
        """A declaration ends at a newline, a closing brace or the end of the file."""
        if self.at(Kind.NEWLINE):
            self.skip_newlines()
        elif not self.at(Kind.RBRACE, Kind.EOF):
            self.fail(
                "E0010",
                f"expected end of line, found {self.tok.found()}",
                self.tok,
                "expected the line to end here",
            )

    def recover(self, stops: set[Kind]) -> None:
        """Skip to the start of a line that opens one of `stops`, balancing braces."""
        depth = 0
        while not self.at(Kind.EOF):
            token = self.advance()
            if token.kind == Kind.LBRACE:
                depth += 1
            elif token.kind == Kind.RBRACE:
                if depth == 0:
                    self.pos -= 1
                    return
                depth -= 1
            elif token.kind == Kind.NEWLINE and depth == 0:
                if self.tok.kind in stops or self.tok.kind == Kind.RBRACE:
                    return
