"""The parser's rules for types: tensor types with their axes, tuples, named and stack types."""

from __future__ import annotations

from typing import TYPE_CHECKING

from presk.syntax import ast
from presk.syntax.parse_base import ParserBase
from presk.syntax.tokens import Kind


class TypeParser(ParserBase):
    """Parses types; sizes inside them are expressions, parsed by `ExprParser`."""

    if TYPE_CHECKING:
        # Defined by ExprParser, which every parser that parses types derives from.
        def parse_additive(self) -> ast.Expr: ...

    # type := real | idx | bool | params | stack | '(' type (',' type)* ')' | named
    def parse_type(self) -> ast.TypeSyn:
        with self.nested:
            return self.parse_type_inner()

    def parse_type_inner(self) -> ast.TypeSyn:
        start = self.tok.span
        match self.tok.kind:
            case Kind.KW_REAL:
                self.advance()
                # A bare `ℝ` is the scalar type, as in `(HD : ℝ)`.
                axes = self.parse_axes() if self.at(Kind.LBRACKET) else ()
                return ast.RealType(axes, self.span_from(start))
            case Kind.KW_IDX:
                self.advance()
                self.expect(Kind.LBRACKET)
                bound = self.parse_additive()
                self.expect(Kind.RBRACKET)
                axes = self.parse_axes()
                return ast.IdxType(bound, axes, self.span_from(start))
            case Kind.KW_BOOL:
                self.advance()
                axes = self.parse_axes()
                return ast.BoolType(axes, self.span_from(start))
            case Kind.KW_PARAMS:
                self.advance()
                target = self.parse_named_type()
                return ast.ParamsType(target, self.span_from(start))
            case Kind.KW_STACK:
                return self.parse_stack_type()
            case Kind.LPAREN:
                self.advance()
                items = [self.parse_type()]
                while self.at(Kind.COMMA):
                    self.advance()
                    if self.at(Kind.RPAREN):
                        break
                    items.append(self.parse_type())
                self.expect(Kind.RPAREN)
                if len(items) == 1:
                    return items[0]
                return ast.TupleType(tuple(items), self.span_from(start))
            case Kind.IDENT:
                return self.parse_named_type()
        self.fail(
            "E0013", f"expected a type, found {self.tok.found()}", self.tok, "expected a type here"
        )

    # named := IDENT ('.' IDENT)* ('{' expr (',' expr)* '}')?
    def parse_named_type(self) -> ast.NamedType:
        start = self.tok.span
        path = [self.ident()]
        while self.at(Kind.DOT) and self.peek().kind == Kind.IDENT:
            self.advance()
            path.append(self.ident())
        args: tuple[ast.Expr, ...] | None = None
        if self.at(Kind.LBRACE):
            self.advance()
            items: list[ast.Expr] = []
            while not self.at(Kind.RBRACE):
                items.append(self.parse_additive())
                if not self.at(Kind.COMMA):
                    break
                self.advance()
            self.expect(Kind.RBRACE)
            args = tuple(items)
        return ast.NamedType(tuple(path), args, self.span_from(start))

    # stack := 'stack' '{' expr '}' '(' named ')'
    def parse_stack_type(self) -> ast.StackType:
        start = self.expect(Kind.KW_STACK).span
        self.expect(Kind.LBRACE)
        count = self.parse_additive()
        self.expect(Kind.RBRACE)
        self.expect(Kind.LPAREN)
        inner = self.parse_named_type()
        self.expect(Kind.RPAREN)
        return ast.StackType(count, inner, self.span_from(start))

    # axes := '[' (axis (',' axis)*)? ']'      axis := '...' | IDENT ':' expr | expr
    def parse_axes(self) -> tuple[ast.AxisItem, ...]:
        self.expect(Kind.LBRACKET)
        axes: list[ast.AxisItem] = []
        while not self.at(Kind.RBRACKET):
            if self.at(Kind.ELLIPSIS):
                axes.append(ast.EllipsisAxis(self.advance().span))
            elif self.at(Kind.IDENT) and self.peek().kind == Kind.COLON:
                name = self.ident()
                self.advance()
                size = self.parse_additive()
                axes.append(ast.AxisSyn(name, size, name.span.to(size.span)))
            else:
                size = self.parse_additive()
                axes.append(ast.AxisSyn(None, size, size.span))
            if not self.at(Kind.COMMA):
                break
            self.advance()
        self.expect(Kind.RBRACKET, "`]` or `,`")
        return tuple(axes)
