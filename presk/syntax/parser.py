"""The parser: tokens to a `File` AST.

A recursive-descent parser, one `parse_<rule>` method per rule with its
grammar above it. On a syntax error it reports one diagnostic, then skips to
the next declaration (or module member) so that one mistake does not cascade
into many.

The rules are split by construct: declarations here, expressions in
parse_exprs.py, types in parse_types.py, and the token cursor with its error
reporting and recovery in parse_base.py. `Parser` derives from all of them.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from presk.diagnostics import Diagnostic, Label, Sink, Source, Span
from presk.syntax import ast
from presk.syntax.deep import MAX_DEPTH, deep
from presk.syntax.lexer import lex
from presk.syntax.parse_base import _Abort
from presk.syntax.parse_exprs import ExprParser
from presk.syntax.tokens import Kind

_TOP_LEVEL = {
    Kind.KW_MODULE,
    Kind.KW_FN,
    Kind.KW_CONST,
    Kind.KW_STATIC,
    Kind.KW_DIM,
    Kind.KW_TYPE,
    Kind.KW_IMPORT,
    Kind.KW_OPTIMIZER,
    Kind.KW_TRAINING,
}
_MEMBER = {Kind.KW_PARAM, Kind.KW_USE, Kind.KW_FN}


class Parser(ExprParser):
    """Parses one file's tokens; reports syntax errors to the sink."""

    def check_depth(self, node: object) -> None:
        """Report E0015 (and abandon the declaration) when its tree is deeper than the
        passes after the parser may walk: long operator chains nest without brackets."""
        deepest = _too_deep(node)
        if deepest is not None:
            self.sink.report(
                Diagnostic(
                    "E0015",
                    "expression nested too deeply",
                    Label(deepest, f"more than {MAX_DEPTH} operations nested in one another"),
                    help="name intermediate results with `let`",
                )
            )
            raise _Abort

    # ------------------------------------------------------------ file

    # file := NEWLINE* (decl NEWLINE*)* EOF
    def parse_file(self) -> ast.File:
        start = self.tok.span
        decls: list[ast.Decl] = []
        self.skip_newlines()
        while not self.at(Kind.EOF):
            try:
                decl = self.parse_decl()
                self.check_depth(decl)
                decls.append(decl)
                self.end_of_line()
            except _Abort:
                self.recover(_TOP_LEVEL)
                if self.at(Kind.RBRACE):
                    self.advance()
            self.skip_newlines()
        return ast.File(tuple(decls), start.to(self.tok.span))

    # decl := import | const | static_assert | dim | type | module | fn | optimizer | training
    def parse_decl(self) -> ast.Decl:
        match self.tok.kind:
            case Kind.KW_IMPORT:
                return self.parse_import()
            case Kind.KW_CONST:
                return self.parse_const()
            case Kind.KW_STATIC:
                return self.parse_static_assert()
            case Kind.KW_DIM:
                return self.parse_dim()
            case Kind.KW_TYPE:
                return self.parse_type_alias()
            case Kind.KW_MODULE:
                return self.parse_module()
            case Kind.KW_FN:
                return self.parse_fn()
            case Kind.KW_OPTIMIZER:
                return self.parse_optimizer()
            case Kind.KW_TRAINING:
                return self.parse_training()
        if self.at_word("inference"):
            return self.parse_inference()
        self.fail(
            "E0011",
            f"expected a declaration, found {self.tok.found()}",
            self.tok,
            "a file holds imports, constants, dims, types, modules, functions and blocks",
        )

    # import := 'import' STRING 'as' IDENT
    def parse_import(self) -> ast.Import:
        start = self.advance().span
        path = self.expect(Kind.STRING, "a path in quotes")
        self.expect(Kind.KW_AS)
        alias = self.ident()
        return ast.Import(ast.Str(path.text, path.span), alias, self.span_from(start))

    # const := 'const' IDENT ':' named_type '=' expr
    def parse_const(self) -> ast.Const:
        start = self.advance().span
        name = self.ident()
        self.expect(Kind.COLON)
        ty = self.parse_named_type()
        self.expect(Kind.EQ)
        value = self.parse_expr()
        return ast.Const(name, ty, value, self.span_from(start))

    # static_assert := 'static' 'assert' expr
    def parse_static_assert(self) -> ast.StaticAssert:
        start = self.advance().span
        self.expect(Kind.KW_ASSERT)
        cond = self.parse_expr()
        return ast.StaticAssert(cond, self.span_from(start))

    # dim := 'dim' IDENT ('<=' expr)?
    def parse_dim(self) -> ast.DimDecl:
        start = self.advance().span
        name = self.ident()
        bound = None
        if self.at(Kind.LE):
            self.advance()
            bound = self.parse_additive()
        return ast.DimDecl(name, bound, self.span_from(start))

    # type_alias := 'type' IDENT '=' type
    def parse_type_alias(self) -> ast.TypeAlias:
        start = self.advance().span
        name = self.ident()
        self.expect(Kind.EQ)
        ty = self.parse_type()
        return ast.TypeAlias(name, ty, self.span_from(start))

    # dims := '{' IDENT+ ':' 'dim' (',' IDENT+ ':' 'dim')* '}'
    def parse_dim_params(self) -> tuple[ast.Ident, ...]:
        # A module's body also opens with `{`; dimension parameters open with a name.
        if not (self.at(Kind.LBRACE) and self.peek().kind == Kind.IDENT):
            return ()
        self.advance()
        names: list[ast.Ident] = []
        while True:
            group = [self.ident()]
            while self.at(Kind.IDENT):
                group.append(self.ident())
            self.expect(Kind.COLON)
            self.expect(Kind.KW_DIM)
            names.extend(group)
            if not self.at(Kind.COMMA):
                break
            self.advance()
        self.expect(Kind.RBRACE)
        return tuple(names)

    # module := 'module' IDENT dims? '{' (member NEWLINE)* '}'
    def parse_module(self) -> ast.Module:
        start = self.advance().span
        name = self.ident()
        dims = self.parse_dim_params()
        self.expect(Kind.LBRACE)
        params: list[ast.ParamDecl] = []
        uses: list[ast.UseDecl] = []
        fns: list[ast.FnDecl] = []
        self.skip_newlines()
        while not self.at(Kind.RBRACE, Kind.EOF):
            try:
                match self.tok.kind:
                    case Kind.KW_PARAM:
                        params.append(self.parse_param())
                    case Kind.KW_USE:
                        uses.append(self.parse_use())
                    case Kind.KW_FN:
                        fns.append(self.parse_fn())
                    case _:
                        self.fail(
                            "E0012",
                            f"expected `param`, `use` or `fn`, found {self.tok.found()}",
                            self.tok,
                            "a module holds parameters, sub-modules and functions",
                        )
                self.end_of_line()
            except _Abort:
                self.recover(_MEMBER)
            self.skip_newlines()
        self.expect(Kind.RBRACE, "`}` closing the module")
        return ast.Module(name, dims, tuple(params), tuple(uses), tuple(fns), self.span_from(start))

    # param := 'param' IDENT ':' type ('init' '=' IDENT ('(' kwargs ')')?)?
    def parse_param(self) -> ast.ParamDecl:
        start = self.advance().span
        name = self.ident()
        self.expect(Kind.COLON)
        ty = self.parse_type()
        init = None
        if self.at_word("init"):
            self.advance()
            self.expect(Kind.EQ)
            init_name = self.ident()
            kwargs: list[ast.KwArg] = []
            if self.at(Kind.LPAREN):
                self.advance()
                while not self.at(Kind.RPAREN):
                    key = self.ident()
                    self.expect(Kind.EQ)
                    value = self.parse_expr()
                    kwargs.append(ast.KwArg(key, value, key.span.to(value.span)))
                    if not self.at(Kind.COMMA):
                        break
                    self.advance()
                self.expect(Kind.RPAREN)
            init = ast.Init(init_name, tuple(kwargs), self.span_from(init_name.span))
        return ast.ParamDecl(name, ty, init, self.span_from(start))

    # use := 'use' IDENT ':' (named_type | stack_type)
    def parse_use(self) -> ast.UseDecl:
        start = self.advance().span
        name = self.ident()
        self.expect(Kind.COLON)
        target: ast.NamedType | ast.StackType
        target = self.parse_stack_type() if self.at(Kind.KW_STACK) else self.parse_named_type()
        return ast.UseDecl(name, target, self.span_from(start))

    # fn := 'fn' IDENT dims? '(' params ')' ('->' type)? ('uses' IDENT (',' IDENT)*)? '=' body
    def parse_fn(self) -> ast.FnDecl:
        start = self.advance().span
        name = self.ident()
        dims = self.parse_dim_params()
        self.expect(Kind.LPAREN)
        params: list[ast.FnParam] = []
        while not self.at(Kind.RPAREN):
            pname = self.ident()
            self.expect(Kind.COLON)
            ty = self.parse_type()
            default = None
            if self.at(Kind.EQ):
                self.advance()
                default = self.parse_expr()
            params.append(ast.FnParam(pname, ty, default, self.span_from(pname.span)))
            if not self.at(Kind.COMMA):
                break
            self.advance()
        self.expect(Kind.RPAREN, "`)` or `,`")
        ret = None
        if self.at(Kind.ARROW):
            self.advance()
            ret = self.parse_type()
        effects: list[ast.Ident] = []
        if self.at(Kind.KW_USES):
            self.advance()
            effects.append(self.ident())
            while self.at(Kind.COMMA):
                self.advance()
                effects.append(self.ident())
        # A missing `=` is reported at what follows it, usually the body on
        # the next line, which is where the reader looks.
        if not self.at(Kind.EQ):
            self.skip_newlines()
        header = start.to(self.expect(Kind.EQ).span)
        body = self.parse_body()
        return ast.FnDecl(
            name, dims, tuple(params), ret, tuple(effects), body, header, self.span_from(start)
        )

    # body := NEWLINE? (let NEWLINE)* expr
    def parse_body(self) -> ast.Body:
        self.skip_newlines()
        start = self.tok.span
        lets: list[ast.Let] = []
        while self.at(Kind.KW_LET):
            lets.append(self.parse_let())
            if not self.at(Kind.NEWLINE):
                self.fail(
                    "E0010",
                    f"expected end of line, found {self.tok.found()}",
                    self.tok,
                    "a `let` ends at the end of its line",
                )
            self.skip_newlines()
        result = self.parse_expr()
        return ast.Body(tuple(lets), result, self.span_from(start))

    # let := 'let' (IDENT | '(' IDENT (',' IDENT)* ')') '=' expr
    def parse_let(self) -> ast.Let:
        start = self.advance().span
        pattern: ast.Pattern
        if self.at(Kind.LPAREN):
            open_span = self.advance().span
            names = [self.ident()]
            while self.at(Kind.COMMA):
                self.advance()
                names.append(self.ident())
            self.expect(Kind.RPAREN)
            pattern = ast.TuplePattern(tuple(names), self.span_from(open_span))
        else:
            pattern = self.ident()
        self.expect(Kind.EQ)
        value = self.parse_expr()
        return ast.Let(pattern, value, self.span_from(start))

    # optimizer := 'optimizer' IDENT '{' (field NEWLINE)* '}'
    def parse_optimizer(self) -> ast.Optimizer:
        start = self.advance().span
        name = self.ident()
        fields, _checkpoint = self.parse_block_fields(allow_checkpoint=False)
        return ast.Optimizer(name, fields, self.span_from(start))

    # training := 'training' IDENT '{' (field | checkpoint NEWLINE)* '}'
    def parse_training(self) -> ast.Training:
        start = self.advance().span
        name = self.ident()
        fields, checkpoint = self.parse_block_fields(allow_checkpoint=True)
        return ast.Training(name, fields, checkpoint, self.span_from(start))

    # inference := 'inference' IDENT '{' (field NEWLINE)* '}'   ('inference' is a word,
    # not a keyword: a program may still name a value `inference`)
    def parse_inference(self) -> ast.Inference:
        start = self.advance().span
        name = self.ident()
        fields, _checkpoint = self.parse_block_fields(allow_checkpoint=False)
        return ast.Inference(name, fields, self.span_from(start))

    # field := IDENT ('=' expr | ':' type '=' expr | ':' expr)
    # checkpoint := 'checkpoint' 'every' expr 'steps' 'to' STRING
    def parse_block_fields(
        self, allow_checkpoint: bool
    ) -> tuple[tuple[ast.Field, ...], ast.Checkpoint | None]:
        self.expect(Kind.LBRACE)
        fields: list[ast.Field] = []
        checkpoint: ast.Checkpoint | None = None
        self.skip_newlines()
        while not self.at(Kind.RBRACE, Kind.EOF):
            if allow_checkpoint and self.at_word("checkpoint"):
                start = self.advance().span
                self.expect_word("every")
                every = self.parse_additive()
                self.expect_word("steps")
                self.expect_word("to")
                to = self.expect(Kind.STRING, "a directory in quotes")
                checkpoint = ast.Checkpoint(every, ast.Str(to.text, to.span), self.span_from(start))
            else:
                # Field names may be words that are keywords elsewhere (`optimizer`).
                if self.tok.kind.name.startswith("KW_") and self.tok.text.isidentifier():
                    word = self.advance()
                    name = ast.Ident(word.text, word.span)
                else:
                    name = self.ident()
                ty: ast.TypeSyn | None = None
                if self.at(Kind.COLON):
                    self.advance()
                    if self.starts_type_then_eq():
                        ty = self.parse_type()
                        self.expect(Kind.EQ)
                    value = self.parse_expr()
                else:
                    self.expect(Kind.EQ, "`=` or `:`")
                    value = self.parse_expr()
                fields.append(ast.Field(name, ty, value, self.span_from(name.span)))
            self.end_of_line()
        self.expect(Kind.RBRACE)
        return tuple(fields), checkpoint

    def starts_type_then_eq(self) -> bool:
        """After `name :`, is this `T = value` (a typed field) or a bare value?"""
        if self.at(Kind.KW_REAL, Kind.KW_IDX, Kind.KW_BOOL, Kind.KW_PARAMS):
            return True
        return self.at(Kind.IDENT) and self.peek().kind == Kind.EQ


def _too_deep(root: object) -> Span | None:
    """The span of the smallest subtree of `root` whose height exceeds MAX_DEPTH, if any.

    An iterative post-order walk over the dataclass fields, so that it never recurses
    itself; the first node found too deep is the lowest one on its path.
    """
    height: dict[int, int] = {}
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        kids = _children(node)
        if not done:
            stack.append((node, True))
            stack.extend((kid, False) for kid in kids)
            continue
        h = 1 + max((height.pop(id(kid), 0) for kid in kids), default=0)
        if h > MAX_DEPTH:
            span = getattr(node, "span", None)
            return span if isinstance(span, Span) else None
        height[id(node)] = h
    return None


def _children(node: object) -> list[object]:
    out: list[object] = []
    if not is_dataclass(node):
        return out
    for f in fields(node):
        value = getattr(node, f.name)
        items = value if isinstance(value, tuple) else (value,)
        out.extend(item for item in items if is_dataclass(item) and hasattr(item, "span"))
    return out


@deep
def parse(source: Source, sink: Sink) -> ast.File:
    """Parse a whole source; syntax errors go to `sink`."""
    return Parser(lex(source, sink), sink).parse_file()


@deep
def parse_expression(source: Source, sink: Sink) -> ast.Expr | None:
    """Parse a lone expression (used for `--const` values and entry arguments)."""
    parser = Parser(lex(source, sink), sink)
    try:
        expr = parser.parse_expr()
        parser.check_depth(expr)
        parser.skip_newlines()
        if not parser.at(Kind.EOF):
            parser.fail("E0010", f"unexpected {parser.tok.found()}", parser.tok, "unexpected here")
        return expr
    except _Abort:
        return None
