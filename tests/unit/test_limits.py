"""Literals, exact constants, powers and deep programs finish in milliseconds.

Each case was a hang, an internal error or a "nested too deeply" refusal before: a value
or a diagnostic with a code and a span must come back, quickly.
"""

from __future__ import annotations

import sys
import threading
import time
from fractions import Fraction
from pathlib import Path

import gmpy2
import pytest
from conftest import run_presk

from presk.interp.tensor import HUGE_EXPONENT, exact_decimal, format_number
from presk.syntax import parser
from presk.syntax.deep import MAX_NESTING, call_deep
from presk.syntax.literals import LiteralRange, parse_literal

FN = "fn f(x : ℝ[3]) -> ℝ[3] =\n  "


def write(tmp_path: Path, text: str, name: str = "prog.psk") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def timed(*args: str) -> tuple[int, str, str, float]:
    start = time.perf_counter()
    code, out, err = run_presk(*args)
    return code, out, err, time.perf_counter() - start


# --- literals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["0", "7", "1.5", "1e-6", "2.50E+3", "0.000125", "1e1000", "1e-1000", "0e99999"]
)
def test_literals_are_exact(text: str) -> None:
    assert parse_literal(text) == Fraction(text)


@pytest.mark.parametrize(
    "text", ["1e1000000000", "1e-1000000000", "1e1001", "1e-1001", "7" * 5000, "1e" + "9" * 50]
)
def test_literals_out_of_range_are_refused_at_once(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(LiteralRange):
        parse_literal(text)
    assert time.perf_counter() - start < 0.05


@pytest.mark.parametrize(
    "value", ["1e1000000000", "1e-1000000000", "7" * 5000, "-1e99999999999999999999"]
)
def test_check_refuses_huge_literals_with_e0016(tmp_path: Path, value: str) -> None:
    code, _, err, seconds = timed("check", write(tmp_path, f"const C : f64 = {value}\n"))
    assert code == 1 and "[E0016]" in err and "internal error" not in err
    assert "prog.psk:1:" in err  # the box points at the literal
    assert seconds < 2


# --- exact constants --------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr", ["2^(10^9)", "10^100000", "(2^8000) * (2^8000)", "(1/3)^9000", "3^(2^64) / 7"]
)
def test_exact_constants_past_the_limit_are_e1011(tmp_path: Path, expr: str) -> None:
    code, _, err, seconds = timed("check", write(tmp_path, f"const C : f64 = {expr}\n"))
    assert code == 1 and "[E1011] Error: constant out of range" in err
    assert seconds < 2


def test_powers_of_zero_and_one_need_no_room(tmp_path: Path) -> None:
    source = (
        "const A : int = (-1)^(10^2000) + 1^(3^5000) + 0^(2^64) + (-1)^(10^2000 + 1)\n"
        "static assert A == 1\n"
    )
    code, _, err, seconds = timed("check", write(tmp_path, source))
    assert (code, err) == (0, "")
    assert seconds < 2


def test_a_constant_within_the_limit_still_prints_in_e1005(tmp_path: Path) -> None:
    # 2^8000 / 3 has 2409 digits: it must print (Python's str() stops at 4300).
    code, _, err, _ = timed("check", write(tmp_path, "const C : nat = 2^8000 / 3\n"))
    assert code == 1 and "[E1005]" in err and "internal error" not in err


# --- powers in the reference ------------------------------------------------------------


def test_a_huge_integer_power_runs_and_prints(tmp_path: Path) -> None:
    path = write(tmp_path, FN + "x^100000000\n")
    code, out, err, seconds = timed("run", path, "--entry", "f")
    assert code == 0, err
    # Seed 0 draws |x| > 1 for some element: its power is far past binary64's range.
    assert "e+" in out
    assert seconds < 5


def test_huge_values_print_like_the_exact_printer_would() -> None:
    with gmpy2.context(precision=256):
        tiny = gmpy2.mpfr(3) * gmpy2.mpfr(2) ** -100_000_000
        start = time.perf_counter()
        assert format_number(tiny, 12) == "8.14185071675e-30103000"
        assert format_number(-1 / tiny, 1) == "-1e+30102999"
        text = exact_decimal(tiny)
        assert time.perf_counter() - start < 0.1
        assert gmpy2.mpfr(text) == tiny  # reads back at the same precision
        # Just inside the exact range, the expansion is exact and long.
        near = gmpy2.mpfr(2) ** -(HUGE_EXPONENT - 8) / 7
        long_text = exact_decimal(near)
        sys_limit = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(0)
        try:
            assert Fraction(long_text) == Fraction(*near.as_integer_ratio())
        finally:
            sys.set_int_max_str_digits(sys_limit)


# --- deep programs ----------------------------------------------------------------------


def test_a_flat_sum_of_1000_terms_checks_and_runs(tmp_path: Path) -> None:
    path = write(tmp_path, FN + " + ".join(["x"] * 1000) + "\n")
    code, _, err = run_presk("check", path)
    assert (code, err) == (0, "")
    code, out, err = run_presk("run", path, "--entry", "f")
    assert code == 0, err
    assert "ℝ[3]" in out


def test_1000_nested_parentheses_check_and_run(tmp_path: Path) -> None:
    path = write(tmp_path, FN + "(" * 1000 + "x * 2" + ")" * 1000 + "\n")
    code, _, err = run_presk("check", path)
    assert (code, err) == (0, "")
    code, out, err = run_presk("run", path, "--entry", "f")
    assert code == 0, err
    assert "ℝ[3]" in out


def test_a_chain_of_500_imports_checks_and_runs(tmp_path: Path) -> None:
    n = 500
    for i in range(n):
        if i + 1 < n:
            body = f'import "m{i + 1}.psk" as m\nfn f(x : ℝ[3]) -> ℝ[3] =\n  m.f(x) + x\n'
        else:
            body = FN + "x\n"
        write(tmp_path, body, f"m{i}.psk")
    main = str(tmp_path / "m0.psk")
    code, _, err = run_presk("check", main)
    assert (code, err) == (0, "")
    code, out, err = run_presk("run", main, "--entry", "f")
    assert code == 0, err
    assert "ℝ[3]" in out


def test_nesting_past_the_limit_is_e0015(tmp_path: Path) -> None:
    path = write(tmp_path, FN + "- " * (MAX_NESTING + 1) + "x\n")
    code, _, err, seconds = timed("check", path)
    assert code == 1 and "[E0015] Error: expression nested too deeply" in err
    assert seconds < 10


def test_a_tree_past_the_height_limit_is_e0015(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parser, "MAX_DEPTH", 50)
    ok = write(tmp_path, FN + " + ".join(["x"] * 40) + "\n", "ok.psk")
    assert run_presk("check", ok)[0] == 0
    deep = write(tmp_path, FN + " + ".join(["x"] * 60) + "\n", "deep.psk")
    code, _, err = run_presk("check", deep)
    assert code == 1 and "[E0015]" in err and "more than 50 operations" in err


def test_call_deep_gives_room_and_passes_results_and_errors_through() -> None:
    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    assert call_deep(depth, 100_000) == 100_000
    with pytest.raises(ZeroDivisionError):
        call_deep(lambda: 1 // 0)
    # Nested calls run directly in the worker; the limit is restored afterwards.
    limit = sys.getrecursionlimit()
    names = call_deep(lambda: (threading.current_thread().name, call_deep(lambda: 1)))
    assert names == ("presk-deep", 1)
    assert sys.getrecursionlimit() == limit


# --- Presburger --------------------------------------------------------------------------


def test_a_static_assert_too_large_to_decide_is_e1012(tmp_path: Path) -> None:
    source = "dim N\ndim M\nstatic assert N * (10^20 + 39) != M * (10^20 + 41) + 7\n"
    code, _, err, seconds = timed("check", write(tmp_path, source))
    assert code == 1 and "[E1012]" in err
    assert seconds < 5


def test_decide_counts_its_steps() -> None:
    from presk.elab import presburger as pb

    n, m = pb.Lin.var("N"), pb.Lin.var("M")
    hard = pb.Cmp("!=", n * (10**20 + 39), m * (10**20 + 41) + 7)
    with pytest.raises(pb.Undecided):
        pb.decide(hard, ["N", "M"])
    # The counter starts afresh for each formula.
    assert pb.decide(pb.Cmp("<=", n, n + m), ["N", "M"]).valid
