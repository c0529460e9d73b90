"""Bad input to the Python API: every public function and method, with wrong types and
values, raises `presk.UsageError` naming the argument (never a bare ValueError, KeyError,
AttributeError or TypeError), and both backends check a call's arguments alike."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import REPO_ROOT

import presk

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

BACKENDS = ("native", "interp")
LINEAR = "Linear{3, 2}.apply"

# An embedding (an index argument) and a hyperparameter with a default.
TABLES = """\
dim B
dim T
module Embedding{N M : dim} {
  param table : ℝ[N, M]  init = normal(std = 0.02)
  fn apply(ids : idx[N][batch: B, seq: T]) -> ℝ[batch: B, seq: T, M] =
    embed(table, ids)
}
module Scale{M : dim} {
  param γ : ℝ[M]  init = ones
  fn apply(x : ℝ[..., model: M], eps : f64 = 1e-5) -> ℝ[..., model: M] =
    x * real(eps)
}
fn bare(x : ℝ[3], h : f64) -> ℝ[3] = x * real(h)
"""


@pytest.fixture(autouse=True)
def _at_root(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.chdir(REPO_ROOT)


@pytest.fixture(scope="module")
def linear() -> presk.Program:
    return presk.load(REPO_ROOT / "tutorial" / "01_linear.psk")


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> presk.Program:
    path = tmp_path_factory.mktemp("tables") / "tables.psk"
    path.write_text(TABLES)
    return presk.load(path)


def refused(call: Callable[[], Any], *words: str) -> str:
    """The UsageError `call` raises; its message holds every word of `words`."""
    with pytest.raises(presk.UsageError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)
    return message


# ---------------------------------------------------------------- a call's arguments


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_s_arguments_are_checked_on_both_backends(
    linear: presk.Program, backend: str
) -> None:
    entry = linear.entry(LINEAR, dims={"batch": 4}, backend=backend)
    theta, x = entry.inputs()
    refused(lambda: entry(theta, np.ones((5, 3))), "argument 2", "expected shape", "batch")
    refused(lambda: entry({"w": theta["w"]}, x), "argument 1", "`b`")
    refused(lambda: entry({**theta, "c": theta["b"]}, x), "argument 1", "`c`")
    refused(lambda: entry(theta, [[1, 2, 3], [1, 2]]), "argument 2", "not an array")
    refused(lambda: entry(theta, "abc"), "argument 2")
    refused(lambda: entry(5, x), "argument 1", "parameter tree")
    refused(lambda: entry(theta, np.ones((4, 3)) * 1j), "argument 2", "real numbers")
    refused(lambda: entry(theta, np.array([[None] * 3] * 4)), "argument 2", "real numbers")
    refused(lambda: entry({"w": theta["w"], "b": "x"}, x), "argument 1.b")
    refused(lambda: entry(theta), "takes 2 arguments, got 1")
    refused(lambda: entry(theta, x, x), "takes 2 arguments, got 3")
    # lists and integer arrays are arrays still
    assert entry(theta, np.ones((4, 3), dtype=np.int32)).shape == (4, 2)
    assert entry(theta, [[1.0, 2.0, 3.0]] * 4).shape == (4, 2)


def test_both_backends_refuse_alike(linear: presk.Program) -> None:
    native = linear.entry(LINEAR, dims={"batch": 4})
    exact = linear.entry(LINEAR, dims={"batch": 4}, backend="interp")
    theta, x = native.inputs()
    for args in [
        (theta, np.ones((5, 3))),
        ({"w": theta["w"]}, x),
        (theta, [[1, 2, 3], [1, 2]]),
        (theta, np.ones((4, 3), dtype=complex)),
        ([theta], x),
        (theta,),
    ]:
        assert refused(lambda a=args: native(*a)) == refused(lambda a=args: exact(*a))


@pytest.mark.parametrize("backend", BACKENDS)
def test_indices_out_of_range_are_refused(tables: presk.Program, backend: str) -> None:
    # Natively, an index outside the table was read as it was: out of bounds in C.
    entry = tables.entry("Embedding{4, 2}.apply", dims={"B": 1, "T": 3}, backend=backend)
    theta, ids = entry.inputs()
    assert entry(theta, ids).shape == (1, 3, 2)
    refused(lambda: entry(theta, np.array([[0, 1, 1_000_000]])), "argument 2", "index 1000000")
    refused(lambda: entry(theta, np.array([[0, -1, 2]])), "argument 2", "index -1", "idx[4]")
    refused(lambda: entry(theta, np.array([[0, 4, 2]])), "index 4 out of range for idx[4]")
    huge = np.array([[0, 2**64 - 1, 2]], dtype=np.uint64)
    refused(lambda: entry(theta, huge), "argument 2", "too large")
    refused(lambda: entry(theta, np.array([[0.0, 1.0, 2.0]])), "argument 2", "integers")
    # the buffer as C reads it (the fast path) is checked too
    refused(lambda: entry(theta, np.array([[3, 2, 9]], dtype=np.int64)), "index 9")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hyperparameter_argument_is_its_default(tables: presk.Program, backend: str) -> None:
    entry = tables.entry("Scale{2}.apply", dims={"b": 3}, backend=backend)
    theta, x, eps = entry.inputs()
    assert eps == Fraction(1, 100000)
    expected = entry(theta, x, eps)
    assert np.array_equal(entry(theta, x, 1e-5), expected)
    assert np.array_equal(entry(theta, x, np.float64(1e-5)), expected)
    refused(lambda: entry(theta, x, 0.5), "argument 3", "`eps`", "default")
    refused(lambda: entry(theta, x, "x"), "argument 3", "`eps`", "a number")
    refused(lambda: entry(theta, x, None), "argument 3", "a number")
    refused(lambda: entry(theta, x, True), "argument 3", "a number")
    refused(lambda: entry(theta, x, float("nan")), "argument 3", "default")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hyperparameter_without_a_default_is_refused(tables: presk.Program, backend: str) -> None:
    refused(lambda: tables.entry("bare", backend=backend), "`h`", "no default")


# ---------------------------------------------------------------- seeds


@pytest.mark.parametrize("seed", [-1, 2**64, "a", 1.5, True, None, [0]])
def test_seeds_are_checked_as_seed_is(linear: presk.Program, seed: object) -> None:
    for backend in BACKENDS:
        entry = linear.entry(LINEAR, dims={"batch": 4}, backend=backend)
        refused(lambda e=entry: e.inputs(seed=seed), "seed", "[0, 18446744073709551615]")
    refused(lambda: linear.init("Linear{3, 2}", seed=seed), "seed", "whole number")


def test_every_seed_of_the_range_is_taken(linear: presk.Program) -> None:
    entry = linear.entry(LINEAR, dims={"batch": 4})
    for seed in (0, 2**64 - 1, np.uint64(7), np.int32(3)):
        assert entry.inputs(seed=seed)[1].shape == (4, 3)  # type: ignore[arg-type]
    assert linear.init("Linear{3, 2}", seed=2**64 - 1)["w"].shape == (3, 2)


# ---------------------------------------------------------------- Program.entry and init


@pytest.mark.parametrize(
    ("dims", "words"),
    [
        ([1], ("dims=[1]", "dict")),
        ("batch=4", ("dims=", "dict")),
        ({"batch": -1}, ("dims['batch']=-1", "whole number")),
        ({"batch": 1.5}, ("dims['batch']=1.5",)),
        ({"batch": "4"}, ("dims['batch']='4'",)),
        ({"batch": True}, ("dims['batch']=True",)),
        ({"batch": None}, ("dims['batch']=None",)),
        ({1: 2}, ("dims", "1")),
        ({"not a name": 2}, ("dims", "not a name")),
    ],
)
def test_dims_are_checked(linear: presk.Program, dims: object, words: tuple[str, ...]) -> None:
    for backend in BACKENDS:
        refused(lambda b=backend: linear.entry(LINEAR, dims=dims, backend=b), *words)  # type: ignore[arg-type]
    refused(lambda: linear.init("Linear{3, 2}", dims=dims), *words)  # type: ignore[arg-type]


def test_dims_of_numpy_integers_are_taken(linear: presk.Program) -> None:
    entry = linear.entry(LINEAR, dims={"batch": np.int64(4)})  # type: ignore[dict-item]
    assert entry.dims == {"In": 3, "Out": 2}
    assert entry.inputs()[1].shape == (4, 3)


def test_a_dimension_missing_or_unknown_names_dims(tables: presk.Program) -> None:
    refused(lambda: tables.entry("Embedding{4, 2}.apply", dims={"B": 1}), "`T`")
    message = refused(
        lambda: tables.entry("Embedding{4, 2}.apply", dims={"B": 1, "T": 1, "Q": 2}), "Q"
    )
    assert message.startswith("dims:")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"backend": 3}, ("backend=3",)),
        ({"backend": "gpu"}, ("backend='gpu'",)),
        ({"backend": ["native"]}, ("backend=",)),
        ({"realize": 3}, ("realize=3",)),
        ({"realize": None}, ("realize=None",)),
        ({"realize": "f16"}, ("realize f16", "f64, f32, bf16")),
        ({"realize": "@/no/such/plan.json"}, ("realize @/no/such/plan.json",)),
        ({"threads": 0}, ("threads=0",)),
        ({"threads": 2000}, ("threads=2000",)),
        ({"threads": True}, ("threads=True",)),
        ({"threads": "2"}, ("threads='2'",)),
        ({"threads": 1.0}, ("threads=1.0",)),
    ],
)
def test_entry_options_are_checked(
    linear: presk.Program, options: dict[str, Any], words: tuple[str, ...]
) -> None:
    refused(lambda: linear.entry(LINEAR, dims={"batch": 1}, **options), *words)
    if "backend" not in options:
        refused(
            lambda: linear.entry(LINEAR, dims={"batch": 1}, backend="interp", **options), *words
        )


@pytest.mark.parametrize("name", [3, None, b"Linear.apply", "", "Linear{3, 2}.apply(", "nope"])
def test_entry_names_are_checked(linear: presk.Program, name: object) -> None:
    refused(lambda: linear.entry(name, dims={"batch": 1}))  # type: ignore[arg-type]


@pytest.mark.parametrize("module", [3, None, "Nope", "Linear{3}", "Linear{3, 2"])
def test_init_modules_are_checked(linear: presk.Program, module: object) -> None:
    refused(lambda: linear.init(module))  # type: ignore[arg-type]


# ---------------------------------------------------------------- load


@pytest.mark.parametrize(
    ("path", "words"),
    [
        (None, ("path=None",)),
        (3, ("path=3",)),
        (b"tutorial/01_linear.psk", ("path=b",)),
        ("tutorial/\0.psk", ("NUL",)),
        ("no/such/file.psk", ("no/such/file.psk",)),
        ("tutorial", ("directory",)),
    ],
)
def test_load_paths_are_checked(path: object, words: tuple[str, ...]) -> None:
    refused(lambda: presk.load(path), *words)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("consts", "words"),
    [
        ([1], ("consts=[1]", "dict")),
        ({"H": float("inf")}, ("consts['H'] = inf", "not a number")),
        ({"H": float("nan")}, ("consts['H'] = nan", "not a number")),
        ({"H": None}, ("consts['H'] = None",)),
        ({"H": True}, ("consts['H'] = True",)),
        ({"H": "1/0"}, ("not a number",)),
        ({1: 2}, ("consts", "1")),
        ({"nope": 2}, ("consts:", "`nope`")),
    ],
)
def test_load_consts_are_checked(consts: object, words: tuple[str, ...]) -> None:
    refused(lambda: presk.load("tutorial/03_attention.psk", consts=consts), *words)  # type: ignore[arg-type]


def test_a_path_object_is_a_path(tmp_path: Path) -> None:
    assert presk.load(REPO_ROOT / "tutorial" / "01_linear.psk").entries() == ["Linear.apply"]
