"""The parser's rules for expressions: lambdas, operators by precedence, calls and atoms."""

from __future__ import annotations

from presk.syntax import ast
from presk.syntax.literals import LiteralRange, parse_literal
from presk.syntax.parse_types import TypeParser
from presk.syntax.tokens import Kind

_ADDITIVE = {Kind.PLUS: ast.BinOp.ADD, Kind.MINUS: ast.BinOp.SUB}
_MULTIPLICATIVE = {
    Kind.STAR: ast.BinOp.MUL,
    Kind.SLASH: ast.BinOp.DIV,
    Kind.PERCENT: ast.BinOp.MOD,
    Kind.CONTRACT: ast.BinOp.DOT,
}
_COMPARE = {
    Kind.EQEQ: ast.BinOp.EQ,
    Kind.NE: ast.BinOp.NE,
    Kind.LE: ast.BinOp.LE,
    Kind.LT: ast.BinOp.LT,
    Kind.GE: ast.BinOp.GE,
    Kind.GT: ast.BinOp.GT,
}


class ExprParser(TypeParser):
    """Parses expressions (and, through `TypeParser`, the types ascribed inside them)."""

    # expr := lambda | pipe      lambda := 'λ' IDENT+ '.' expr
    def parse_expr(self) -> ast.Expr:
        with self.nested:
            return self.parse_lambda_or_pipe()

    def parse_lambda_or_pipe(self) -> ast.Expr:
        if self.at(Kind.KW_LAMBDA):
            start = self.advance().span
            params = [self.ident()]
            while self.at(Kind.IDENT, Kind.COMMA):
                if self.at(Kind.COMMA):
                    self.advance()
                params.append(self.ident())
            self.expect(Kind.DOT, "`.` after the lambda's parameters")
            body = self.parse_expr()
            return ast.Lambda(tuple(params), body, self.span_from(start))
        return self.parse_pipe()

    # pipe := compare ('|>' compare)*
    def parse_pipe(self) -> ast.Expr:
        left = self.parse_compare()
        while self.at(Kind.PIPE):
            self.advance()
            right = self.parse_compare()
            left = ast.Binary(ast.BinOp.PIPE, left, right, left.span.to(right.span))
        return left

    # compare := additive (('==' | '!=' | '<=' | '<' | '>=' | '>') additive)?
    def parse_compare(self) -> ast.Expr:
        left = self.parse_additive()
        if self.tok.kind in _COMPARE:
            op = _COMPARE[self.advance().kind]
            right = self.parse_additive()
            left = ast.Binary(op, left, right, left.span.to(right.span))
        return left

    # additive := multiplicative (('+' | '-') multiplicative)*
    def parse_additive(self) -> ast.Expr:
        left = self.parse_multiplicative()
        while self.tok.kind in _ADDITIVE:
            op = _ADDITIVE[self.advance().kind]
            right = self.parse_multiplicative()
            left = ast.Binary(op, left, right, left.span.to(right.span))
        return left

    # multiplicative := unary (('*' | '/' | '%' | '·') unary)*
    def parse_multiplicative(self) -> ast.Expr:
        left = self.parse_unary()
        while self.tok.kind in _MULTIPLICATIVE:
            op = _MULTIPLICATIVE[self.advance().kind]
            right = self.parse_unary()
            left = ast.Binary(op, left, right, left.span.to(right.span))
        return left

    # unary := '-' unary | power
    def parse_unary(self) -> ast.Expr:
        if self.at(Kind.MINUS):
            start = self.advance().span
            with self.nested:
                operand = self.parse_unary()
            return ast.Neg(operand, start.to(operand.span))
        return self.parse_power()

    # power := postfix ('^' unary)?
    def parse_power(self) -> ast.Expr:
        base = self.parse_postfix()
        if self.at(Kind.CARET):
            self.advance()
            with self.nested:
                exponent = self.parse_unary()
            return ast.Binary(ast.BinOp.POW, base, exponent, base.span.to(exponent.span))
        return base

    # postfix := atom ('(' args ')' | '.' IDENT)*
    def parse_postfix(self) -> ast.Expr:
        expr = self.parse_atom()
        while True:
            if self.at(Kind.LPAREN):
                self.advance()
                args = self.parse_args()
                self.expect(Kind.RPAREN, "`)` or `,`")
                expr = ast.Call(expr, args, self.span_from(expr.span))
            elif self.at(Kind.DOT) and self.peek().kind == Kind.IDENT:
                self.advance()
                name = self.ident()
                expr = ast.Member(expr, name, expr.span.to(name.span))
            else:
                return expr

    # args := (arg (',' arg)*)?
    # arg := 'axis' IDENT | IDENT '=' expr | IDENT ':' expr | expr (':' type)?
    def parse_args(self) -> tuple[ast.Arg, ...]:
        args: list[ast.Arg] = []
        while not self.at(Kind.RPAREN):
            start = self.tok.span
            if self.at(Kind.KW_AXIS):
                self.advance()
                name = self.ident()
                args.append(ast.AxisArg(name, self.span_from(start)))
            elif self.at(Kind.IDENT) and self.peek().kind == Kind.EQ:
                name = self.ident()
                self.advance()
                value = self.parse_expr()
                args.append(ast.KwArg(name, value, self.span_from(start)))
            elif (
                self.at(Kind.IDENT)
                and self.peek().kind == Kind.COLON
                and self.peek(2).kind not in (Kind.KW_REAL, Kind.KW_IDX, Kind.KW_BOOL)
            ):
                name = self.ident()
                self.advance()
                size = self.parse_additive()
                args.append(ast.DimArg(name, size, self.span_from(start)))
            else:
                value = self.parse_expr()
                if self.at(Kind.COLON):
                    self.advance()
                    ty = self.parse_type()
                    value = ast.Ascribe(value, ty, self.span_from(start))
                args.append(ast.PosArg(value, self.span_from(start)))
            if not self.at(Kind.COMMA):
                break
            self.advance()
        return tuple(args)

    # atom := NUMBER | STRING | IDENT | 'stream' STRING | '(' expr (':' type)? ')'
    #       | '(' expr (',' expr)+ ')' | 'ein' '[' IDENT (',' IDENT)* ']' '(' expr ')'
    #       | 'grad' '(' expr ')'
    def parse_atom(self) -> ast.Expr:
        token = self.tok
        match token.kind:
            case Kind.INT | Kind.FLOAT:
                try:
                    value = parse_literal(token.text)
                except LiteralRange as error:
                    self.fail("E0016", error.message, token, error.label)
                self.advance()
                return ast.Num(token.text, value, token.kind == Kind.INT, token.span)
            case Kind.STRING:
                self.advance()
                return ast.Str(token.text, token.span)
            case Kind.IDENT:
                self.advance()
                if token.text == "stream" and self.at(Kind.STRING):
                    path = self.advance()
                    return ast.Stream(ast.Str(path.text, path.span), self.span_from(token.span))
                return ast.Name(ast.Ident(token.text, token.span), token.span)
            case Kind.LPAREN:
                self.advance()
                first = self.parse_expr()
                if self.at(Kind.COLON):
                    self.advance()
                    ty = self.parse_type()
                    self.expect(Kind.RPAREN)
                    return ast.Ascribe(first, ty, self.span_from(token.span))
                if self.at(Kind.COMMA):
                    items = [first]
                    while self.at(Kind.COMMA):
                        self.advance()
                        if self.at(Kind.RPAREN):
                            break
                        items.append(self.parse_expr())
                    self.expect(Kind.RPAREN)
                    return ast.TupleExpr(tuple(items), self.span_from(token.span))
                self.expect(Kind.RPAREN)
                return first
            case Kind.KW_EIN:
                self.advance()
                self.expect(Kind.LBRACKET)
                out = [self.ident()]
                while self.at(Kind.COMMA):
                    self.advance()
                    out.append(self.ident())
                self.expect(Kind.RBRACKET)
                self.expect(Kind.LPAREN)
                body = self.parse_expr()
                self.expect(Kind.RPAREN)
                return ast.Ein(tuple(out), body, self.span_from(token.span))
            case Kind.KW_GRAD:
                self.advance()
                self.expect(Kind.LPAREN)
                func = self.parse_expr()
                self.expect(Kind.RPAREN)
                return ast.Grad(func, self.span_from(token.span))
        self.fail(
            "E0014",
            f"expected an expression, found {token.found()}",
            token,
            "expected an expression here",
        )
