"""One PSK-Core function as the lines of a Python function body.

Each instruction becomes an expression; an unnamed value used once is written inside the
expression that uses it, so the code nests as the source did, and a value the source
named (a `let`) is a statement under a comment with its presk type. Parameter trees are
not values in the code: `field θ.proj` is `self.proj` in a module, a call of a module's
`apply` is a call of the sub-module, and a stack's `fold` is a loop over an
`nn.ModuleList` (or, with `--stack=unroll`, one call per layer).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from presk.core import ir
from presk.core.unroll import check_layers
from presk.core.walk import operands
from presk.elab.presburger import Lin
from presk.elab.program import FileEnv, ModuleInfo
from presk.elab.ty import SCALAR, Hyper, Params, Tensor, Type
from presk.export.pytorch.code import ATOM, LAMBDA, Bound, Code, ModRef, Tree
from presk.export.pytorch.draws import HELPER, constructor_args
from presk.export.pytorch.layout import Unsupported
from presk.export.pytorch.names import comment, ident, number
from presk.export.pytorch.naming import Naming, Table, module_arguments
from presk.export.pytorch.prims import primitive
from presk.types.check import FnInfo


@dataclass(frozen=True)
class Options:
    shapes: bool  # --shapes=check
    unroll: bool  # --stack=unroll
    # Functions written as a comment only (--serve: the block's sampler, which draws).
    left_out: frozenset[str] = frozenset()


@dataclass
class Scope:
    """What the function being written sees: the program, and how it names other code."""

    functions: dict[str, FnInfo]
    options: Options
    # How the current file names a top-level function of any file: `loss`, `lin.loss`.
    function_ref: Callable[[FnInfo], str]
    # How it names a module's class: `Linear`, `lin.Linear`.
    class_ref: Callable[[ModuleInfo], str]
    module_dims: dict[str, str] = field(default_factory=dict)  # dim → `self.D`
    naming: Naming = field(default_factory=Naming)  # every Python name of the export
    file: FileEnv | None = None  # the file being written


def signature_names(info: FnInfo, fn: ir.Function) -> list[tuple[ir.Param, str | None]]:
    """Each Core parameter with, for a parameter tree of a top-level function, the name of
    the module argument passed beside it (`net` for `θ : params net`)."""
    declared = module_arguments(info)
    trees = [p for p in fn.params if isinstance(p.type, Params)]
    out: list[tuple[ir.Param, str | None]] = []
    for p in fn.params:
        if isinstance(p.type, Params):
            default = "model" if len(trees) == 1 else f"model_{ident(p.name)}"
            out.append((p, declared.get(p.name, default)))
        else:
            out.append((p, None))
    return out


class BodyWriter:
    """Writes one function; see the module docstring."""

    def __init__(
        self,
        scope: Scope,
        fn: ir.Function,
        env: dict[int, Bound],
        table: Table | None = None,
        dim_names: dict[str, str] | None = None,
    ) -> None:
        self.scope = scope
        self.fn = fn
        self.env = env
        self.lines: list[str] = []
        self.dims_used: set[str] = set()
        # The function's scope: its parameters, then its dims and lets as they come.
        self.table = table if table is not None else Table()
        for c in env.values():
            if isinstance(c, Code) and c.text.isidentifier():
                self.table.claim(c.text)
        self.dim_names: dict[str, str] = {} if dim_names is None else dim_names
        if dim_names is None:
            dims = [d for d in fn.dims if d not in scope.module_dims]
            chosen = self.table.assign([ident(d) for d in dims])
            self.dim_names.update(zip(dims, chosen, strict=True))
        self.uses = _use_counts(fn)
        self.types: dict[int, Type] = {p.index: p.type for p in fn.params}
        self.counter = 0

    # ------------------------------------------------------------ names and sizes

    def fresh(self, base: str) -> str:
        return self.table.fresh(base)

    def dim(self, var: str) -> str:
        """The local holding the dimension `var` (bound from an argument's shape)."""
        if var not in self.dim_names:
            self.dim_names[var] = self.fresh(ident(var))
        return self.dim_names[var]

    def size(self, lin: Lin) -> str:
        terms: list[str] = []
        for var, coeff in lin.coeffs:
            if coeff.denominator != 1:
                raise Unsupported(f"the size {lin}")
            if var in self.scope.module_dims:
                name = self.scope.module_dims[var]
            else:
                name = self.dim(var)
                self.dims_used.add(var)
            terms.append(name if coeff == 1 else f"{coeff.numerator} * {name}")
        if lin.const != 0 or not terms:
            terms.append(number(lin.const))
        return " + ".join(terms)

    def shape(self, ty: Tensor) -> str:
        sizes = [self.size(a.size) for a in ty.axes]
        return "(" + ", ".join(sizes) + ("," if len(sizes) == 1 else "") + ")"

    # ------------------------------------------------------------ the body

    def write(self) -> Bound:
        for instr in self.fn.body:
            self.types[instr.index] = instr.type
            self.instr(instr)
        return self.operand(self.fn.result)

    def operand(self, op: ir.Operand) -> Bound:
        match op:
            case ir.Lit(value):
                text = number(value)
                return Code(text, 2 if text.startswith("-") else ATOM, True)
            case ir.Ref(index):
                return self.env[index]

    def code(self, op: ir.Operand) -> Code:
        bound = self.operand(op)
        if isinstance(bound, ModRef):
            raise Unsupported("a module's parameters used as a value")
        if isinstance(bound, Tree):
            if bound.prefix:
                raise Unsupported("a part of a parameter dict used as a value")
            return Code(bound.params)
        return bound

    def type_of(self, op: ir.Operand) -> Type:
        return self.types[op.index] if isinstance(op, ir.Ref) else SCALAR

    def instr(self, instr: ir.Instr) -> None:
        op = instr.op
        match op:
            case ir.Field(tree, name):
                owner = self.type_of(tree)
                assert isinstance(owner, Params)
                attr = self.scope.naming.attr(owner.inst.module, name)
                self.env[instr.index] = self.field(self.operand(tree), attr, instr.type)
                return
            case ir.Fold():
                self.env[instr.index] = self.fold(op)
                return
            case ir.Prim():
                args = [self.code(a) for a in op.args]
                types = [self.type_of(a) for a in op.args]
                value = primitive(op, args, types, instr.type, self.size)
            case ir.Call() if self.is_init(op):
                self.env[instr.index] = self.init(instr, op)
                return
            case ir.Call():
                value = self.call(op)
            case ir.Get(tuple_, index):
                value = Code(f"{self.code(tuple_).atom()}[{index}]")
            case ir.MakeTuple(items):
                value = Code("(" + ", ".join(self.code(i).text for i in items) + ",)")
            case ir.GradOf():
                value = self.grad(op)
            case ir.Slice() | ir.FoldVjp() | ir.FoldFwd() | ir.FoldBwd():
                raise Unsupported(f"the Core operation {type(op).__name__}")
        self.bind(instr, value)

    def bind(self, instr: ir.Instr, value: Code) -> None:
        uses = self.uses.get(instr.index, 0)
        if instr.name is None and uses == 1:
            self.env[instr.index] = value
            return
        if instr.name is None and uses == 0:
            return
        name = self.fresh(ident(instr.name) if instr.name else f"_t{instr.index}")
        if instr.name is not None:
            self.lines.append(f"# {comment(instr.name)} : {comment(str(instr.type))}")
        self.lines.append(f"{name} = {value.text}")
        if self.scope.options.shapes and isinstance(instr.type, Tensor) and not instr.type.open:
            self.lines.append(f"assert {name}.shape == {self.shape(instr.type)}")
        self.env[instr.index] = Code(name, ATOM, value.scalar)

    def field(self, tree: Bound, attr: str, ty: Type) -> Bound:
        match tree:
            case ModRef(obj, stacked):
                if stacked:
                    raise Unsupported("a field of a stack outside its loop")
                if isinstance(ty, Params):
                    return ModRef(f"{obj}.{attr}", ty.inst.stack is not None)
                return Code(f"{obj}.{attr}")
            case Tree(module, params, prefix):
                if isinstance(ty, Params):
                    return Tree(f"{module}.{attr}", params, f"{prefix}{attr}.")
                return Code(f'{params}["{prefix}{attr}"]')
            case Code():
                raise Unsupported("a field of a value")

    def rest_args(self, callee: FnInfo, fn: ir.Function, args: tuple[ir.Operand, ...]) -> str:
        parts: list[str] = []
        keyword = False
        names = self.scope.naming.signature(callee).names
        for param, arg in zip(fn.params, args, strict=True):
            if isinstance(param.type, Hyper) and param.default is not None:
                if isinstance(arg, ir.Lit) and arg.value == param.default:
                    keyword = True  # the default: left out, later ones by keyword
                    continue
                parts.append(f"{names[param.index]}={self.code(arg).text}")
                continue
            if keyword:
                parts.append(f"{names[param.index]}={self.code(arg).text}")
            else:
                parts.append(self.code(arg).text)
        return ", ".join(parts)

    def call(self, op: ir.Call) -> Code:
        callee = self.scope.functions.get(op.fn)
        if callee is None or callee.core is None:
            raise Unsupported(f"a call of `{op.fn}`")
        fn = callee.core
        if callee.module is not None:
            tree = self.operand(op.args[0])
            rest = self.rest_args(callee, _tail(fn), op.args[1:])
            method = "" if callee.short == "apply" else f".{self.scope.naming.method(callee)}"
            match tree:
                case ModRef(obj, False):
                    return Code(f"{obj}{method}({rest})")
                case Tree(module, params, "") if not method:
                    args = ", ".join(self.code(a).text for a in op.args[1:])
                    return Code(f"torch.func.functional_call({module}, {params}, ({args},))")
            raise Unsupported(f"a call of `{op.fn}` on these parameters")
        parts: list[str] = []
        for (_, companion), arg in zip(signature_names(callee, fn), op.args, strict=True):
            if companion is not None:
                tree = self.operand(arg)
                if not isinstance(tree, Tree) or tree.prefix:
                    raise Unsupported(f"a call of `{op.fn}` with these parameters")
                parts += [tree.module, tree.params]
            else:
                parts.append(self.code(arg).text)
        return Code(f"{self.scope.function_ref(callee)}({', '.join(parts)})")

    def is_init(self, op: ir.Call) -> bool:
        callee = self.scope.functions.get(op.fn)
        return callee is not None and callee.generated and callee.short == "init"

    def init(self, instr: ir.Instr, op: ir.Call) -> Tree:
        """`M.init(key)`: a module built at the call's sizes (its own draws unused) and
        the dict of presk's draws for it, which `functional_call` applies."""
        callee = self.scope.functions[op.fn]
        module = callee.module
        assert module is not None
        sizes = dict(op.dims)
        args = [
            self.size(sizes[name]) if name in sizes else self.size(Lin.var(name))
            for name in constructor_args(module)
        ]
        obj = self.fresh(f"_{ident(module.name.lower())}")
        self.lines.append(f"{obj} = {self.scope.class_ref(module)}({', '.join(args)})")
        params = self.fresh(ident(instr.name) if instr.name else "_params")
        if instr.name is not None:
            self.lines.append(f"# {comment(instr.name)} : {comment(str(instr.type))}")
        key = self.code(op.args[0]).text
        self.lines.append(f"{params} = {HELPER}.init({obj}, {key})")
        return Tree(obj, params)

    def fold(self, op: ir.Fold) -> Code:
        stack = self.operand(op.stacked)
        if not isinstance(stack, ModRef) or not stack.stacked:
            raise Unsupported("a fold over these parameters")
        layer = self.scope.functions.get(op.fn)
        if layer is None or layer.core is None or layer.short != "apply":
            raise Unsupported(f"a stack of `{op.fn}`")
        extra = [self.code(e).text for e in op.extra]
        state = self.fresh(f"_stack{self.counter}")
        self.counter += 1
        self.lines.append(f"{state} = {self.code(op.init).text}")
        args = ", ".join([state, *extra])
        count = self.size(op.count)
        if self.scope.options.unroll and op.count.is_const:
            check_layers(int(op.count.const), f"--stack unroll, `{op.fn}`")
            for i in range(int(op.count.const)):
                self.lines.append(f"{state} = {stack.obj}[{i}]({args})")
        else:
            var = self.fresh(ident(layer.module.name.lower()) if layer.module else "layer")
            self.lines.append(f"for {var} in {stack.obj}:  # stack{{{count}}}")
            self.lines.append(f"    {state} = {var}({args})")
        return Code(state)

    def grad(self, op: ir.GradOf) -> Code:
        if op.value or op.wrt is not None:
            raise Unsupported("a gradient with its value")
        lam = self.scope.functions.get(op.fn)
        if lam is None or lam.core is None:
            raise Unsupported(f"the gradient of `{op.fn}`")
        fn = lam.core
        env: dict[int, Bound] = {}
        for param, arg in zip(fn.params[:-1], op.args[:-1], strict=True):
            env[param.index] = self.operand(arg)
        last, wrt = fn.params[-1], self.operand(op.args[-1])
        # The lambda's body sees what it captured (env), its own lets and the file's names;
        # its parameter must shadow none of those.
        table = self.table.copy()
        captured = {c.text for c in env.values() if isinstance(c, Code)}
        if self.scope.file is not None:
            captured |= {n for n in self.scope.naming.scope(self.scope.file).taken}
        var = ident(last.name)
        if unicodedata.normalize("NFKC", var) in captured:
            var = table.fresh(var)
        table.claim(var)
        if isinstance(wrt, Tree):
            env[last.index] = Tree(wrt.module, var, wrt.prefix)
            point = Code(wrt.params)
        elif isinstance(wrt, Code):
            env[last.index] = Code(var)
            point = wrt
        else:
            raise Unsupported("the gradient in a module's own parameters")
        inner = BodyWriter(self.scope, fn, env, table, self.dim_names)
        result = inner.write()
        self.dims_used |= inner.dims_used
        if not isinstance(result, Code):
            raise Unsupported("a gradient of parameters")
        if not inner.lines:
            body = Code(f"lambda {var}: {result.text}", LAMBDA)
            return Code(f"torch.func.grad({body.text})({point.text})")
        name = self.fresh(f"_{ident(lam.short)}")
        self.lines.append(f"def {name}({var}):")
        self.lines += [f"    {line}" for line in [*inner.lines, f"return {result.text}"]]
        return Code(f"torch.func.grad({name})({point.text})")


def _tail(fn: ir.Function) -> ir.Function:
    """The function without its first parameter (a module function's θ)."""
    return ir.Function(fn.name, fn.dims, fn.params[1:], fn.ret, fn.effects, fn.body, fn.result)


def _use_counts(fn: ir.Function) -> dict[int, int]:
    counts: dict[int, int] = {}
    for instr in fn.body:
        for operand in operands(instr.op):
            if isinstance(operand, ir.Ref):
                counts[operand.index] = counts.get(operand.index, 0) + 1
    if isinstance(fn.result, ir.Ref):
        counts[fn.result.index] = counts.get(fn.result.index, 0) + 1
    return counts


__all__ = ["BodyWriter", "Options", "Scope", "signature_names"]
