"""Reverse-mode differentiation of PSK-Core functions.

`differentiate(module, remat)` replaces every `grad F(args)` by a call of a
generated `F.grad`, and generates what it needs, function by function:

- `F.vjp[w]` (w: the parameters whose adjoints callers read) returns the
  tuple of those adjoints for a cotangent `ct`;
- with `remat = "store"` (the default) it is `F.bwd[w]` after `F.fwd[w]`:
  `.fwd` runs the forward pass once and returns the residuals, the forward
  values the reverse sweep reads; `.bwd` runs the sweep on them. Forward
  values that nothing reads are not computed (dead code is removed);
- with `remat = "recompute"`, `.vjp` is one function that computes its
  forward pass and then its sweep;
- `F.grad` calls `.vjp` with `ct = 1` and takes the adjoint of the last
  parameter; `F.value_vjp` returns the value and the adjoints in one call.

The sweep reads like micrograd's backward: walk the instructions in reverse,
and for each active one whose result has a cotangent, add each operand's
contribution (rules.RULES for primitives, the callee's vjp for calls, a
fold's reverse for folds). Only values that depend on the differentiated
parameters are active.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from presk.ad.rules import RULES, Site
from presk.core import ir
from presk.core.build import Builder
from presk.core.walk import live, operands, remap, remap_operand
from presk.diagnostics import CompilerBug
from presk.elab.presburger import Lin
from presk.elab.ty import Elem, Params, Tensor, TupleT, Type


class NotDifferentiable(Exception):
    """A construct the reverse sweep cannot handle (a grad inside a grad)."""


def differentiable_type(ty: Type) -> bool:
    """Reals, parameter trees and tuples of them carry adjoints."""
    match ty:
        case Tensor(elem):
            return elem == Elem.REAL
        case Params():
            return True
        case TupleT(items):
            return any(differentiable_type(item) for item in items)
    return False


def _suffix(fn: ir.Function, wrt: tuple[int, ...]) -> str:
    """`[θ]` when only some differentiable parameters are wanted, else empty."""
    wanted = [p.name for p in fn.params if p.index in wrt]
    every = [p.name for p in fn.params if differentiable_type(p.type)]
    return "" if wanted == every else "[" + ", ".join(wanted) + "]"


@dataclass
class _Adjoints:
    """Cotangent contributions per forward binding, summed on demand."""

    builder: Builder
    types: dict[int, Type]
    primal: dict[int, ir.Operand]
    full: dict[int, list[ir.Operand]] = field(default_factory=dict)
    fields: dict[int, dict[str, list[ir.Operand]]] = field(default_factory=dict)
    items: dict[int, dict[int, list[ir.Operand]]] = field(default_factory=dict)

    def add(self, index: int, value: ir.Operand) -> None:
        self.full.setdefault(index, []).append(value)

    def add_field(self, index: int, name: str, value: ir.Operand) -> None:
        self.fields.setdefault(index, {}).setdefault(name, []).append(value)

    def add_item(self, index: int, item: int, value: ir.Operand) -> None:
        self.items.setdefault(index, {}).setdefault(item, []).append(value)

    def _sum(self, values: list[ir.Operand], ty: Type) -> ir.Operand:
        total = values[0]
        for value in values[1:]:
            name = "add" if isinstance(ty, Tensor) else "tree_add"
            total = self.builder.prim(name, (total, value), ty)
        return total

    def total(self, index: int) -> ir.Operand | None:
        """The summed cotangent of binding `index`, or None if it has none."""
        ty = self.types[index]
        parts = list(self.full.get(index, []))
        b = self.builder
        if index in self.fields:
            assert isinstance(ty, Params)
            tree = b.prim("zeros_like", (self.primal[index],), ty)
            for name, values in self.fields[index].items():
                member = _member_type(ty, name)
                tree = b.prim(
                    "set_field", (tree, self._sum(values, member)), ty, (("field", name),)
                )
            parts.append(tree)
        if index in self.items:
            assert isinstance(ty, TupleT)
            elements: list[ir.Operand] = []
            for i, item_ty in enumerate(ty.items):
                item_values = self.items[index].get(i)
                if item_values:
                    elements.append(self._sum(item_values, item_ty))
                else:
                    source = b.emit(None, item_ty, ir.Get(self.primal[index], i))
                    elements.append(b.prim("zeros_like", (source,), item_ty))
            parts.append(b.emit(None, ty, ir.MakeTuple(tuple(elements))))
        if not parts:
            return None
        return self._sum(parts, ty)


def _member_type(ty: Params, name: str) -> Type:
    from presk.types.scope import member_type

    member = member_type(ty.inst, name)
    if member is None:
        raise CompilerBug(f"params {ty.inst} has no member {name}")
    return member


class Differentiator:
    """Generates the derivative functions of a module on demand."""

    def __init__(self, module: ir.Module, remat: str) -> None:
        self.source = {fn.name: fn for fn in module.functions}
        self.remat = remat
        self.generated: dict[str, ir.Function] = {}
        self.order: list[str] = []

    def add(self, fn: ir.Function) -> None:
        if fn.name not in self.generated:
            self.generated[fn.name] = fn
            self.order.append(fn.name)

    def function(self, name: str) -> ir.Function:
        return self.source[name] if name in self.source else self.generated[name]

    # ------------------------------------------------------------ entry points

    def grad(self, name: str) -> str:
        """`F.grad`: the adjoint of F's last parameter for ct = 1."""
        target = f"{name}.grad"
        if target in self.generated:
            return target
        fn = self.function(name)
        last = fn.params[-1]
        vjp = self.vjp(name, (last.index,))
        b = Builder(target, fn.dims)
        args = [b.param(p.name, p.type, p.default) for p in fn.params]
        dims = tuple((d, _var(d)) for d in fn.dims)
        out_ty = TupleT((last.type,))
        out = b.emit(None, out_ty, ir.Call(vjp, dims, (*args, ir.Lit(Fraction(1)))))
        g = b.emit(None, last.type, ir.Get(out, 0))
        self.add(b.finish(last.type, g))
        self.value_vjp(name, (last.index,))
        return target

    def grad_call(self, op: ir.GradOf) -> ir.Call:
        """The call that replaces a `grad`: `F.grad`, or `F.value_vjp[w]` at ct = 1."""
        if not op.value:
            assert op.wrt is None, "a gradient in another parameter comes with its value"
            return ir.Call(self.grad(op.fn), op.dims, op.args)
        fn = self.function(op.fn)
        wrt = fn.params[-1].index if op.wrt is None else op.wrt
        target = self.value_vjp(op.fn, (wrt,))
        return ir.Call(target, op.dims, (*op.args, ir.Lit(Fraction(1))))

    def vjp(self, name: str, wrt: tuple[int, ...]) -> str:
        """`F.vjp[w]`, generated once per (F, w)."""
        fn = self.function(name)
        target = f"{name}.vjp{_suffix(fn, wrt)}"
        if target in self.generated:
            return target
        if self.remat == "recompute":
            self.add(self.combined(fn, wrt, target, with_value=False).fn)
            return target
        fwd_name, bwd_name = self.pieces(name, wrt)
        fwd, bwd = self.generated[fwd_name], self.generated[bwd_name]
        b = Builder(target, fn.dims)
        args = [b.param(p.name, p.type, p.default) for p in fn.params]
        ct = b.param("ct", fn.ret)
        dims = tuple((d, _var(d)) for d in fn.dims)
        kept = b.emit(None, fwd.ret, ir.Call(fwd.name, dims, tuple(args)))
        residuals = b.emit(None, _residual_type(fwd), ir.Get(kept, 1))
        out = b.emit(None, bwd.ret, ir.Call(bwd.name, dims, (*args, residuals, ct)))
        self.add(b.finish(bwd.ret, out))
        return target

    def pieces(self, name: str, wrt: tuple[int, ...]) -> tuple[str, str]:
        """`F.fwd[w]` and `F.bwd[w]` (the store form), generated once per (F, w)."""
        fn = self.function(name)
        suffix = _suffix(fn, wrt)
        names = f"{name}.fwd{suffix}", f"{name}.bwd{suffix}"
        if names[0] not in self.generated:
            swept = self.combined(fn, wrt, f"{name}.vjp{suffix}", with_value=False, dce=False)
            for piece in self.split(fn, swept, wrt):
                self.add(piece)
        return names

    def value_vjp(self, name: str, wrt: tuple[int, ...]) -> str:
        """`F.value_vjp`: the value and the adjoints in one call."""
        fn = self.function(name)
        target = f"{name}.value_vjp{_suffix(fn, wrt)}"
        if target not in self.generated:
            self.add(self.combined(fn, wrt, target, with_value=True).fn)
        return target

    # ------------------------------------------------------------ the sweep

    def combined(
        self,
        fn: ir.Function,
        wrt: tuple[int, ...],
        target: str,
        with_value: bool,
        dce: bool = True,
    ) -> _Swept:
        """Forward pass then reverse sweep in one function.

        In the store form an active call runs its callee's `.fwd` and a fold its
        layers' (`FoldFwd`), so the sweep reads their residuals instead of running
        their forward passes again; see Note [Forward once].
        """
        b = Builder(target, fn.dims)
        m: dict[int, ir.Operand] = {}
        types: dict[int, Type] = {}
        for p in fn.params:
            m[p.index] = b.param(p.name, p.type, p.default)
            types[p.index] = p.type
        ct = b.param("ct", fn.ret)
        active = set(wrt)
        kept: dict[int, _Kept] = {}
        for instr in fn.body:
            types[instr.index] = instr.type
            if isinstance(instr.op, ir.GradOf):
                raise NotDifferentiable(
                    f"`{fn.name}` takes a gradient inside a differentiated function"
                )
            if any(isinstance(o, ir.Ref) and o.index in active for o in operands(instr.op)):
                if differentiable_type(instr.type) or isinstance(instr.type, TupleT):
                    active.add(instr.index)
            if self.remat == "store" and instr.index in active:
                forward = self.keep(b, instr, m, types, active)
                if forward is not None:
                    m[instr.index], kept[instr.index] = forward
                    continue
            m[instr.index] = b.emit(instr.name, instr.type, remap(instr.op, m), instr.span)
        boundary = len(b.params) + len(b.instrs)
        value = remap_operand(fn.result, m)
        adj = _Adjoints(b, types, m)
        if isinstance(fn.result, ir.Ref) and fn.result.index in active:
            adj.add(fn.result.index, ct)
        for instr in reversed(fn.body):
            if instr.index not in active:
                continue
            cotangent = adj.total(instr.index)
            if cotangent is None:
                continue
            self.sweep(b, instr, m, types, active, adj, cotangent, kept.get(instr.index))
        outputs: list[ir.Operand] = []
        out_types: list[Type] = []
        for index in wrt:
            param = fn.params[index]
            total = adj.total(index)
            if total is None:
                total = b.prim("zeros_like", (m[index],), param.type)
            outputs.append(total)
            out_types.append(param.type)
        if with_value:
            outputs.insert(0, value)
            out_types.insert(0, fn.ret)
        ret = TupleT(tuple(out_types))
        result = b.emit(None, ret, ir.MakeTuple(tuple(outputs)))
        whole = b.finish(ret, result, fn.effects)
        return _Swept(_dce(whole) if dce else whole, boundary, value)

    def keep(
        self,
        b: Builder,
        instr: ir.Instr,
        m: dict[int, ir.Operand],
        types: dict[int, Type],
        active: set[int],
    ) -> tuple[ir.Operand, _Kept] | None:
        """An active call or fold run in the store form: its value, and what its reverse reads."""
        match instr.op:
            case ir.Call(callee, dims, args):
                positions = _positions(self.function(callee), args, active)
                if not positions:
                    return None
                try:
                    fwd_name, bwd_name = self.pieces(callee, positions)
                except NotDifferentiable:
                    return None  # the sweep says so if it needs this call's adjoint
                fwd = self.generated[fwd_name]
                res_ty = _residual_type(fwd)
                call = ir.Call(fwd_name, dims, tuple(remap_operand(a, m) for a in args))
                out = b.emit(None, TupleT((instr.type, res_ty)), call)
                value = b.emit(instr.name, instr.type, ir.Get(out, 0), instr.span)
                residuals = b.emit(None, res_ty, ir.Get(out, 1))
                return value, _Kept(bwd_name, positions, residuals)
            case ir.Fold(callee, dims, stacked, count, init, _):
                fwd_name, bwd_name = self.pieces(callee, (0, 1))
                res_ty = _residual_type(self.generated[fwd_name])
                carry = types[init.index] if isinstance(init, ir.Ref) else instr.type
                layers, start = remap_operand(stacked, m), remap_operand(init, m)
                op = ir.FoldFwd(fwd_name, dims, layers, count, start)
                out = b.emit(None, TupleT((instr.type, carry, res_ty)), op)
                value = b.emit(instr.name, instr.type, ir.Get(out, 0), instr.span)
                inputs = b.emit(None, carry, ir.Get(out, 1))
                residuals = b.emit(None, res_ty, ir.Get(out, 2))
                return value, _Kept(bwd_name, (0, 1), residuals, inputs)
        return None

    def sweep(
        self,
        b: Builder,
        instr: ir.Instr,
        m: dict[int, ir.Operand],
        types: dict[int, Type],
        active: set[int],
        adj: _Adjoints,
        ct: ir.Operand,
        kept: _Kept | None = None,
    ) -> None:
        """Add the contributions of one instruction's cotangent to its operands."""

        def is_active(o: ir.Operand) -> bool:
            return isinstance(o, ir.Ref) and o.index in active

        op = instr.op
        match op:
            case ir.Prim(name, args):
                rule = RULES.get(name)
                if rule is None:
                    if any(is_active(a) for a in args):
                        raise CompilerBug(f"no adjoint rule for `{name}`")
                    return
                arg_types = tuple(
                    types[a.index] if is_active(a) else None  # type: ignore[union-attr]
                    for a in args
                )
                site = Site(
                    op,
                    tuple(remap_operand(a, m) for a in args),
                    arg_types,
                    m[instr.index],
                    instr.type,
                )
                for arg, contribution in zip(args, rule(b, site, ct), strict=False):
                    if contribution is not None and is_active(arg):
                        assert isinstance(arg, ir.Ref)
                        adj.add(arg.index, contribution)
            case ir.Call(callee, dims, args):
                positions = _positions(self.function(callee), args, active)
                if not positions:
                    return
                call_ty = self._call_types(args, positions, types)
                inputs = tuple(remap_operand(a, m) for a in args)
                if kept is not None:
                    assert kept.positions == positions
                    reverse = ir.Call(kept.bwd, dims, (*inputs, kept.residuals, ct))
                else:
                    reverse = ir.Call(self.vjp(callee, positions), dims, (*inputs, ct))
                out = b.emit(None, call_ty, reverse)
                for k, i in enumerate(positions):
                    arg = args[i]
                    assert isinstance(arg, ir.Ref)
                    part = b.emit(None, types[arg.index], ir.Get(out, k))
                    adj.add(arg.index, part)
            case ir.Fold(callee, dims, stacked, count, init, _):
                st, it = types[stacked.index], types[init.index]  # type: ignore[union-attr]
                layers = remap_operand(stacked, m)
                back: ir.Op
                if kept is not None:
                    assert kept.inputs is not None
                    back = ir.FoldBwd(
                        kept.bwd, dims, layers, count, kept.inputs, kept.residuals, ct
                    )
                else:
                    vjp = self.vjp(callee, (0, 1))
                    back = ir.FoldVjp(vjp, dims, callee, layers, count, remap_operand(init, m), ct)
                out = b.emit(None, TupleT((st, it)), back)
                for k, operand in enumerate((stacked, init)):
                    if is_active(operand):
                        assert isinstance(operand, ir.Ref)
                        adj.add(operand.index, b.emit(None, types[operand.index], ir.Get(out, k)))
            case ir.Field(tree, name):
                if is_active(tree):
                    assert isinstance(tree, ir.Ref)
                    adj.add_field(tree.index, name, ct)
            case ir.Get(tuple_, index):
                if is_active(tuple_):
                    assert isinstance(tuple_, ir.Ref)
                    adj.add_item(tuple_.index, index, ct)
            case ir.MakeTuple(items):
                for k, item in enumerate(items):
                    if is_active(item):
                        assert isinstance(item, ir.Ref)
                        adj.add(item.index, b.emit(None, types[item.index], ir.Get(ct, k)))
            case _:
                raise NotDifferentiable(f"cannot differentiate `{type(op).__name__}`")

    def _call_types(
        self, args: tuple[ir.Operand, ...], positions: tuple[int, ...], types: dict[int, Type]
    ) -> TupleT:
        """The adjoint tuple's type in the caller's terms (its arguments' types)."""
        items: list[Type] = []
        for i in positions:
            arg = args[i]
            assert isinstance(arg, ir.Ref)
            items.append(types[arg.index])
        return TupleT(tuple(items))

    # ------------------------------------------------------------ residuals

    def split(
        self, fn: ir.Function, swept: _Swept, wrt: tuple[int, ...]
    ) -> tuple[ir.Function, ir.Function]:
        """Cut the store form into `.fwd` (the value and the residuals) and `.bwd`."""
        combined = swept.fn
        n = len(fn.params)
        forward = [i for i in combined.body if i.index < swept.boundary]
        backward = [i for i in combined.body if i.index >= swept.boundary]
        by_index = {i.index: i for i in forward}
        # Views of the parameters are taken again in `.bwd`; the rest is kept.
        again: set[int] = set()
        for instr in forward:
            if _structural(instr) and all(
                not isinstance(o, ir.Ref) or o.index < n or o.index in again
                for o in operands(instr.op)
            ):
                again.add(instr.index)
        residuals: list[int] = []
        retaken: set[int] = set()

        def need(index: int) -> None:
            if index not in by_index or index in retaken or index in residuals:
                return
            if index in again:
                retaken.add(index)
                for o in operands(by_index[index].op):
                    if isinstance(o, ir.Ref):
                        need(o.index)
            else:
                residuals.append(index)

        for instr in backward:
            for o in operands(instr.op):
                if isinstance(o, ir.Ref):
                    need(o.index)
        if isinstance(combined.result, ir.Ref):
            need(combined.result.index)
        res_ty = TupleT(tuple(by_index[r].type for r in residuals))
        suffix = _suffix(fn, wrt)
        # .fwd: the value and the residuals.
        fb = Builder(f"{fn.name}.fwd{suffix}", fn.dims)
        fm: dict[int, ir.Operand] = {}
        for p in fn.params:
            fm[p.index] = fb.param(p.name, p.type, p.default)
        for instr in forward:
            fm[instr.index] = fb.emit(instr.name, instr.type, remap(instr.op, fm), instr.span)
        packed = fb.emit(None, res_ty, ir.MakeTuple(tuple(fm[r] for r in residuals)))
        out_ty = TupleT((fn.ret, res_ty))
        value = remap_operand(swept.value, fm)
        out = fb.emit(None, out_ty, ir.MakeTuple((value, packed)))
        fwd = _dce(fb.finish(out_ty, out, fn.effects))
        # .bwd: parameters, the residuals, the cotangent; then the sweep.
        bb = Builder(f"{fn.name}.bwd{suffix}", fn.dims)
        bm: dict[int, ir.Operand] = {}
        for p in fn.params:
            bm[p.index] = bb.param(p.name, p.type, p.default)
        packed_in = bb.param("residuals", res_ty)
        bm[n] = bb.param("ct", fn.ret)
        for k, r in enumerate(residuals):
            instr = by_index[r]
            bm[r] = bb.emit(instr.name, instr.type, ir.Get(packed_in, k))
        for instr in forward:
            if instr.index in retaken:
                bm[instr.index] = bb.emit(instr.name, instr.type, remap(instr.op, bm), instr.span)
        for instr in backward:
            bm[instr.index] = bb.emit(instr.name, instr.type, remap(instr.op, bm), instr.span)
        bwd = _dce(bb.finish(combined.ret, remap_operand(combined.result, bm)))
        return fwd, bwd


@dataclass(frozen=True)
class _Swept:
    """A forward-then-reverse function, with where its forward copy ends and its value."""

    fn: ir.Function
    boundary: int  # instructions numbered below it are the forward copy
    value: ir.Operand


@dataclass(frozen=True)
class _Kept:
    """A call or fold run forward in the store form: its reverse and what that reads."""

    bwd: str
    positions: tuple[int, ...]
    residuals: ir.Operand
    inputs: ir.Operand | None = None  # a fold's layer inputs


def _positions(
    callee: ir.Function, args: tuple[ir.Operand, ...], active: set[int]
) -> tuple[int, ...]:
    """The arguments of a call that carry adjoints: active, of a differentiable type."""
    return tuple(
        i
        for i, a in enumerate(args)
        if isinstance(a, ir.Ref)
        and a.index in active
        and differentiable_type(callee.params[i].type)
    )


def _residual_type(fwd: ir.Function) -> Type:
    """The residual tuple's type of a `.fwd` function (item 1 of its result)."""
    assert isinstance(fwd.ret, TupleT)
    return fwd.ret.items[1]


def _structural(instr: ir.Instr) -> bool:
    """Views, regroupings and scalar constants: cheaper to take again than to keep."""
    match instr.op:
        case ir.Field() | ir.Slice() | ir.Get() | ir.MakeTuple():
            return True
        case ir.Prim(name):
            scalar = isinstance(instr.type, Tensor) and not instr.type.axes
            return scalar and name in ("real", "dim")
    return False


# Note [Forward once]
# ~~~~~~~~~~~~~~~~~~~
# In the store form a gradient runs every forward kernel once. The forward copy
# of a differentiated function calls each active callee's `.fwd`, which
# returns the callee's value with its residuals, and runs an active fold as a
# `FoldFwd`, which keeps every layer's input and residuals; the sweep then
# calls the callee's `.bwd` (or a `FoldBwd`) on what was kept. Those residuals
# are values of the caller's forward copy like any other, so when the caller
# is itself cut into `.fwd`/`.bwd` they become its residuals in turn, up to
# the entry. The recompute form (`--remat recompute`) calls `.vjp`, which runs
# the callee's forward pass again, and reverses folds with `FoldVjp`: less
# memory, more time. Both compute the same values, so the bits do not change.


def _var(name: str) -> Lin:
    return Lin.var(name)


def _dce(fn: ir.Function) -> ir.Function:
    """Remove instructions whose values nothing reads, renumbering the rest."""
    needed = live(fn)
    m: dict[int, ir.Operand] = {}
    params = []
    for p in fn.params:
        m[p.index] = ir.Ref(p.index, p.name)
        params.append(p)
    body: list[ir.Instr] = []
    for instr in fn.body:
        if instr.index not in needed:
            continue
        index = len(params) + len(body)
        m[instr.index] = ir.Ref(index, instr.name)
        body.append(ir.Instr(index, instr.name, instr.type, remap(instr.op, m), instr.span))
    return ir.Function(
        fn.name,
        fn.dims,
        tuple(params),
        fn.ret,
        fn.effects,
        tuple(body),
        remap_operand(fn.result, m),
        fn.span,
    )


def differentiate(module: ir.Module, remat: str = "store") -> ir.Module:
    """Replace every `grad` by a call of a generated `.grad`; add what it needs."""
    d = Differentiator(module, remat)
    rewritten: list[ir.Function] = []
    for fn in module.functions:
        if not any(isinstance(i.op, ir.GradOf) for i in fn.body):
            rewritten.append(fn)
            continue
        body = []
        for instr in fn.body:
            if isinstance(instr.op, ir.GradOf):
                op: ir.Op = d.grad_call(instr.op)
                body.append(ir.Instr(instr.index, instr.name, instr.type, op, instr.span))
            else:
                body.append(instr)
        rewritten.append(
            ir.Function(
                fn.name, fn.dims, fn.params, fn.ret, fn.effects, tuple(body), fn.result, fn.span
            )
        )
    extra = [d.generated[name] for name in d.order]
    return ir.Module((*rewritten, *extra))
