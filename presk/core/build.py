"""Building a PSK-Core function instruction by instruction (differentiation and the
optimizer generate functions this way)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from presk.core import ir
from presk.elab.ty import Type


@dataclass
class Builder:
    """A function under construction: parameters first, then instructions."""

    name: str
    dims: tuple[str, ...]
    params: list[ir.Param] = field(default_factory=list)
    instrs: list[ir.Instr] = field(default_factory=list)

    def param(self, name: str, ty: Type, default: Fraction | None = None) -> ir.Ref:
        index = len(self.params)
        self.params.append(ir.Param(index, name, ty, default))
        return ir.Ref(index, name)

    def emit(self, name: str | None, ty: Type, op: ir.Op, span: object = None) -> ir.Ref:
        index = len(self.params) + len(self.instrs)
        self.instrs.append(ir.Instr(index, name, ty, op, span))  # type: ignore[arg-type]
        return ir.Ref(index, name)

    def prim(
        self,
        name: str,
        args: tuple[ir.Operand, ...],
        ty: Type,
        attrs: tuple[tuple[str, ir.AttrValue], ...] = (),
    ) -> ir.Operand:
        return self.emit(None, ty, ir.Prim(name, args, attrs))

    def finish(self, ret: Type, result: ir.Operand, effects: tuple[str, ...] = ()) -> ir.Function:
        return ir.Function(
            self.name, self.dims, tuple(self.params), ret, effects, tuple(self.instrs), result
        )
