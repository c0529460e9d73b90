"""Input synthesis (presk/interp/synth.py): host arrays, reference values, sizes first."""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import gmpy2
import numpy as np
import pytest
from conftest import REPO_ROOT, run_presk

from presk import machine
from presk.elab.presburger import Lin
from presk.elab.ty import Params, subst
from presk.entries import bind_dims, find_entry
from presk.interp import rng, synth
from presk.interp.reference import RunError, Tree
from presk.interp.tensor import Axis, Kind, Tensor
from presk.pipeline import front_end

LINEAR = str(REPO_ROOT / "tutorial" / "01_linear.psk")
ATTENTION = str(REPO_ROOT / "tutorial" / "03_attention.psk")


def entry_of(path: str, text: str, dims: dict[str, str]) -> tuple[Any, dict[str, int], Any]:
    checked, _ = front_end(path, {})
    entry = find_entry(checked, text)
    binding = bind_dims(entry, dims)
    return entry.info.params, binding.dims, binding.prefix


def same(a: Any, b: Any) -> bool:
    """Exact equality of reference values, the sign of zero included."""
    if isinstance(a, Tensor):
        return (
            isinstance(b, Tensor)
            and (a.kind, a.axes, a.bound) == (b.kind, b.axes, b.bound)
            and [(type(x), str(x)) for x in a.flat()] == [(type(y), str(y)) for y in b.flat()]
        )
    if isinstance(a, Tree):
        return isinstance(b, Tree) and all(
            ka == kb and same(va, vb) for (ka, va), (kb, vb) in zip(a.items, b.items, strict=True)
        )
    if isinstance(a, tuple):
        return isinstance(b, tuple) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and type(a) is type(b)


def test_linear_inputs_as_arrays_and_reference_values() -> None:
    params, dims, prefix = entry_of(LINEAR, "Linear{3, 2}.apply", {"batch": "4"})
    theta, x = synth.draw_inputs(params, dims, prefix, 0)
    assert list(theta) == ["w", "b"]
    assert theta["w"].dtype == np.float64 and theta["w"].shape == (3, 2)
    assert not theta["b"].any()
    assert x.shape == (4, 3)
    # The bits of docs/rng.md: θ's w is xavier_uniform under key_for(0, "theta/w").
    want = rng.xavier_uniform(rng.key_for(0, "theta/w"), 6, 3, 2)
    assert theta["w"].reshape(-1).tolist() == want
    assert x.reshape(-1).tolist() == rng.normals(rng.key_for(0, "input/x"), 12)
    assert synth.input_elements(params, dims, prefix) == 6 + 2 + 12
    env = {k: Lin.const_(Fraction(v)) for k, v in dims.items()}
    for (name, ty, default), value in zip(params, (theta, x), strict=True):
        concrete = subst(ty, env)
        path = "theta" if isinstance(ty, Params) else f"input/{name}"
        with gmpy2.context(precision=256):
            ref = synth.to_reference(value, concrete, dims, prefix)
            assert same(ref, synth.synthesize(concrete, name, path, dims, prefix, 0, default))
    assert isinstance(ref, Tensor) and ref.kind is Kind.REAL
    assert ref.flat()[0] == gmpy2.mpfr(float(x[0, 0]))


def test_idx_bool_key_and_tuples() -> None:
    params, dims, prefix = entry_of(ATTENTION, "attend", {"B": "1", "T": "3"})
    drawn = synth.draw_inputs(params, dims, prefix, 5)
    assert len(drawn) == len(params)
    for value in drawn:
        assert isinstance(value, dict | np.ndarray | tuple | rng.Key | Fraction)
    key = rng.key_for(5, "input/ids")
    ids = synth._indices(key, 7, 50257, "ids")
    assert ids.dtype == np.int64 and ids.tolist() == rng.randints(key, 7, 50257)
    wide = synth._indices(key, 7, 2**64 - 1, "ids")
    assert wide.dtype == np.uint64 and wide.tolist() == rng.randints(key, 7, 2**64 - 1)
    with pytest.raises(RunError, match=r"idx\[0\] has no values"):
        synth._indices(key, 7, 0, "ids")
    with pytest.raises(RunError, match="wider than 64 bits"):
        synth._indices(key, 7, 2**64, "ids")


def test_init_from_key_keeps_its_bits() -> None:
    params, dims, _ = entry_of(LINEAR, "Linear{3, 2}.apply", {"batch": "1"})
    theta_ty = subst(params[0][1], {k: Lin.const_(Fraction(v)) for k, v in dims.items()})
    assert isinstance(theta_ty, Params)
    key = rng.key_for(3, "input/key")
    with gmpy2.context(precision=256):
        tree = synth.init_from_key(theta_ty.inst, dims, key)
    w = tree["w"]
    assert isinstance(w, Tensor)
    want = rng.xavier_uniform(rng.derive(key, "w"), 6, 3, 2)
    assert [float(v) for v in w.flat()] == want


@pytest.mark.parametrize(
    ("entry", "dims"),
    [
        ("Linear{0, 0}.apply", {"batch": "0"}),
        ("Linear{0, 0}.apply", {"batch": "3"}),
        ("Linear{3, 2}.apply", {"batch": "0"}),
        ("Linear{0, 2}.apply", {"batch": "2"}),
    ],
)
def test_zero_sizes_draw(entry: str, dims: dict[str, str]) -> None:
    params, bound, prefix = entry_of(LINEAR, entry, dims)
    theta, x = synth.draw_inputs(params, bound, prefix, 0)
    sizes = (bound["In"], bound["Out"])
    assert theta["w"].shape == sizes and theta["b"].shape == sizes[1:]
    assert x.shape == (int(dims["batch"]), sizes[0])
    with gmpy2.context(precision=256):
        ref = synth.to_reference(theta, params[0][1], bound, prefix)
    assert isinstance(ref, Tree)
    w = ref["w"]
    assert isinstance(w, Tensor) and w.shape == sizes


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ([LINEAR, "--entry", "Linear{0, 0}.apply", "--dim", "batch=0"], "ℝ[batch: 0, 0]"),
        ([LINEAR, "--entry", "Linear{0, 0}.apply", "--dim", "batch=3"], "[[], [], []]"),
        ([LINEAR, "--entry", "Linear{3, 2}.apply", "--dim", "batch=0"], "ℝ[batch: 0, 2]"),
        ([LINEAR, "--entry", "Linear{0, 2}.apply", "--dim", "batch=2"], "[[0, 0], [0, 0]]"),
        ([ATTENTION, "--entry", "attend", "--dim", "B=1", "--dim", "T=0"], "seq: 0"),
    ],
)
def test_zero_sizes_run_on_the_reference(args: list[str], want: str) -> None:
    code, out, err = run_presk("run", *args)
    assert code == 0 and want in out, err


def test_sizes_are_refused_before_anything_is_allocated() -> None:
    params, dims, prefix = entry_of(LINEAR, "Linear{3, 2}.apply", {"batch": "1000000000000"})
    start = time.perf_counter()
    assert synth.input_elements(params, dims, prefix) == 6 + 2 + 3 * 10**12
    with pytest.raises(RunError, match=r"3,000,000,000,008 elements \(21\.8 TiB as f64\)"):
        synth.draw_inputs(params, dims, prefix, 0)
    assert time.perf_counter() - start < 1.0


def test_the_reference_check_counts_its_objects() -> None:
    memory = machine.memory_bytes()
    assert memory is not None
    n = memory // 64  # fits as doubles, not as mpfr objects
    params, dims, _ = entry_of(LINEAR, "Linear{1, 2}.apply", {"batch": "1"})
    x_ty = subst(params[1][1], {k: Lin.const_(Fraction(v)) for k, v in dims.items()})
    with pytest.raises(RunError, match="for the reference"):
        synth.to_reference(np.zeros(0), x_ty, dims, (Axis("batch", n),))


def test_run_refuses_huge_dims_in_a_line(tmp_path: Path) -> None:
    start = time.perf_counter()
    code, _, err = run_presk(
        "run", LINEAR, "--entry", "Linear{3, 2}.apply", "--dim", "batch=1000000000000"
    )
    assert code == 1 and "elements" in err and len(err.strip().splitlines()) == 1, err
    assert time.perf_counter() - start < 30
