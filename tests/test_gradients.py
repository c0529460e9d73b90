"""Reverse-mode gradients checked against central differences at 512 bits.

* The tables agree: every differentiable primitive has an adjoint rule, and the
  interpreter evaluates every primitive, adjoint-only ones included.
* Per primitive (tests/ad/prims_grad.psk, arith_grad.psk, prefix_grad.psk,
  attend_grad.psk, tower_input_grad.psk): every `g_NAME` is the gradient of
  `f_NAME` in its argument `x`; each coordinate is
  compared with (f(x + h e_i) − f(x − h e_i)) / 2h, h = 2⁻¹⁰⁰, computed at 512
  bits. The truncation error is about h² ≈ 1e-60 and the rounding error about
  2⁻⁵¹²/h ≈ 1e-124, so a correct adjoint agrees to far better than the 1e-25
  the tests ask; a wrong one (a sign, a missing factor, a wrong axis) misses by
  O(1). The gradients of `remat = store` and `remat = recompute` must be
  identical, bit for bit.
* Whole programs: tutorial 04, the MLP, tutorial 06's tower and a tiny MiniGPT,
  θ's gradient against central differences (every coordinate, or a sample).
* The command line: `presk run` of a gradient and `presk dump --stage
  core-after-ad`, and `value_vjp` against the loss and the gradient.
* Regression tests for bugs the suite found (tests/ad/edge_grad.psk,
  dropout_rate_grad.psk, attend_grad.psk's `f_tutorial`): scalar adjoints are
  tensors, dims named through aliases, a zero base of a power, a dropout rate
  that depends on the argument (refused with E3001).

The whole file runs in a few seconds: every tensor is tiny.
"""

from __future__ import annotations

import ast as pyast
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import gmpy2
import numpy as np
import pytest

from presk.ad import reverse as ad_reverse
from presk.ad import rules as ad_rules
from presk.ad.reverse import differentiate
from presk.core import ir
from presk.elab.presburger import Lin
from presk.elab.ty import Params, subst
from presk.interp.reference import EVALUATED, Interpreter, Tree
from presk.interp.synth import synthesize
from presk.interp.tensor import Axis, Kind, Tensor
from presk.pipeline import front_end
from presk.types import prims as type_prims

REPO = Path(__file__).resolve().parent.parent
BITS = 512
TOL = 1e-25  # |ad − fd| <= TOL · max(1, |fd|)
REMATS = ("store", "recompute")
# The operators are Core primitives too, differentiable without an entry in
# presk.types.prims (which types the named primitives only).
OPERATORS = frozenset({"add", "sub", "mul", "div", "pow", "neg", "dot", "ein"})


# ---------------------------------------------------------------- harness


@dataclass
class Loaded:
    """A checked program and its differentiated modules, one interpreter per remat."""

    interps: dict[str, Interpreter]
    modules: dict[str, ir.Module]

    def params(self, name: str) -> tuple[ir.Param, ...]:
        return self.interps["store"].functions[name].params


@functools.cache
def load(path: str, consts: tuple[tuple[str, int], ...] = ()) -> Loaded:
    checked, _ = front_end(str(REPO / path), {k: Fraction(v) for k, v in consts})
    modules = {remat: differentiate(checked.core, remat) for remat in REMATS}
    return Loaded({r: Interpreter(m) for r, m in modules.items()}, modules)


def inputs_for(
    prog: Loaded, fn: str, dims: dict[str, int], prefix: tuple[Axis, ...] | None = None
) -> list[Any]:
    """Synthesized arguments of `fn`: θ from its initializers, tensors standard normals
    (an open prefix `...` materialized as `prefix`)."""
    env = {k: Lin.const_(Fraction(v)) for k, v in dims.items()}
    out = []
    for p in prog.params(fn):
        path = "theta" if isinstance(p.type, Params) else f"input/{p.name}"
        out.append(synthesize(subst(p.type, env), p.name, path, dims, prefix, 0, p.default))
    return out


def bump(t: Tensor, idx: tuple[int, ...], delta: Any) -> Tensor:
    data = t.data.copy()
    data[idx] = data[idx] + delta
    return Tensor(t.kind, t.axes, data)


def replace_leaf(tree: Tree, path: str, leaf: Tensor) -> Tree:
    head, _, rest = path.partition(".")
    items = []
    for key, value in tree.items:
        if key == head:
            assert (not rest and isinstance(value, Tensor)) or isinstance(value, Tree)
            value = replace_leaf(value, rest, leaf) if rest else leaf  # type: ignore[arg-type]
        items.append((key, value))
    assert head in dict(tree.items), path
    return Tree(tuple(items))


def as_tensor(value: Any) -> Any:
    """A scalar gradient that is the literal cotangent itself comes back as a Fraction
    (see test_scalar_gradients_are_tensors); compare it as the ℝ[] it stands for."""
    return Tensor.scalar(value) if isinstance(value, Fraction) else value


def central(loss: Callable[[Any], Any], h: Any) -> Any:
    return (loss(h) - loss(-h)) / (2 * h)


def assert_close(ad: Any, fd: Any, where: str) -> None:
    err = abs(ad - fd)
    bound = TOL * max(1, abs(fd))
    assert err <= bound, f"{where}: ad {float(ad)!r} fd {float(fd)!r} |ad - fd| {float(err):.3g}"


def step() -> Any:
    return gmpy2.mpfr(2) ** -100


# ---------------------------------------------------------------- 1a: the tables


def _emitted_by_rules() -> set[str]:
    """Primitive names that rules.py and reverse.py emit (string first arguments of `.prim`)."""
    names: set[str] = set()
    for module in (ad_rules, ad_reverse):
        assert module.__file__ is not None
        tree = pyast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        for node in pyast.walk(tree):
            if (
                isinstance(node, pyast.Call)
                and isinstance(node.func, pyast.Attribute)
                and node.func.attr == "prim"
                and node.args
            ):
                first = node.args[0]
                if isinstance(first, pyast.Constant) and isinstance(first.value, str):
                    names.add(first.value)
                elif isinstance(first, pyast.Name):
                    # `name = "add" if … else "tree_add"`: every string the module
                    # assigns to that variable.
                    for other in pyast.walk(tree):
                        if isinstance(other, pyast.Assign) and any(
                            isinstance(t, pyast.Name) and t.id == first.id for t in other.targets
                        ):
                            for c in pyast.walk(other.value):
                                if isinstance(c, pyast.Constant) and isinstance(c.value, str):
                                    names.add(c.value)
    return names


def test_every_differentiable_primitive_has_an_adjoint_rule() -> None:
    missing = sorted(type_prims.DIFFERENTIABLE - set(ad_rules.RULES))
    assert not missing, f"no adjoint rule for {missing}"
    assert set(ad_rules.RULES) >= OPERATORS
    # Rules only for primitives that exist.
    assert set(ad_rules.RULES) <= set(type_prims.RULES) | OPERATORS


def test_every_primitive_is_evaluated() -> None:
    missing = sorted(set(type_prims.RULES) - EVALUATED)
    assert not missing, f"the interpreter does not evaluate {missing}"
    emitted = _emitted_by_rules()
    assert {"sum_to", "reduce_vjp", "dot_vjp_l", "ein_vjp_r", "zeros_like", "tree_add"} <= emitted
    missing = sorted(emitted - EVALUATED)
    assert not missing, f"the adjoints emit {missing}, which the interpreter does not evaluate"


AD_PROGRAMS = [
    ("tests/ad/prims_grad.psk", ()),
    ("tests/ad/arith_grad.psk", ()),
    ("tutorial/04_grad.psk", ()),
    ("tests/examples/mlp/mlp.psk", ()),
    ("tests/ad/tower_grad.psk", ()),
    ("tests/ad/minigpt_grad.psk", (("V", 16), ("D", 8), ("H", 2), ("L", 2))),
    ("tests/ad/attend_grad.psk", (("D", 4),)),
    ("tests/ad/prefix_grad.psk", ()),
    ("tests/ad/tower_input_grad.psk", ()),
    ("tests/ad/edge_grad.psk", ()),
]


def _prim_names(module: ir.Module) -> set[str]:
    return {i.op.name for fn in module.functions for i in fn.body if isinstance(i.op, ir.Prim)}


@pytest.mark.parametrize("path, consts", AD_PROGRAMS, ids=[p for p, _ in AD_PROGRAMS])
def test_differentiated_programs_use_only_evaluated_primitives(
    path: str, consts: tuple[tuple[str, int], ...]
) -> None:
    for remat, module in load(path, consts).modules.items():
        missing = sorted(_prim_names(module) - EVALUATED)
        assert not missing, f"{path} ({remat}) emits {missing}"


# ---------------------------------------------------------------- 1b: per primitive


def _pairs(path: str) -> list[tuple[str, str]]:
    text = (REPO / path).read_text(encoding="utf-8")
    names = re.findall(r"^fn (f_\w+)", text, re.M)
    return [(path, name[2:]) for name in names]


PRIM_CASES = _pairs("tests/ad/prims_grad.psk") + _pairs("tests/ad/arith_grad.psk")


def test_per_primitive_programs_cover_every_differentiable_primitive() -> None:
    covered: set[str] = set()
    for path in {p for p, _ in PRIM_CASES}:
        prog = load(path)
        functions = prog.interps["store"].functions
        for name in (n for p, n in PRIM_CASES if p == path):
            # The primitives of f_NAME and of the functions it calls.
            todo, seen = [f"f_{name}"], set()
            while todo:
                fn = functions[todo.pop()]
                if fn.name in seen:
                    continue
                seen.add(fn.name)
                for instr in fn.body:
                    if isinstance(instr.op, ir.Prim):
                        covered.add(instr.op.name)
                    elif isinstance(instr.op, ir.Call):
                        todo.append(instr.op.fn)
    wanted = set(type_prims.DIFFERENTIABLE) | OPERATORS
    assert not sorted(wanted - covered), f"no gradient test for {sorted(wanted - covered)}"


def check_gradient(
    path: str,
    loss: str,
    grad: str,
    wrt: str,
    dims: dict[str, int],
    consts: tuple[tuple[str, int], ...] = (),
    prefix: tuple[Axis, ...] | None = None,
) -> None:
    prog = load(path, consts)
    assert [p.name for p in prog.params(loss)] == [p.name for p in prog.params(grad)]
    with gmpy2.context(precision=BITS):
        args = inputs_for(prog, loss, dims, prefix)
        k = [p.name for p in prog.params(loss)].index(wrt)
        grads = {r: as_tensor(prog.interps[r].call(grad, dims, args)) for r in REMATS}
        assert grads["store"] == grads["recompute"], "store and recompute differ"
        g, x = grads["store"], args[k]
        assert isinstance(g, Tensor) and isinstance(x, Tensor)
        assert g.shape == x.shape and g.names == x.names
        interp = prog.interps["store"]
        h = step()
        for idx in np.ndindex(*x.shape):

            def f(delta: Any, idx: tuple[int, ...] = idx) -> Any:
                moved = [*args[:k], bump(x, idx, delta), *args[k + 1 :]]
                return interp.call(loss, dims, moved).item()

            assert_close(g.data[idx], central(f, h), f"{grad}{list(idx)}")


@pytest.mark.parametrize("path, name", PRIM_CASES, ids=[n for _, n in PRIM_CASES])
def test_primitive_gradient(path: str, name: str) -> None:
    check_gradient(path, f"f_{name}", f"g_{name}", "x", {})


# Tutorial 03's attention (tests/ad/attend_grad.psk): gradients in q, k and v.
@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_attention_gradient(which: str) -> None:
    check_gradient(
        "tests/ad/attend_grad.psk",
        f"f_{which}",
        f"g_{which}",
        "x",
        {"B": 2, "T": 3},
        consts=(("D", 4),),
    )


def test_attention_gradient_through_the_tutorial() -> None:
    check_gradient(
        "tests/ad/attend_grad.psk",
        "f_tutorial",
        "g_tutorial",
        "x",
        {"B": 2, "T": 3},
        consts=(("D", 4),),
    )


PREFIXES = {
    "none": (),
    "batch": (Axis("batch", 2),),
    "batch_seq": (Axis("batch", 2), Axis("seq", 2)),
}
PREFIX_CASES = [
    (name, prefix) for _, name in _pairs("tests/ad/prefix_grad.psk") for prefix in PREFIXES
]


@pytest.mark.parametrize("name, prefix", PREFIX_CASES, ids=[f"{n}-{p}" for n, p in PREFIX_CASES])
def test_open_prefix_gradient(name: str, prefix: str) -> None:
    check_gradient(
        "tests/ad/prefix_grad.psk", f"f_{name}", f"g_{name}", "x", {}, prefix=PREFIXES[prefix]
    )


@pytest.mark.parametrize("layers", [3, 1, 0])
def test_tower_input_gradient(layers: int) -> None:
    # Through the fold's reverse to its initial value; L = 0 is the identity.
    check_gradient(
        "tests/ad/tower_input_grad.psk", "f_x", "g_x", "x", {"B": 2}, consts=(("L", layers),)
    )


def test_scalar_gradient_values() -> None:
    prog = load("tests/ad/edge_grad.psk")
    with gmpy2.context(precision=BITS):
        args = inputs_for(prog, "loss", {})
        for remat in REMATS:
            g = prog.interps[remat].call("loss_grad", {}, args)
            assert isinstance(g, Tree)
            assert as_tensor(g["s"]) == Tensor.scalar(1)
            assert g["v"] == Tensor.zeros(args[0]["v"].axes)
    check_gradient("tests/ad/edge_grad.psk", "f_identity", "g_identity", "x", {})


def test_scalar_gradients_are_tensors() -> None:
    prog = load("tests/ad/edge_grad.psk")
    with gmpy2.context(precision=BITS):
        args = inputs_for(prog, "loss", {})
        g = prog.interps["store"].call("loss_grad", {}, args)
        assert [p for p, _ in g.leaves()] == [p for p, _ in args[0].leaves()]
        x = inputs_for(prog, "g_identity", {})
        assert isinstance(prog.interps["store"].call("g_identity", {}, x), Tensor)


@pytest.mark.parametrize("name", ["pow0", "pow_zero_base"])
def test_power_gradient_at_a_zero_base(name: str) -> None:
    check_gradient("tests/ad/edge_grad.psk", f"f_{name}", f"g_{name}", "x", {})


def test_dropout_rate_depending_on_the_argument() -> None:
    from presk.diagnostics import CompileError

    try:
        load("tests/ad/dropout_rate_grad.psk")
    except CompileError as error:  # refusing it is a correct answer
        assert any(d.code == "E3001" for d in error.diagnostics), error
        return
    check_gradient("tests/ad/dropout_rate_grad.psk", "f_rate", "g_rate", "x", {})


# ---------------------------------------------------------------- 1c: whole programs


def check_program(
    path: str,
    loss: str,
    grad: str,
    dims: dict[str, int],
    consts: tuple[tuple[str, int], ...] = (),
    prepare: Callable[[Tree], Tree] | None = None,
    sample: Callable[[list[tuple[str, Tensor]]], list[tuple[str, tuple[int, ...]]]] | None = None,
) -> None:
    """θ's gradient against central differences, at every coordinate or at a sample."""
    prog = load(path, consts)
    with gmpy2.context(precision=BITS):
        args = inputs_for(prog, loss, dims)
        theta = args[0]
        assert isinstance(theta, Tree)
        if prepare is not None:
            theta = prepare(theta)
        args = [theta, *args[1:]]
        grads = {r: prog.interps[r].call(grad, dims, args) for r in REMATS}
        assert grads["store"] == grads["recompute"], "store and recompute differ"
        g = grads["store"]
        assert isinstance(g, Tree)
        leaves = dict(theta.leaves())
        gleaves = dict(g.leaves())
        assert list(gleaves) == list(leaves)
        for path_, leaf in leaves.items():
            assert gleaves[path_].axes == leaf.axes, path_
        coords = (
            sample(list(leaves.items()))
            if sample is not None
            else [(p, idx) for p, t in leaves.items() for idx in np.ndindex(*t.shape)]
        )
        interp = prog.interps["store"]
        h = step()
        nonzero = 0
        for path_, idx in coords:

            def f(delta: Any, path_: str = path_, idx: tuple[int, ...] = idx) -> Any:
                moved = replace_leaf(theta, path_, bump(leaves[path_], idx, delta))
                return interp.call(loss, dims, [moved, *args[1:]]).item()

            ad = gleaves[path_].data[idx]
            nonzero += ad != 0
            assert_close(ad, central(f, h), f"{path_}{list(idx)}")
        assert nonzero >= len(coords) * 3 // 4, "many checked coordinates have a zero gradient"


def test_tutorial_04_gradient() -> None:
    check_program("tutorial/04_grad.psk", "loss", "loss_grad", {"D": 3, "B": 2})


def test_mlp_gradient() -> None:
    check_program("tests/examples/mlp/mlp.psk", "mse", "mse_grad", {"D": 2, "B": 2})


def test_tower_gradient() -> None:
    check_program("tests/ad/tower_grad.psk", "loss", "loss_grad", {"B": 2})


def perturbed(scale: str, only: Callable[[str], bool] = lambda p: True) -> Callable[[Tree], Tree]:
    """θ with the chosen leaves replaced by synthesized normals times `scale`."""

    def prepare(theta: Tree) -> Tree:
        for path_, leaf in theta.leaves():
            if only(path_):
                noise = synthesize_normals(leaf.axes, f"perturb/{path_}")
                theta = replace_leaf(theta, path_, noise.map(lambda v: v * Fraction(scale)))
        return theta

    return prepare


def synthesize_normals(axes: tuple[Axis, ...], path: str) -> Tensor:
    from presk.elab.ty import Axis as TyAxis
    from presk.elab.ty import Elem
    from presk.elab.ty import Tensor as TensorT

    ty = TensorT(Elem.REAL, tuple(TyAxis(a.name, Lin.const_(Fraction(a.size))) for a in axes))
    value = synthesize(ty, path, path, {}, None, 0, None)
    assert isinstance(value, Tensor) and value.kind is Kind.REAL
    return value


def test_tower_gradient_perturbed_theta() -> None:
    # γ = 1 and b = 0 as initialised could hide a rule that drops them.
    check_program(
        "tests/ad/tower_grad.psk", "loss", "loss_grad", {"B": 2}, prepare=perturbed("0.5")
    )


MINIGPT_CONSTS = (("V", 16), ("D", 8), ("H", 2), ("L", 2))
MINIGPT_SAMPLE = [
    ("tok.table", (11, 1)),  # token 11 occurs in the synthesized ids
    ("pos.table", (2, 5)),
    ("blocks.ln1.γ", (1, 2)),
    ("blocks.attn.q_proj.w", (0, 1, 6)),
    ("blocks.attn.k_proj.w", (1, 3, 5)),  # (k_proj.b has an exactly zero gradient)
    ("blocks.attn.v_proj.w", (1, 7, 0)),
    ("blocks.attn.o_proj.w", (0, 4, 4)),
    ("blocks.ln2.β", (0, 5)),
    ("blocks.mlp.up.w", (1, 2, 17)),
    ("blocks.mlp.down.w", (0, 30, 3)),
    ("ln_f.β", (6,)),
    ("head.w", (5, 9)),
]


def minigpt_theta(theta: Tree) -> Tree:
    # The readout starts at zero, which would make every upstream gradient vanish.
    return perturbed("0.5", lambda p: p.startswith("head."))(theta)


def test_minigpt_gradient() -> None:
    def sample(leaves: list[tuple[str, Tensor]]) -> list[tuple[str, tuple[int, ...]]]:
        names = dict(leaves)
        for path_, idx in MINIGPT_SAMPLE:
            assert path_ in names and len(idx) == names[path_].rank, path_
        return MINIGPT_SAMPLE

    check_program(
        "tests/ad/minigpt_grad.psk",
        "loss",
        "loss_grad",
        {"B": 2, "T": 4},
        consts=MINIGPT_CONSTS,
        prepare=minigpt_theta,
        sample=sample,
    )


# ---------------------------------------------------------------- 1d: the command line

Presk = Callable[..., tuple[int, str, str]]  # conftest's in-process `presk`


def test_run_prints_the_gradient_tree(presk: Presk) -> None:
    code, out, err = presk(
        "run", "tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"
    )
    assert code == 0, err
    assert out.startswith("params = {\n"), out
    assert re.search(r"^  w = \[3, 1\] \[\[", out, re.M), out
    assert re.search(r"^  b = \[1\] \[", out, re.M), out
    assert out.rstrip().endswith("}")
    code, again, err = presk(
        "run",
        "tutorial/04_grad.psk",
        "--entry",
        "loss_grad",
        "--dim",
        "D=3",
        "--dim",
        "B=2",
        "--remat",
        "recompute",
    )
    assert code == 0, err
    assert again == out


def test_dump_core_after_ad_lists_the_derivatives(presk: Presk) -> None:
    code, out, err = presk("dump", "tutorial/04_grad.psk", "--stage", "core-after-ad")
    assert code == 0, err
    names = re.findall(r"^fn (\S+?)(?:\{|\()", out, re.M)
    for wanted in (
        "loss.fwd",
        "loss.bwd",
        "loss_grad.lambda0.vjp",
        "loss_grad.lambda0.grad",
        "loss_grad.lambda0.value_vjp",
    ):
        assert any(n == wanted or n.startswith(wanted + "[") for n in names), (wanted, names)
    # The gradient itself is a call of the generated `.grad`, not a `grad` op; callees
    # run forward once, so nothing calls their `.vjp` (which would run it again).
    assert "call loss_grad.lambda0.grad" in out
    assert not any(n.startswith("loss.vjp") for n in names), names
    code, out2, err = presk(
        "dump", "tutorial/04_grad.psk", "--stage", "core-after-ad", "--remat", "recompute"
    )
    assert code == 0, err
    names = re.findall(r"^fn (\S+?)(?:\{|\()", out2, re.M)
    assert any(n.startswith("loss.vjp") for n in names)
    assert not any(n.startswith(("loss.fwd", "loss.bwd")) for n in names), names


def test_value_vjp_agrees_with_the_loss_and_the_gradient() -> None:
    prog = load("tutorial/04_grad.psk")
    dims = {"D": 3, "B": 2}
    for remat in REMATS:
        interp = prog.interps[remat]
        (value_vjp,) = [n for n in interp.functions if n.startswith("loss_grad.lambda0.value_vjp")]
        with gmpy2.context(precision=BITS):
            theta, x, y = inputs_for(prog, "loss", dims)
            loss = interp.call("loss", dims, [theta, x, y])
            grad = interp.call("loss_grad", dims, [theta, x, y])
            # The lifted λ takes its captures first, the differentiated θ last, then ct.
            value, g = interp.call(value_vjp, dims, [x, y, theta, Fraction(1)])
            assert value == loss
            assert g == grad
            # Every adjoint is linear in ct, and doubling is exact in binary.
            value2, g2 = interp.call(value_vjp, dims, [x, y, theta, Fraction(2)])
            assert value2 == loss
            doubled = Tree(tuple((k, v.map(lambda e: 2 * e)) for k, v in grad.items))
            assert g2 == doubled
