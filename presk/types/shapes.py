"""Shape rules on static types: size equality, broadcasting, contraction, unification.

Sizes are linear forms over the function's dimensions; two sizes are equal
when they agree for every value of the dimensions (decided by
presk.elab.presburger, which also finds the counterexample shown by E2006).
Failures raise `ShapeError`, which the checker turns into a diagnostic at the
expression being checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from presk.elab import presburger as pb
from presk.elab.presburger import Lin
from presk.elab.ty import (
    Axis,
    Elem,
    FnT,
    Hyper,
    Instance,
    KeyT,
    ModuleT,
    Params,
    Tensor,
    TupleT,
    Type,
    subst_lin,
)


@dataclass
class ShapeError(Exception):
    """A shape problem: its code, message, the label text and optional help/note."""

    code: str
    message: str
    label: str
    note: str | None = None
    help: str | None = None


@dataclass
class DimContext:
    """The dimension variables in scope, their order, and their bounds."""

    variables: list[str] = field(default_factory=list)
    upper: dict[str, int] = field(default_factory=dict)

    def counterexample(self, a: Lin, b: Lin) -> dict[str, int] | None:
        """None when a == b for every value of the dimensions, else the least witness."""
        if a == b:
            return None
        names = [v for v in self.variables if v in set(a.vars()) | set(b.vars())]
        names += sorted((set(a.vars()) | set(b.vars())) - set(names))
        return pb.equal_for_all(a, b, names, pb.Bounds(upper=dict(self.upper)))

    def require_equal(self, a: Lin, b: Lin) -> None:
        """Raise E2006 with a counterexample unless a == b for all dimension values, or
        E1012 when the question is too large to decide."""
        try:
            cx = self.counterexample(a, b)
        except pb.Undecided:
            raise ShapeError(
                "E1012",
                f"cannot decide whether `{a}` equals `{b}`",
                "too large to decide",
                note=f"sizes are decided exactly, in at most {pb.STEP_LIMIT} steps",
            ) from None
        if cx is None:
            return
        names = [v for v in self.variables if v in cx] + sorted(set(cx) - set(self.variables))
        if cx:
            label = f"differ for {pb.format_counterexample(cx, names)}"
        else:
            label = f"{a} ≠ {b}"
        raise ShapeError("E2006", f"dimension mismatch: `{a}` vs `{b}`", label)

    def equal(self, a: Lin, b: Lin) -> bool:
        """Whether a == b for all dimension values; False when too large to decide (the
        caller then requires the equality, which reports E1012)."""
        try:
            return self.counterexample(a, b) is None
        except pb.Undecided:
            return False


BROADCAST_NOTE = (
    "axes align from the last one, or by name when every axis of the smaller operand is named"
)


def _names_agree(a: str | None, b: str | None) -> bool:
    return a is None or b is None or a == b


def broadcast(ctx: DimContext, a: Tensor, b: Tensor) -> tuple[Axis, ...]:
    """The axes of an elementwise result of `a` and `b` (same open prefix if any).

    The operand with fewer axes aligns with the trailing axes of the other, or
    by name when all of its axes are named. Sizes must agree; names must agree
    where both are given, and the result keeps the name that is given.
    """
    long, short = (a, b) if len(a.axes) >= len(b.axes) else (b, a)
    # An open operand's prefix is unknown: the other may only extend it if
    # it is open too (the same prefix) or its axes all fit the explicit part.
    if short.open and not long.open and len(short.axes) < len(long.axes):
        raise _cannot(a, b)
    offset = len(long.axes) - len(short.axes)
    pairs = list(zip(long.axes[offset:], short.axes, strict=True))
    names_agree = all(_names_agree(x.name, y.name) for x, y in pairs)
    # By position when names and sizes agree there (as the reference aligns at run time) ...
    if names_agree and all(ctx.equal(x.size, y.size) for x, y in pairs):
        merged = tuple(Axis(x.name or y.name, x.size) for x, y in pairs)
        return long.axes[:offset] + merged
    # ... else by name when every axis of the smaller operand is named.
    named = {axis.name: axis for axis in long.axes if axis.name is not None}
    if short.axes and all(axis.name in named for axis in short.axes) and not short.open:
        for axis in short.axes:
            assert axis.name is not None
            ctx.require_equal(named[axis.name].size, axis.size)
        return long.axes
    if names_agree:
        for x, y in pairs:
            ctx.require_equal(x.size, y.size)  # raises E2006 with a counterexample
    raise _cannot(a, b)


def _cannot(a: Tensor, b: Tensor) -> ShapeError:
    return ShapeError(
        "E2003",
        f"cannot broadcast `{a}` with `{b}`",
        "no alignment by position or by name",
        note=BROADCAST_NOTE,
    )


def elementwise(ctx: DimContext, a: Tensor, b: Tensor) -> Tensor:
    """The type of `a op b` for a real elementwise op."""
    axes = broadcast(ctx, a, b)
    return Tensor(Elem.REAL, axes, a.open or b.open)


def dot(ctx: DimContext, a: Tensor, b: Tensor) -> Tensor:
    """`a · b`: a's last axis against b's first."""
    if not a.axes or not b.axes:
        raise ShapeError("E2004", "`·` needs an axis on each side", "a scalar cannot be contracted")
    if b.open:
        raise ShapeError(
            "E2004", "the right operand of `·` cannot have an open prefix", "open prefix here"
        )
    last, first = a.axes[-1], b.axes[0]
    if not _names_agree(last.name, first.name):
        raise ShapeError(
            "E2004",
            f"`·` contracts axis `{last}` with axis `{first}`",
            "the contracted axes have different names",
        )
    ctx.require_equal(last.size, first.size)
    return Tensor(Elem.REAL, a.axes[:-1] + b.axes[1:], a.open)


# ---------------------------------------------------------------- calls


@dataclass
class Unifier:
    """Binds a callee's dimensions and open prefix from the types of its arguments."""

    ctx: DimContext
    callee_dims: tuple[str, ...]
    env: dict[str, Lin] = field(default_factory=dict)
    prefix: tuple[bool, tuple[Axis, ...]] | None = None

    def bind(self, param: Type, arg: Type) -> None:
        """First pass: bind dimensions that appear alone as a size."""
        match param, arg:
            case Tensor(), Tensor():
                for p_axis, a_axis in zip(reversed(param.axes), reversed(arg.axes), strict=False):
                    self._bind_size(p_axis.size, a_axis.size)
                if param.bound is not None and arg.bound is not None:
                    self._bind_size(param.bound, arg.bound)
            case (Params(p_inst), Params(a_inst)) | (ModuleT(p_inst), ModuleT(a_inst)):
                self._bind_inst(p_inst, a_inst)
            case TupleT(p_items), TupleT(a_items) if len(p_items) == len(a_items):
                for p, a in zip(p_items, a_items, strict=True):
                    self.bind(p, a)

    def _bind_inst(self, p: Instance, a: Instance) -> None:
        if p.module is a.module and len(p.args) == len(a.args):
            for ps, as_ in zip(p.args, a.args, strict=True):
                self._bind_size(ps, as_)
            if p.stack is not None and a.stack is not None:
                self._bind_size(p.stack, a.stack)

    def _bind_size(self, p: Lin, a: Lin) -> None:
        names = p.vars()
        if len(names) != 1 or names[0] not in self.callee_dims or names[0] in self.env:
            return
        coeff = p.coeff(names[0])
        # p = c·v + k  =>  v = (a − k) / c, bound only when it is whole for every
        # value of the caller's dimensions (2·N = M does not fix a natural N).
        value = (a - p.const) * (1 / coeff)
        if value.const.denominator == 1 and all(c.denominator == 1 for _, c in value.coeffs):
            self.env[names[0]] = value

    def check(self, param: Type, arg: Type) -> None:
        """Second pass: every argument must match its parameter under the bindings."""
        match param, arg:
            case Tensor(), Tensor():
                self._check_tensor(param, arg)
            case (Params(p_inst), Params(a_inst)) | (ModuleT(p_inst), ModuleT(a_inst)):
                if p_inst.module is not a_inst.module:
                    raise _mismatch(param, arg)
                for ps, as_ in zip(p_inst.args, a_inst.args, strict=True):
                    self.ctx.require_equal(self.size(ps), as_)
                if (p_inst.stack is None) != (a_inst.stack is None):
                    raise _mismatch(param, arg)
                if p_inst.stack is not None and a_inst.stack is not None:
                    self.ctx.require_equal(self.size(p_inst.stack), a_inst.stack)
            case TupleT(p_items), TupleT(a_items) if len(p_items) == len(a_items):
                for p, a in zip(p_items, a_items, strict=True):
                    self.check(p, a)
            case Hyper(p_name), Hyper(a_name):
                if p_name != a_name and not (p_name in ("f64", "f32") and a_name == "nat"):
                    raise _mismatch(param, arg)
            case KeyT(), KeyT():
                pass
            case FnT(), FnT():
                pass
            case _:
                raise _mismatch(param, arg)

    def size(self, p: Lin) -> Lin:
        unbound = [v for v in p.vars() if v in self.callee_dims and v not in self.env]
        if unbound:
            raise ShapeError(
                "E2017",
                f"cannot infer dimension `{unbound[0]}` from the arguments",
                "the arguments' types do not determine it as a whole number",
            )
        return subst_lin(p, {k: v for k, v in self.env.items()})

    def _check_tensor(self, param: Tensor, arg: Tensor) -> None:
        if param.elem != arg.elem:
            raise _mismatch(param, arg)
        if param.bound is not None and arg.bound is not None:
            self.ctx.require_equal(self.size(param.bound), arg.bound)
        n = len(param.axes)
        if param.open:
            if len(arg.axes) < n:
                raise _mismatch(param, arg)
            prefix = (arg.open, arg.axes[: len(arg.axes) - n])
            if self.prefix is None:
                self.prefix = prefix
            elif not self._same_prefix(self.prefix, prefix):
                raise ShapeError(
                    "E2003",
                    "the open prefixes `...` of two arguments differ",
                    "this prefix differs from an earlier argument's",
                )
            tail = arg.axes[len(arg.axes) - n :]
        else:
            if arg.open or len(arg.axes) != n:
                raise _mismatch(param, arg)
            tail = arg.axes
        for p_axis, a_axis in zip(param.axes, tail, strict=True):
            if not _names_agree(p_axis.name, a_axis.name):
                raise _mismatch(param, arg)
            self.ctx.require_equal(self.size(p_axis.size), a_axis.size)

    def _same_prefix(
        self, a: tuple[bool, tuple[Axis, ...]], b: tuple[bool, tuple[Axis, ...]]
    ) -> bool:
        if a[0] != b[0] or len(a[1]) != len(b[1]):
            return False
        return all(
            _names_agree(x.name, y.name) and self.ctx.equal(x.size, y.size)
            for x, y in zip(a[1], b[1], strict=True)
        )

    def result(self, ret: Type) -> Type:
        """The callee's return type in the caller's terms."""
        match ret:
            case Tensor(elem, axes, open_, bound):
                new_axes = tuple(Axis(a.name, self.size(a.size)) for a in axes)
                new_bound = None if bound is None else self.size(bound)
                if open_:
                    if self.prefix is None:
                        raise ShapeError(
                            "E2006",
                            "cannot infer the open prefix `...` of the result",
                            "no argument has an open prefix",
                        )
                    return Tensor(elem, self.prefix[1] + new_axes, self.prefix[0], new_bound)
                return Tensor(elem, new_axes, False, new_bound)
            case Params(inst):
                return Params(self.inst(inst))
            case ModuleT(inst):
                return ModuleT(self.inst(inst))
            case TupleT(items):
                return TupleT(tuple(self.result(item) for item in items))
            case FnT(params, res):
                return FnT(tuple(self.result(p) for p in params), self.result(res))
            case Hyper() | KeyT():
                return ret

    def inst(self, inst: Instance) -> Instance:
        stack = None if inst.stack is None else self.size(inst.stack)
        return Instance(inst.module, tuple(self.size(a) for a in inst.args), stack)


def _mismatch(param: Type, arg: Type) -> ShapeError:
    return ShapeError("E2002", f"expected `{param}`, found `{arg}`", f"this has type `{arg}`")


def same_type(ctx: DimContext, declared: Type, actual: Type) -> None:
    """Raise unless `actual` is `declared` (names: unnamed declared axes accept any name)."""
    unifier = Unifier(ctx, ())
    match declared, actual:
        case Tensor(), Tensor():
            if declared.open != actual.open or len(declared.axes) != len(actual.axes):
                raise _mismatch(declared, actual)
            if declared.elem != actual.elem:
                raise _mismatch(declared, actual)
            for d, a in zip(declared.axes, actual.axes, strict=True):
                if d.name is not None and a.name is not None and d.name != a.name:
                    raise _mismatch(declared, actual)
            for d, a in zip(declared.axes, actual.axes, strict=True):
                ctx.require_equal(d.size, a.size)
            if declared.bound is not None and actual.bound is not None:
                ctx.require_equal(declared.bound, actual.bound)
        case _:
            unifier.check(declared, actual)
