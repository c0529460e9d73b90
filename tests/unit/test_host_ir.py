"""The host IR: frozen nodes, frames resolved when recorded, printed by cgen/host.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from presk.ad.reverse import differentiate
from presk.cgen import host as printer
from presk.host import ir as h
from presk.host.program import HTensor, record
from presk.host.realization import Realization
from presk.pipeline import front_end

PROGRAM = """
fn inner(x : ℝ[4]) -> ℝ[4] = exp(x) * 2
fn outer(x : ℝ[4], y : ℝ[4]) -> ℝ[4] =
  let s = x + y
  inner(s) + inner(x)
"""


@pytest.fixture()
def recorded(tmp_path: Path) -> h.Function:
    source = tmp_path / "p.psk"
    source.write_text(PROGRAM, encoding="utf-8")
    checked, _ = front_end(str(source), {})
    module = differentiate(checked.core)
    args = [HTensor("", "f64", ((None, 4),)), HTensor("", "f64", ((None, 4),))]
    host = record(module, "outer", {}, args, Realization("f64"))
    assert host.params == ("x", "y")
    return host.entry


def _walk(body: tuple[h.Stmt, ...]) -> list[h.Stmt]:
    out: list[h.Stmt] = []
    for s in body:
        out.append(s)
        if isinstance(s, h.Fold):
            out.extend(_walk(s.body))
    return out


def test_nodes_are_frozen_and_calls_sit_at_the_callers_frame_end(recorded: h.Function) -> None:
    entry = recorded
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.body[0].where = "x"  # type: ignore[union-attr, misc]
    calls = h.calls(entry.body)
    assert len(calls) == 2 and all(c.frame == entry.frame for c in calls)
    assert entry.callee_frame == max(inst.frame_bytes for inst, _ in entry.calls)
    offsets = [d.offset for d in entry.locals if isinstance(d, h.Alloc)]
    # Packed by lifetimes (host/frames.py): aligned, inside the frame, not in order.
    assert all(o % 64 == 0 and o < entry.frame for o in offsets)
    assert any(isinstance(s, h.Site) and s.name == "s" for s in entry.body)
    text = printer.function_c(entry)
    assert f"(frame + {entry.frame}, threads," in text and "FRAME_END" not in text


def test_every_node_prints() -> None:
    layer = h.Layer(h.Layer("in0", h.LoopVar("l2"), 16), h.LoopVar("l2", 1), 4)
    assert printer.ptr(layer) == "((in0 + l2 * 16) + (l2 + 1) * 4)"
    assert printer.ptr(h.Layer("in1", 3, 8)) == "(in1 + 3 * 8)"
    body: tuple[h.Stmt, ...] = (
        h.Site("f/%1", "a*/b"),
        h.Launch("presk_k0", ("in0", "t0")),
        h.Launch("presk_k1", ("t0", "t1"), split=6),
        h.Copy("p2a", "in0", 32),
        h.Fold(
            "l2",
            3,
            h.Order.FORWARD,
            (h.Call("presk_f1_g", 128, ("p2a", "p2b")), h.Swap("f32", "p2a", "p2b")),
        ),
        h.Fold("l2", 3, h.Order.ALL_BUT_LAST, (h.Call("presk_f1_g", 128, ("p2a",)),)),
        h.Fold("l2", 3, h.Order.BACKWARD, (h.Call("presk_f1_g", 128, ()),)),
    )
    lines = [line for s in body for line in printer.stmt(s)]
    assert lines[0] == "/* f/%1 (a* /b) */"
    assert "#pragma omp parallel num_threads(threads)" in lines
    assert "presk_k1(t0, t1, 0, 6);" in lines
    assert "for (int64_t l2 = 0; l2 < 3; l2++) {" in lines
    assert "    { float *swap = p2a; p2a = p2b; p2b = swap; }" in lines
    assert "for (int64_t l2 = 0; l2 + 1 < 3; l2++) {" in lines
    assert "for (int64_t l2 = 3 - 1; l2 >= 0; l2--) {" in lines
    assert "    presk_f1_g(frame + 128, threads);" in lines
    decls = [h.Alloc("t0", "bf16", 64), h.Accumulators("f64", "p2a", "p2b", "t1", "t2")]
    assert printer.local(decls[0]) == "uint16_t *t0 = (uint16_t *)(frame + 64);"
    assert printer.local(decls[1]) == "double *p2a = t1; double *p2b = t2;"
