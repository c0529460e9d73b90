"""`presk bench --by-kernel`: each kernel's and site's time, from an instrumented build.

The instrumented build is the plain C text with each launch between two
clock reads (Note [Profile] in presk/cgen/host.py): its outputs keep their
bits, and with the option off the C text is the ordinary one, byte for byte.
"""

from __future__ import annotations

import re

import pytest

from presk.cgen.host import PrintOptions
from presk.cgen.program import print_unit
from presk.commands.bench import _counters
from presk.commands.common import choose_entry
from presk.host import ir as h
from presk.host.realization import Realization
from presk.interp.synth import draw_inputs
from presk.pipeline import (
    CompiledEntry,
    Request,
    compile_entry,
    front_end,
    lower_entry,
    run_back_end,
)
from tests.conftest import run_presk

TOWER = "tests/ad/tower_grad.psk"
ROW = re.compile(r"(presk_k\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\S.*)")


ATTEND = ("tutorial/03_attention.psk", "attend", ["B=4", "T=32"])  # split launches at 2 workers


def _request(
    threads: int = 1,
    profile: bool | None = None,
    program: tuple[str, str, list[str]] = (TOWER, "loss_grad", ["B=3"]),
) -> Request:
    path, entry, dims = program
    checked, _ = front_end(path, {})
    chosen = choose_entry(checked, entry, dims)
    extra = {} if profile is None else {"profile": profile}
    return Request(checked, chosen.entry, chosen.binding, Realization("f32"), threads, **extra)


def _launches(body: tuple[h.Stmt, ...]) -> int:
    return sum(
        1 if isinstance(s, h.Launch) else _launches(s.body) if isinstance(s, h.Fold) else 0
        for s in body
    )


def test_the_table_lists_every_kernel_and_the_shares_sum_to_100() -> None:
    code, out, err = run_presk(
        "bench", TOWER, "--entry", "loss_grad", "--dim", "B=3", "--by-kernel", "--repeat", "2",
        "--threads", "1",
    )  # fmt: skip
    assert code == 0, err
    rows = [m.groups() for line in out.splitlines() if (m := ROW.fullmatch(line))]
    host = lower_entry(_request()).host
    assert host is not None
    assert sorted(name for name, *_ in rows) == sorted(name for name, _ in host.kernels)
    assert abs(sum(float(share) for *_, share, _ in rows) - 100) < 0.05 * len(rows) + 0.1
    times = [float(ms) for _, _, ms, _, _ in rows]
    assert times == sorted(times, reverse=True)
    # Each kernel's sites are among those the recording names for it.
    for name, _, _, _, sites in rows:
        assert set(sites.split(", ")) <= set(host.sites[name]), name
    # One call launches what the host program's statements launch, folds counted per layer.
    assert all(int(launches) >= 1 for _, launches, *_ in rows)
    assert "byte for byte" in out.splitlines()[-1] and "DIFFER" not in out
    assert re.search(r"^site\s+launches", out, re.MULTILINE)


@pytest.mark.parametrize("threads, split", [(1, False), (2, False), (2, True)])
def test_the_instrumented_bits_are_the_plain_ones(threads: int, split: bool) -> None:
    request = _request(threads, profile=True, **({"program": ATTEND} if split else {}))
    state = run_back_end(request)
    assert state.unit is not None and state.host is not None and state.library is not None
    # A split launch is timed around its parallel region (built with OpenMP).
    assert bool(state.host.splits) == split
    assert state.layouts is not None
    profiled = CompiledEntry(
        state.unit, state.host, state.library, request.realization, threads, state.layouts
    )
    plain = compile_entry(
        request.checked, request.entry, request.binding, request.realization, threads
    )
    info = request.entry.info
    drawn = draw_inputs(info.params, request.dims, request.binding.prefix, 0)
    a, b = profiled.bind(drawn), plain.bind(drawn)
    ns, calls = _counters(profiled)
    ns[:] = 0
    calls[:] = 0
    assert a.invoke() == 0 and b.invoke() == 0
    assert [x.tobytes() for x in a.outputs] == [x.tobytes() for x in b.outputs]
    # Every launch statement has its counter, and each ran at least once.
    statements = sum(_launches(f.body) for f in state.host.functions)
    assert len(profiled.unit.profile) == statements == len(calls)
    assert (calls >= 1).all() and ns.sum() > 0
    assert profiled.unit.text.count("presk__prof_calls[") == statements + 1


def test_the_plain_text_is_unchanged_with_the_option_off() -> None:
    default = lower_entry(_request()).unit
    off = lower_entry(_request(profile=False)).unit
    on_state = lower_entry(_request(profile=True))
    assert default is not None and off is not None and on_state.unit is not None
    assert default.text == off.text and default.cdef == off.cdef and off.profile == ()
    assert on_state.host is not None
    request = _request()
    names = [n for n, _, _ in request.entry.info.params]
    explicit = print_unit(on_state.host, request.entry.info.name, names, "", PrintOptions())
    assert explicit.text == default.text
    for needle in ("presk__", "clock_gettime", "_POSIX_C_SOURCE"):
        assert needle not in default.text
    on = on_state.unit
    assert on.text != default.text and on.kernels == default.kernels
    assert (
        on.cdef == default.cdef + f"int64_t {on.symbol}__profile(int64_t **ns, int64_t **calls);\n"
    )


def test_realize_needs_by_kernel_and_a_bad_one_is_one_line() -> None:
    base = ("bench", TOWER, "--entry", "loss_grad", "--dim", "B=3")
    code, out, err = run_presk(*base, "--realize", "f64", "--native-only")
    assert code == 2 and out == "" and "--by-kernel" in err and len(err.splitlines()) == 1
    code, out, err = run_presk(*base, "--by-kernel", "--realize", "f16")
    assert code != 0 and out == "" and "Traceback" not in err and "internal error" not in err
