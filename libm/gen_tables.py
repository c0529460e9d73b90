#!/usr/bin/env python3
"""Generate (and check) the lookup tables embedded in libm/musl/presk_libm.c.

The tables are the ones musl (>= 1.1.20, via ARM's optimized-routines) uses for
exp/expf/log/logf and for the Payne-Hanek reduction of sin/cos.  Most entries are
pure functions of well-known constants and are computed here from scratch with
MPFR (gmpy2) at 4000 bits:

  * exp:   2^(k/128) ~= H[k]*(1+T[k]);  tab[2k] = bits(T[k]),
           tab[2k+1] = bits(H[k]) - (k << 45)                     (k = 0..127)
  * expf:  tab[k] = bits(RN(2^(k/32))) - (k << 47)                 (k = 0..31)
  * log:   for the chosen reciprocal invc of each of the 128 subintervals
           c = 1/invc,  logc = RN(log c),  chi = RN(c),  clo = RN(c - chi)
  * logf:  for the chosen invc of each of the 16 subintervals, logc = RN(log c)
  * ipio2: the 24-bit digits of 2/pi (66 of them suffice for double inputs)
  * PIo2:  pi/2 cut into 24-bit pieces
  * tanh:  presk's own polynomial for |x| < 0.5493 (musl's tanh is not within
           1 ulp there), fitted here with mpmath; see tanh_poly()

Only the log/logf reciprocals ("seeds") are inputs: ARM chose each invc by a
search (+-2^29 candidates around 1/center) so that logc is exact enough and
k*ln2hi + logc is exact; re-running that search would take CPU-days and could pick
other, equally valid, candidates, so the chosen values are listed here (copied
from musl's log_data.c / logf_data.c) and the script re-derives everything else
and re-checks the properties the selection guarantees.

Usage:
  python libm/gen_tables.py            print the generated C block
  python libm/gen_tables.py --write    rewrite the block inside presk_libm.c
  python libm/gen_tables.py --check    exit 1 unless presk_libm.c holds exactly this block
  python libm/gen_tables.py --musl-libc /usr/lib/x86_64-linux-musl/libc.a
        additionally compare every table with the installed musl's binary data
        (needs binutils' ar and objcopy)
"""

from __future__ import annotations

import argparse
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import gmpy2
from gmpy2 import mpfr

HERE = Path(__file__).resolve().parent
TARGET = HERE / "musl" / "presk_libm.c"
BEGIN = "/* BEGIN GENERATED TABLES: libm/gen_tables.py --write; do not edit by hand. */"
END = "/* END GENERATED TABLES */"

CTX = gmpy2.context(precision=4000)
gmpy2.set_context(CTX)

# log: invc for each of the 128 subintervals of [0x1.6p-1, 0x1.6p0] (musl log_data.c).
LOG_INVC = [
    float.fromhex(s)
    for s in (
        "0x1.734f0c3e0de9fp+0",
        "0x1.713786a2ce91fp+0",
        "0x1.6f26008fab5a0p+0",
        "0x1.6d1a61f138c7dp+0",
        "0x1.6b1490bc5b4d1p+0",
        "0x1.69147332f0cbap+0",
        "0x1.6719f18224223p+0",
        "0x1.6524f99a51ed9p+0",
        "0x1.63356aa8f24c4p+0",
        "0x1.614b36b9ddc14p+0",
        "0x1.5f66452c65c4cp+0",
        "0x1.5d867b5912c4fp+0",
        "0x1.5babccb5b90dep+0",
        "0x1.59d61f2d91a78p+0",
        "0x1.5805612465687p+0",
        "0x1.56397cee76bd3p+0",
        "0x1.54725e2a77f93p+0",
        "0x1.52aff42064583p+0",
        "0x1.50f22dbb2bddfp+0",
        "0x1.4f38f4734ded7p+0",
        "0x1.4d843cfde2840p+0",
        "0x1.4bd3ec078a3c8p+0",
        "0x1.4a27fc3e0258ap+0",
        "0x1.4880524d48434p+0",
        "0x1.46dce1b192d0bp+0",
        "0x1.453d9d3391854p+0",
        "0x1.43a2744b4845ap+0",
        "0x1.420b54115f8fbp+0",
        "0x1.40782da3ef4b1p+0",
        "0x1.3ee8f5d57fe8fp+0",
        "0x1.3d5d9a00b4ce9p+0",
        "0x1.3bd60c010c12bp+0",
        "0x1.3a5242b75dab8p+0",
        "0x1.38d22cd9fd002p+0",
        "0x1.3755bc5847a1cp+0",
        "0x1.35dce49ad36e2p+0",
        "0x1.34679984dd440p+0",
        "0x1.32f5cceffcb24p+0",
        "0x1.3187775a10d49p+0",
        "0x1.301c8373e3990p+0",
        "0x1.2eb4ebb95f841p+0",
        "0x1.2d50a0219a9d1p+0",
        "0x1.2bef9a8b7fd2ap+0",
        "0x1.2a91c7a0c1babp+0",
        "0x1.293726014b530p+0",
        "0x1.27dfa5757a1f5p+0",
        "0x1.268b39b1d3bbfp+0",
        "0x1.2539d838ff5bdp+0",
        "0x1.23eb7aac9083bp+0",
        "0x1.22a012ba940b6p+0",
        "0x1.2157996cc4132p+0",
        "0x1.201201dd2fc9bp+0",
        "0x1.1ecf4494d480bp+0",
        "0x1.1d8f5528f6569p+0",
        "0x1.1c52311577e7cp+0",
        "0x1.1b17c74cb26e9p+0",
        "0x1.19e010c2c1ab6p+0",
        "0x1.18ab07bb670bdp+0",
        "0x1.1778a25efbcb6p+0",
        "0x1.1648d354c31dap+0",
        "0x1.151b990275fddp+0",
        "0x1.13f0ea432d24cp+0",
        "0x1.12c8b7210f9dap+0",
        "0x1.11a3028ecb531p+0",
        "0x1.107fbda8434afp+0",
        "0x1.0f5ee0f4e6bb3p+0",
        "0x1.0e4065d2a9fcep+0",
        "0x1.0d244632ca521p+0",
        "0x1.0c0a77ce2981ap+0",
        "0x1.0af2f83c636d1p+0",
        "0x1.09ddb98a01339p+0",
        "0x1.08cabaf52e7dfp+0",
        "0x1.07b9f2f4e28fbp+0",
        "0x1.06ab58c358f19p+0",
        "0x1.059eea5ecf92cp+0",
        "0x1.04949cdd12c90p+0",
        "0x1.038c6c6f0ada9p+0",
        "0x1.02865137932a9p+0",
        "0x1.0182427ea7348p+0",
        "0x1.008040614b195p+0",
        "0x1.fe01ff726fa1ap-1",
        "0x1.fa11cc261ea74p-1",
        "0x1.f6310b081992ep-1",
        "0x1.f25f63ceeadcdp-1",
        "0x1.ee9c8039113e7p-1",
        "0x1.eae8078cbb1abp-1",
        "0x1.e741aa29d0c9bp-1",
        "0x1.e3a91830a99b5p-1",
        "0x1.e01e009609a56p-1",
        "0x1.dca01e577bb98p-1",
        "0x1.d92f20b7c9103p-1",
        "0x1.d5cac66fb5ccep-1",
        "0x1.d272caa5ede9dp-1",
        "0x1.cf26e3e6b2ccdp-1",
        "0x1.cbe6da2a77902p-1",
        "0x1.c8b266d37086dp-1",
        "0x1.c5894bd5d5804p-1",
        "0x1.c26b533bb9f8cp-1",
        "0x1.bf583eeece73fp-1",
        "0x1.bc4fd75db96c1p-1",
        "0x1.b951e0c864a28p-1",
        "0x1.b65e2c5ef3e2cp-1",
        "0x1.b374867c9888bp-1",
        "0x1.b094b211d304ap-1",
        "0x1.adbe885f2ef7ep-1",
        "0x1.aaf1d31603da2p-1",
        "0x1.a82e63fd358a7p-1",
        "0x1.a5740ef09738bp-1",
        "0x1.a2c2a90ab4b27p-1",
        "0x1.a01a01393f2d1p-1",
        "0x1.9d79f24db3c1bp-1",
        "0x1.9ae2505c7b190p-1",
        "0x1.9852ef297ce2fp-1",
        "0x1.95cbaeea44b75p-1",
        "0x1.934c69de74838p-1",
        "0x1.90d4f2f6752e6p-1",
        "0x1.8e6528effd79dp-1",
        "0x1.8bfce9fcc007cp-1",
        "0x1.899c0dabec30ep-1",
        "0x1.87427aa2317fbp-1",
        "0x1.84f00acb39a08p-1",
        "0x1.82a49e8653e55p-1",
        "0x1.8060195f40260p-1",
        "0x1.7e22563e0a329p-1",
        "0x1.7beb377dcb5adp-1",
        "0x1.79baa679725c2p-1",
        "0x1.77907f2170657p-1",
        "0x1.756cadbd6130cp-1",
    )
]

# logf: invc for each of the 16 subintervals of [0x1.66p-1, 0x1.66p0] (musl logf_data.c).
LOGF_INVC = [
    float.fromhex(s)
    for s in (
        "0x1.661ec79f8f3bep+0",
        "0x1.571ed4aaf883dp+0",
        "0x1.49539f0f010bp+0",
        "0x1.3c995b0b80385p+0",
        "0x1.30d190c8864a5p+0",
        "0x1.25e227b0b8eap+0",
        "0x1.1bb4a4a1a343fp+0",
        "0x1.12358f08ae5bap+0",
        "0x1.0953f419900a7p+0",
        "0x1p+0",
        "0x1.e608cfd9a47acp-1",
        "0x1.ca4b31f026aap-1",
        "0x1.b2036576afce6p-1",
        "0x1.9c2d163a1aa2dp-1",
        "0x1.886e6037841edp-1",
        "0x1.767dcf5534862p-1",
    )
]


def bits(x: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", x))[0])


def from_bits(b: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", b & (2**64 - 1)))[0])


def rn(v: object) -> float:
    """Round an mpfr to the nearest double (ties to even)."""
    return float(gmpy2.mpfr(v))  # gmpy2 converts with MPFR_RNDN


def exp_table() -> list[int]:
    n = 128
    out: list[int] = []
    for k in range(n):
        e = gmpy2.exp2(mpfr(k) / n)
        h = rn(e)
        t = rn((e - mpfr(h)) / mpfr(h))
        out.append(bits(t))
        out.append((bits(h) - (k << 45)) % 2**64)
    return out


def exp2f_table() -> list[int]:
    n = 32
    return [(bits(rn(gmpy2.exp2(mpfr(k) / n))) - (k << 47)) % 2**64 for k in range(n)]


def log_table() -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    tab, tab2 = [], []
    for i, invc in enumerate(LOG_INVC):
        c = 1 / mpfr(invc)
        logc = rn(gmpy2.log(c))
        chi = rn(c)
        clo = rn(c - mpfr(chi))
        # The properties the seed selection guarantees (see musl log_data.c):
        # 1) 0x1.8p9 + logc is exact, so k*ln2hi + logc has no rounding error;
        assert float.fromhex("0x1.8p9") + logc - float.fromhex("0x1.8p9") == logc, i
        # 2) chi + clo represents c to better than 2^-66 (relative to 1);
        assert abs(c - mpfr(chi) - mpfr(clo)) < mpfr(2) ** -66, i
        # 3) logc is within 2^-66 of log(c) (much better than a plain rounding).
        assert abs(gmpy2.log(c) - mpfr(logc)) < mpfr(2) ** -66, i
        tab.append((invc, logc))
        tab2.append((chi, clo))
    return tab, tab2


def logf_table() -> list[tuple[float, float]]:
    out = []
    for i, invc in enumerate(LOGF_INVC):
        logc = rn(gmpy2.log(1 / mpfr(invc)))
        assert abs(gmpy2.log(1 / mpfr(invc)) - mpfr(logc)) < mpfr(2) ** -28, i
        out.append((invc, logc))
    return out


def ipio2_table(count: int = 66) -> list[int]:
    two_over_pi = 2 / gmpy2.const_pi()
    return [
        int(gmpy2.floor(two_over_pi * mpfr(2) ** (24 * (i + 1)))) % (1 << 24) for i in range(count)
    ]


def pio2_table() -> list[float]:
    rem = gmpy2.const_pi() / 2
    out = []
    for i in range(8):
        scale = mpfr(2) ** (24 * i + 23)
        piece = gmpy2.floor(rem * scale) / scale
        out.append(float(piece))  # exact: 24 significant bits
        rem -= piece
    return out


TANH_POLY_DEGREE = 10
TANH_POLY_BOUND = float.fromhex("0x1.193ebp-1")  # presk_tanh uses the polynomial below this


def tanh_poly() -> tuple[list[float], float]:
    """g(z) ~= (tanh(x) - x) / x^3 with z = x^2, for 0 <= x < TANH_POLY_BOUND.

    Not from musl (whose tanh has errors up to 2 ulp): a degree-10 polynomial in
    z interpolating g at Chebyshev nodes, computed with mpmath at 300 bits and
    rounded to double.  Returns the coefficients (lowest first) and log2 of the
    maximum relative error of the rounded polynomial on a dense grid."""
    import mpmath as mp

    with mp.workprec(300):
        b = mp.mpf(TANH_POLY_BOUND) ** 2
        d = TANH_POLY_DEGREE

        def g(z: object) -> object:
            x = mp.sqrt(z)
            return (mp.tanh(x) - x) / x**3

        nodes = [b / 2 * (1 + mp.cos(mp.pi * (j + mp.mpf(1) / 2) / (d + 1))) for j in range(d + 1)]
        a = mp.matrix([[z**k for k in range(d + 1)] for z in nodes])
        c = mp.lu_solve(a, mp.matrix([g(z) for z in nodes]))
        coef = [float(c[k]) for k in range(d + 1)]
        worst = mp.mpf(0)
        for i in range(1, 1001):
            z = b * i / 1000
            p = mp.mpf(0)
            for k in reversed(range(d + 1)):
                p = p * z + mp.mpf(coef[k])
            worst = max(worst, abs(p / g(z) - 1))
        err = float(mp.log(worst, 2))
    assert err < -53.0, err
    return coef, err


def hexd(x: float) -> str:
    if x == 0:
        return "0x0p+0"
    return x.hex()


def render() -> str:
    lines = [BEGIN]
    et = exp_table()
    lines.append(
        "/* exp: 2^(k/128) ~= asdouble(tab[2k+1] + (k << 45)) * (1 + asdouble(tab[2k])). */"
    )
    lines.append("static const uint64_t EXP_TAB[256] = {")
    for k in range(0, 256, 2):
        lines.append(f"\t0x{et[k]:016x}, 0x{et[k + 1]:016x},")
    lines.append("};")
    ft = exp2f_table()
    lines.append("/* expf: 2^(k/32) == asdouble(tab[k] + (k << 47)). */")
    lines.append("static const uint64_t EXP2F_TAB[32] = {")
    for k in range(0, 32, 4):
        lines.append("\t" + " ".join(f"0x{v:016x}," for v in ft[k : k + 4]))
    lines.append("};")
    tab, tab2 = log_table()
    lines.append(
        "/* log: {invc, logc = RN(log(1/invc))} and {chi, clo} = 1/invc as a double-double. */"
    )
    lines.append("static const struct { double invc, logc; } LOG_TAB[128] = {")
    for invc, logc in tab:
        lines.append(f"\t{{{hexd(invc)}, {hexd(logc)}}},")
    lines.append("};")
    lines.append("static const struct { double chi, clo; } LOG_TAB2[128] = {")
    for chi, clo in tab2:
        lines.append(f"\t{{{hexd(chi)}, {hexd(clo)}}},")
    lines.append("};")
    lines.append("/* logf: {invc, logc = RN(log(1/invc))}. */")
    lines.append("static const struct { double invc, logc; } LOGF_TAB[16] = {")
    for invc, logc in logf_table():
        lines.append(f"\t{{{hexd(invc)}, {hexd(logc)}}},")
    lines.append("};")
    tp, terr = tanh_poly()
    lines.append(
        f"/* tanh: (tanh(x) - x)/x^3 ~= sum TANH_P[k] x^(2k) for |x| < {TANH_POLY_BOUND.hex()};"
    )
    lines.append(
        f"   Chebyshev interpolant, degree {TANH_POLY_DEGREE}, max relative error 2^{terr:.2f}. */"
    )
    lines.append(f"static const double TANH_P[{len(tp)}] = {{")
    for v in tp:
        lines.append(f"\t{hexd(v)},")
    lines.append("};")
    ip = ipio2_table()
    lines.append("/* The 24-bit digits of 2/pi, for the large-argument reduction. */")
    lines.append("static const int32_t IPIO2[66] = {")
    for k in range(0, 66, 6):
        lines.append("\t" + " ".join(f"0x{v:06X}," for v in ip[k : k + 6]))
    lines.append("};")
    lines.append("/* pi/2 in pieces of 24 significant bits. */")
    lines.append("static const double PIO2_PIECES[8] = {")
    for v in pio2_table():
        lines.append(f"\t{hexd(v)},")
    lines.append("};")
    lines.append(END)
    return "\n".join(lines) + "\n"


def current_block(text: str) -> str:
    a = text.index(BEGIN)
    b = text.index(END) + len(END) + 1
    return text[a:b]


def compare_with_musl(libc_a: Path) -> int:
    """Compare every generated table with the installed musl's rodata."""

    def section(member: str, name: str) -> bytes:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(["ar", "x", str(libc_a), member], cwd=d, check=True)
            out = Path(d) / "sec.bin"
            subprocess.run(
                ["objcopy", "-O", "binary", f"--only-section={name}", member, str(out)],
                cwd=d,
                check=True,
            )
            return out.read_bytes()

    bad = 0

    def check(what: str, ours: list[int], theirs: list[int]) -> None:
        nonlocal bad
        diff = sum(1 for a, b in zip(ours, theirs, strict=True) if a != b)
        print(f"{what:>14}: {len(ours)} entries, {diff} differ from musl")
        bad += diff

    d = section("exp_data.lo", ".rodata.__exp_data")
    q = struct.unpack(f"<{len(d) // 8}Q", d)
    check("exp tab", exp_table(), list(q[14 : 14 + 256]))
    d = section("exp2f_data.lo", ".rodata.__exp2f_data")
    q = struct.unpack(f"<{len(d) // 8}Q", d)
    check("exp2f tab", exp2f_table(), list(q[:32]))
    d = section("log_data.lo", ".rodata.__log_data")
    q = struct.unpack(f"<{len(d) // 8}Q", d)
    tab, tab2 = log_table()
    check("log tab", [bits(v) for p in tab for v in p], list(q[18 : 18 + 256]))
    check("log tab2", [bits(v) for p in tab2 for v in p], list(q[18 + 256 : 18 + 512]))
    d = section("logf_data.lo", ".rodata.__logf_data")
    q = struct.unpack(f"<{len(d) // 8}Q", d)
    check("logf tab", [bits(v) for p in logf_table() for v in p], list(q[:32]))
    d = section("__rem_pio2_large.lo", ".rodata.ipio2")
    ii = struct.unpack(f"<{len(d) // 4}i", d)
    check("ipio2", ipio2_table(), list(ii[:66]))
    d = section("__rem_pio2_large.lo", ".rodata.PIo2")
    check("PIo2", [bits(v) for v in pio2_table()], list(struct.unpack("<8Q", d)))
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the block in presk_libm.c")
    ap.add_argument("--check", action="store_true", help="verify the block in presk_libm.c")
    ap.add_argument("--musl-libc", type=Path, help="also compare with this musl libc.a")
    args = ap.parse_args()
    block = render()
    rc = 0
    if args.write:
        text = TARGET.read_text()
        TARGET.write_text(text.replace(current_block(text), block))
        print(f"wrote tables into {TARGET}")
    elif args.check:
        if current_block(TARGET.read_text()) != block:
            print(f"{TARGET}: generated tables are stale or edited; run --write")
            rc = 1
        else:
            print(f"{TARGET}: tables match the generator")
    elif not args.musl_libc:
        sys.stdout.write(block)
    if args.musl_libc:
        rc |= 1 if compare_with_musl(args.musl_libc) else 0
    return rc


if __name__ == "__main__":
    sys.exit(main())
