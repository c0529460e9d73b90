"""The host program: an entry recorded once at its shapes, as C functions and launches.

`record(module, entry, dims, prefix, dtype)` evaluates the entry's PSK-Core
over shapes only — no arithmetic — and produces a `HostProgram`: one C
function per (function, dims, argument layout) instance, each a sequence of
kernel launches and calls, with every intermediate buffer at a fixed offset
of its frame (frames sizes are computed here, so a call allocates nothing).
A projection, a field of a tree, a layer of a stacked tree are views: a
pointer expression (`in3 + l * 16`), never a copy. A fold over a stack is a
C loop over layers with its value in two buffers used in turn; the reverse
of a fold keeps each layer's input and walks back. Hyperparameters and
literals are constants of the program.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from presk.core import ir as core
from presk.core.walk import live
from presk.elab.presburger import Lin
from presk.elab.ty import Elem, Tensor, Type
from presk.host.realization import Realization
from presk.kernel import ir as kir
from presk.kernel.lower import ELEMENTWISE, Launch, LoweringError, Step, lower
from presk.kernel.text import kernel_text
from presk.sched import fusion, split

ALIGN = 64


class HostError(Exception):
    """A construct the native backend does not support yet."""


class HostRunError(Exception):
    """A run-time error the recording can see, since it knows every shape (E7001)."""


Axes = tuple[tuple[str | None, int], ...]


@dataclass(frozen=True)
class HTensor:
    """A tensor at a C pointer expression."""

    ptr: str
    dtype: str
    axes: Axes

    @property
    def size(self) -> int:
        n = 1
        for _, s in self.axes:
            n *= s
        return n


@dataclass(frozen=True)
class HConst:
    """A number known when the program is printed (a literal, a hyperparameter)."""

    value: Fraction


@dataclass(frozen=True)
class HKey:
    """A random key at a C pointer expression (`const presk_key *`)."""

    ptr: str


@dataclass(frozen=True)
class HTree:
    """A parameter tree of host values."""

    items: tuple[tuple[str, HValue], ...]

    def get(self, name: str) -> HValue:
        for key, value in self.items:
            if key == name:
                return value
        raise HostError(f"tree has no member `{name}`")


@dataclass(frozen=True)
class HPending:
    """An elementwise value computed inside its consumer's nest (a fusion group member)."""

    step_name: str
    attrs: tuple[tuple[str, object], ...]
    args: tuple[object, ...]  # HValues
    dtype: str
    axes: Axes


HValue = HTensor | HConst | HKey | HTree | HPending | tuple  # type: ignore[type-arg]


def leaves(value: HValue) -> list[HTensor | HKey]:
    """Pointer leaves of a value, in order (constants are not passed)."""
    match value:
        case HTensor() | HKey():
            return [value]
        case HTree(items):
            return [leaf for _, v in items for leaf in leaves(v)]
        case tuple():
            return [leaf for v in value for leaf in leaves(v)]
    return []


def leaf_paths(value: HValue, prefix: str) -> list[tuple[str, HTensor | HKey]]:
    """Leaves with dotted paths, for the entry's struct fields."""
    match value:
        case HTensor() | HKey():
            return [(prefix, value)]
        case HTree(items):
            return [p for k, v in items for p in leaf_paths(v, f"{prefix}.{k}" if prefix else k)]
        case tuple():
            return [p for i, v in enumerate(value) for p in leaf_paths(v, f"{prefix}.{i}")]
    return []


def layout(value: HValue) -> tuple[object, ...]:
    """What a function instance is specialised on: leaf types and shapes, constants."""
    match value:
        case HTensor(_, dtype, axes):
            return ("t", dtype, axes)
        case HConst(v):
            return ("c", v)
        case HKey():
            return ("k",)
        case HTree(items):
            return ("tree", tuple((k, layout(v)) for k, v in items))
        case tuple():
            return ("tuple", tuple(layout(v) for v in value))
    raise HostError(f"no layout for {value!r}")


def rebind(value: HValue, names: list[str]) -> HValue:
    """The same structure with its pointer leaves renamed to `names` (consumed in order)."""
    match value:
        case HTensor(_, dtype, axes):
            return HTensor(names.pop(0), dtype, axes)
        case HKey():
            return HKey(names.pop(0))
        case HConst():
            return value
        case HTree(items):
            return HTree(tuple((k, rebind(v, names)) for k, v in items))
        case tuple():
            return tuple(rebind(v, names) for v in value)
    raise HostError(f"cannot rebind {value!r}")


@dataclass
class FunctionInstance:
    """A Presk function at concrete shapes, printed as one C function."""

    c_name: str
    source: str  # the Presk function's name
    params: list[tuple[str, str]] = field(default_factory=list)  # (C type, name)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    locals: list[str] = field(default_factory=list)  # declarations
    body: list[str] = field(default_factory=list)
    frame: int = 0  # bytes of its own buffers
    callee_frame: int = 0  # the largest frame a call or loop of it needs
    calls: list[tuple[FunctionInstance, int]] = field(default_factory=list)  # (callee, times)
    result: HValue = ()

    @property
    def frame_bytes(self) -> int:
        return self.frame + self.callee_frame

    @property
    def bytes_unreleased(self) -> int:
        """The arena a call would need if no callee's frame were ever reused."""
        return self.frame + sum(inst.bytes_unreleased * times for inst, times in self.calls)


@dataclass
class HostProgram:
    """Every kernel and function instance of an entry, and the entry's interface."""

    kernels: list[tuple[str, kir.Kernel]]
    functions: list[FunctionInstance]
    entry: FunctionInstance
    inputs: list[tuple[str, HTensor | HKey]]  # leaf paths of the entry's arguments
    outputs: list[tuple[str, HTensor]]
    launches: int = 0
    launches_unfused: int = 0
    splits: int = 0
    dead: int = 0
    sites: dict[str, list[str]] = field(default_factory=dict)  # kernel → sites, `fn/%N`

    @property
    def arena_bytes(self) -> int:
        return self.entry.frame_bytes


_C_TYPE = {"f64": "double", "f32": "float", "bf16": "uint16_t", "i64": "int64_t"}
_BYTES = {"f64": 8, "f32": 4, "bf16": 2, "i64": 8}


def _round(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _int(size: Lin, dims: dict[str, int]) -> int:
    value = size.subst({k: Fraction(v) for k, v in dims.items()})
    if not value.is_const or value.const.denominator != 1:
        raise HostError(f"size {size} is not a whole number here")
    return int(value.const)


class Recorder:
    """Records instances on demand; kernels are shared between identical nests."""

    def __init__(
        self,
        module: core.Module,
        dtype: str,
        fuse: bool = True,
        threads: int = 1,
        realization: Realization | None = None,
        tiles: bool | None = None,
    ) -> None:
        self.tiles = tiles
        self.functions = {fn.name: fn for fn in module.functions}
        self.realization = realization or Realization(dtype)
        self.dtype = self.realization.default
        self.fuse = fuse
        self.threads = threads
        self.splits = 0
        self.instances: dict[tuple[object, ...], FunctionInstance] = {}
        self.order: list[FunctionInstance] = []
        self.kernels: dict[str, tuple[str, kir.Kernel]] = {}
        self.launches = 0
        self.launches_unfused = 0
        self.dead = 0  # launches recorded for values nothing reads
        self.site = ""  # the site being recorded, `fn/%N`
        self.sites: dict[str, list[str]] = {}  # C kernel name → the sites that launch it

    # ------------------------------------------------------------ kernels

    def kernel(self, launch: Launch) -> str:
        """The C name of the kernel of a launch (identical kernels are printed once)."""
        try:
            # A kernel computes in its root's arithmetic type (see Note [Fusion]).
            root = launch.output.dtype
            dtype = root if root in ("f64", "f32", "bf16") else self.dtype
            k = lower(launch, dtype, self.tiles)
        except LoweringError as error:
            raise HostError(str(error)) from None
        if self.threads > 1 and split.splittable(k):
            k = kir.Kernel(k.name, k.dtype, k.inputs, k.outputs, k.body, split=True)
        text = kernel_text(k)
        if text not in self.kernels:
            self.kernels[text] = (f"presk_k{len(self.kernels)}", k)
        c_name = self.kernels[text][0]
        sites = self.sites.setdefault(c_name, [])
        if self.site not in sites:
            sites.append(self.site)
        return c_name

    def launch_line(self, c_name: str, ptrs: list[str]) -> list[str]:
        """The C statements of one launch: a call, or an OpenMP region over the outer loop."""
        k = next(kernel for name, kernel in self.kernels.values() if name == c_name)
        if not k.split:
            return [f"{c_name}({', '.join(ptrs)});"]
        self.splits += 1
        n = split.outer_bound(k)
        args = ", ".join(ptrs)
        return [
            "#ifdef _OPENMP",
            "#pragma omp parallel num_threads(threads)",
            "{",
            "    int64_t presk_w = omp_get_num_threads(), presk_t = omp_get_thread_num();",
            f"    {c_name}({args}, {n} * presk_t / presk_w, {n} * (presk_t + 1) / presk_w);",
            "}",
            "#else",
            f"{c_name}({args}, 0, {n});",
            "#endif",
        ]

    # ------------------------------------------------------------ instances

    def instance(self, name: str, dims: dict[str, int], args: list[HValue]) -> FunctionInstance:
        """The instance of `name` at these dims and argument layouts (recorded once)."""
        key = (name, tuple(sorted(dims.items())), tuple(layout(a) for a in args))
        if key in self.instances:
            return self.instances[key]
        fn = self.functions.get(name)
        if fn is None:
            raise HostError(f"no function `{name}`")
        c_name = "presk_f" + str(len(self.instances)) + "_" + _c_ident(name)
        inst = FunctionInstance(c_name, name)
        self.instances[key] = inst
        params: list[str] = []
        bound: list[HValue] = []
        for arg in args:
            names = [f"in{len(params) + i}" for i in range(len(leaves(arg)))]
            for leaf, pname in zip(leaves(arg), names, strict=True):
                ctype = (
                    "const presk_key *"
                    if isinstance(leaf, HKey)
                    else f"const {_C_TYPE[leaf.dtype]} *"
                )
                inst.params.append((ctype, pname))
            params.extend(names)
            bound.append(rebind(arg, list(names)))
        _Body(self, inst, fn, dims, bound).run()
        self.order.append(inst)
        return inst


def _comment(text: str) -> str:
    """Program text made safe inside a C comment."""
    text = text.replace("*/", "* /").replace("/*", "/ *").replace("??", "? ?")
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def _c_ident(name: str) -> str:
    """A program name as a C identifier: letters, digits and `_` only (sanitised)."""
    out = []
    for ch in name:
        if ch.isascii() and (ch.isalnum() or ch == "_"):
            out.append(ch)
        elif ch in ".[]{},= ":
            out.append("_")
        else:
            out.append(f"u{ord(ch):x}")
    return "".join(out).strip("_") or "fn"


class _Body:
    """Records one function instance's body."""

    def __init__(
        self,
        rec: Recorder,
        inst: FunctionInstance,
        fn: core.Function,
        dims: dict[str, int],
        args: list[HValue],
    ) -> None:
        self.rec = rec
        self.inst = inst
        self.fn = fn
        self.dims = dims
        self.env: dict[int, HValue] = {}
        for param, arg in zip(fn.params, args, strict=True):
            self.env[param.index] = _conform(arg, param.type)
        self.prefix: Axes = self._prefix(fn, args)
        self.fused = fusion.members(fn) if rec.fuse else set()
        self.let_name: str | None = None

    def _prefix(self, fn: core.Function, args: list[HValue]) -> Axes:
        for param, arg in zip(fn.params, args, strict=True):
            if isinstance(param.type, Tensor) and param.type.open and isinstance(arg, HTensor):
                return arg.axes[: len(arg.axes) - len(param.type.axes)]
        return ()

    # ------------------------------------------------------------ buffers

    def alloc(self, dtype: str, axes: Axes) -> HTensor:
        """A buffer of this instance's frame."""
        # Buffers are named after the let they hold, when it has a name.
        suffix = f"_{_c_ident(self.let_name)}" if self.let_name else ""
        name = f"t{len(self.inst.locals)}{suffix}"
        size = _BYTES[dtype]
        for _, s in axes:
            size *= s
        offset = self.inst.frame
        self.inst.frame += _round(max(size, 1))
        ctype = _C_TYPE[dtype]
        self.inst.locals.append(f"{ctype} *{name} = ({ctype} *)(frame + {offset});")
        return HTensor(name, dtype, axes)

    def axes_of(self, ty: Type) -> Axes:
        assert isinstance(ty, Tensor)
        body = tuple((a.name, _int(a.size, self.dims)) for a in ty.axes)
        return (self.prefix if ty.open else ()) + body

    def dtype_of(self, ty: Type, index: int | None = None) -> str:
        """A site's storage type: the realization's for reals, i64 for indices and masks."""
        assert isinstance(ty, Tensor)
        if ty.elem != Elem.REAL:
            return "i64"
        if index is None:
            return self.rec.dtype
        return self.rec.realization.site(self.fn.name, index)

    def value(self, op: core.Operand) -> HValue:
        match op:
            case core.Ref(index):
                return self.env[index]
            case core.Lit(value):
                return HConst(value)

    # ------------------------------------------------------------ the body

    def run(self) -> None:
        fn = self.fn
        needed = live(fn)
        for instr in fn.body:
            self.let_name = instr.name
            self.rec.site = where = f"{fn.name}/%{instr.index}"
            start, launches = len(self.inst.body), self.rec.launches
            self.env[instr.index] = _conform(self.step(instr), instr.type)
            if instr.index not in needed:
                # Computed as written, but the result never reads it: the summary says so.
                self.rec.dead += self.rec.launches - launches
            if len(self.inst.body) > start:
                # A comment per site, as `dump --stage core` names it.
                site = where + (f" ({instr.name})" if instr.name else "")
                self.inst.body.insert(start, f"/* {_comment(site)} */")
            self.let_name = None
        self.rec.site = f"{fn.name}/result"
        result = self._materialize(self.value(fn.result))
        out_leaves: list[tuple[str, str]] = []
        # Every result leaf is copied to the caller's buffers; see Note [Outputs].
        for i, leaf in enumerate(leaves(result)):
            if isinstance(leaf, HKey):
                raise HostError("a function returning a key is not supported natively")
            name = f"out{i}"
            out_leaves.append((f"{_C_TYPE[leaf.dtype]} *", name))
            self.inst.body.append(f"memcpy({name}, {leaf.ptr}, {leaf.size * _BYTES[leaf.dtype]});")
        consts = [v for v in _flatten(result) if isinstance(v, HConst)]
        if consts:
            raise HostError("a function returning a constant is not supported natively")
        self.inst.outputs = out_leaves
        self.inst.result = result

    def step(self, instr: core.Instr) -> HValue:
        op = instr.op
        match op:
            case core.Prim():
                return self.prim(instr, op)
            case core.Call(callee, call_dims, args):
                return self.call(callee, call_dims, [self.value(a) for a in args])
            case core.Fold(callee, call_dims, stacked, count, init, _):
                return self.fold(
                    instr, callee, call_dims, self.value(stacked), count, self.value(init)
                )
            case core.FoldVjp(vjp, call_dims, forward, stacked, count, init, ct):
                return self.fold_vjp(
                    instr,
                    vjp,
                    forward,
                    call_dims,
                    self.value(stacked),
                    count,
                    self.value(init),
                    self.value(ct),
                )
            case core.Field(tree, name):
                value = self.value(tree)
                if not isinstance(value, HTree):
                    raise HostError("a field of something that is not a tree")
                return value.get(name)
            case core.Slice(tree, index):
                return _layer(self.value(tree), str(index))
            case core.MakeTuple(items):
                return tuple(self.value(i) for i in items)
            case core.Get(tuple_, index):
                value = self.value(tuple_)
                if not isinstance(value, tuple):
                    raise HostError("an element of something that is not a tuple")
                return value[index]  # type: ignore[no-any-return]
            case core.GradOf():
                raise HostError("`grad` must be differentiated before it runs natively")
        raise HostError(f"unsupported op {type(op).__name__}")

    # ------------------------------------------------------------ primitives

    def prim(self, instr: core.Instr, op: core.Prim) -> HValue:
        name = op.name
        args = [self.value(a) for a in op.args]
        if name == "real" and isinstance(args[0], HConst):
            return args[0]
        if name in ("mean", "max") and isinstance(args[0], HTensor):
            # Shapes are known here: an empty reduction is the reference's run-time error.
            axis = op.attr("axis")
            sizes = [s for n, s in args[0].axes if axis is None or n == axis]
            if any(s == 0 for s in sizes):
                raise HostRunError(f"{name} over no elements (at {self.fn.name}/%{instr.index})")
        if name == "dim":
            size = op.attr("size")
            assert isinstance(size, Lin)
            return HConst(Fraction(_int(size, self.dims)))
        if name in ("zeros_like", "tree_add", "set_field") and not isinstance(args[0], HTensor):
            return self.tree_prim(name, op, args)
        if name in ("merge", "split") and isinstance(args[0], HTensor):
            # Same row-major data under other axes: a view.
            return HTensor(args[0].ptr, args[0].dtype, self.axes_of(instr.type))
        if name == "init":
            raise HostError("initializers run on the host before the call, not inside it")
        if name == "tree_add":
            name = "add"
        if name == "set_field":
            raise HostError("set_field of a tensor")
        if name not in ELEMENTWISE and name != "dropout":
            # Other kernels read their operands from buffers: a constant (a cotangent
            # of 1, say) becomes a scalar buffer.
            args = [self._constant(a) if isinstance(a, HConst) else a for a in args]
        dtype, axes = self.dtype_of(instr.type, instr.index), self.axes_of(instr.type)
        attrs = tuple((k, _concrete_attr(v, self.dims)) for k, v in op.attrs)
        if instr.index in self.fused:
            # Computed inside its consumer's loop nest; see Note [Fusion].
            return HPending(name, attrs, tuple(args), dtype, axes)
        out = self.alloc(dtype, axes)
        inputs: list[kir.Buffer] = []
        ptrs: list[str] = []
        steps: list[Step] = []

        def operand(arg: HValue) -> kir.Buffer | Fraction | int:
            if isinstance(arg, HConst):
                return arg.value
            if isinstance(arg, HPending):
                operands = [operand(a) for a in arg.args]  # type: ignore[arg-type]
                steps.append(Step(arg.step_name, dict(arg.attrs), operands, arg.axes))
                return len(steps) - 1
            if isinstance(arg, (HTensor, HKey)):
                if arg.ptr in ptrs:
                    return inputs[ptrs.index(arg.ptr)]
                buffer = _buffer(len(inputs), arg)
                inputs.append(buffer)
                ptrs.append(arg.ptr)
                return buffer
            raise HostError(f"`{name}` on a tree or tuple is not supported natively")

        operands = [operand(arg) for arg in args]
        steps.append(Step(name, dict(attrs), operands, axes))
        out_buffer = kir.Buffer(len(inputs), out.dtype, out.axes)
        c_name = self.rec.kernel(Launch(steps, inputs, out_buffer))
        self.inst.body.extend(self.rec.launch_line(c_name, [*ptrs, out.ptr]))
        self.rec.launches += 1
        self.rec.launches_unfused += len(steps)
        return out

    def tree_prim(self, name: str, op: core.Prim, args: list[HValue]) -> HValue:
        match name:
            case "set_field":
                tree, value = args
                assert isinstance(tree, HTree)
                key = str(op.attr("field"))
                return HTree(tuple((k, value if k == key else v) for k, v in tree.items))
            case "zeros_like":
                return self._map(args[0], lambda leaf: self._fill(leaf))
            case "tree_add":
                return self._zip(args[0], args[1])
        raise HostError(f"`{name}` on trees")

    def _map(self, value: HValue, f: object) -> HValue:
        match value:
            case HTensor():
                return f(value)  # type: ignore[operator, no-any-return]
            case HTree(items):
                return HTree(tuple((k, self._map(v, f)) for k, v in items))
            case tuple():
                return tuple(self._map(v, f) for v in value)
        raise HostError("cannot map over this value")

    def _zip(self, a: HValue, b: HValue) -> HValue:
        match a, b:
            case HTensor(), HTensor():
                return self._launch("add", [a, b], a.dtype, a.axes)
            case HTree(items), HTree():
                return HTree(tuple((k, self._zip(v, b.get(k))) for k, v in items))
            case tuple(), tuple():
                return tuple(self._zip(x, y) for x, y in zip(a, b, strict=True))
        raise HostError("cannot add these values")

    def _materialize(self, value: HValue) -> HValue:
        """A result with its constants (a literal cotangent, say) in scalar buffers."""
        match value:
            case HConst():
                return self._constant(value)
            case HTree(items):
                return HTree(tuple((k, self._materialize(v)) for k, v in items))
            case tuple():
                return tuple(self._materialize(v) for v in value)
        return value

    def _constant(self, value: HConst) -> HTensor:
        out = self.alloc(self.rec.dtype, ())
        step = Step("real", {}, [value.value], ())
        c_name = self.rec.kernel(Launch([step], [], kir.Buffer(0, self.rec.dtype, ())))
        self.inst.body.extend(self.rec.launch_line(c_name, [out.ptr]))
        self.rec.launches += 1
        self.rec.launches_unfused += 1
        return out

    def _fill(self, like: HTensor) -> HTensor:
        return self._launch("zeros_like", [like], like.dtype, like.axes)

    def _launch(self, name: str, args: list[HTensor], dtype: str, axes: Axes) -> HTensor:
        out = self.alloc(dtype, axes)
        inputs = [_buffer(i, a) for i, a in enumerate(args)]
        step = Step(name, {}, list(inputs), axes)
        c_name = self.rec.kernel(Launch([step], inputs, kir.Buffer(len(inputs), dtype, axes)))
        self.inst.body.extend(self.rec.launch_line(c_name, [*(a.ptr for a in args), out.ptr]))
        self.rec.launches += 1
        self.rec.launches_unfused += 1
        return out

    # ------------------------------------------------------------ calls and folds

    def call(
        self, callee: str, call_dims: tuple[tuple[str, Lin], ...], args: list[HValue]
    ) -> HValue:
        dims = {d: _int(size, self.dims) for d, size in call_dims}
        inst = self.rec.instance(callee, dims, args)
        outs = self._outputs_like(inst.result)
        self._emit_call(inst, args, outs)
        return outs

    def _outputs_like(self, template: HValue) -> HValue:
        match template:
            case HTensor(_, dtype, axes):
                return self.alloc(dtype, axes)
            case HTree(items):
                return HTree(tuple((k, self._outputs_like(v)) for k, v in items))
            case tuple():
                return tuple(self._outputs_like(v) for v in template)
        raise HostError(f"cannot allocate a result like {template!r}")

    def _emit_call(
        self, inst: FunctionInstance, args: list[HValue], outs: HValue, times: int = 1
    ) -> None:
        self.inst.calls.append((inst, times))
        ptrs = [leaf.ptr for a in args for leaf in leaves(a)]
        out_ptrs = [leaf.ptr for leaf in leaves(outs)]
        self.inst.callee_frame = max(self.inst.callee_frame, inst.frame_bytes)
        call_args = ", ".join(["frame + FRAME_END", "threads", *ptrs, *out_ptrs])
        self.inst.body.append(f"{inst.c_name}({call_args});")

    def fold(
        self,
        instr: core.Instr,
        callee: str,
        call_dims: tuple[tuple[str, Lin], ...],
        stacked: HValue,
        count: Lin,
        init: HValue,
    ) -> HValue:
        if not isinstance(init, HTensor):
            raise HostError("a fold over a value that is not a tensor")
        layers = _int(count, self.dims)
        dims = {d: _int(size, self.dims) for d, size in call_dims}
        loop = f"l{len(self.inst.locals)}"
        layer = _layer(stacked, loop)
        inst = self.rec.instance(callee, dims, [layer, init])
        a = self.alloc(init.dtype, init.axes)
        b = self.alloc(init.dtype, init.axes)
        cur, nxt = f"p{len(self.inst.locals)}a", f"p{len(self.inst.locals)}b"
        ctype = _C_TYPE[init.dtype]
        self.inst.locals.append(f"{ctype} *{cur} = {a.ptr}; {ctype} *{nxt} = {b.ptr};")
        body = self.inst.body
        body.append(f"memcpy({cur}, {init.ptr}, {init.size * _BYTES[init.dtype]});")
        body.append(f"for (int64_t {loop} = 0; {loop} < {layers}; {loop}++) {{")
        self._emit_call(
            inst,
            [layer, HTensor(cur, init.dtype, init.axes)],
            HTensor(nxt, init.dtype, init.axes),
            layers,
        )
        body[-1] = "    " + body[-1]
        body.append(f"    {{ {ctype} *swap = {cur}; {cur} = {nxt}; {nxt} = swap; }}")
        body.append("}")
        return HTensor(cur, init.dtype, init.axes)

    def fold_vjp(
        self,
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
        layers = _int(count, self.dims)
        if layers == 0:
            # No layer: the stacked adjoint is empty and the cotangent passes through.
            return (self._outputs_like(stacked), ct)
        dims = {d: _int(size, self.dims) for d, size in call_dims}
        loop = f"l{len(self.inst.locals)}"
        layer = _layer(stacked, loop)
        x_bytes = init.size * _BYTES[init.dtype]
        # Each layer's input, kept for the way back.
        xs = self.alloc(init.dtype, ((None, layers), *init.axes))
        x_at = HTensor(f"({xs.ptr} + {loop} * {init.size})", init.dtype, init.axes)
        x_next = HTensor(f"({xs.ptr} + ({loop} + 1) * {init.size})", init.dtype, init.axes)
        fwd = self.rec.instance(forward, dims, [layer, x_at])
        back = self.rec.instance(vjp, dims, [layer, x_at, ct])
        # The stacked adjoint: every leaf with its layer axis, written layer by layer.
        d_stacked = self._outputs_like(_unlayer(back.result[0], layers))  # type: ignore[index]
        g_a = self.alloc(ct.dtype, ct.axes)
        g_b = self.alloc(ct.dtype, ct.axes)
        cur, nxt = f"g{len(self.inst.locals)}a", f"g{len(self.inst.locals)}b"
        ctype = _C_TYPE[ct.dtype]
        self.inst.locals.append(f"{ctype} *{cur} = {g_a.ptr}; {ctype} *{nxt} = {g_b.ptr};")
        body = self.inst.body
        body.append(f"memcpy({xs.ptr}, {init.ptr}, {x_bytes});")
        body.append(f"for (int64_t {loop} = 0; {loop} + 1 < {layers}; {loop}++) {{")
        self._emit_call(fwd, [layer, x_at], x_next, layers - 1)
        body[-1] = "    " + body[-1]
        body.append("}")
        body.append(f"memcpy({cur}, {ct.ptr}, {ct.size * _BYTES[ct.dtype]});")
        body.append(f"for (int64_t {loop} = {layers} - 1; {loop} >= 0; {loop}--) {{")
        d_layer = _layer(d_stacked, loop)
        self._emit_call(
            back,
            [layer, x_at, HTensor(cur, ct.dtype, ct.axes)],
            (d_layer, HTensor(nxt, ct.dtype, ct.axes)),
            layers,
        )
        body[-1] = "    " + body[-1]
        body.append(f"    {{ {ctype} *swap = {cur}; {cur} = {nxt}; {nxt} = swap; }}")
        body.append("}")
        return (d_stacked, HTensor(cur, ct.dtype, ct.axes))


def _conform(value: HValue, ty: Type) -> HValue:
    """Rename a tensor's trailing axes to its static type's names, as the reference does.

    Run-time names must be the ones the checker proved, since by-name
    alignment and named reductions read them.
    """
    if not isinstance(value, HTensor) or not isinstance(ty, Tensor):
        return value
    n = len(ty.axes)
    if len(value.axes) < n:
        return value
    head = value.axes[: len(value.axes) - n]
    tail = tuple(
        (static.name, size)
        for static, (_, size) in zip(ty.axes, value.axes[len(value.axes) - n :], strict=True)
    )
    return HTensor(value.ptr, value.dtype, head + tail)


def _layer(value: HValue, index: str) -> HValue:
    """Layer `index` (a C expression) of a stacked value: each leaf's first axis fixed."""
    match value:
        case HTensor(ptr, dtype, axes):
            chunk = 1
            for _, s in axes[1:]:
                chunk *= s
            return HTensor(f"({ptr} + {index} * {chunk})", dtype, axes[1:])
        case HTree(items):
            return HTree(tuple((k, _layer(v, index)) for k, v in items))
        case tuple():
            return tuple(_layer(v, index) for v in value)
    return value


def _unlayer(value: HValue, layers: int) -> HValue:
    """The stacked shape of a per-layer value (a template: pointers are placeholders)."""
    match value:
        case HTensor(ptr, dtype, axes):
            return HTensor(ptr, dtype, ((None, layers), *axes))
        case HTree(items):
            return HTree(tuple((k, _unlayer(v, layers)) for k, v in items))
        case tuple():
            return tuple(_unlayer(v, layers) for v in value)
    return value


def _buffer(index: int, value: HTensor | HKey) -> kir.Buffer:
    if isinstance(value, HKey):
        return kir.Buffer(index, "key", ())
    return kir.Buffer(index, value.dtype, value.axes)


def _flatten(value: HValue) -> list[HValue]:
    match value:
        case HTree(items):
            return [x for _, v in items for x in _flatten(v)]
        case tuple():
            return [x for v in value for x in _flatten(v)]
    return [value]


def _concrete_attr(value: object, dims: dict[str, int]) -> object:
    if isinstance(value, Lin):
        return _int(value, dims)
    return value


def record(
    module: core.Module,
    entry: str,
    dims: dict[str, int],
    args: list[HValue],
    dtype: str,
    threads: int = 1,
    realization: Realization | None = None,
    tiles: bool | None = None,
) -> HostProgram:
    """Record an entry at concrete dims on arguments of these layouts.

    With `threads` > 1, kernels whose outer loop is parallel and whose work is
    large enough are split over OpenMP workers (presk/sched/split.py).
    """
    rec = Recorder(module, dtype, threads=threads, realization=realization, tiles=tiles)
    names = [f"in{i}" for i in range(sum(len(leaves(a)) for a in args))]
    entry_args = [rebind(a, names) for a in args]
    inst = rec.instance(entry, dims, entry_args)
    inputs = [p for i, a in enumerate(args) for p in leaf_paths(a, f"arg{i}")]
    outputs = [(p, leaf) for p, leaf in leaf_paths(inst.result, "out") if isinstance(leaf, HTensor)]
    return HostProgram(
        [k for k in rec.kernels.values()],
        rec.order,
        inst,
        inputs,
        outputs,
        rec.launches,
        rec.launches_unfused,
        rec.splits,
        rec.dead,
        rec.sites,
    )


# Note [Fusion]
# ~~~~~~~~~~~~~
# A chain of elementwise primitives is one loop nest: each member is an
# expression inside its consumer's nest, computed in the root's arithmetic
# type, and only the root is stored. Members are chosen per function by
# `_fusion_members`; the launch of the root collects them as the steps of
# one `Launch`, producers first. With a uniform realization the bits are
# those of the unfused launches; `launches_unfused` counts what fusion saved.

# Note [Outputs]
# ~~~~~~~~~~~~~~
# A function instance receives its callers' output buffers and copies each
# result leaf into them at its end. Writing the last launches directly into
# those buffers would save the copies; the copy keeps every other case (a
# result that is an input, a view, a tuple of call results) uniform, and it
# is a memcpy of the result alone.
