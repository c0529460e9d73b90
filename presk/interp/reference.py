"""The reference interpreter: PSK-Core evaluated exactly on MPFR.

`Interpreter.call(fn, dims, args)` evaluates a Core function at concrete
dimension values. Every arithmetic operation is one correctly rounded MPFR
operation at the precision of the gmpy2 context the caller sets (`--bits`);
sums run in increasing index order (presk/interp/prims.py). Values are
`Tensor`s, `Tree`s (parameter trees), tuples, exact `Fraction`s
(hyperparameters) and random `Key`s.

After each instruction the value's axes are renamed to the instruction's
static type, so run-time names always agree with what the checker proved
(a value passed to `ℝ[..., In]` loses its caller's name for that axis).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import gmpy2

from presk.core import ir
from presk.elab.presburger import Lin
from presk.elab.ty import Elem, Type
from presk.elab.ty import Tensor as TensorT
from presk.interp import adjoints, prims, rng
from presk.interp.tensor import Axis, Kind, PrimError, Tensor

# Parameter trees and the value union live in interp/tree.py, which adjoints.py shares;
# they are re-exported here, where the rest of presk has always found them.
from presk.interp.tree import Tree as Tree
from presk.interp.tree import Value as Value
from presk.syntax.deep import call_deep


class RunError(Exception):
    """A run-time failure (E7001), with the site where it happened."""

    def __init__(self, message: str, site: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.site = site


class NotBuilt(Exception):
    """An operation whose evaluation belongs to a stage not built yet."""


class Interpreter:
    """Evaluates the functions of a Core module."""

    def __init__(self, module: ir.Module) -> None:
        self.functions = {fn.name: fn for fn in module.functions}
        self.init_hook: Any = None  # set by the runner: builds θ for `M.init`

    def call(self, name: str, dims: dict[str, int], args: list[Value]) -> Value:
        """Evaluate function `name` with dimension values `dims` on `args`.

        Calls nest the interpreter once per call (a chain of imports is a chain of calls),
        so evaluation runs under `call_deep`, in the caller's gmpy2 context: contexts
        belong to a thread, and the worker's would be the default 53 bits.
        """
        context = gmpy2.get_context().copy()

        def evaluate() -> Value:
            with context:
                return self._call(name, dims, args)

        return call_deep(evaluate)

    def _call(self, name: str, dims: dict[str, int], args: list[Value]) -> Value:
        fn = self.functions[name]
        env: dict[int, Value] = {}
        for param, arg in zip(fn.params, args, strict=True):
            env[param.index] = _conform(arg, param.type, dims)
        for instr in fn.body:
            try:
                value = self.step(fn, instr, env, dims)
            except PrimError as error:
                raise RunError(error.message, _site(fn, instr)) from None
            env[instr.index] = _conform(value, instr.type, dims)
        return self.operand(fn.result, env)

    def operand(self, op: ir.Operand, env: dict[int, Value]) -> Value:
        match op:
            case ir.Ref(index):
                return env[index]
            case ir.Lit(value):
                return value

    def step(
        self, fn: ir.Function, instr: ir.Instr, env: dict[int, Value], dims: dict[str, int]
    ) -> Value:
        op = instr.op
        match op:
            case ir.Prim(name, args, _):
                values = [self.operand(a, env) for a in args]
                return self.prim(op, values, dims, instr)
            case ir.Call(callee, call_dims, args):
                values = [self.operand(a, env) for a in args]
                inner = {d: _int(size, dims) for d, size in call_dims}
                if callee.endswith(".init") and callee not in self.functions:
                    raise RunError(f"no initializer `{callee}`")
                return self._call(callee, inner, values)
            case ir.Fold(callee, call_dims, stacked, count, init, _):
                tree = self.operand(stacked, env)
                assert isinstance(tree, Tree)
                inner = {d: _int(size, dims) for d, size in call_dims}
                value = self.operand(init, env)
                for layer in range(_int(count, dims)):
                    value = self._call(callee, inner, [tree.layer(layer), value])
                return value
            case ir.FoldVjp(vjp, call_dims, forward, stacked, count, init, ct):
                tree = self.operand(stacked, env)
                assert isinstance(tree, Tree)
                inner = {d: _int(size, dims) for d, size in call_dims}
                layers = _int(count, dims)
                inputs = [self.operand(init, env)]
                for layer in range(layers - 1):
                    inputs.append(self._call(forward, inner, [tree.layer(layer), inputs[-1]]))
                grads: list[Value] = [tree] * layers
                cotangent = self.operand(ct, env)
                for layer in reversed(range(layers)):
                    out = self._call(vjp, inner, [tree.layer(layer), inputs[layer], cotangent])
                    assert isinstance(out, tuple)
                    grads[layer], cotangent = out
                return (adjoints.stack_layers(grads, tree), cotangent)
            case ir.FoldFwd(fwd, call_dims, stacked, count, init):
                # The layers' inputs and residuals are kept as tuples, one item a layer.
                tree = self.operand(stacked, env)
                assert isinstance(tree, Tree)
                inner = {d: _int(size, dims) for d, size in call_dims}
                inputs = [self.operand(init, env)]
                kept: list[Value] = []
                for layer in range(_int(count, dims)):
                    out = self._call(fwd, inner, [tree.layer(layer), inputs[-1]])
                    assert isinstance(out, tuple)
                    inputs.append(out[0])
                    kept.append(out[1])
                return (inputs[-1], tuple(inputs[:-1]), tuple(kept))
            case ir.FoldBwd(bwd, call_dims, stacked, count, inputs_op, residuals_op, ct):
                tree = self.operand(stacked, env)
                assert isinstance(tree, Tree)
                inner = {d: _int(size, dims) for d, size in call_dims}
                xs, kept_in = self.operand(inputs_op, env), self.operand(residuals_op, env)
                assert isinstance(xs, tuple) and isinstance(kept_in, tuple)
                layers = _int(count, dims)
                grads = [tree] * layers
                cotangent = self.operand(ct, env)
                for layer in reversed(range(layers)):
                    at = [tree.layer(layer), xs[layer], kept_in[layer], cotangent]
                    out = self._call(bwd, inner, at)
                    assert isinstance(out, tuple)
                    grads[layer], cotangent = out
                return (adjoints.stack_layers(grads, tree), cotangent)
            case ir.Field(tree_op, name):
                tree = self.operand(tree_op, env)
                assert isinstance(tree, Tree)
                return tree[name]
            case ir.Slice(tree_op, index):
                tree = self.operand(tree_op, env)
                assert isinstance(tree, Tree)
                return tree.layer(index)
            case ir.MakeTuple(items):
                return tuple(self.operand(item, env) for item in items)
            case ir.Get(tuple_op, index):
                value = self.operand(tuple_op, env)
                assert isinstance(value, tuple)
                return value[index]  # type: ignore[no-any-return]
            case ir.GradOf():
                raise NotBuilt(
                    "`grad` is evaluated by reverse-mode differentiation, which is not built yet"
                )

    def prim(
        self, op: ir.Prim, values: list[Value], dims: dict[str, int], instr: ir.Instr
    ) -> Value:
        name = op.name
        if name in _ELEMENTWISE:
            return _ELEMENTWISE[name](*(_as_tensor(v) for v in values))
        if name in _UNARY:
            return _UNARY[name](_as_tensor(values[0]))
        axis = op.attr("axis")
        match name:
            case "pow":
                base = _as_tensor(values[0])
                exponent = values[1]
                if isinstance(exponent, Fraction) and exponent.denominator == 1:
                    return prims.pow_(base, int(exponent))
                return prims.pow_(base, _as_tensor(exponent))
            case "sum" | "mean" | "max":
                reduce = {
                    "sum": prims.reduce_sum,
                    "mean": prims.reduce_mean,
                    "max": prims.reduce_max,
                }
                return reduce[name](_as_tensor(values[0]), axis if isinstance(axis, str) else None)
            case "dot":
                return prims.dot(_as_tensor(values[0]), _as_tensor(values[1]))
            case "ein":
                a, b = _as_tensor(values[0]), _as_tensor(values[1])
                for old, new in _relabel(op):
                    b = prims.rename_axis(b, old, new)
                out = op.attr("out")
                assert isinstance(out, tuple)
                return prims.ein([str(n) for n in out], a, b)
            case "softmax":
                assert isinstance(axis, str)
                mask = _as_tensor(values[1]) if len(values) > 1 else None
                return prims.softmax(_as_tensor(values[0]), axis, mask)
            case "log_softmax":
                assert isinstance(axis, str)
                return prims.log_softmax(_as_tensor(values[0]), axis)
            case "cross_entropy":
                logits = _as_tensor(values[0])
                return prims.cross_entropy(logits, _as_tensor(values[1]), logits.rank - 1)
            case "causal_mask" | "positions":
                size = op.attr("size")
                assert isinstance(size, Lin) and isinstance(axis, str)
                make = prims.causal_mask if name == "causal_mask" else prims.positions
                return make(axis, _int(size, dims))
            case "embed":
                return prims.embed(_as_tensor(values[0]), _as_tensor(values[1]))
            case "one_hot":
                return prims.one_hot(_as_tensor(values[0]))
            case "argmax":
                x = _as_tensor(values[0])
                return prims.argmax(x, axis if isinstance(axis, str) else x.rank - 1)
            case "sample":
                key, logits = values[0], _as_tensor(values[1])
                assert isinstance(key, rng.Key)
                rows = logits.size // logits.shape[-1] if logits.shape[-1] else 0
                return prims.sample(rng.uniforms(key, rows), logits, logits.rank - 1)
            case "dropout":
                key, rate, x = values[0], values[1], _as_tensor(values[2])
                assert isinstance(key, rng.Key)
                p = rate if isinstance(rate, Fraction) else _as_tensor(rate).item()
                if not 0 <= p < 1:
                    raise PrimError(f"dropout rate {p} outside [0, 1)")
                return prims.dropout(rng.uniforms(key, x.size), gmpy2.mpfr(p), x)
            case "real":
                value = values[0]
                if isinstance(value, Fraction):
                    return prims.real(value)
                return prims.real(_as_tensor(value))
            case "merge":
                names = op.attr("axes")
                assert isinstance(names, tuple)
                return prims.merge(_as_tensor(values[0]), str(names[0]), str(names[1]))
            case "split":
                parts = op.attr("parts")
                assert isinstance(parts, tuple) and isinstance(axis, str)
                static = instr.type
                assert isinstance(static, TensorT)
                x = _as_tensor(values[0])
                index = [a.name for a in x.axes].index(axis)
                sizes = [_int(a.size, dims) for a in static.axes if a.name in parts]
                del index
                return prims.split(
                    x, axis, [Axis(str(n), s) for n, s in zip(parts, sizes, strict=True)]
                )
            case "split_heads":
                heads = op.attr("heads")
                static = instr.type
                assert isinstance(static, TensorT)
                count = next(_int(a.size, dims) for a in static.axes if a.name == heads)
                return prims.split_heads(_as_tensor(values[0]), str(heads), count)
            case "merge_heads":
                return prims.merge_heads(_as_tensor(values[0]))
            case "dim":
                size = op.attr("size")
                assert isinstance(size, Lin)
                return prims.real(Fraction(_int(size, dims)))
            case name if name in _ADJOINTS:
                result: Value = _ADJOINTS[name](op, values)
                return result
            case "init":
                key = values[0]
                assert isinstance(key, rng.Key) and isinstance(instr.type, object)
                if self.init_hook is None:
                    raise NotBuilt("initializers run only from `presk run`")
                return self.init_hook(instr.type, dims, key)  # type: ignore[no-any-return]
        raise NotBuilt(f"the primitive `{name}` has no evaluation yet")


_ELEMENTWISE = {
    "add": prims.add,
    "sub": prims.sub,
    "mul": prims.mul,
    "div": prims.div,
}

_UNARY = {
    "neg": prims.neg,
    "exp": prims.exp,
    "log": prims.log,
    "sqrt": prims.sqrt,
    "tanh": prims.tanh,
    "sin": prims.sin,
    "cos": prims.cos,
    "erf": prims.erf,
    "gelu": prims.gelu,
    "relu": prims.relu,
    "abs": prims.abs_,
}


def _relabel(op: ir.Prim) -> tuple[tuple[str, str], ...]:
    value = op.attr("relabel")
    return value if isinstance(value, tuple) else ()  # type: ignore[return-value]


def _axis(op: ir.Prim) -> str | None:
    value = op.attr("axis")
    return value if isinstance(value, str) else None


_ADJOINTS: dict[str, Any] = {
    "sum_to": lambda op, v: adjoints.sum_to(_as_tensor(v[0]), _as_tensor(v[1])),
    "reduce_vjp": lambda op, v: adjoints.reduce_vjp(
        _as_tensor(v[0]),
        _as_tensor(v[1]),
        _as_tensor(v[2]) if len(v) > 2 else None,
        str(op.attr("kind")),
        _axis(op),
    ),
    "heaviside": lambda op, v: adjoints.heaviside(_as_tensor(v[0])),
    "ylog": lambda op, v: adjoints.ylog(_as_tensor(v[0]), _as_tensor(v[1])),
    "sign": lambda op, v: adjoints.sign(_as_tensor(v[0])),
    "erf_vjp": lambda op, v: adjoints.erf_vjp(_as_tensor(v[0]), _as_tensor(v[1])),
    "gelu_vjp": lambda op, v: adjoints.gelu_vjp(_as_tensor(v[0]), _as_tensor(v[1])),
    "dot_vjp_l": lambda op, v: adjoints.dot_vjp_l(_as_tensor(v[0]), _as_tensor(v[1])),
    "dot_vjp_r": lambda op, v: adjoints.dot_vjp_r(_as_tensor(v[0]), _as_tensor(v[1])),
    "ein_vjp_l": lambda op, v: adjoints.ein_vjp_l(
        _as_tensor(v[0]), _as_tensor(v[1]), _as_tensor(v[2]), _relabel(op)
    ),
    "ein_vjp_r": lambda op, v: adjoints.ein_vjp_r(
        _as_tensor(v[0]), _as_tensor(v[1]), _as_tensor(v[2]), _relabel(op)
    ),
    "softmax_vjp": lambda op, v: adjoints.softmax_vjp(
        _as_tensor(v[0]), _as_tensor(v[1]), str(_axis(op))
    ),
    "log_softmax_vjp": lambda op, v: adjoints.log_softmax_vjp(
        _as_tensor(v[0]), _as_tensor(v[1]), str(_axis(op))
    ),
    "cross_entropy_vjp": lambda op, v: adjoints.cross_entropy_vjp(
        _as_tensor(v[0]), _as_tensor(v[1]), _as_tensor(v[2])
    ),
    "embed_vjp": lambda op, v: adjoints.embed_vjp(
        _as_tensor(v[0]), _as_tensor(v[1]), _as_tensor(v[2])
    ),
    "shape_vjp": lambda op, v: adjoints.shape_vjp(
        _as_tensor(v[0]), _as_tensor(v[1]), str(op.attr("op"))
    ),
    "zeros_like": lambda op, v: adjoints.zeros_like(v[0]),
    "set_field": lambda op, v: adjoints.set_field(v[0], v[1], str(op.attr("field"))),
    "tree_add": lambda op, v: adjoints.tree_add(v[0], v[1]),
}

# Primitives the interpreter evaluates (a test checks it covers the checker's table).
EVALUATED = frozenset(
    set(_ELEMENTWISE)
    | set(_UNARY)
    | {
        "pow",
        "sum",
        "mean",
        "max",
        "dot",
        "ein",
        "softmax",
        "log_softmax",
        "cross_entropy",
        "causal_mask",
        "positions",
        "embed",
        "one_hot",
        "argmax",
        "sample",
        "dropout",
        "real",
        "merge",
        "split",
        "split_heads",
        "merge_heads",
        "dim",
        "init",
    }
    | set(_ADJOINTS)
)


def _site(fn: ir.Function, instr: ir.Instr) -> str:
    name = f"%{instr.index}" + (f" ({instr.name})" if instr.name else "")
    return f"{fn.name}/{name}"


def _int(size: Lin, dims: dict[str, int]) -> int:
    value = size.subst({k: Fraction(v) for k, v in dims.items()})
    if not value.is_const or value.const.denominator != 1:
        raise RunError(f"size {size} is not a whole number at {dims}")
    return int(value.const)


def _as_tensor(value: Value) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, Fraction):
        return prims.real(value)
    raise TypeError(f"expected a tensor, got {type(value).__name__}")


def _conform(value: Value, ty: Type, dims: dict[str, int]) -> Value:
    """Rename a tensor's trailing axes to its static type's names (see the module doc)."""
    if isinstance(value, Fraction) and isinstance(ty, TensorT) and ty.elem == Elem.REAL:
        # A literal flowing as a real (a cotangent of 1, say) is an ℝ[] tensor.
        return prims.real(value)
    if not isinstance(value, Tensor) or not isinstance(ty, TensorT):
        return value
    if isinstance(value, Tensor) and ty.elem == Elem.REAL and value.kind != Kind.REAL:
        return value
    n = len(ty.axes)
    if value.rank < n:
        return value
    head = value.axes[: value.rank - n]
    tail = tuple(
        Axis(static.name, axis.size)
        for static, axis in zip(ty.axes, value.axes[value.rank - n :], strict=True)
    )
    if head + tail == value.axes:
        return value
    return value.with_axes(head + tail)
