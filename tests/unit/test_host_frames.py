"""Frames packed by buffer lifetimes (presk/host/frames.py)."""

from __future__ import annotations

from presk.host import ir as h
from presk.host.frames import pack


def _alloc(name: str) -> h.Alloc:
    return h.Alloc(name, "f32", -1)


def test_buffers_live_apart_share_bytes_and_buffers_live_together_do_not() -> None:
    locals_: list[h.Local] = [_alloc("a"), _alloc("b"), _alloc("c"), _alloc("d")]
    body: list[h.Stmt] = [
        h.Launch("k0", ("in0", "a")),  # a written
        h.Launch("k1", ("a", "b")),  # a read while b is written: apart
        h.Launch("k2", ("b", "c")),  # a is dead: c may take its bytes
        h.Launch("k3", ("c", h.Layer("d", 1, 16), "out0")),
    ]
    sizes = {"a": 64, "b": 128, "c": 64, "d": 64}
    packed, frame = pack(locals_, body, sizes)
    at = {x.name: x.offset for x in packed if isinstance(x, h.Alloc)}
    spans = {n: (at[n], at[n] + sizes[n]) for n in at}

    def apart(x: str, y: str) -> bool:
        return spans[x][1] <= spans[y][0] or spans[y][1] <= spans[x][0]

    assert apart("a", "b") and apart("b", "c") and apart("c", "d")
    assert at["c"] == at["a"] == 0  # the first dead buffer's bytes are taken again
    assert frame < sum(sizes.values())


def test_a_fold_keeps_its_body_and_accumulators_apart() -> None:
    locals_: list[h.Local] = [
        _alloc("x"),
        _alloc("y"),
        _alloc("t"),
        h.Accumulators("f32", "p0a", "p0b", "x", "y"),
    ]
    body: list[h.Stmt] = [
        h.Copy("p0a", "in0", 64),
        h.Fold(
            "l0", 3, h.Order.FORWARD, (h.Launch("k", ("p0a", "t")), h.Swap("f32", "p0a", "p0b"))
        ),
        h.Copy("out0", "p0a", 64),
    ]
    packed, _ = pack(locals_, body, {"x": 64, "y": 64, "t": 64})
    offsets = [x.offset for x in packed if isinstance(x, h.Alloc)]
    assert len(set(offsets)) == 3
    assert packed[-1] == locals_[-1]


def test_a_buffer_no_statement_names_takes_no_bytes() -> None:
    packed, frame = pack([_alloc("unused")], [h.Site("f/%1", None)], {"unused": 64})
    assert frame == 0 and packed == [h.Alloc("unused", "f32", 0)]
