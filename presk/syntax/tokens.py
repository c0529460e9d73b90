"""Token kinds and tokens.

A token carries its kind, its text (the identifier, the digits, the decoded
string) and its span. Unicode and ASCII spellings of the same symbol produce
the same kind, so the parser never sees the difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from presk.diagnostics import Span


class Kind(Enum):
    """What a token is. Keywords are `KW_*`; `value` is the dump name."""

    IDENT = "Ident"
    INT = "Int"
    FLOAT = "Float"
    STRING = "Str"
    NEWLINE = "Newline"
    EOF = "Eof"
    # Keywords.
    KW_MODULE = "Module"
    KW_PARAM = "Param"
    KW_FN = "Fn"
    KW_LET = "Let"
    KW_USE = "Use"
    KW_STACK = "Stack"
    KW_IMPORT = "Import"
    KW_AS = "As"
    KW_CONST = "Const"
    KW_STATIC = "Static"
    KW_ASSERT = "Assert"
    KW_DIM = "Dim"
    KW_TYPE = "Type"
    KW_USES = "Uses"
    KW_OPTIMIZER = "Optimizer"
    KW_TRAINING = "Training"
    KW_AXIS = "Axis"
    KW_PARAMS = "Params"
    KW_IDX = "Idx"
    KW_BOOL = "Bool"
    KW_REAL = "Real"
    KW_EIN = "Ein"
    KW_GRAD = "Grad"
    KW_LAMBDA = "Lambda"
    # Punctuation and operators.
    LPAREN = "LParen"
    RPAREN = "RParen"
    LBRACKET = "LBracket"
    RBRACKET = "RBracket"
    LBRACE = "LBrace"
    RBRACE = "RBrace"
    COMMA = "Comma"
    COLON = "Colon"
    DOT = "Dot"
    ELLIPSIS = "Ellipsis"
    ARROW = "Arrow"
    EQ = "Eq"
    EQEQ = "EqEq"
    NE = "Ne"
    LE = "Le"
    LT = "Lt"
    GE = "Ge"
    GT = "Gt"
    PLUS = "Plus"
    MINUS = "Minus"
    STAR = "Star"
    SLASH = "Slash"
    PERCENT = "Percent"
    CARET = "Caret"
    CONTRACT = "Contract"
    PIPE = "Pipe"


KEYWORDS: dict[str, Kind] = {
    "module": Kind.KW_MODULE,
    "param": Kind.KW_PARAM,
    "fn": Kind.KW_FN,
    "let": Kind.KW_LET,
    "use": Kind.KW_USE,
    "stack": Kind.KW_STACK,
    "import": Kind.KW_IMPORT,
    "as": Kind.KW_AS,
    "const": Kind.KW_CONST,
    "static": Kind.KW_STATIC,
    "assert": Kind.KW_ASSERT,
    "dim": Kind.KW_DIM,
    "type": Kind.KW_TYPE,
    "uses": Kind.KW_USES,
    "optimizer": Kind.KW_OPTIMIZER,
    "training": Kind.KW_TRAINING,
    "axis": Kind.KW_AXIS,
    "params": Kind.KW_PARAMS,
    "idx": Kind.KW_IDX,
    "bool": Kind.KW_BOOL,
    "ℝ": Kind.KW_REAL,
    "Real": Kind.KW_REAL,
    "ein": Kind.KW_EIN,
    "grad": Kind.KW_GRAD,
}

# How each kind reads in a diagnostic ("expected `=`, found identifier `x`").
DESCRIPTIONS: dict[Kind, str] = {
    Kind.IDENT: "identifier",
    Kind.INT: "integer",
    Kind.FLOAT: "number",
    Kind.STRING: "string",
    Kind.NEWLINE: "end of line",
    Kind.EOF: "end of file",
    Kind.LPAREN: "`(`",
    Kind.RPAREN: "`)`",
    Kind.LBRACKET: "`[`",
    Kind.RBRACKET: "`]`",
    Kind.LBRACE: "`{`",
    Kind.RBRACE: "`}`",
    Kind.COMMA: "`,`",
    Kind.COLON: "`:`",
    Kind.DOT: "`.`",
    Kind.ELLIPSIS: "`...`",
    Kind.ARROW: "`->`",
    Kind.EQ: "`=`",
    Kind.EQEQ: "`==`",
    Kind.NE: "`!=`",
    Kind.LE: "`<=`",
    Kind.LT: "`<`",
    Kind.GE: "`>=`",
    Kind.GT: "`>`",
    Kind.PLUS: "`+`",
    Kind.MINUS: "`-`",
    Kind.STAR: "`*`",
    Kind.SLASH: "`/`",
    Kind.PERCENT: "`%`",
    Kind.CARET: "`^`",
    Kind.CONTRACT: "`·`",
    Kind.PIPE: "`|>`",
    Kind.KW_LAMBDA: "`λ`",
    Kind.KW_REAL: "`ℝ`",
}


def describe(kind: Kind) -> str:
    """A kind as a diagnostic names it: "`=`", "identifier", "keyword `let`"."""
    if kind in DESCRIPTIONS:
        return DESCRIPTIONS[kind]
    return f"keyword `{kind.value.lower()}`"


@dataclass(frozen=True, slots=True)
class Token:
    """A token: its kind, its text and where it is."""

    kind: Kind
    text: str
    span: Span

    def found(self) -> str:
        """How a diagnostic names this token: "identifier `x`", "`=`", "end of line"."""
        if self.kind in (Kind.IDENT, Kind.INT, Kind.FLOAT):
            return f"{describe(self.kind)} `{self.text}`"
        if self.kind == Kind.STRING:
            return f'string "{self.text}"'
        return describe(self.kind)

    def dump(self) -> str:
        """The token as `presk dump --stage tokens` prints it: `Ident("x") @ 3..4`."""
        start = self.span.source.byte_offset(self.span.start)
        end = self.span.source.byte_offset(self.span.end)
        if self.kind == Kind.IDENT:
            head = f'Ident("{self.text}")'
        elif self.kind in (Kind.INT, Kind.FLOAT):
            head = f"{self.kind.value}({self.text})"
        elif self.kind == Kind.STRING:
            head = f'Str("{self.text}")'
        elif self.kind.name.startswith("KW_"):
            head = f"Kw({self.kind.value})"
        else:
            head = self.kind.value
        return f"{head} @ {start}..{end}"
