"""`test_conformance.py`: the exported module against presk's 256-bit reference.

The test rebuilds the entry's module, copies θ from `conformance/inputs.json` into its
parameters (a stack's leaves, one tensor with a leading layer axis in presk, go to each
layer of the `nn.ModuleList`), runs in float64 and compares with `expected.json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from presk.elab.presburger import Lin
from presk.elab.ty import Instance
from presk.export.pytorch.draws import constructor_args
from presk.export.pytorch.layout import Unsupported
from presk.export.pytorch.naming import Naming, import_line, imported, words
from presk.types.scope import use_instance

RTOL = "1e-9"
ATOL = "1e-12"


@dataclass(frozen=True)
class Conformance:
    """What the test needs: how to build the model and call the entry."""

    entry: str  # as `--conformance-entry` named it
    source: str  # the file's basename
    module: Instance | None  # the model's instance, at concrete sizes (None: no θ)
    sizes: dict[str, int]  # the --dim values
    function: str | None  # a top-level entry: its Python name; None: a module's function
    method: str  # the module function (`forward`), for a module entry
    arguments: list[tuple[str, bool]]  # the entry's parameters: (name, is θ)
    entry_file: str  # the Python module defining the entry
    # The model's class: (Python module, class) (None: no θ).
    model_class: tuple[str, str] | None = None
    # PARAMETERS: parameter_paths of the result's tree, else of the model.
    parameters: list[tuple[str, str, int | None]] = field(default_factory=list)
    # The call's arguments, when not the usual ones (an optimizer's step).
    call_args: list[str] | None = None


# The test's (and the ONNX tracer's, which extends it) own names, module-level and local
# to the functions that call the imported ones: an import meeting one is renamed.
OWN_NAMES = words(
    """
    json Fraction Path torch presk_random HERE PARAMETERS read tensor _floats load check
    test_conformance test_presk_init inputs expected arg tree model params result value
    name FEEDS _sample _trace export_onnx warnings Entry given part values samples dtype
    path onnx onnxruntime re np missing
    """
)


def parameter_paths(inst: Instance, names: Naming) -> list[tuple[str, str, int | None]]:
    """(presk path, torch path with `{}` for a layer, layers) of every leaf."""
    out: list[tuple[str, str, int | None]] = []

    def walk(inst: Instance, presk: str, torch: str, layers: int | None) -> None:
        for decl in inst.module.decl.params:
            attr = names.attr(inst.module, decl.name.name)
            out.append((presk + decl.name.name, torch + attr, layers))
        for use in inst.module.decl.uses:
            sub = use_instance(inst, use)
            name, attr = use.name.name, names.attr(inst.module, use.name.name)
            if sub.stack is not None:
                if layers is not None:
                    raise Unsupported("a stack inside a stack")
                count = sub.stack.const if sub.stack.is_const else None
                if count is None:
                    raise Unsupported(f"a stack of {sub.stack} layers")
                walk(sub.unstacked(), f"{presk}{name}.", f"{torch}{attr}.{{}}.", int(count))
            else:
                walk(sub, f"{presk}{name}.", f"{torch}{attr}.", layers)

    walk(inst, "", "", None)
    return out


def _value(lin: Lin, sizes: dict[str, int]) -> int:
    total = lin.const
    for var, coeff in lin.coeffs:
        total += coeff * sizes[var]
    return int(total)


def _imports(c: Conformance) -> dict[tuple[str, str], str]:
    """What the test imports, (module, name), with its local name."""
    wanted = [c.model_class] if c.model_class is not None else []
    if c.function is not None:
        wanted.append((c.entry_file, c.function))
    return imported(OWN_NAMES, wanted)


def test_file(c: Conformance) -> str:
    imports: dict[str, dict[str, str]] = {}
    for (module, name), local in _imports(c).items():
        imports.setdefault(module, {})[name] = local
    import_lines = [import_line(f, names) for f, names in sorted(imports.items())]
    table = "\n".join(f"    ({p!r}, {t!r}, {n!r})," for p, t, n in c.parameters)
    build, call = entry_code(c)
    text = _TEMPLATE.format(
        entry=repr(c.entry),
        source=c.source,
        imports="\n".join(import_lines),
        table=table,
        build=build,
        call=call,
        rtol=RTOL,
        atol=ATOL,
        random="import presk_random\n" if c.module is not None else "",
    )
    if c.module is not None:
        model = build.splitlines()[0].strip()
        text += _INIT_TEST.format(model=model, theta=repr(_theta(c)))
    return text


def entry_code(c: Conformance) -> tuple[str, str]:
    """The test's lines that build the model and load θ, and the expression of the call
    (in `model`, `params` and `arg(name)`); the ONNX export traces the same call."""
    build = "None"
    local = _imports(c)
    if c.module is not None:
        assert c.model_class is not None
        module = c.module.module
        env = dict(zip(module.dims, c.module.args, strict=True))
        args = [
            str(_value(env[name], c.sizes) if name in env else c.sizes[name])
            for name in constructor_args(module)
        ]
        build = f"{local[c.model_class]}({', '.join(args)})"
    call_args = []
    for name, is_tree in c.arguments:
        call_args += ["model", "params"] if is_tree else [f"arg({name!r})"]
    if c.function is None:
        target = "model" if c.method == "forward" else f"model.{c.method}"
        call = f"{target}({', '.join(a for a in call_args if a not in ('model', 'params'))})"
    else:
        function = local[(c.entry_file, c.function)]
        call = f"{function}({', '.join(c.call_args if c.call_args is not None else call_args)})"
    return _build(build, c), call


def _build(build: str, c: Conformance) -> str:
    """The test's lines that make the model and, for a function's entry, its θ dict."""
    if c.module is None:
        return ""
    lines = [f"    model = {build}", f"    load(model, inputs[{_theta(c)!r}])"]
    if c.function is not None:
        lines.append("    params = dict(model.named_parameters())")
    return "\n".join(lines)


def _theta(c: Conformance) -> str:
    names = [name for name, is_tree in c.arguments if is_tree]
    return names[0] if names else "θ"


_TEMPLATE = '''"""Conformance of the PyTorch export of {entry} ({source}) with presk's reference.

Generated by presk. Do not edit by hand.
"""

import json
from fractions import Fraction
from pathlib import Path

{random}import torch
{imports}

HERE = Path(__file__).parent
# Each parameter: its presk path, its path in the module (`{{}}`: a layer), the layers.
PARAMETERS = [
{table}
]


def read(name):
    return json.loads((HERE / "conformance" / name).read_text(encoding="utf-8"))


def tensor(value):
    """A tensor of inputs.json (exact decimals) in float64, int64 or bool."""
    kinds = {{"real": torch.float64, "idx": torch.int64, "bool": torch.bool}}
    data = value["data"]
    if value["kind"] == "real":
        data = _floats(data)
    return torch.tensor(data, dtype=kinds[value["kind"]])


def _floats(data):
    if isinstance(data, list):
        return [_floats(d) for d in data]
    return float(Fraction(data))


def load(model, tree):
    """Copy presk's θ into the module's parameters."""
    with torch.no_grad():
        for presk, path, layers in PARAMETERS:
            value = tensor(tree[presk])
            if layers is None:
                model.get_parameter(path).copy_(value)
            else:
                for layer in range(layers):
                    model.get_parameter(path.format(layer)).copy_(value[layer])


def check(result, expected):
    if isinstance(expected, list):
        assert len(result) == len(expected)
        for r, e in zip(result, expected, strict=True):
            check(r, e)
    elif "kind" in expected:
        want = tensor(expected)
        got = torch.as_tensor(result, dtype=want.dtype)
        assert got.shape == want.shape, (got.shape, want.shape)
        assert torch.allclose(got, want, rtol={rtol}, atol={atol}), (got - want).abs().max()
    else:  # a parameter tree, keyed by presk's paths
        for presk, path, layers in PARAMETERS:
            if layers is None:
                got = result[path]
            else:
                got = torch.stack([result[path.format(layer)] for layer in range(layers)])
            check(got, expected[presk])


def test_conformance():
    torch.set_default_dtype(torch.float64)
    inputs = read("inputs.json")["inputs"]
    expected = read("expected.json")["output"]

    def arg(name):
        value = inputs[name]
        if isinstance(value, list):
            return tuple(tensor(v) for v in value)
        if isinstance(value, str):
            return float(Fraction(value))
        if "key" in value:  # presk's random key: two 32-bit words
            return tuple(value["key"])
        return tensor(value)

    def tree(name):
        """A parameter tree of inputs.json as a dict keyed like named_parameters()."""
        out = {{}}
        for presk, path, layers in PARAMETERS:
            value = tensor(inputs[name][presk])
            for layer in [None] if layers is None else range(layers):
                out[path.format(layer)] = value if layer is None else value[layer]
        return out

{build}
    result = {call}
    check(result, expected)
'''

_INIT_TEST = '''

def test_presk_init():
    """presk_random.init draws the θ presk synthesized (seed 0, each leaf's key theta/<path>)."""
    torch.set_default_dtype(torch.float64)
    inputs = read("inputs.json")["inputs"]
    {model}
    check(presk_random.init(model, presk_random.key_from_seed(0), "theta/"), inputs[{theta}])
'''

__all__ = ["Conformance", "entry_code", "parameter_paths", "test_file"]
