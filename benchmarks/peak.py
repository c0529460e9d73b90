"""The exact-order ceiling: how fast one core multiplies and adds unfused, against fused.

Our products add each term as a rounded multiply followed by a rounded add (no FMA,
`-ffp-contract=off`), the bits of the reference; a BLAS issues one fused multiply-add a
term. Where the processor runs multiplies and adds on pipes of their own beside its FMA
pipes (AMD's Zen), the two forms reach the same flops a cycle. Where every one of them
takes the same two ports (Intel's cores with AVX-512), the unfused form does half the
flops a cycle, whatever its layout: that is the most an exact-order product can reach
against a BLAS on the machine, and `make bench-plans` prints it beside the GEMM's ratio.

Each probe runs independent chains of register-only vector instructions, in inline
assembly so that the compiler neither hoists the multiply nor fuses it (x86-64 only:
elsewhere the ceiling is not measured).
"""

from __future__ import annotations

import platform
import statistics
import time

from benchtools import SETTLE_S

ROUNDS = 15
ITERATIONS = 4_000_000

# One step of chain i: t = x·y, acc_i = acc_i + t (unfused), or acc_i = x·y + acc_i (fused).
# AVX-512: 12 chains in zmm0–11, x and y in zmm30–31, products in zmm16–19 (renamed);
# AVX2: 8 chains in ymm0–7, x and y in ymm14–15, products in ymm8–11.
# Each: the macro that says the compiler targets it, its registers, chains, x and y, the
# first product register.
_ISAS = (("__AVX512F__", "zmm", 12, (30, 31), 16), ("__AVX2__", "ymm", 8, (14, 15), 8))


def _asm(lines: list[str], regs: list[int]) -> str:
    body = "".join(f'"{line}\\n"' for line in lines)
    clobbers = ", ".join(f'"xmm{r}"' for r in regs)
    return f"__asm__ volatile({body} ::: {clobbers});"


def _zero(reg: str, chains: int, xy: tuple[int, int], tmp: int) -> str:
    """Every register the steps use set to zero first: what they held may be a
    subnormal, which the multiplier takes a slow path for."""
    regs = [*range(chains), *xy, *range(tmp, tmp + 4)]
    xor = "vpxord" if reg == "zmm" else "vpxor"  # AVX-512F, AVX2
    return _asm([f"{xor} %%{reg}{r}, %%{reg}{r}, %%{reg}{r}" for r in regs], regs)


def _steps(reg: str, chains: int, xy: tuple[int, int], tmp: int, fused: bool) -> str:
    x, y = xy
    lines = []
    for i in range(chains):
        if fused:
            lines.append(f"vfmadd231ps %%{reg}{x}, %%{reg}{y}, %%{reg}{i}")
        else:
            t = tmp + i % 4
            lines.append(f"vmulps %%{reg}{x}, %%{reg}{y}, %%{reg}{t}")
            lines.append(f"vaddps %%{reg}{t}, %%{reg}{i}, %%{reg}{i}")
    return _asm(lines, [*range(chains), *range(tmp, tmp + 4)])


def c_text() -> str:
    """One unit with `presk_peak(fused, n)`: n steps of every chain; returns the flops
    (0 where the machine has neither AVX-512 nor AVX2 with FMA)."""
    parts = ["long presk_peak(int fused, long n) {"]
    first = True
    for guard, reg, chains, xy, tmp in _ISAS:
        parts.append(f"#{'if' if first else 'elif'} defined({guard}) && defined(__FMA__)")
        lanes = 16 if reg == "zmm" else 8
        parts.append(f"  {_zero(reg, chains, xy, tmp)}")
        fma, plain = (_steps(reg, chains, xy, tmp, f) for f in (True, False))
        parts.append(
            f"  for (long i = 0; i < n; i++) {{ if (fused) {{ {fma} }} else {{ {plain} }} }}"
        )
        parts.append(f"  return n * {chains} * {lanes} * 2;")
        first = False
    parts += ["#else", "  (void)fused; (void)n; return 0;", "#endif", "}"]
    return "\n".join(parts) + "\n"


def exact_order_ceiling() -> tuple[float, float, float] | None:
    """(unfused GFLOP/s, fused GFLOP/s, best of ROUNDS each; the median over the rounds of
    their ratio, capped at 1) on one core; None off x86-64 or without a vector unit the
    probe knows. The two run back to back in each round, so that a neighbour slowing the
    machine for a while moves both sides of a round's ratio."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    from presk.build.compile import build
    from presk.build.load import load

    lib = load(build(c_text()), "long presk_peak(int fused, long n);").lib
    if lib.presk_peak(0, 1) == 0:
        return None

    def rate(fused: int) -> float:
        start = time.perf_counter()
        flops = lib.presk_peak(fused, ITERATIONS)
        return flops / (time.perf_counter() - start) / 1e9

    best, ratios = [0.0, 0.0], []
    for _ in range(ROUNDS):
        time.sleep(SETTLE_S)
        pair = [rate(0), rate(1)]
        best = [max(b, r) for b, r in zip(best, pair, strict=True)]
        ratios.append(pair[0] / pair[1])
    return best[0], best[1], min(1.0, statistics.median(ratios))
