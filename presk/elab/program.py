"""Loading a program: files and imports, constants in ℚ, dims, modules.

`load` parses the main file and everything it imports (paths relative to the
importing file), evaluates every constant exactly (with `--const` overrides,
which reach imported files too), checks `nat` constants (E1005) and static
assertions (E1004), and records dims, aliases and modules per file. The
result is a `Program`: files in dependency order, the main file last.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from presk.diagnostics import Diagnostic, Label, Sink, Source, Span
from presk.elab import presburger as pb
from presk.elab.presburger import Lin, NonLinear
from presk.syntax import ast
from presk.syntax.deep import deep
from presk.syntax.parser import parse

MACHINE_TYPES = ("f64", "f32", "nat", "int")

# The most bits an exact constant's numerator or denominator may have (about 2466
# decimal digits). Literals stay far below it (presk/syntax/literals.py); only a product
# or a power can reach it, and past it a constant is nothing a tensor program means. It
# keeps every step of constant arithmetic cheap, and every constant printable in a
# message (Python refuses to print integers of more than 4300 digits).
MAX_CONST_BITS = 1 << 13

# Maps a name to its dimension variable, or None when it is not a dimension.
DimLookup = Callable[[str], Lin | None]


class LoadError(Exception):
    """A file could not be read (not a diagnostic: there is no span to show)."""


class UnknownConstant(Exception):
    """`--const` names no constant of the program: a usage error."""


@dataclass(eq=False)
class ModuleInfo:
    """A module declaration and the file it lives in."""

    name: str
    file: FileEnv
    decl: ast.Module

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.decl.dims)


@dataclass(eq=False)
class FileEnv:
    """One source file: its declarations by kind, constants evaluated."""

    path: str  # as displayed: relative to where presk was run
    source: Source
    tree: ast.File
    imports: dict[str, FileEnv] = field(default_factory=dict)
    import_decls: list[ast.Import] = field(default_factory=list)
    consts: dict[str, Fraction] = field(default_factory=dict)
    const_decls: dict[str, ast.Const] = field(default_factory=dict)
    dims: dict[str, ast.DimDecl] = field(default_factory=dict)
    dim_bounds: dict[str, Fraction] = field(default_factory=dict)
    aliases: dict[str, ast.TypeAlias] = field(default_factory=dict)
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    fns: dict[str, ast.FnDecl] = field(default_factory=dict)
    optimizers: dict[str, ast.Optimizer] = field(default_factory=dict)
    trainings: list[ast.Training] = field(default_factory=list)
    inferences: list[ast.Inference] = field(default_factory=list)

    @property
    def basename(self) -> str:
        return os.path.basename(self.path)


@dataclass(eq=False)
class Program:
    """All files of a program, imports before importers; `main` is last."""

    files: list[FileEnv]
    overrides: dict[str, Fraction]

    @property
    def main(self) -> FileEnv:
        return self.files[-1]


@deep
def load(path: str, overrides: dict[str, Fraction], sink: Sink) -> Program:
    """Parse and elaborate `path` and its imports. Raises LoadError, CompileError."""
    loader = _Loader(overrides, sink)
    loader.load_file(path, None)
    sink.check()
    unknown = sorted(set(overrides) - loader.const_names)
    if unknown:
        raise UnknownConstant(f"--const {unknown[0]}: no constant `{unknown[0]}` in this program")
    return Program(loader.files, overrides)


def read_source(path: str) -> Source:
    """Read a source file as UTF-8; a one-line LoadError if it cannot be."""
    if os.path.isdir(path):
        raise LoadError(f"{path}: is a directory, not a source file")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise LoadError(f"{path}: {error.strerror or error}") from None
    if b"\0" in data:
        raise LoadError(f"{path}: not a text file (it contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LoadError(f"{path}: not valid UTF-8 (byte {error.start})") from None
    return Source(path, text)


class _Loader:
    def __init__(self, overrides: dict[str, Fraction], sink: Sink) -> None:
        self.overrides = overrides
        self.sink = sink
        self.files: list[FileEnv] = []
        self.by_path: dict[str, FileEnv] = {}
        self.loading: list[str] = []
        self.const_names: set[str] = set()

    def load_file(self, path: str, via: ast.Import | None) -> FileEnv | None:
        key = os.path.realpath(path)
        if key in self.by_path:
            return self.by_path[key]
        if key in self.loading:
            assert via is not None
            self.error(
                "E1001", f"import cycle through `{path}`", via.path.span, "imported again here"
            )
            return None
        try:
            source = read_source(path)
        except LoadError as error:
            if via is None:
                raise
            self.error("E1002", f"cannot import `{via.path.value}`", via.path.span, str(error))
            return None
        self.loading.append(key)
        tree = parse(source, self.sink)
        env = FileEnv(path, source, tree)
        self.collect(env)
        self.loading.pop()
        self.by_path[key] = env
        self.files.append(env)
        return env

    def error(self, code: str, message: str, span: Span, label: str) -> None:
        self.sink.report(Diagnostic(code, message, Label(span, label)))

    def declare(self, env: FileEnv, ident: ast.Ident, table: Mapping[str, object]) -> bool:
        if ident.name in table:
            self.error(
                "E1003", f"`{ident.name}` is declared twice", ident.span, "declared again here"
            )
            return False
        return True

    def collect(self, env: FileEnv) -> None:
        for decl in env.tree.decls:
            match decl:
                case ast.Import(path, alias):
                    target = os.path.normpath(os.path.join(os.path.dirname(env.path), path.value))
                    if alias.name in env.imports:
                        self.declare(env, alias, env.imports)
                        continue
                    imported = self.load_file(target, decl)
                    env.import_decls.append(decl)
                    if imported is not None:
                        env.imports[alias.name] = imported
                case ast.Const(name, _, _):
                    if self.declare(env, name, env.const_decls):
                        env.const_decls[name.name] = decl
                        self.const_names.add(name.name)
                        self.eval_const(env, decl)
                case ast.StaticAssert():
                    self.check_assert(env, decl)
                case ast.DimDecl(name, bound):
                    if self.declare(env, name, env.dims):
                        env.dims[name.name] = decl
                        if bound is not None:
                            value = self.const_value(env, bound)
                            if value is not None:
                                env.dim_bounds[name.name] = value
                case ast.TypeAlias(name):
                    if self.declare(env, name, env.aliases):
                        env.aliases[name.name] = decl
                case ast.Module(name):
                    if self.declare(env, name, env.modules):
                        env.modules[name.name] = ModuleInfo(name.name, env, decl)
                        members: dict[str, object] = {}
                        for ident in [
                            *(p.name for p in decl.params),
                            *(u.name for u in decl.uses),
                            *(f.name for f in decl.fns),
                        ]:
                            if self.declare(env, ident, members):
                                members[ident.name] = ident
                        for fn in decl.fns:
                            self.check_params(env, fn)
                case ast.FnDecl(name):
                    if self.declare(env, name, env.fns):
                        env.fns[name.name] = decl
                    self.check_params(env, decl)
                case ast.Optimizer(name):
                    env.optimizers[name.name] = decl
                case ast.Training():
                    env.trainings.append(decl)
                case ast.Inference():
                    env.inferences.append(decl)

    def check_params(self, env: FileEnv, decl: ast.FnDecl) -> None:
        """A function's dimension and value parameters are named once each."""
        seen: dict[str, object] = {}
        for ident in [*decl.dims, *(p.name for p in decl.params)]:
            if self.declare(env, ident, seen):
                seen[ident.name] = ident

    # ------------------------------------------------------------ constants

    def eval_const(self, env: FileEnv, decl: ast.Const) -> None:
        name = decl.name.name
        if name in self.overrides:
            value: Fraction | None = self.overrides[name]
        else:
            value = self.const_value(env, decl.value)
        if value is None:
            return
        kind = decl.type.dotted
        if kind == "nat" and (value.denominator != 1 or value < 0):
            self.sink.report(
                Diagnostic(
                    "E1005",
                    f"`{name}` is not a natural number",
                    Label(decl.value.span, f"evaluates to {_show(value)}"),
                    note="constants are evaluated exactly: "
                    "a division must be exact and the result non-negative",
                )
            )
            return
        if kind not in MACHINE_TYPES:
            self.error(
                "E1006",
                f"unknown constant type `{kind}`",
                decl.type.span,
                "a constant is a `nat`, an `int`, an `f64` or an `f32`",
            )
            return
        env.consts[name] = value

    def const_value(self, env: FileEnv, expr: ast.Expr) -> Fraction | None:
        """Evaluate a constant expression exactly; None after reporting an error."""
        try:
            return const_eval(env, expr)
        except ConstError as error:
            self.error(error.code, error.message, error.span, error.label)
            return None

    def check_assert(self, env: FileEnv, decl: ast.StaticAssert) -> None:
        text = env.source.text[decl.cond.span.start : decl.cond.span.end]
        try:
            formula, variables = assertion_formula(env, decl.cond)
        except ConstError as error:
            self.error(error.code, error.message, error.span, error.label)
            return
        bounds = {name: int(env.dim_bounds[name]) for name in variables if name in env.dim_bounds}
        try:
            result = pb.decide(formula, variables, pb.Bounds(upper=bounds))
        except pb.Undecided:
            self.sink.report(
                Diagnostic(
                    "E1012",
                    f"cannot decide the static assertion {text}",
                    Label(decl.span, "too large to decide"),
                    note=f"assertions are decided exactly, in at most {pb.STEP_LIMIT} steps",
                )
            )
            return
        if result.valid:
            return
        if variables and result.counterexample:
            witness = pb.format_counterexample(result.counterexample, variables)
            label = f"`{text}` is false for {witness}"
        else:
            label = f"`{text}` is false with the constants of this file"
        self.error("E1004", f"static assertion fails: {text}", decl.span, label)


def _bits(value: Fraction) -> int:
    return max(value.numerator.bit_length(), value.denominator.bit_length(), 1)


def _show(value: Fraction) -> str:
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


@dataclass
class ConstError(Exception):
    """A problem in a constant or dimension expression."""

    code: str
    message: str
    span: Span
    label: str


def lookup_const(env: FileEnv, expr: ast.Expr) -> Fraction | None:
    """The value of `C` or `alias.C` if `expr` names a constant."""
    match expr:
        case ast.Name(ident):
            return env.consts.get(ident.name)
        case ast.Member(ast.Name(alias), name) if alias.name in env.imports:
            return env.imports[alias.name].consts.get(name.name)
    return None


def const_eval(env: FileEnv, expr: ast.Expr) -> Fraction:
    """Evaluate an expression of numbers and constants exactly in ℚ."""
    lin = lin_eval(env, expr, lambda name: None)
    if not lin.is_const:
        raise ConstError("E2001", "not a constant", expr.span, "this depends on a dimension")
    return lin.const


def lin_eval(env: FileEnv, expr: ast.Expr, dim: DimLookup) -> Lin:
    """A dimension expression as a linear form; `dim` maps names to dimension variables."""
    match expr:
        case ast.Num(_, value):
            return Lin.const_(value)
        case ast.Name(ident) | ast.Member(_, ident):
            known = lookup_const(env, expr)
            if known is not None:
                return Lin.const_(known)
            if isinstance(expr, ast.Name):
                var = dim(ident.name)
                if var is not None:
                    return var
                if ident.name in env.dims:
                    raise ConstError(
                        "E1010",
                        f"`{ident.name}` is a dimension: a constant cannot depend on it",
                        expr.span,
                        "a dimension has no value until the program runs",
                    )
            raise ConstError(
                "E2001",
                f"unresolved name `{ident.name}`",
                expr.span,
                "not a constant or dimension in scope",
            )
        case ast.Neg(operand):
            return lin_eval(env, operand, dim) * -1
        case ast.Binary(op, left, right):
            a = lin_eval(env, left, dim)
            b = lin_eval(env, right, dim)
            return _bounded(_lin_binary(op, a, b, expr), expr)
    raise ConstError("E2013", "not a dimension expression", expr.span, "expected a size here")


def _lin_binary(op: ast.BinOp, a: Lin, b: Lin, expr: ast.Binary) -> Lin:
    try:
        match op:
            case ast.BinOp.ADD:
                return a + b
            case ast.BinOp.SUB:
                return a - b
            case ast.BinOp.MUL:
                return a * b
            case ast.BinOp.DIV:
                if not b.is_const or b.const == 0:
                    raise ConstError(
                        "E1007",
                        "division by zero or by a dimension",
                        expr.span,
                        "cannot divide here",
                    )
                return a * (1 / b.const)
            case ast.BinOp.MOD:
                if a.is_const and b.is_const and b.const != 0:
                    return Lin.const_(a.const % b.const)
                raise ConstError(
                    "E1007",
                    "`%` needs constant operands here",
                    expr.span,
                    "not a constant remainder",
                )
            case ast.BinOp.POW:
                if a.is_const and b.is_const and b.const.denominator == 1:
                    exponent = int(b.const)
                    if a.const == 0 and exponent < 0:
                        raise ConstError(
                            "E1007", "zero to a negative power", expr.span, "division by zero"
                        )
                    if a.const in (0, 1, -1):
                        # 0, 1 and -1 keep their size whatever the exponent.
                        small = a.const ** (exponent % 2) if a.const else Fraction(exponent == 0)
                        return Lin.const_(small)
                    # Any other base has a numerator or denominator of 2 or more, so each
                    # factor adds a bit at least: refuse before computing the power. The
                    # result then has at most twice the limit's bits, and _bounded refuses
                    # what lies between.
                    if abs(exponent) * (_bits(a.const) - 1) > MAX_CONST_BITS:
                        raise _out_of_range(expr)
                    return Lin.const_(a.const**exponent)
                raise ConstError(
                    "E1007", "`^` needs constant operands here", expr.span, "not constant"
                )
    except NonLinear:
        raise ConstError(
            "E1008", "dimension expression is not linear", expr.span, "a product of two dimensions"
        ) from None
    raise ConstError(
        "E2013", "not a dimension expression", expr.span, f"`{op.value}` is not allowed here"
    )


def _bounded(lin: Lin, expr: ast.Expr) -> Lin:
    """`lin`, or E1011 when one of its numbers is larger than MAX_CONST_BITS allows."""
    for value in (lin.const, *(c for _, c in lin.coeffs)):
        if _bits(value) > MAX_CONST_BITS:
            raise _out_of_range(expr)
    return lin


def _out_of_range(expr: ast.Expr) -> ConstError:
    return ConstError(
        "E1011",
        "constant out of range",
        expr.span,
        f"this needs more than {MAX_CONST_BITS} bits exactly",
    )


_PB_OPS: dict[ast.BinOp, pb.CmpOp] = {
    ast.BinOp.EQ: "==",
    ast.BinOp.NE: "!=",
    ast.BinOp.LE: "<=",
    ast.BinOp.LT: "<",
    ast.BinOp.GE: ">=",
    ast.BinOp.GT: ">",
}


def assertion_formula(env: FileEnv, cond: ast.Expr) -> tuple[pb.Formula, list[str]]:
    """A static assertion as a Presburger formula over the file's dims."""
    variables: list[str] = []

    def dim(name: str) -> Lin | None:
        if name in env.dims:
            if name not in variables:
                variables.append(name)
            return Lin.var(name)
        return None

    if not (isinstance(cond, ast.Binary) and cond.op in _PB_OPS):
        raise ConstError(
            "E1009", "a static assertion is a comparison", cond.span, "expected `==`, `<=`, ..."
        )
    left, right = cond.left, cond.right
    # `a % k == r` with a symbolic `a` is a divisibility constraint: k | (a - r).
    if (
        isinstance(left, ast.Binary)
        and left.op == ast.BinOp.MOD
        and cond.op in (ast.BinOp.EQ, ast.BinOp.NE)
    ):
        a = lin_eval(env, left.left, dim)
        k = lin_eval(env, left.right, dim)
        r = lin_eval(env, right, dim)
        if k.is_const and k.const.denominator == 1 and k.const > 0 and r.is_const:
            divides: pb.Formula = pb.And((pb.Divides(int(k.const), a - r), _in_range(r, k)))
            if cond.op == ast.BinOp.NE:
                divides = pb.Not(divides)
            return divides, variables
    a = lin_eval(env, left, dim)
    b = lin_eval(env, right, dim)
    return pb.Cmp(_PB_OPS[cond.op], a, b), variables


def _in_range(r: Lin, k: Lin) -> pb.Formula:
    return pb.TrueF() if 0 <= r.const < k.const else pb.FalseF()
