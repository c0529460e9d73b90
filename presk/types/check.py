"""The checker: types every function and lowers it to PSK-Core as it goes.

`check_program` walks every file of a loaded program (imports first) and
checks each function: its signature (types, dimensions, implicit dimensions:
W0001), its body (shapes for every value of the dimensions, broadcasting,
contractions, primitives' rules), its declared return type (E2011), its
effects against `uses` (E4001) and the regularity of `grad`'s argument
(E3001). Checking a body emits its PSK-Core instructions, so the result is
both a report (types of functions and lets, regularity and effects) and a
Core module. A function is checked once, with symbolic dimensions; calls
instantiate its signature. See Note [Checking emits Core].

This module is the entry point; the checker is split by construct into layers, each
extending the one below: check_base (state, diagnostics), check_fn (signatures, bodies),
check_expr (expressions), check_call (calls, lambdas, `grad`). The records it produces
(`FnInfo`, `CheckedProgram`) live in presk/types/values.py and are re-exported here.
"""

from __future__ import annotations

from presk.core import ir
from presk.diagnostics import Sink, Span
from presk.elab.program import ConstError, FileEnv, ModuleInfo, Program
from presk.syntax import ast
from presk.syntax.deep import deep
from presk.types.check_call import CallChecker
from presk.types.check_fn import _module_cycle
from presk.types.scope import TypeScope, find_module, resolve
from presk.types.serving import check_serve
from presk.types.training import BlockError, check_trainings
from presk.types.values import (
    Abort,
    CheckedProgram,
    FnCtx,
    FnInfo,
)

__all__ = [
    "Abort",
    "CheckedProgram",
    "Checker",
    "FnCtx",
    "FnInfo",
    "check_program",
    "lookup_module",
]


class Checker(CallChecker):
    """Checks a loaded program; see the module docstring."""

    # ------------------------------------------------------------ driver

    def run(self) -> CheckedProgram:
        for file in self.program.files:
            # Aliases are resolved once here, used or not, so a broken one is reported.
            for alias in file.aliases.values():
                try:
                    resolve(TypeScope(file), alias.type)
                except ConstError as error:
                    self.report(error.code, error.message, error.span, error.label)
        for file in self.program.files:
            for decl in file.tree.decls:
                match decl:
                    case ast.Module():
                        module = file.modules.get(decl.name.name)
                        if module is None or module.decl is not decl:
                            continue
                        self.note_module_instances(module)
                        if _module_cycle(module, []) is not None:
                            continue
                        for fn in decl.fns:
                            info = self.fn_info(file, module, fn)
                            self.order.append(info)
                            self.check_fn(info)
                        self.inits.append(self.init_info(module))
                    case ast.FnDecl():
                        if file.fns.get(decl.name.name) is decl:
                            info = self.fn_info(file, None, decl)
                            self.order.append(info)
                            self.check_fn(info)
        functions = [*self.order, *self.inits]
        for info in self.order:
            functions.extend(self._all_lambdas(info))
        trainings = check_trainings(self.program.main, self.order, self._report_block)
        for run in trainings:
            functions.extend((run.rate, run.update, run.step))
        serves = []
        for block in self.program.main.inferences:
            try:
                serves.append(check_serve(self.program.main, block, self.order))
            except BlockError as error:
                self._report_block(error)
        core = ir.Module(tuple(info.core for info in functions if info.core is not None))
        return CheckedProgram(self.program, functions, core, self.instances, [], trainings, serves)

    def _report_block(self, error: BlockError) -> None:
        assert isinstance(error.span, Span)
        self.report(error.code, error.message, error.span, error.label, help=error.help)

    def _all_lambdas(self, info: FnInfo) -> list[FnInfo]:
        out: list[FnInfo] = []
        for lam in info.lambdas:
            out.append(lam)
            out.extend(self._all_lambdas(lam))
        return out


@deep
def check_program(program: Program, sink: Sink) -> CheckedProgram:
    """Check every function of a loaded program; errors go to `sink`."""
    return Checker(program, sink).run()


def lookup_module(file: FileEnv, path: tuple[ast.Ident, ...]) -> ModuleInfo | None:
    """A module by `M` or `alias.M` (re-exported for the CLI's entry parsing)."""
    return find_module(file, path)


# Note [Checking emits Core]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# Typing an expression and lowering it to PSK-Core need the same facts: what
# each name resolves to, which function a call reaches with which dimension
# arguments, where a module's parameters live in θ. Rather than record those
# facts in side tables for a second walk, the checker emits each instruction
# as soon as it has typed it. Core's definitions (presk/core/ir.py) therefore
# precede the checker in the stage order; presk/core/ keeps the text form and
# the verifier, which depend on nothing past the checker.
