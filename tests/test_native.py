"""The native backend: a fast subset of the conformance suite (conformance/run.py).

* the tutorial commands with `--backend native`, against the reference
  (`presk run` in process, as a user types them);
* a handful of conformance programs in f64, f32 and bf16, within the suite's bands;
* the bf16 conversions of presk.backends.native against an exact reference and the
  C runtime's;
* the build cache: a second run in a fresh process compiles nothing;
* `presk dump --stage kernel` of tutorial 01 as the manual prints it;
* the conformance runner itself: its inputs are `presk run`'s, its programs reach every
  primitive, its tie rules accept what they should and nothing else.

Every test compiles into a temporary PRESK_CACHE, never the real ~/.cache.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from conformance import run as conf  # noqa: E402

REAL_CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
pytestmark = pytest.mark.skipif(REAL_CC is None, reason="no C compiler (cc, gcc, clang)")

Presk = Callable[..., tuple[int, str, str]]


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One temporary build cache for the module (units are shared between tests)."""
    root = tmp_path_factory.mktemp("presk-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRESK_CACHE", str(root))
        mp.delenv("PRESK_CC", raising=False)
        yield root


def _run(presk: Presk, *args: str) -> str:
    code, out, err = presk("run", *args)
    assert code == 0, err
    assert err == "", err
    return out


def _json_values(presk: Presk, *args: str) -> list[tuple[str, Fraction | int]]:
    """The output of `presk run --json` as (path, exact value) pairs."""
    doc = json.loads(_run(presk, *args, "--json"))

    def walk(node: object, path: str) -> Iterator[tuple[str, Fraction | int]]:
        if isinstance(node, dict) and "data" in node:
            flat = np.array(node["data"], dtype=object).reshape(-1)
            for i, v in enumerate(flat):
                yield (f"{path}[{i}]", v if isinstance(v, int) else Fraction(v))
        elif isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, f"{path}.{i}")

    return list(walk(doc["output"], "out"))


def _within_band(presk: Presk, realize: str, *args: str) -> None:
    """Native and reference `presk run --json` agree element by element within the band."""
    eps, a = conf.BANDS[realize]
    ref = _json_values(presk, *args)
    nat = _json_values(presk, *args, "--backend", "native", "--realize", realize)
    assert [p for p, _ in ref] == [p for p, _ in nat]
    for (path, x), (_, y) in zip(ref, nat, strict=True):
        if isinstance(x, int):
            assert x == y, path
        else:
            assert abs(x - y) <= Fraction(eps) * (abs(x) + Fraction(a)), (path, x, y)


# ---------------------------------------------------------------- the tutorial commands

LINEAR = ("tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4")
NORM = ("tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--dim", "batch=2")
ATTEND = ("tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=3")
GRAD = ("tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2")
PICK = ("tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=6")
TOWER = ("tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=3")


def test_tutorial_01_linear_prints_the_reference_digits(presk: Presk) -> None:
    reference = _run(presk, *LINEAR)
    assert _run(presk, *LINEAR, "--backend", "native") == reference
    assert reference.startswith("ℝ[batch: 4, 2] = [batch: 4, 2] [[")


@pytest.mark.parametrize("realize", ["f32", "bf16"])
def test_tutorial_01_linear_in_narrow_types(presk: Presk, realize: str) -> None:
    _within_band(presk, realize, *LINEAR)


def test_tutorial_02_norm(presk: Presk) -> None:
    _within_band(presk, "f64", *NORM)


def test_tutorial_03_attend_digits_equal_the_reference(presk: Presk) -> None:
    reference = _run(presk, *ATTEND, "--digits", "12")
    native = _run(presk, *ATTEND, "--digits", "12", "--backend", "native", "--realize", "f64")
    assert native == reference
    assert reference.startswith("ℝ[batch: 1, heads: 2, seq: 3, hd: 4] = ")


def test_tutorial_04_loss_grad(presk: Presk) -> None:
    out = _run(presk, *GRAD, "--backend", "native")
    assert out.startswith("params = {\n  w = ") and "\n  b = " in out
    _within_band(presk, "f64", *GRAD)


def test_tutorial_05_pick_draws_the_reference_tokens(presk: Presk) -> None:
    reference = _run(presk, *PICK)
    assert reference.startswith("idx[8][batch: 6] = [batch: 6] [")
    assert _run(presk, *PICK, "--backend", "native") == reference


def test_tutorial_06_tower(presk: Presk) -> None:
    _within_band(presk, "f64", *TOWER)


# ---------------------------------------------------------------- conformance programs

FAST_CASES = [
    "04_softmax.g_softmax_causal",
    "05_contractions.g_ein_scores_k",
    "05_contractions.g_dot_prefix",
    "06_indices.g_embed",
    "07_random.e_sample_many",
    "09_trees.grad_tower",
]


def _case(label: str) -> conf.Case:
    return next(c for c in conf.program_cases() if c.label == label)


@pytest.mark.parametrize("label", FAST_CASES)
def test_program_within_the_bands(label: str) -> None:
    result = conf.run_case(_case(label), conf.REALIZATIONS)
    assert result.error is None, result.error
    for realize in conf.REALIZATIONS:
        outcome = result.outcomes[realize]
        assert outcome.passed, (realize, outcome.failure_lines(realize))


def test_negative_integer_power_of_a_negative_base() -> None:
    result = conf.run_case(_case("02_arith.e_pow_neg"), ("f64",))
    assert result.outcomes["f64"].passed, result.outcomes["f64"].failure_lines("f64")


# ---------------------------------------------------------------- bf16 conversions


def _bf16_exact(bits: int) -> int:
    """The bf16 pattern nearest the f32 of pattern `bits` (ties to even, by exact rationals);
    a NaN gives the quiet NaN of its upper half."""
    sign, magnitude = bits & 0x80000000, bits & 0x7FFFFFFF
    if magnitude > 0x7F800000:
        return ((bits >> 16) | 0x40) & 0xFFFF
    value = _f32_value(magnitude)
    low = magnitude >> 16  # the bf16 below (or equal), by truncation
    if low == 0x7F80:  # infinity
        return (sign >> 16) | low
    high = low + 1
    below, above = _f32_value(low << 16), _bf16_value_or_overflow(high)
    if value - below < above - value or (value - below == above - value and low % 2 == 0):
        result = low
    else:
        result = high
    return (sign >> 16) | result


def _f32_value(magnitude: int) -> Fraction:
    exponent, mantissa = magnitude >> 23, magnitude & 0x7FFFFF
    if exponent == 0:
        return Fraction(mantissa, 2 ** (23 + 126))
    return Fraction(0x800000 | mantissa, 2**23) * Fraction(2) ** (exponent - 127)


def _bf16_value_or_overflow(pattern: int) -> Fraction:
    # Past the largest finite bf16 lies 2^128, where rounding with an unbounded exponent
    # would put the next value: a value rounding there overflows to infinity.
    if pattern == 0x7F80:
        return Fraction(2) ** 128
    return _f32_value(pattern << 16)


def _random_patterns(n: int) -> np.ndarray:
    rng = np.random.default_rng(20260919)
    patterns = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    # Every class: ties (low half exactly 0x8000), just above and below, zeros, subnormals,
    # the largest finite values and the overflow boundary, infinities, NaNs (quiet and not).
    special = [
        0x00000000, 0x80000000, 0x00000001, 0x00008000, 0x00018000, 0x00017FFF,
        0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x7F7F7FFF, 0x7F7F8000,
        0x7F7FFFFF, 0xFF7F8000, 0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000,
        0xFFFFFFFF, 0x7FBFFFFF, 0x807FFFFF, 0x00800000,
    ]  # fmt: skip
    ties = (patterns & np.uint32(0xFFFF0000)) | np.uint32(0x8000)
    return np.concatenate([patterns, ties[: n // 4], np.array(special, dtype=np.uint32)])


def test_to_bf16_rounds_to_nearest_even_exactly() -> None:
    from presk.backends.native import from_bf16, to_bf16

    patterns = _random_patterns(20000)
    got = to_bf16(patterns.view(np.float32))
    expected = np.array([_bf16_exact(int(p)) for p in patterns], dtype=np.uint16)
    wrong = np.nonzero(got != expected)[0]
    assert wrong.size == 0, [(hex(patterns[i]), hex(got[i]), hex(expected[i])) for i in wrong[:5]]
    # NaN stays NaN, infinities and signed zeros stay themselves.
    back = from_bf16(got)
    source = patterns.view(np.float32)
    assert np.array_equal(np.isnan(back), np.isnan(source))
    finite = ~np.isnan(source)
    assert np.array_equal(np.signbit(back[finite]), np.signbit(source[finite]))


def test_from_bf16_widens_exactly_and_round_trips() -> None:
    from presk.backends.native import from_bf16, to_bf16

    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    wide = from_bf16(every)
    assert wide.dtype == np.float32
    assert np.array_equal(wide.view(np.uint32), every.astype(np.uint32) << 16)
    nan = np.isnan(wide)
    assert np.array_equal(to_bf16(wide)[~nan], every[~nan])
    assert np.all(np.isnan(from_bf16(to_bf16(wide[nan]))))


def test_to_bf16_agrees_with_the_c_runtime() -> None:
    """Inputs are narrowed in Python and results in C: the two must be one function."""
    from presk.backends.native import to_bf16
    from presk.build.compile import build
    from presk.build.load import load, pointer
    from presk.cgen.program import runtime_text

    source = runtime_text() + (
        "\nvoid presk_test_to_bf16(const float *x, uint16_t *y, size_t n) {\n"
        "    for (size_t i = 0; i < n; i++) y[i] = presk_f32_to_bf16(x[i]);\n"
        "}\n"
    )
    lib = load(build(source), "void presk_test_to_bf16(const float *x, uint16_t *y, size_t n);")
    patterns = _random_patterns(200000)
    x = np.ascontiguousarray(patterns.view(np.float32))
    y = np.zeros(x.shape, dtype=np.uint16)
    lib.lib.presk_test_to_bf16(
        pointer(lib.ffi, x, "float"), pointer(lib.ffi, y, "uint16_t", writable=True), x.size
    )
    assert np.array_equal(y, to_bf16(x))


# ---------------------------------------------------------------- the build cache


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[list[str]]]:
    """`presk run … --backend native` twice, each in a fresh process, with PRESK_CC a
    wrapper logging its arguments: the two outputs and each run's compiler invocations."""
    tmp = tmp_path_factory.mktemp("counting-cc")
    log = tmp / "cc.log"
    wrapper = tmp / "counting-cc"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec {REAL_CC} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PRESK_CC": str(wrapper), "PRESK_CACHE": str(tmp / "cache")}
    command = [sys.executable, "-m", "presk.cli", "run", *LINEAR, "--backend", "native"]
    outputs, calls = [], []
    for _ in range(2):
        before = log.read_text().splitlines() if log.exists() else []
        done = subprocess.run(
            command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
        )
        after = log.read_text().splitlines() if log.exists() else []
        outputs.append(done.stdout)
        calls.append(after[len(before) :])
    return outputs, calls


def test_a_cached_second_run_compiles_nothing(
    two_runs: tuple[list[str], list[list[str]]],
) -> None:
    (first, second), (calls1, calls2) = two_runs
    assert len([c for c in calls1 if "-shared" in c]) == 1
    assert [c for c in calls2 if "-shared" in c] == []
    assert second == first


def test_a_cached_second_run_starts_no_compiler_at_all(
    two_runs: tuple[list[str], list[list[str]]],
) -> None:
    assert two_runs[1][1] == []


# ---------------------------------------------------------------- presk dump --stage kernel

# The manual's text (the chapter on the kernel IR, `presk dump … --stage kernel`).
LINEAR_KERNELS_F32 = """\
-- 2 kernels, 2 launches, f32
-- fusion: 2 launches without it, 0 saved (0%)
kernel dot (%0 : f32[batch: 4, 3], %1 : f32[3, 2]) -> %2 : f32[batch: 4, 2] {
  for i0 in 0..4 {
    for i2 in 0..2 {
      %2[i0, i2] = 0
    }
    for i1 in 0..3 {
      s0 = %0[i0, i1]
      for i2 in 0..2 {
        %2[i0, i2] = (%2[i0, i2] + (s0 * %1[i1, i2]))
      }
    }
  }
}
kernel add (%0 : f32[batch: 4, 2], %1 : f32[2]) -> %2 : f32[batch: 4, 2] {
  for i0 in 0..4 {
    for i1 in 0..2 {
      %2[i0, i1] = (%0[i0, i1] + %1[i1])
    }
  }
}
"""


def test_dump_kernel_of_tutorial_01_matches_the_manual(presk: Presk) -> None:
    code, out, err = presk("dump", *LINEAR, "--stage", "kernel", "--realize", "f32")
    assert (code, err) == (0, "")
    assert out == LINEAR_KERNELS_F32


# ---------------------------------------------------------------- the conformance runner


def test_runner_synthesizes_the_inputs_of_presk_run(presk: Presk) -> None:
    from presk.commands.run import to_json

    doc = json.loads(_run(presk, *GRAD, "--json"))
    case = conf.Case("t", "tutorial/04_grad.psk", "loss_grad", (("D", "3"), ("B", "2")))
    loaded = conf.load(case)
    assert {n: to_json(v) for n, _, v in loaded.inputs} == doc["inputs"]
    reference, _ = conf.reference(loaded)
    assert json.loads(json.dumps(to_json(reference))) == doc["output"]


def test_programs_reach_every_primitive_and_adjoint() -> None:
    reached = set(conf.coverage(conf.program_cases()))
    assert conf.required() - reached == set()


def test_runner_accepts_ties_within_rounding_only() -> None:
    import gmpy2

    from presk.interp.tensor import Axis, Tensor

    def idx(values: list[int], n: int) -> Tensor:
        return Tensor.idx((Axis("a", len(values)),), values, n)

    with gmpy2.context(precision=256):
        x = Tensor.real((Axis("a", 2), Axis("b", 3)), [[1.0, 1.001, 0.5], [2.0, 1.0, 0.0]])
        ref = idx([1, 0], 3)
        records = [conf.Record("argmax", x, 1, ref)]
        # Row 0: 1.001 and 1.0 are a tie in bf16, not in f32; row 1 is no tie anywhere.
        near = conf.compare(ref, idx([0, 0], 3), "bf16", records)
        assert near.passed and len(near.notes) == 1
        assert not conf.compare(ref, idx([0, 0], 3), "f32", records).passed
        assert not conf.compare(ref, idx([1, 1], 3), "bf16", records).passed

        # Samples from p = (1/2, 1/2): u = 0.501 lies just past the first running sum,
        # within bf16's band of it and not f32's; u = 0.9 is far from every sum.
        logits = Tensor.real((Axis("r", 2), Axis("v", 2)), [[0.0, 0.0], [0.0, 0.0]])
        drawn = idx([1, 1], 2)
        records = [conf.Record("sample", logits, 1, drawn, [0.501, 0.9])]
        assert conf.compare(drawn, idx([0, 1], 2), "bf16", records).passed
        assert not conf.compare(drawn, idx([0, 1], 2), "f32", records).passed
        assert not conf.compare(drawn, idx([1, 0], 2), "bf16", records).passed
