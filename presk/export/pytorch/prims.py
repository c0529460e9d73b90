"""Each PSK-Core primitive as an ordinary torch expression.

`primitive` receives the operands already written (`Code`), their types and the result's
type; named axes become positions through presk/export/pytorch/layout.py.
"""

from __future__ import annotations

from collections.abc import Callable

from presk.core import ir
from presk.elab.presburger import Lin
from presk.elab.ty import Elem, Hyper, Tensor, Type
from presk.export.pytorch.code import ATOM, POWER, PRODUCT, SUM, UNARY, Code, binary
from presk.export.pytorch.draws import HELPER
from presk.export.pytorch.layout import Unsupported, aligned, axis_position

_ARITHMETIC = {"add": ("+", SUM), "sub": ("-", SUM), "mul": ("*", PRODUCT), "div": ("/", PRODUCT)}
_BINARY_CALLS = {"maximum": "torch.maximum", "minimum": "torch.minimum"}
# Unary primitives: the torch function, and the math function for a Python number.
_UNARY = {
    "exp": ("torch.exp", "math.exp"),
    "log": ("torch.log", "math.log"),
    "sqrt": ("torch.sqrt", "math.sqrt"),
    "tanh": ("torch.tanh", "math.tanh"),
    "sin": ("torch.sin", "math.sin"),
    "cos": ("torch.cos", "math.cos"),
    "erf": ("torch.erf", "math.erf"),
    "abs": ("torch.abs", "abs"),
    "relu": ("torch.relu", None),
    "gelu": ("F.gelu", None),
}
_REDUCE = {"sum": "sum", "mean": "mean", "max": "amax"}

Size = Callable[[Lin], str]


def primitive(op: ir.Prim, args: list[Code], types: list[Type], result: Type, size: Size) -> Code:
    """The torch expression of `op` applied to `args` (of `types`), of type `result`."""
    name = op.name
    if name in _ARITHMETIC:
        symbol, prec = _ARITHMETIC[name]
        a, b = (_laid(c, t, result) for c, t in zip(args, types, strict=True))
        return binary(symbol, prec, a, b)
    if name in _BINARY_CALLS:
        a, b = (_laid(c, t, result) for c, t in zip(args, types, strict=True))
        return Code(f"{_BINARY_CALLS[name]}({_tensor(a)}, {_tensor(b)})")
    if name == "neg":
        return Code(f"-{args[0].at(UNARY)}", UNARY, args[0].scalar)
    if name in _UNARY:
        torch_fn, math_fn = _UNARY[name]
        if args[0].scalar:
            if math_fn is None:
                raise Unsupported(f"`{name}` of a number")
            return Code(f"{math_fn}({args[0].text})", ATOM, True)
        return Code(f"{torch_fn}({args[0].text})")
    if name == "pow":
        return binary("**", POWER, args[0], args[1])
    if name in _REDUCE:
        return _reduce(op, args[0], types[0])
    if name == "real":
        return _real(args[0], types[0])
    return _structured(op, args, types, result, size)


def _structured(op: ir.Prim, args: list[Code], types: list[Type], result: Type, size: Size) -> Code:
    name = op.name
    match name:
        case "dot":
            b = _closed(types[1])
            if len(b.axes) <= 2:
                return binary("@", PRODUCT, args[0], args[1])
            return Code(f"torch.tensordot({args[0].text}, {args[1].text}, dims=1)")
        case "ein":
            return _ein(op, args, types)
        case "softmax" | "log_softmax":
            x = _closed_or_open(types[0])
            dim = axis_position(x, _axis(op))
            text = args[0].atom()
            if len(args) > 1:
                mask = _laid(args[1], types[1], x)
                text = f'{text}.masked_fill(~{mask.atom()}, float("-inf"))'
            return Code(f"{text}.{name}(dim={dim})")
        case "cross_entropy":
            logits = _closed_or_open(types[0])
            if logits.open or len(logits.axes) < 2:
                return Code(
                    f"-{args[0].atom()}.log_softmax(dim=-1)"
                    f".gather(-1, {args[1].atom()}.unsqueeze(-1)).squeeze(-1)",
                    UNARY,
                )
            moved = f"{args[0].atom()}.movedim(-1, 1)"
            return Code(f'F.cross_entropy({moved}, {args[1].text}, reduction="none")')
        case "causal_mask":
            n = size(_size_attr(op))
            return Code(f"torch.ones({n}, {n}, dtype=torch.bool).tril()")
        case "positions":
            return Code(f"torch.arange({size(_size_attr(op))})")
        case "embed":
            return Code(f"F.embedding({args[1].text}, {args[0].text})")
        case "one_hot":
            assert isinstance(result, Tensor)
            classes = size(result.axes[-1].size)
            return Code(f"F.one_hot({args[0].text}, {classes}).to(torch.get_default_dtype())")
        case "argmax":
            x = _closed_or_open(types[0])
            dim = axis_position(x, _axis(op)) if op.attr("axis") else -1
            # presk takes the last of equal maxima, torch.argmax the first: flip, then count
            # back from the end.
            n = size(x.axes[dim].size)
            end = str(int(n) - 1) if n.isdigit() else f"{n} - 1"
            return Code(f"{end} - {args[0].atom()}.flip({dim}).argmax(dim={dim})", SUM)
        case "split_heads":
            assert isinstance(result, Tensor)
            heads = size(result.axes[-3].size)
            return Code(f"{args[0].atom()}.unflatten(-1, ({heads}, -1)).transpose(-3, -2)")
        case "merge_heads":
            return Code(f"{args[0].atom()}.transpose(-3, -2).flatten(-2)")
        case "merge":
            x = _closed_or_open(types[0])
            names = op.attr("axes")
            assert isinstance(names, tuple)
            first = axis_position(x, str(names[0]))
            return Code(f"{args[0].atom()}.flatten({first}, {first + 1})")
        case "split":
            x = _closed_or_open(types[0])
            assert isinstance(result, Tensor)
            parts = op.attr("parts")
            assert isinstance(parts, tuple)
            where = {a.name: a.size for a in result.axes}
            sizes = ", ".join(size(where[str(n)]) for n in parts)
            return Code(f"{args[0].atom()}.unflatten({axis_position(x, _axis(op))}, ({sizes}))")
        case "sample":  # presk's generator: presk_random.py, written beside the modules
            return Code(f"{HELPER}.sample({args[0].text}, {args[1].text})")
        case "dropout":
            return Code(f"{HELPER}.dropout({args[0].text}, {args[1].text}, {args[2].text})")
    raise Unsupported(f"the primitive `{name}`")


def _laid(code: Code, ty: Type, result: Type) -> Code:
    if code.scalar or not isinstance(ty, Tensor) or not isinstance(result, Tensor):
        return code
    if aligned("x", ty, result) == "x":
        return code
    return Code(aligned(code.atom(), ty, result))


def _tensor(code: Code) -> str:
    return f"torch.tensor({code.text})" if code.scalar else code.text


def _reduce(op: ir.Prim, x: Code, ty: Type) -> Code:
    method = _REDUCE[op.name]
    axis = op.attr("axis")
    if isinstance(axis, str):
        return Code(f"{x.atom()}.{method}(dim={axis_position(_closed_or_open(ty), axis)})")
    return Code(f"{x.atom()}.{method}()")


def _real(x: Code, ty: Type) -> Code:
    if x.scalar or isinstance(ty, Hyper):
        return Code(x.text, x.prec, True)
    if isinstance(ty, Tensor) and ty.elem != Elem.REAL:
        return Code(f"{x.atom()}.to(torch.get_default_dtype())")
    return x


def _ein(op: ir.Prim, args: list[Code], types: list[Type]) -> Code:
    a, b = _closed(types[0]), _closed(types[1])
    relabel = dict(_pairs(op.attr("relabel")))
    out = op.attr("out")
    assert isinstance(out, tuple)
    letters: dict[str, str] = {}

    def spell(names: list[str | None]) -> str:
        text = ""
        for n in names:
            if n is None:
                raise Unsupported("`ein` over an unnamed axis")
            text += letters.setdefault(n, "abcdefghijklmnopqrstuvwxyz"[len(letters)])
        return text

    left = spell([axis.name for axis in a.axes])
    right = spell([relabel.get(axis.name or "", axis.name) for axis in b.axes])
    result = spell([str(n) for n in out])
    return Code(f'torch.einsum("{left},{right}->{result}", {args[0].text}, {args[1].text})')


def _pairs(value: ir.AttrValue) -> list[tuple[str, str]]:
    if not isinstance(value, tuple):
        return []
    return [p for p in value if isinstance(p, tuple) and len(p) == 2]


def _axis(op: ir.Prim) -> str:
    axis = op.attr("axis")
    assert isinstance(axis, str)
    return axis


def _size_attr(op: ir.Prim) -> Lin:
    value = op.attr("size")
    assert isinstance(value, Lin)
    return value


def _closed(ty: Type) -> Tensor:
    if not isinstance(ty, Tensor) or ty.open:
        raise Unsupported(f"a contraction over {ty}")
    return ty


def _closed_or_open(ty: Type) -> Tensor:
    assert isinstance(ty, Tensor)
    return ty


__all__ = ["primitive"]
