"""`presk export --target onnx`: the entry's forward graph as `model.onnx` (docs/pytorch.md).

The graph is `torch.onnx.export` of the readable PyTorch export: the same module and the
same call its conformance test makes, traced by the TorchScript exporter (it needs no
package beyond torch and onnx, and the readable module's loops over a stack unroll at
tracing). θ becomes the graph's initializers; the entry's other arguments its inputs.

The tracing runs in a child Python (`builder_file` is its script) so that presk's own
process never imports torch. The graph is float64 where onnxruntime's CPU kernels take
every operator in float64, else float32 (the test then states a looser tolerance).
"""

from __future__ import annotations

from dataclasses import dataclass

from presk.core import ir
from presk.export.pytorch.conformance import Conformance, entry_code, test_file

OPSET = 18
# float64 compares as the PyTorch export's test does; float32 within its rounding.
TOLERANCES = {"float64": ("1e-9", "1e-12"), "float32": ("1e-5", "1e-5")}


@dataclass(frozen=True)
class Feed:
    """One input of the graph: an argument of the entry, or one tensor of a tuple argument."""

    graph: str  # the input's name in the graph
    argument: str  # the entry's parameter
    part: int | None  # its position in a tuple argument (None: the argument itself)


def inexpressible(core: ir.Module, name: str) -> str | None:
    """Why the entry's forward graph cannot be written in ONNX (None: it can)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        fn_name = todo.pop()
        if fn_name in seen:
            continue
        seen.add(fn_name)
        try:
            fn = core.get(fn_name)
        except KeyError:
            continue
        if fn.effects:
            return f"`{fn_name}` draws samples (effect {', '.join(fn.effects)})"
        for instr in fn.body:
            match instr.op:
                case ir.GradOf() | ir.FoldVjp() | ir.FoldFwd() | ir.FoldBwd():
                    return f"`{fn_name}` takes a gradient"
                case ir.Call(callee) | ir.Fold(callee):
                    todo.append(callee)
                case ir.Prim() | ir.Field() | ir.Slice() | ir.MakeTuple() | ir.Get():
                    pass
    return None


def feeds(conformance: Conformance, inputs: dict[str, object]) -> list[Feed]:
    """The graph's inputs, in the order the traced module takes them."""
    out: list[Feed] = []
    for name, is_tree in conformance.arguments:
        if is_tree:
            continue
        value = inputs[name]
        if isinstance(value, list):
            out += [Feed(f"{name}.{i}", name, i) for i in range(len(value))]
        else:
            out.append(Feed(name, name, None))
    return out


def outputs(expected: object) -> int | None:
    """How many tensors the result flattens to (None: a parameter tree, not a graph's)."""
    if isinstance(expected, list):
        counts = [outputs(e) for e in expected]
        return None if None in counts else sum(c for c in counts if c is not None)
    if isinstance(expected, dict) and "kind" in expected:
        return 1
    return None


def output_names(count: int) -> list[str]:
    return ["output"] if count == 1 else [f"output.{i}" for i in range(count)]


def builder_file(conformance: Conformance, feed: list[Feed], count: int) -> str:
    """The child's script: the PyTorch test's helpers, then the tracing of its call."""
    build, call = entry_code(conformance)
    keep = "            self.model = model\n" if conformance.module is not None else ""
    return test_file(conformance) + _BUILDER.format(
        feeds=_feed_table(feed),
        outputs=output_names(count),
        build=build,
        keep=keep,
        call=call,
        opset=OPSET,
    )


def precision(dtype: str, missing: str | None) -> str:
    """The graph's dtype in words: `float32` says which operator lacks a float64 kernel."""
    return dtype if missing is None else f"{dtype}: onnxruntime has no float64 {missing}"


def onnx_test_file(
    conformance: Conformance, feed: list[Feed], dtype: str, missing: str | None
) -> str:
    rtol, atol = TOLERANCES[dtype]
    return _TEST.format(
        entry=repr(conformance.entry),
        source=conformance.source,
        opset=OPSET,
        dtype=dtype,
        precision=precision(dtype, missing),
        feeds=_feed_table(feed),
        rtol=rtol,
        atol=atol,
    )


def _feed_table(feed: list[Feed]) -> str:
    return "\n".join(f"    ({f.graph!r}, {f.argument!r}, {f.part!r})," for f in feed)


_BUILDER = r'''

# The ONNX export (presk export --target onnx): the call above, traced.
FEEDS = [
{feeds}
]


def _sample(value, dtype):
    if isinstance(value, str):
        return torch.tensor(float(Fraction(value)), dtype=dtype)
    value = tensor(value)
    return value.to(dtype) if value.is_floating_point() else value


def _trace(path, dtype):
    import warnings

    torch.set_default_dtype(dtype)
    inputs = read("inputs.json")["inputs"]
{build}

    class Entry(torch.nn.Module):
        def __init__(self):
            super().__init__()
{keep}
        def forward(self, *values):
            given = {{}}
            for (_, name, part), value in zip(FEEDS, values, strict=True):
                if part is None:
                    given[name] = value
                else:
                    given.setdefault(name, []).append(value)

            def arg(name):
                value = given[name]
                return tuple(value) if isinstance(value, list) else value

            return {call}

    samples = []
    for _, name, part in FEEDS:
        value = inputs[name] if part is None else inputs[name][part]
        samples.append(_sample(value, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Entry(), tuple(samples), path, dynamo=False, opset_version={opset},
            input_names=[graph for graph, _, _ in FEEDS], output_names={outputs},
        )


def export_onnx(path):
    """Trace in float64; where onnxruntime lacks a float64 kernel, in float32. The dtype,
    and after float32 the operator that wanted it."""
    import re

    import onnx
    import onnxruntime

    missing = None
    for dtype in ("float64", "float32"):
        _trace(path, getattr(torch, dtype))
        onnx.checker.check_model(path)
        try:
            onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        except Exception as error:
            found = re.search(r"implementation for (\w+)\(", str(error))
            if dtype == "float32" or found is None:
                raise
            missing = found.group(1)
            continue
        return dtype if missing is None else f"{{dtype}} {{missing}}"
    raise AssertionError("unreachable")
'''

_TEST = '''"""Conformance of the ONNX export of {entry} ({source}) with presk's reference.

model.onnx: opset {opset}, {precision}.
onnxruntime's result must be within rtol={rtol}, atol={atol} of the 256-bit reference's.
Generated by presk. Do not edit by hand.
"""

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import onnxruntime

HERE = Path(__file__).parent
DTYPE = np.{dtype}
# Each input of the graph: its name, the entry's argument, its position in a tuple.
FEEDS = [
{feeds}
]


def read(name):
    return json.loads((HERE / "conformance" / name).read_text(encoding="utf-8"))


def array(value, real=DTYPE):
    """An array of inputs.json (exact decimals) in `real`, int64 or bool."""
    if isinstance(value, str):
        return np.array(float(Fraction(value)), dtype=real)
    kinds = {{"real": real, "idx": np.int64, "bool": np.bool_}}
    data = value["data"]
    if value["kind"] == "real":
        data = _floats(data)
    return np.array(data, dtype=kinds[value["kind"]])


def _floats(data):
    if isinstance(data, list):
        return [_floats(d) for d in data]
    return float(Fraction(data))


def flatten(value):
    """The result's tensors in the graph's order of outputs."""
    if isinstance(value, list):
        return [t for v in value for t in flatten(v)]
    return [value]


def test_conformance():
    inputs = read("inputs.json")["inputs"]
    expected = flatten(read("expected.json")["output"])
    session = onnxruntime.InferenceSession(
        str(HERE / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    wanted = {{i.name for i in session.get_inputs()}}
    feeds = {{}}
    for graph, name, part in FEEDS:
        if graph in wanted:  # the tracer drops an input the graph never reads
            feeds[graph] = array(inputs[name] if part is None else inputs[name][part])
    results = session.run(None, feeds)
    assert len(results) == len(expected)
    for got, want in zip(results, expected, strict=True):
        want = array(want, real=np.float64)
        assert got.shape == want.shape, (got.shape, want.shape)
        if want.dtype == np.float64:
            np.testing.assert_allclose(got.astype(np.float64), want, rtol={rtol}, atol={atol})
        else:
            np.testing.assert_array_equal(got, want)
'''

__all__ = [
    "OPSET",
    "Feed",
    "builder_file",
    "feeds",
    "inexpressible",
    "onnx_test_file",
    "outputs",
    "precision",
]
