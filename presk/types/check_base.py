"""The checker's shared state and its reporting: the base every part of the checker extends.

The checker is one class built in layers, one module per construct (as mypyc's irbuild):
`check_base` (state, diagnostics), `check_fn` (signatures and bodies), `check_expr`
(expressions), `check_call` (calls, lambdas, folds, `grad`) and `check` (the driver). Each
layer imports only the one below; the three methods a lower layer needs from a higher one
(`expr`, `value`, `call`) are declared abstract here. See presk/types/check.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from presk.diagnostics import Diagnostic, Label, Sink, Span
from presk.elab.program import FileEnv, Program
from presk.elab.ty import (
    Instance,
)
from presk.syntax import ast
from presk.types.shapes import ShapeError
from presk.types.values import (
    Abort,
    Denot,
    FnCtx,
    FnInfo,
    Val,
)


class CheckerBase(ABC):
    """State of one checking run, and how problems are reported."""

    def __init__(self, program: Program, sink: Sink) -> None:
        self.program = program
        self.sink = sink
        self.infos: dict[tuple[int, str], FnInfo] = {}
        self.order: list[FnInfo] = []
        self.inits: list[FnInfo] = []
        self.instances: list[Instance] = []
        self._prefixes: dict[int, str] | None = None
        self._reported: set[tuple[str, str, str, int, int]] = set()

    # The layers above implement these; declared here so that lower layers may recurse.
    @abstractmethod
    def expr(self, ctx: FnCtx, node: ast.Expr) -> Denot:
        """Check and lower an expression (check_expr)."""

    @abstractmethod
    def value(self, ctx: FnCtx, denot: Denot, span: Span) -> Val:
        """A denotation that must be a runtime value (check_expr)."""

    @abstractmethod
    def call(self, ctx: FnCtx, node: ast.Call) -> Denot:
        """Check and lower a call (check_call)."""

    def report(
        self,
        code: str,
        message: str,
        span: Span,
        label: str,
        *,
        secondary: tuple[Label, ...] = (),
        help: str | None = None,
        note: str | None = None,
    ) -> None:
        key = (code, message, span.source.path, span.start, span.end)
        if key in self._reported:
            return  # the same broken declaration, reached again from another function
        self._reported.add(key)
        self.sink.report(Diagnostic(code, message, Label(span, label), secondary, help, note))

    def fail(
        self,
        code: str,
        message: str,
        span: Span,
        label: str,
        *,
        secondary: tuple[Label, ...] = (),
        help: str | None = None,
        note: str | None = None,
    ) -> Abort:
        """Report an error and return the exception that stops this function's check."""
        self.report(code, message, span, label, secondary=secondary, help=help, note=note)
        return Abort()

    def shape_fail(self, error: ShapeError, span: Span) -> Abort:
        return self.fail(
            error.code, error.message, span, error.label, note=error.note, help=error.help
        )

    def prefix(self, file: FileEnv) -> str:
        """`stem.` for a file whose names clash with another file's, else empty.

        Core functions live in one namespace; the main file keeps plain names
        and an imported file that would collide is qualified by its stem.
        """
        if self._prefixes is None:
            self._prefixes = {}
            seen: set[str] = set()
            for env in [self.program.main, *reversed(self.program.files[:-1])]:
                names = set(env.fns) | set(env.modules)
                clash = bool(names & seen)
                stem = env.basename.rsplit(".", 1)[0]
                self._prefixes[id(env)] = f"{stem}." if clash else ""
                seen |= names
        return self._prefixes[id(file)]
