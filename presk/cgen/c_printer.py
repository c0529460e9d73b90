"""Kernel IR to C: one `static inline` function per kernel, every expression computed here.

Buffers are row-major pointers (`double`, `float`, `uint16_t` for bf16,
`int64_t` for indices and masks); an index is linearised in the printer.
Arithmetic happens in the kernel's arithmetic type (double, or float for
f32 and bf16): bf16 loads widen through `presk_bf16_to_f32` and stores
round through `presk_f32_to_bf16`. The libm functions are the project's own
(`presk_exp`, `presk_expf`, …) so that every build computes the same bits.
Nothing from the program reaches C but numbers: the kernel's text, printed
as a comment above it, is sanitised so that it cannot close the comment.
"""

from __future__ import annotations

import re
from fractions import Fraction

import gmpy2

from presk import names
from presk.cgen.lanes import LANES, block_guard, call_depth, call_guards, lane_calls
from presk.dtypes import Dtype
from presk.kernel import ir
from presk.kernel.text import kernel_text, vector_lanes

# Storage and arithmetic C types by dtype name, from presk/dtypes.py (kept for the
# modules that index them by the IR's strings).
C_STORAGE = {str(d): d.c_type for d in Dtype}
C_ARITH = {str(d): d.c_arith for d in Dtype if d.is_real}
_LIBM = ("exp", "log", "tanh", "sin", "cos", "erf")


def safe_comment(text: str) -> str:
    """Text that can sit inside `/* */` whatever the program named things (lines kept)."""
    return names.comment(text, newlines=True)


def rounded(value: Fraction, arith: str) -> float:
    """`value` rounded once, to nearest, to the arithmetic type (an f32's value as a float)."""
    if arith == "f64":
        return float(value)  # Fraction → double rounds correctly (to nearest)
    with gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True):
        return float(gmpy2.mpfr(gmpy2.mpq(value.numerator, value.denominator)))


def constant(value: Fraction, arith: str) -> str:
    """A C literal of `value` rounded once to the arithmetic type."""
    x = rounded(value, arith)
    return _literal(x) if arith == "f64" else _literal(x) + "f"


def _literal(x: float) -> str:
    if x != x:
        return "(0.0/0.0)"
    if x in (float("inf"), float("-inf")):
        return "(1.0/0.0)" if x > 0 else "(-1.0/0.0)"
    text = repr(x)
    return text if any(ch in text for ch in ".e") else text + ".0"


# The GCC vector types of presk_rt.h, by arithmetic type and lanes.
VECTOR_TYPES = {
    ("f64", 2): "presk_v2d",
    ("f64", 4): "presk_v4d",
    ("f64", 8): "presk_v8d",
    ("f32", 4): "presk_v4f",
    ("f32", 8): "presk_v8f",
    ("f32", 16): "presk_v16f",
}


class _Printer:
    # Innermost loops that call exp, log, tanh or erf run in blocks of lanes
    # (cgen/lanes.py), unless a layout plan keeps the kernel scalar.
    lanes = True

    def __init__(self, kernel: ir.Kernel) -> None:
        self.kernel = kernel
        self.lanes = type(self).lanes and kernel.lanes
        self.arith = ir.arith(kernel.dtype)
        self.real = C_ARITH[kernel.dtype]
        self.names = {b.index: f"b{b.index}" for b in (*kernel.inputs, *kernel.outputs)}
        self._load_count = 0  # vector load temporaries are numbered through the kernel
        self._bounds = ir.loop_bounds(kernel.body)
        self._lane_values: dict[ir.Fn, str] = {}  # a block's calls, while its body prints

    def index(self, e: ir.Index) -> str:
        match e:
            case ir.IVar(name):
                return name
            case ir.IConst(value):
                return str(value)
            case ir.IBin(op, left, right):
                return f"({self.index(left)} {op} {self.index(right)})"

    def linear(self, buffer: ir.Buffer, idx: tuple[ir.Index, ...]) -> str:
        if not idx:
            return "0"
        # Horner's form of the row-major offset: ((i0 * n1 + i1) * n2 + i2) …
        text = self.index(idx[0])
        for i, size in zip(idx[1:], buffer.shape[1:], strict=True):
            text = (
                f"({text}) * {size} + {self.index(i)}"
                if " " in text
                else f"{text} * {size} + {self.index(i)}"
            )
        return text

    def ref(self, buffer: ir.Buffer, idx: tuple[ir.Index, ...]) -> str:
        """The C lvalue of one element of a buffer."""
        return f"{self.names[buffer.index]}[{self.linear(buffer, idx)}]"

    def load(self, e: ir.Load) -> str:
        ref = self.ref(e.buffer, e.index)
        dtype = e.buffer.dtype
        if dtype == "bf16":
            ref = f"presk_bf16_to_f32({ref})"
        # A buffer of another realization converts at the kernel's edge, on load.
        if dtype in C_ARITH and ir.arith(dtype) != self.arith:
            ref = f"({self.real})({ref})"
        return ref

    def expr(self, e: ir.Expr | ir.Index | ir.Cmp) -> str:
        match e:
            case ir.Load():
                return self.load(e)
            case ir.Var(name):
                return name
            case ir.Const(value):
                return constant(value, self.arith)
            case ir.FromIndex(value):
                return f"({self.real})({self.expr(value)})"
            case ir.Bin(op, left, right):
                a, b = self.expr(left), self.expr(right)
                if op == "max":
                    return f"({a} < {b} ? {b} : {a})"
                if op == "min":
                    return f"({b} < {a} ? {b} : {a})"
                return f"({a} {op} {b})"
            case ir.Neg(operand):
                return f"(-{self.expr(operand)})"
            case ir.Fn(name, arg):
                if e in self._lane_values:
                    return self._lane_values[e]
                if name == "sqrt":
                    return f"{'sqrt' if self.arith == 'f64' else 'sqrtf'}({self.expr(arg)})"
                suffix = "" if self.arith == "f64" else "f"
                return f"presk_{name}{suffix}({self.expr(arg)})"
            case ir.Cmp(op, left, right):
                return f"({self.expr(left)} {op} {self.expr(right)})"
            case ir.Select(cond, then, other):
                return f"({self.test(cond)} ? {self.expr(then)} : {self.expr(other)})"
            case ir.IVar() | ir.IConst() | ir.IBin():
                return self.index(e)

    def test(self, cond: ir.Cmp | ir.Load) -> str:
        """A condition as C: a mask's element (a Load) is true where it is not 0."""
        text = self.expr(cond)
        return f"({text} != 0)" if isinstance(cond, ir.Load) else text

    def split_at(self, depth: int) -> bool:
        """Whether the loop printed at `depth` is the one the workers share."""
        return self.kernel.split and depth == self.kernel.split_depth + 1

    def loop_head(self, var: str, bound: int) -> str:
        return f"for (int64_t {var} = 0; {var} < {bound}; {var}++)"

    def stmts(self, body: tuple[ir.Stmt, ...], depth: int) -> list[str]:
        pad = "    " * depth
        out: list[str] = []
        for s in body:
            match s:
                case ir.For() if self.lanes and (calls := self.block_calls(s)):
                    split = self.split_at(depth)
                    end = "hi" if split else str(s.bound)
                    out.extend(self.lane_loop(s, calls, "lo" if split else "0", end, depth))
                case ir.For(var, bound, inner) if self.split_at(depth):
                    # This worker's contiguous share of the parallel outer loop.
                    out.append(f"{pad}for (int64_t {var} = lo; {var} < hi; {var}++) {{")
                    out.extend(self.stmts(inner, depth + 1))
                    out.append(f"{pad}}}")
                case ir.For(var, bound, inner):
                    out.append(f"{pad}{self.loop_head(var, bound)} {{")
                    out.extend(self.stmts(inner, depth + 1))
                    out.append(f"{pad}}}")
                case ir.Let(name, value, _):
                    out.append(f"{pad}{name} = {self.expr(value)};")
                case ir.Store(buffer, idx, value):
                    target = self.ref(buffer, idx)
                    text = self.expr(value)
                    if buffer.dtype == "bf16":
                        text = f"presk_f32_to_bf16({text})"
                    elif buffer.dtype == "i64":
                        text = f"(int64_t)({text})"
                    out.append(f"{pad}{target} = {text};")
                case ir.If(cond, then, other):
                    test = self.test(cond)
                    out.append(f"{pad}if {test} {{")
                    out.extend(self.stmts(then, depth + 1))
                    if other:
                        out.append(f"{pad}}} else {{")
                        out.extend(self.stmts(other, depth + 1))
                    out.append(f"{pad}}}")
                case ir.VLet(name, value, _):
                    out.extend(f"{pad}{line}" for line in self.vector_loads(value))
                    out.append(f"{pad}{name} = {self.vexpr(value)};")
                case ir.VStore(buffer, idx, value):
                    out.extend(f"{pad}{line}" for line in self.vector_loads(value))
                    out.append(f"{pad}{self.vector_store(buffer, idx, value)}")
                case ir.Scratch(buffer, inner):
                    out.append(f"{pad}{{")
                    out.append(f"{pad}    {self.scratch(buffer)}")
                    out.extend(self.stmts(inner, depth + 1))
                    out.append(f"{pad}}}")
                case ir.Random(name, key, counter):
                    key_name = self.names[key.index]
                    draw = f"presk_uniform(*{key_name}, (uint64_t)({self.index(counter)}))"
                    out.append(f"{pad}{name} = {draw};")
        return out

    def block_calls(self, loop: ir.For) -> tuple[ir.Fn, ...]:
        return lane_calls(loop, self._bounds, LANES[self.arith])

    def lane_loop(
        self, loop: ir.For, calls: tuple[ir.Fn, ...], start: str, end: str, depth: int
    ) -> list[str]:
        """A loop in blocks: each block's calls by lanes, then its iterations in order."""
        pad, lanes = "    " * depth, LANES[self.arith]
        suffix = "" if self.arith == "f64" else "f"
        arrays = {fn: f"presk_lv{n}" for n, fn in enumerate(calls)}
        inner = pad + "        "

        def each_lane(indent: str, body: list[str]) -> list[str]:
            # The loop variable is declared where the lane's statements read it (-Wunused).
            uses = re.search(rf"\b{loop.var}\b", "\n".join(body)) is not None
            lane = [f"{indent}    const int64_t {loop.var} = presk_lb + presk_l;"] if uses else []
            head = f"{indent}for (int presk_l = 0; presk_l < {lanes}; presk_l++) {{"
            return [head, *lane, *body, f"{indent}}}"]

        out = [f"{pad}{{", f"{pad}    int64_t presk_lb = {start};"]
        out.append(f"{pad}    for (; presk_lb + {lanes} <= {end}; presk_lb += {lanes}) {{")
        declared = ", ".join(f"{a}[{lanes}]" for a in arrays.values())
        out.append(f"{inner}_Alignas(64) {self.real} {declared};")

        def any_lane(indent: str, flag: str, cond: ir.Cmp | ir.Load) -> list[str]:
            """`flag` set where some lane of the block passes `cond`."""
            test = [f"{indent}    {flag} |= {self.test(cond)};"]
            return [f"{indent}int {flag} = 0;", *each_lane(indent, test)]

        guard = block_guard(loop, calls, self._bounds)
        calling = inner
        if guard is not None:
            # No lane reads a call unless it passes the guard: a block none passes calls nothing.
            out += any_lane(inner, "presk_lany", guard)
            out.append(f"{inner}if (presk_lany) {{")
            calling = inner + "    "
        levels = {fn: call_depth(fn, calls) for fn in calls}
        guards = call_guards(loop, calls, self._bounds) if guard is None else {}
        for level in sorted(set(levels.values())):
            batch = [fn for fn in calls if levels[fn] == level]
            args = [f"{calling}    {arrays[fn]}[presk_l] = {self.expr(fn.arg)};" for fn in batch]
            out += each_lane(calling, args)
            for fn in batch:
                a = arrays[fn]
                call = f"presk_{fn.name}{suffix}_lanes({a}, {a});"
                if fn in guards:
                    # No lane reads this call's value unless it passes its selection's test.
                    out += any_lane(calling, f"{a}_any", guards[fn])
                    call = f"if ({a}_any) {call}"
                out.append(f"{calling}{call}")
                self._lane_values[fn] = f"{a}[presk_l]"
        if guard is not None:
            # Every iteration of a block none passes takes the other branch, and only it.
            (branch,) = loop.body
            assert isinstance(branch, ir.If)
            out.append(f"{inner}}} else {{")
            if branch.other:
                out += each_lane(calling, self.stmts(branch.other, depth + 4))
            out += [f"{calling}continue;", f"{inner}}}"]
        out += each_lane(inner, self.stmts(loop.body, depth + 3))
        self._lane_values = {}
        out.append(f"{pad}    }}")
        # The iterations past the last whole block, as the scalar loop runs them.
        out.append(
            f"{pad}    for (int64_t {loop.var} = presk_lb; {loop.var} < {end}; {loop.var}++) {{"
        )
        out += self.stmts(loop.body, depth + 2)
        out += [f"{pad}    }}", f"{pad}}}"]
        return out

    def vector_type(self, lanes: int) -> str:
        """The vector type of `lanes` lanes in the kernel's arithmetic type (presk_rt.h)."""
        vtype = VECTOR_TYPES.get((self.arith, lanes))
        assert vtype is not None, f"no vector type of {lanes} {self.arith} lanes"
        return vtype

    def scratch(self, buffer: ir.Buffer) -> str:
        """A scratch buffer's declaration: a local array, aligned for whole-vector loads."""
        name = self.names[buffer.index] = f"b{buffer.index}"
        return f"_Alignas(64) {C_STORAGE[buffer.dtype]} {name}[{buffer.size}];"

    def vector_loads(self, v: ir.VExpr) -> list[str]:
        """Unaligned loads of a vector expression's operands into numbered temporaries."""
        out: list[str] = []
        self._loads: dict[int, str] = {}

        def visit(e: ir.VExpr) -> None:
            match e:
                case ir.VLoad(buffer, idx, lanes):
                    self._load_count += 1
                    name = f"vl{self._load_count}"
                    self._loads[id(e)] = name
                    out.append(f"{self.vector_type(lanes)} {name};")
                    out.append(self.vector_load(name, buffer, idx, lanes))
                case ir.VBin(_, left, right):
                    visit(left)
                    visit(right)

        visit(v)
        return out

    def vector_load(
        self, name: str, buffer: ir.Buffer, idx: tuple[ir.Index, ...], lanes: int
    ) -> str:
        """Fill vector `name` from consecutive elements; bf16 widens lane by lane."""
        base, at = self.names[buffer.index], self.linear(buffer, idx)
        if buffer.dtype == "bf16":
            lane = f"{name}[presk_l] = presk_bf16_to_f32({base}[({at}) + presk_l]);"
            return f"for (int presk_l = 0; presk_l < {lanes}; presk_l++) {lane}"
        return f"memcpy(&{name}, &{base}[{at}], sizeof {name});"

    def vector_store(self, buffer: ir.Buffer, idx: tuple[ir.Index, ...], value: ir.VExpr) -> str:
        """Store a vector at consecutive elements; bf16 rounds lane by lane."""
        base, at = self.names[buffer.index], self.linear(buffer, idx)
        lanes = vector_lanes(value)
        if buffer.dtype == "bf16":
            lane = f"{base}[({at}) + presk_l] = presk_f32_to_bf16({self.vexpr(value)}[presk_l]);"
            return f"for (int presk_l = 0; presk_l < {lanes}; presk_l++) {lane}"
        vtype = self.vector_type(lanes)
        if not isinstance(value, ir.VVar):  # a sum (a bias epilogue's) has no address
            copy = f"memcpy(&{base}[{at}], &presk_v, sizeof({vtype}));"
            return f"{{ {vtype} presk_v = {self.vexpr(value)}; {copy} }}"
        return f"memcpy(&{base}[{at}], &{self.vexpr(value)}, sizeof({vtype}));"

    def vexpr(self, v: ir.VExpr) -> str:
        match v:
            case ir.VLoad():
                return self._loads[id(v)]
            case ir.Splat(value, lanes):
                scalar = self.expr(value)
                return f"(({self.vector_type(lanes)}){{{', '.join([scalar] * lanes)}}})"
            case ir.VBin(op, left, right):
                return f"({self.vexpr(left)} {op} {self.vexpr(right)})"
            case ir.VVar(name):
                return name

    def scalars(self) -> list[str]:
        """Declarations of every scalar the body assigns (real, index or draw)."""
        seen: dict[str, str] = {}

        def visit(body: tuple[ir.Stmt, ...]) -> None:
            for s in body:
                match s:
                    case ir.For(_, _, inner):
                        visit(inner)
                    case ir.Let(name, _, integer):
                        seen.setdefault(name, "int64_t" if integer else self.real)
                    case ir.If(_, then, other):
                        visit(then)
                        visit(other)
                    case ir.Random(name):
                        seen.setdefault(name, "double")
                    case ir.VLet(name, _, lanes):
                        seen.setdefault(name, self.vector_type(lanes))
                    case ir.Scratch(_, inner):
                        visit(inner)

        visit(self.kernel.body)
        return [
            f"    {ty} {name}" + (";" if ty.startswith("presk_v") else " = 0;")
            for name, ty in sorted(seen.items())
        ]

    def declarator(self, buffer: ir.Buffer) -> str:
        """A buffer parameter's name with its pointer: `*restrict b0`."""
        return f"*restrict {self.names[buffer.index]}"

    def param_list(self) -> list[str]:
        """One declaration per input (read-only) and output buffer."""
        parts = []
        for b in self.kernel.inputs:
            if b.dtype == "key":
                parts.append(f"const presk_key *{self.names[b.index]}")
            else:
                parts.append(f"const {C_STORAGE[b.dtype]} {self.declarator(b)}")
        for b in self.kernel.outputs:
            parts.append(f"{C_STORAGE[b.dtype]} {self.declarator(b)}")
        return parts

    def params(self) -> str:
        parts = self.param_list()
        if self.kernel.split:
            parts += ["int64_t lo", "int64_t hi"]
        return ", ".join(parts)


# A kernel of a point of one lane: gcc neither vectorizes its loops nor packs its scalar
# statements into vectors (-fno-tree-vectorize for this function alone).
SCALAR_ATTRIBUTE = (
    "#if defined(__GNUC__) && !defined(__clang__)\n"
    '__attribute__((optimize("no-tree-vectorize")))\n'
    "#endif"
)


def kernel_comment(kernel: ir.Kernel) -> str:
    """The kernel's PSK-Kernel text as the inside of a C block comment."""
    return "\n".join(" * " + line for line in safe_comment(kernel_text(kernel)).splitlines())


def kernel_c(kernel: ir.Kernel, c_name: str) -> str:
    """A kernel as a `static inline` C function under its PSK-Kernel text."""
    p = _Printer(kernel)
    comment = kernel_comment(kernel)
    # A kernel may read an operand for its shape only (zeros_like): no -Wextra warning.
    voids = [f"    (void){name};" for name in p.names.values()]
    decls, body = p.scalars(), p.stmts(kernel.body, 1)
    lines = ["/*", comment, " */"]
    if not kernel.vectorize:  # gcc's own vectorizer off; clang has no such attribute
        lines += [SCALAR_ATTRIBUTE]
    lines += [
        f"static inline void {c_name}({p.params()}) {{",
        *voids,
        *decls,
        *body,
        "}",
    ]
    return "\n".join(lines) + "\n"
