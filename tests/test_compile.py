"""The one compile path: `compile_entry` and the `CompiledEntry` it returns.

A compiled entry is called on arrays and parameter trees (dicts), checks
their shapes with a usage error naming the argument and the axis, gives the
bits `presk run --backend native` prints, runs in an arena per call (so
threads may share it), and refuses a call larger than the machine before
allocating anything.
"""

from __future__ import annotations

import shutil
import threading
from fractions import Fraction

import numpy as np
import pytest
from conftest import run_presk

from presk.diagnostics import UsageError
from presk.host.realization import Realization
from presk.interp import rng
from presk.interp.reference import RunError
from presk.interp.synth import draw_inputs
from presk.pipeline import BACK_END, FRONT_END, Request, compile_path, run_back_end

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _linear(dtype: str = "f64", batch: int = 4):
    return compile_path(
        "tutorial/01_linear.psk", "Linear{3, 2}.apply", {"batch": batch}, Realization(dtype)
    )


def test_the_passes_are_listed_in_order() -> None:
    assert [p.name for p in FRONT_END] == ["load", "check"]
    assert [p.name for p in BACK_END] == [
        "differentiate",
        "layout",
        "record",
        "budget",
        "print",
        "build",
        "load",
    ]
    assert all(p.description for p in (*FRONT_END, *BACK_END))


def test_a_compiled_entry_computes_what_the_command_prints() -> None:
    compiled, _, chosen, binding = _linear()
    theta, x = draw_inputs(chosen.info.params, binding.dims, binding.prefix, 0)
    assert set(theta) == {"w", "b"}
    out = compiled(theta, x)
    w, b = theta["w"], theta["b"]
    assert out.shape == (4, 2) and out.dtype == np.float64
    # Row-wise sums in increasing k, then the bias: what numpy's loop computes too.
    expected = np.array(
        [[sum(x[i, k] * w[k, j] for k in range(3)) + b[j] for j in range(2)] for i in range(4)]
    )
    assert np.array_equal(out, expected)
    code, printed, _ = run_presk(
        "run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4",
        "--backend", "native", "--json",
    )  # fmt: skip
    assert code == 0
    import json

    data = json.loads(printed)["output"]["data"]
    assert np.array_equal(np.array(data, dtype=float), out)


def test_compiled_entries_report_their_text_and_counts() -> None:
    compiled, *_ = _linear("f32")
    assert "float" in compiled.c_text
    assert compiled.kernels >= 1 and compiled.launches >= 1
    assert compiled.arena_bytes >= 0


def test_bf16_outputs_come_back_widened_to_float32() -> None:
    compiled, _, chosen, binding = _linear("bf16")
    theta, x = draw_inputs(chosen.info.params, binding.dims, binding.prefix, 0)
    out = compiled(theta, x)
    assert out.dtype == np.float32
    # Every value is a bf16: its low 16 bits are zero.
    assert not np.any(out.view(np.uint32) & 0xFFFF)


def test_bad_arguments_name_the_argument_and_the_axis() -> None:
    compiled, _, chosen, binding = _linear()
    theta, x = draw_inputs(chosen.info.params, binding.dims, binding.prefix, 0)
    with pytest.raises(
        UsageError, match=r"argument 2: expected shape \[batch: 4, 3\].*axis `batch`"
    ):
        compiled(theta, np.zeros((5, 3)))
    with pytest.raises(UsageError, match=r"argument 1\.w: expected shape"):
        compiled({"w": np.zeros((2, 3)), "b": theta["b"]}, x)
    with pytest.raises(UsageError, match="no `b` in the parameter tree"):
        compiled({"w": theta["w"]}, x)
    with pytest.raises(UsageError, match="has no leaf `c`"):
        compiled({**theta, "c": theta["b"]}, x)
    with pytest.raises(UsageError, match="takes 2 arguments"):
        compiled(theta)
    with pytest.raises(UsageError, match="expected real numbers"):
        compiled(theta, np.full((4, 3), "a"))


def test_one_entry_called_from_four_threads_at_once() -> None:
    compiled, _, chosen, binding = _linear(batch=64)
    theta, _ = draw_inputs(chosen.info.params, binding.dims, binding.prefix, 0)
    inputs = [np.random.default_rng(i).standard_normal((64, 3)) for i in range(4)]
    expected = [compiled(theta, x) for x in inputs]
    got: list[object] = [None] * 4

    def work(i: int) -> None:
        for _ in range(50):
            got[i] = compiled(theta, inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True))


def test_keys_are_passed_as_keys() -> None:
    compiled, _, chosen, binding = compile_path(
        "tutorial/05_sample.psk", "pick", {"B": 3}, Realization("f64")
    )
    args = draw_inputs(chosen.info.params, binding.dims, binding.prefix, 0)
    assert any(isinstance(a, rng.Key) for a in args)
    assert np.array_equal(compiled(*args), compiled(*args))
    with pytest.raises(UsageError, match="expected a random key"):
        compiled(*[np.zeros(2) if isinstance(a, rng.Key) else a for a in args])


def test_a_call_larger_than_the_machine_is_refused_before_anything_is_built() -> None:
    from presk.commands.common import choose_entry
    from presk.pipeline import front_end

    checked, _ = front_end("tutorial/01_linear.psk", {})
    chosen = choose_entry(checked, "Linear{3, 2}.apply", ["batch=1000000000000"])
    request = Request(checked, chosen.entry, chosen.binding, Realization("f32"))
    with pytest.raises(RunError, match=r"needs .* TiB"):
        run_back_end(request)


def test_compile_path_takes_constants() -> None:
    compiled, *_ = compile_path(
        "tutorial/03_attention.psk",
        "attend",
        {"B": 1, "T": 2},
        Realization("f64"),
        consts={"H": Fraction(1)},
    )
    assert compiled.launches > 0


def test_deep_programs_run_natively(tmp_path) -> None:
    """The back end's passes recurse as the program nests: they run with room too."""
    chain = 300
    for i in range(chain):
        body = f"n.f{i + 1}(x) + x" if i < chain - 1 else "x"
        head = f'import "m{i + 1}.psk" as n\n' if i < chain - 1 else ""
        (tmp_path / f"m{i}.psk").write_text(f"{head}fn f{i}(x : ℝ[3]) -> ℝ[3] = {body}\n")
    (tmp_path / "sum.psk").write_text("fn f(x : ℝ[3]) -> ℝ[3] = " + " + ".join(["x"] * 1000) + "\n")
    for path, entry in ((tmp_path / "m0.psk", "f0"), (tmp_path / "sum.psk", "f")):
        native = run_presk("run", str(path), "--entry", entry, "--backend", "native")
        reference = run_presk("run", str(path), "--entry", entry)
        assert native[0] == 0 and reference[0] == 0, native[2] + reference[2]
        assert native[1].startswith("ℝ[3] = ")


@pytest.mark.parametrize("command", ["run", "bench", "export"])
def test_a_failing_compiler_is_one_line(command: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PRESK_CC", "false")
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "cache"))
    argv = [command, "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=2"]
    argv += {"run": ["--backend", "native"], "bench": ["--native-only"]}.get(command, [])
    if command == "export":
        argv += ["-o", str(tmp_path / "out")]
    code, out, err = run_presk(*argv)
    assert code == 1 and out == ""
    assert err.startswith(f"presk {command}: ") and "internal error" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "entry, dims",
    [
        ("Linear{0, 0}.apply", ["batch=0"]),
        ("Linear{0, 4}.apply", ["batch=4"]),
        ("Linear{4, 0}.apply", ["batch=4"]),
        ("Linear{3, 2}.apply", ["batch=0"]),
    ],
)
def test_zero_sizes_run_natively(entry: str, dims: list[str]) -> None:
    argv = ["run", "tutorial/01_linear.psk", "--entry", entry]
    argv += [f for d in dims for f in ("--dim", d)]
    native = run_presk(*argv, "--backend", "native")
    reference = run_presk(*argv)
    assert native[0] == 0 and reference[0] == 0, native[2] + reference[2]
    assert native[1].split(" = ")[0] == reference[1].split(" = ")[0]
