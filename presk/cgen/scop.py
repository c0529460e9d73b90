"""A point-zero kernel as a C function a polyhedral tool reads.

The nest form differs from the native printer's in what such tools need
and in nothing that changes a bit: buffers are arrays of literal
dimensions (`const float in0[restrict 16][2][256][256]`) accessed by one
subscript per axis instead of a linearised offset, loop variables and
scalars are declared once at the top so that the region between
`#pragma scop` and `#pragma endscop` holds only loops and assignments, and
the kernel comes in after `presk.kernel.scop.to_selections`, so data
decides values, never control.
"""

from __future__ import annotations

from presk.cgen.c_printer import _Printer, kernel_comment
from presk.kernel import ir


class _NestPrinter(_Printer):
    # A polyhedral tool reads the loops as the kernel has them: no blocks of lanes.
    lanes = False

    def __init__(self, kernel: ir.Kernel) -> None:
        super().__init__(kernel)
        self.names = {b.index: f"in{i}" for i, b in enumerate(kernel.inputs)}
        outputs = kernel.outputs
        for i, b in enumerate(outputs):
            self.names[b.index] = "out" if len(outputs) == 1 else f"out{i}"

    def ref(self, buffer: ir.Buffer, idx: tuple[ir.Index, ...]) -> str:
        subscripts = "".join(f"[{self.index(i)}]" for i in idx) or "[0]"
        return self.names[buffer.index] + subscripts

    def loop_head(self, var: str, bound: int) -> str:
        return f"for ({var} = 0; {var} < {bound}; {var}++)"

    def loop_vars(self) -> list[str]:
        found: list[str] = []

        def visit(body: tuple[ir.Stmt, ...]) -> None:
            for s in body:
                match s:
                    case ir.For(var, _, inner):
                        if var not in found:
                            found.append(var)
                        visit(inner)
                    case ir.If(_, then, other):
                        visit(then)
                        visit(other)

        visit(self.kernel.body)
        return found

    def declarator(self, buffer: ir.Buffer) -> str:
        return self.names[buffer.index] + _dims(buffer)


def _dims(buffer: ir.Buffer) -> str:
    """`[restrict 16][2][256]`: the first dimension carries the qualifier of the pointer."""
    shape = buffer.shape or (1,)
    return f"[restrict {shape[0]}]" + "".join(f"[{n}]" for n in shape[1:])


def nest_prototype(kernel: ir.Kernel, name: str) -> str:
    """The declaration of a nest's function (also its definition's first line)."""
    return f"void {name}({', '.join(_NestPrinter(kernel).param_list())})"


def nest_c(kernel: ir.Kernel, name: str, static_control: bool) -> str:
    """A nest as a C function; a static-control part sits between the scop pragmas."""
    p = _NestPrinter(kernel)
    comment = kernel_comment(kernel)
    loops = p.loop_vars()
    body = p.stmts(kernel.body, 1)
    if static_control:
        body = ["#pragma scop", *body, "#pragma endscop"]
    lines = [
        "/*",
        comment,
        " */",
        nest_prototype(kernel, name) + " {",
        *(f"    (void){n};" for n in p.names.values()),
        *([f"    int64_t {', '.join(f'{v} = 0' for v in loops)};"] if loops else []),
        *p.scalars(),
        *body,
        "}",
    ]
    return "\n".join(lines) + "\n"
