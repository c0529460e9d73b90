"""The bias epilogue: a product's kernel adds the operand of the one add that reads it.

Where an `add` is the only reader of a contraction's value (a linear layer's
bias, a residual), the product's kernel adds the add's other operand to each
output element once its sum is complete, and the add launches nothing. The
bits are the two kernels': in f64 and f32 the sum the add would have loaded
back is exactly the one in the register, so the operand is added there
before the store; a bf16 store rounds, so the sum is stored, loaded back,
added to and stored again, as the add's own kernel does. A form that keeps
its running sums in the output between blocks of K gives the epilogue to its
stores in the last block only; the row-wise form, whose row is the running
sum, adds it to the row after the row's last k.

Each form passes its final stores through `finish`; `Names.finished` counts
them, so a form that forgot would be caught rather than drop the bias.
"""

from __future__ import annotations

from dataclasses import replace

from presk.kernel import ir
from presk.kernel.ir import Bin, BinOp, Buffer, Index, Load, Stmt, Store
from presk.kernel.lower.base import Axes, Epilogue, Launch, LayoutError, Names
from presk.kernel.text import vector_lanes


def fits(operand: Axes, product: Axes) -> str | None:
    """None if an add's operand of these axes can be the epilogue of a product of these,
    else why not: it is the product's shape, or one axis the size of its last."""

    def agree(x: str | None, y: str | None) -> bool:
        return x is None or y is None or x == y

    if [s for _, s in operand] == [s for _, s in product]:
        if all(agree(x, y) for (x, _), (y, _) in zip(operand, product, strict=True)):
            return None
    if len(operand) == 1 and product and operand[0][1] == product[-1][1]:
        if agree(operand[0][0], product[-1][0]):
            return None
    return "the add's other operand is neither the product's shape nor one row along its last axis"


def with_epilogue(launch: Launch, dtype: str, axes: Axes, first: bool) -> Launch:
    """The product's launch with the add's other operand, of this type and these axes,
    as its epilogue: a new input numbered after the product's, which moves the output
    up by one."""
    out = launch.output
    operand = Buffer(out.index, dtype, axes)
    moved = Buffer(out.index + 1, out.dtype, out.axes)
    return replace(
        launch, inputs=[*launch.inputs, operand], output=moved, epilogue=Epilogue(operand, first)
    )


def finish(names: Names, stores: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """A product's final stores, with the epilogue's add where its launch has one."""
    epilogue = names.epilogue
    if epilogue is None:
        return stores
    names.finished += 1
    out: list[Stmt] = []
    for store in stores:
        out += _added(epilogue, store)
    return tuple(out)


def row_tail(names: Names, out: Buffer, index: tuple[Index, ...]) -> tuple[Stmt, ...]:
    """The epilogue of an element whose running sum is the output itself (the row-wise
    form): nothing without an epilogue, else out[index] = out[index] + operand."""
    if names.epilogue is None:
        return ()
    return finish(names, (Store(out, index, Load(out, index)),))


def _added(epilogue: Epilogue, store: Stmt) -> tuple[Stmt, ...]:
    match store:
        case Store(buffer, index, value):
            assert not isinstance(value, ir.IVar | ir.IConst | ir.IBin)
            term: ir.Expr = Load(*_operand_at(epilogue, buffer, index))
            if buffer.dtype == "bf16":
                again = Store(buffer, index, _sum(epilogue, Load(buffer, index), term))
                return (store, again)
            return (Store(buffer, index, _sum(epilogue, value, term)),)
        case ir.VStore(buffer, index, value):
            lanes = vector_lanes(value)
            operand, at = _operand_at(epilogue, buffer, index)
            vterm = ir.VLoad(operand, at, lanes)
            if buffer.dtype == "bf16":
                back = ir.VLoad(buffer, index, lanes)
                return (store, ir.VStore(buffer, index, _vsum(epilogue, back, vterm)))
            return (ir.VStore(buffer, index, _vsum(epilogue, value, vterm)),)
    raise AssertionError(f"not a final store: {store!r}")


def _operand_at(
    epilogue: Epilogue, buffer: Buffer, index: tuple[Index, ...]
) -> tuple[Buffer, tuple[Index, ...]]:
    """The operand's element for the output element `buffer[index]`, where `buffer` is
    the output or a row-major view of it that keeps its last axis: the position along
    that axis, or the same position in a same-shaped operand viewed alike."""
    operand = epilogue.operand
    if len(operand.axes) == 1:
        if buffer.axes[-1][1] != operand.axes[0][1]:
            # A dot over a right operand of several trailing axes reads them as one J.
            raise LayoutError(
                "`epilogue`: this product reads its last axes as one, so the add's operand "
                "must be of the product's shape, not along its last axis"
            )
        return operand, (index[-1],)
    return Buffer(operand.index, operand.dtype, buffer.axes), index


def _sum(epilogue: Epilogue, value: ir.Expr, term: ir.Expr) -> ir.Expr:
    return Bin(BinOp.ADD, term, value) if epilogue.first else Bin(BinOp.ADD, value, term)


def _vsum(epilogue: Epilogue, value: ir.VExpr, term: ir.VExpr) -> ir.VExpr:
    if epilogue.first:
        return ir.VBin(ir.VecOp.ADD, term, value)
    return ir.VBin(ir.VecOp.ADD, value, term)


__all__ = ["finish", "fits", "row_tail", "with_epilogue"]
