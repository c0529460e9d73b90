"""benchmarks/peak.py: the exact-order ceiling's probe compiles, counts its flops, and
gives a ratio of unfused to fused throughput that a multiply and an add can reach."""

from __future__ import annotations

import platform
import shutil
import sys

import pytest
from conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None or platform.machine() != "x86_64", reason="x86-64 and a C compiler"
)
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import peak  # noqa: E402


def test_the_probe_counts_two_flops_a_lane_of_each_chain() -> None:
    from presk.build.compile import build
    from presk.build.load import load

    text = peak.c_text()
    assert "vfmadd231ps" in text and "vmulps" in text and "vaddps" in text
    lib = load(build(text), "long presk_peak(int fused, long n);").lib
    per_step = lib.presk_peak(0, 1)
    if per_step == 0:
        pytest.skip("neither AVX-512 nor AVX2 with FMA: the probe measures nothing here")
    assert per_step in (12 * 16 * 2, 8 * 8 * 2)  # AVX-512's 12 chains, or AVX2's 8
    assert lib.presk_peak(1, 10) == lib.presk_peak(0, 10) == 10 * per_step


def test_the_ceiling_is_a_share_of_the_fused_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peak, "ROUNDS", 2)
    monkeypatch.setattr(peak, "ITERATIONS", 200_000)
    monkeypatch.setattr(peak, "SETTLE_S", 0.0)
    got = peak.exact_order_ceiling()
    if got is None:
        pytest.skip("the probe measures nothing on this machine")
    unfused, fused, ratio = got
    assert unfused > 0 and fused > 0 and 0 < ratio <= 1
