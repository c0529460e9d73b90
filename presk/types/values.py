"""What a name or an expression denotes while checking a function body.

`Val` is a runtime value: its type, the Core operand that holds it, and its
dependencies on the function's arguments (for regularity). The other classes
are compile-time things that only calls and member accesses consume: modules
(`ModVal`), their functions (`MethodVal`), top-level functions (`FnRef`),
imported files (`ImportVal`), primitives (`PrimVal`) and lambdas not yet
applied (`LambdaVal`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from presk.core.ir import Operand
from presk.elab.program import FileEnv, ModuleInfo
from presk.elab.ty import Instance, Type
from presk.syntax import ast
from presk.types.regularity import Deps

if TYPE_CHECKING:
    from presk.types.check import FnCtx


@dataclass
class Val:
    """A value: its type, its Core operand and its dependencies."""

    ty: Type
    operand: Operand
    deps: Deps = field(default_factory=dict)


@dataclass
class ModVal:
    """A module: a module-typed argument, a `use`, or a module named directly.

    `inst` is None for a module named without arguments (`t.Tower`, `Linear`):
    its dimensions are then inferred from the θ passed to its functions.
    `theta` is the implicit parameter subtree of a `use` inside a module.
    """

    module: ModuleInfo
    inst: Instance | None
    theta: Val | None = None


@dataclass
class MethodVal:
    """`m.f`: a function of a module, with the module it was reached through."""

    owner: ModVal
    name: str
    span: ast.Ident


@dataclass
class FnRef:
    """A top-level function of a file."""

    file: FileEnv
    decl: ast.FnDecl


@dataclass
class ImportVal:
    """An import alias: `lin` in `lin.Linear`."""

    file: FileEnv


@dataclass
class PrimVal:
    """A primitive's name."""

    name: str


@dataclass
class LambdaVal:
    """A lambda not yet applied: checked when its argument types are known."""

    node: ast.Lambda
    ctx: FnCtx


Denot = Val | ModVal | MethodVal | FnRef | ImportVal | PrimVal | LambdaVal
