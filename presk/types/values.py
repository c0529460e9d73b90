"""What a name or an expression denotes while checking a function body.

`Val` is a runtime value: its type, the Core operand that holds it, and its
dependencies on the function's arguments (for regularity). The other classes
are compile-time things that only calls and member accesses consume: modules
(`ModVal`), their functions (`MethodVal`), top-level functions (`FnRef`),
imported files (`ImportVal`), primitives (`PrimVal`) and lambdas not yet
applied (`LambdaVal`).

Beside them, the records of a checking run: a function's signature and report (`FnInfo`),
the state of the body being checked (`FnCtx`), and the checker's result
(`CheckedProgram`). They live here, below the checker's modules, so that the primitives'
rules (presk/types/prims.py) and the checker share them without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from presk.core import ir
from presk.core.ir import Operand
from presk.diagnostics import Diagnostic, Span
from presk.elab.presburger import Lin
from presk.elab.program import FileEnv, ModuleInfo, Program
from presk.elab.ty import Instance, ModuleT, Params, Type
from presk.syntax import ast
from presk.types.regularity import Blame, Deps, Reg
from presk.types.shapes import DimContext


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


class Abort(Exception):
    """Stops checking the current function after its first error (no cascades)."""


@dataclass(eq=False)
class FnInfo:
    """A function: its signature, and once checked its report and its Core."""

    name: str  # qualified: `Linear.apply`, `loss_grad.lambda0`, `Linear.init`
    file: FileEnv
    module: ModuleInfo | None
    decl: ast.FnDecl | None
    dims: list[str] = field(default_factory=list)
    dim_ctx: DimContext = field(default_factory=DimContext)
    params: list[tuple[str, Type, Fraction | None]] = field(default_factory=list)
    module_args: dict[str, ModuleT] = field(default_factory=dict)
    # Every declared parameter, module-typed ones included, for matching calls.
    all_params: list[tuple[str, Type, Fraction | None]] = field(default_factory=list)
    ret: Type | None = None
    declared_effects: tuple[str, ...] = ()
    state: str = "new"  # new, signed, checking, done, failed
    regularity: dict[str, tuple[Reg, Blame | None]] = field(default_factory=dict)
    effects: dict[str, Span] = field(default_factory=dict)
    lets: list[tuple[str, Type]] = field(default_factory=list)
    core: ir.Function | None = None
    lambdas: list[FnInfo] = field(default_factory=list)
    generated: bool = False
    block: bool = False  # generated from an optimizer or training block (not in summaries)
    depends: set[str] = field(default_factory=set)  # parameters the result depends on

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1] if self.module is not None else self.name


@dataclass
class FnCtx:
    """The state of one function body being checked and lowered."""

    info: FnInfo
    locals: dict[str, Denot] = field(default_factory=dict)
    instrs: list[ir.Instr] = field(default_factory=list)
    next_index: int = 0
    theta: Val | None = None
    members: dict[str, Val] = field(default_factory=dict)
    parent: FnCtx | None = None
    lambda_count: list[int] = field(default_factory=lambda: [0])

    def emit(self, name: str | None, ty: Type, op: ir.Op, span: Span | None, deps: Deps) -> Val:
        index = self.next_index
        self.next_index += 1
        self.instrs.append(ir.Instr(index, name, ty, op, span))
        return Val(ty, ir.Ref(index, name), deps)

    def name_last(self, val: Val, name: str) -> Val | None:
        """Give the instruction that produced `val` a source name, if it is the last one."""
        if (
            isinstance(val.operand, ir.Ref)
            and self.instrs
            and self.instrs[-1].index == val.operand.index
            and self.instrs[-1].name is None
        ):
            last = self.instrs[-1]
            self.instrs[-1] = ir.Instr(last.index, name, last.type, last.op, last.span)
            return Val(val.ty, ir.Ref(last.index, name), val.deps)
        return None


# ---------------------------------------------------------------- blocks
# The records of the optimizer, training and inference blocks (types/training.py and
# types/serving.py check them and fill these in).


@dataclass(frozen=True)
class AdamW:
    """An optimizer block's constants, exact; `warmup` None is a constant rate."""

    name: str
    lr: Fraction
    weight_decay: Fraction
    beta1: Fraction
    beta2: Fraction
    eps: Fraction
    cosine: bool
    warmup: int


@dataclass(frozen=True)
class DataPipeline:
    """`stream "F" |> shuffle(seed = s) |> batch(B = n)`: the file, the seed, the batch."""

    path: str  # as written, relative to the file holding the block
    resolved: str  # relative to the working directory
    seed: int | None
    dim: str
    batch: int


@dataclass(frozen=True)
class TrainingRun:
    """What `presk train` drives: the model, the generated functions, the data, the plan."""

    name: str
    model: str
    params: Params
    objective: FnInfo
    optimizer: AdamW
    data: DataPipeline
    epochs: int
    checkpoint_every: int | None
    checkpoint_dir: str | None
    step: FnInfo  # run.step
    update: FnInfo  # adamw.step
    rate: FnInfo  # adamw.lr


@dataclass(frozen=True)
class ServeBlock:
    """What `presk serve` needs: the functions, where the files are, the names of the axes."""

    name: str
    model: str
    params: Params
    generate: FnInfo
    greedy: FnInfo | None
    weights: str  # relative to the working directory
    vocab: str
    batch: str  # the dimension of the batch axis (B)
    context: str  # the dimension of the window (T)
    classes: Lin  # the vocabulary's size in the model (V)


@dataclass
class CheckedProgram:
    """The checker's result: every function's report, the Core module, the instances seen."""

    program: Program
    functions: list[FnInfo]
    core: ir.Module
    instances: list[Instance]
    warnings: list[Diagnostic]
    trainings: list[TrainingRun] = field(default_factory=list)
    serves: list[ServeBlock] = field(default_factory=list)

    def find(self, name: str) -> FnInfo | None:
        for info in self.functions:
            if info.name == name:
                return info
        return None
