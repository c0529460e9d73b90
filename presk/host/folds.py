"""Folds over stacked layers, recorded as host loops (a mixin of program.py's `_Body`).

A fold is a loop over layers with its value in two buffers used in turn. Its
reverse either runs the layers forward again keeping each input and then
walks back (`fold_vjp`, the recompute form), or reads what `fold_fwd` kept:
every layer's input and residuals, in stacks, for `fold_bwd`.
"""

from __future__ import annotations

from typing import Protocol

from presk.core import ir as core
from presk.elab.presburger import Lin
from presk.host import ir as h
from presk.host.ir import Axes, Function, HTensor, HValue
from presk.host.values import HostError, concrete, layer_of, nbytes, stacked_like


class Instances(Protocol):
    folds: int

    def instance(self, name: str, dims: dict[str, int], args: list[HValue]) -> Function: ...


class FoldHost(Protocol):
    """What recording a fold needs of the function body it is in."""

    @property
    def rec(self) -> Instances: ...

    dims: dict[str, int]
    locals: list[h.Local]

    def alloc(self, dtype: str, axes: Axes) -> HTensor: ...

    def emit(self, stmt: h.Stmt) -> None: ...

    def _call(self, inst: Function, args: list[HValue], outs: HValue, times: int = 1) -> h.Call: ...

    def _accumulators(self, prefix: str, like: HTensor) -> tuple[str, str]: ...

    def _outputs_like(self, template: HValue) -> HValue: ...


class FoldRecording:
    """The fold statements of a function body."""

    def fold(
        self: FoldHost,
        instr: core.Instr,
        callee: str,
        call_dims: tuple[tuple[str, Lin], ...],
        stacked: HValue,
        count: Lin,
        init: HValue,
    ) -> HValue:
        if not isinstance(init, HTensor):
            raise HostError("a fold over a value that is not a tensor")
        layers, dims, loop = _laps(self, count, call_dims)
        layer = layer_of(stacked, h.LoopVar(loop))
        inst = self.rec.instance(callee, dims, [layer, init])
        cur, nxt = self._accumulators("p", init)
        dtype, axes = init.dtype, init.axes
        self.emit(h.Copy(cur, init.ptr, nbytes(init)))
        step = self._call(
            inst, [layer, HTensor(cur, dtype, axes)], HTensor(nxt, dtype, axes), layers
        )
        body = (step, h.Swap(dtype, cur, nxt))
        self.emit(h.Fold(loop, layers, h.Order.FORWARD, body))
        self.rec.folds += 1
        return HTensor(cur, dtype, axes)

    def fold_vjp(
        self: FoldHost,
        instr: core.Instr,
        vjp: str,
        forward: str,
        call_dims: tuple[tuple[str, Lin], ...],
        stacked: HValue,
        count: Lin,
        init: HValue,
        ct: HValue,
    ) -> HValue:
        if not isinstance(init, HTensor) or not isinstance(ct, HTensor):
            raise HostError("the reverse of a fold over a value that is not a tensor")
        layers, dims, loop = _laps(self, count, call_dims)
        if layers == 0:
            # No layer: the stacked adjoint is empty and the cotangent passes through.
            return (self._outputs_like(stacked), ct)
        layer = layer_of(stacked, h.LoopVar(loop))
        # Each layer's input, kept for the way back.
        xs, x_at, x_next = _input_stack(self, init, layers, loop)
        fwd = self.rec.instance(forward, dims, [layer, x_at])
        back = self.rec.instance(vjp, dims, [layer, x_at, ct])
        self.emit(h.Copy(xs.ptr, init.ptr, nbytes(init)))
        forward_step = self._call(fwd, [layer, x_at], x_next, layers - 1)
        self.emit(h.Fold(loop, layers, h.Order.ALL_BUT_LAST, (forward_step,)))
        self.rec.folds += 1
        return _walk_back(self, back, loop, layers, [layer, x_at], ct)

    def fold_fwd(
        self: FoldHost,
        fwd: str,
        call_dims: tuple[tuple[str, Lin], ...],
        stacked: HValue,
        count: Lin,
        init: HValue,
    ) -> HValue:
        """A fold's layers through their `.fwd`, every input and residual kept in a stack."""
        if not isinstance(init, HTensor):
            raise HostError("a fold over a value that is not a tensor")
        layers, dims, loop = _laps(self, count, call_dims)
        # Layer l's input at row l; the last row is the fold's value.
        xs, x_at, x_next = _input_stack(self, init, layers + 1, loop)
        layer = layer_of(stacked, h.LoopVar(loop))
        inst = self.rec.instance(fwd, dims, [layer, x_at])
        assert isinstance(inst.result, tuple)
        kept = self._outputs_like(stacked_like(inst.result[1], layers))
        self.emit(h.Copy(xs.ptr, init.ptr, nbytes(init)))
        step = self._call(inst, [layer, x_at], (x_next, layer_of(kept, h.LoopVar(loop))), layers)
        self.emit(h.Fold(loop, layers, h.Order.FORWARD, (step,)))
        self.rec.folds += 1
        last = HTensor(h.Layer(xs.ptr, layers, init.size), init.dtype, init.axes)
        return (last, xs, kept)

    def fold_bwd(
        self: FoldHost,
        bwd: str,
        call_dims: tuple[tuple[str, Lin], ...],
        stacked: HValue,
        count: Lin,
        inputs: HValue,
        kept: HValue,
        ct: HValue,
    ) -> HValue:
        """The layers of a `fold_fwd` in reverse, each its `.bwd` on what was kept."""
        if not isinstance(inputs, HTensor) or not isinstance(ct, HTensor):
            raise HostError("the reverse of a fold over a value that is not a tensor")
        layers, dims, loop = _laps(self, count, call_dims)
        if layers == 0:
            return (self._outputs_like(stacked), ct)
        at = h.LoopVar(loop)
        layer = layer_of(stacked, at)
        x_at = layer_of(inputs, at)
        kept_at = layer_of(kept, at)
        back = self.rec.instance(bwd, dims, [layer, x_at, kept_at, ct])
        return _walk_back(self, back, loop, layers, [layer, x_at, kept_at], ct)


def _laps(
    body: FoldHost, count: Lin, call_dims: tuple[tuple[str, Lin], ...]
) -> tuple[int, dict[str, int], str]:
    """A fold's layer count, its callee's dims and the name of its loop variable."""
    layers = concrete(count, body.dims)
    dims = {d: concrete(size, body.dims) for d, size in call_dims}
    return layers, dims, f"l{len(body.locals)}"


def _input_stack(
    body: FoldHost, init: HTensor, rows: int, loop: str
) -> tuple[HTensor, HTensor, HTensor]:
    """A stack of `rows` layer inputs shaped like `init`, and its rows `loop`, `loop + 1`."""
    xs = body.alloc(init.dtype, ((None, rows), *init.axes))
    at = HTensor(h.Layer(xs.ptr, h.LoopVar(loop), init.size), init.dtype, init.axes)
    after = HTensor(h.Layer(xs.ptr, h.LoopVar(loop, 1), init.size), init.dtype, init.axes)
    return xs, at, after


def _walk_back(
    body: FoldHost, back: Function, loop: str, layers: int, inputs: list[HValue], ct: HTensor
) -> HValue:
    """The layers from last to first, each `back` on `inputs` and the running cotangent.

    Layer l of the stacked adjoint (every leaf with its layer axis) is written in
    place; the cotangent passes between two accumulators.
    """
    at = h.LoopVar(loop)
    d_stacked = body._outputs_like(stacked_like(back.result[0], layers))  # type: ignore[index]
    cur, nxt = body._accumulators("g", ct)
    body.emit(h.Copy(cur, ct.ptr, nbytes(ct)))
    step = body._call(
        back,
        [*inputs, HTensor(cur, ct.dtype, ct.axes)],
        (layer_of(d_stacked, at), HTensor(nxt, ct.dtype, ct.axes)),
        layers,
    )
    body.emit(h.Fold(loop, layers, h.Order.BACKWARD, (step, h.Swap(ct.dtype, cur, nxt))))
    body.rec.folds += 1
    return (d_stacked, HTensor(cur, ct.dtype, ct.axes))
