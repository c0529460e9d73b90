"""The host program: an entry recorded once at its shapes, as host IR functions.

`record(module, entry, dims, args, realization)` evaluates the entry's PSK-Core
over shapes only — no arithmetic — and produces a `HostProgram`: one
`Function` (presk/host/ir.py) per (function, dims, argument layout)
instance, each a sequence of kernel launches, calls, copies and folds, with
every intermediate buffer at a fixed offset of its frame (frame sizes are
computed here, so a call allocates nothing; a call's frame offset is set
when its caller's recording ends). A projection, a field of a tree, a layer
of a stacked tree are views (`Layer`), never copies. A fold over a stack is
a loop over layers with its value in two buffers used in turn; the reverse
of a fold keeps each layer's input and walks back. Hyperparameters and
literals are constants of the program. presk/cgen/host.py prints it as C.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import assert_never

from presk import names
from presk.core import ir as core
from presk.core.walk import live
from presk.dtypes import Dtype
from presk.elab.presburger import Lin
from presk.elab.ty import Elem, Tensor, Type
from presk.host import ir as h
from presk.host.folds import FoldRecording
from presk.host.frames import pack
from presk.host.inplace import in_place, renamed
from presk.host.ir import Axes, Function, HConst, HKey, HPending, HTensor, HTree, HValue
from presk.host.plan import PlanError
from presk.host.realization import Realization
from presk.host.values import (
    HostError,
    HostRunError,
    concrete,
    conform,
    flatten,
    layer_of,
    layout,
    leaf_paths,
    leaves,
    member,
    nbytes,
    rebind,
)
from presk.kernel import ir as kir
from presk.kernel.layout import NO_SPLIT, Layout, Split
from presk.kernel.lower import ELEMENTWISE, Launch, LoweringError, Step, epilogue, lower
from presk.kernel.lower.dispatch import lower_pack
from presk.kernel.lower.layouts import (
    LayoutError,
    check_point,
    nest_of,
    operand_1,
    panel_of,
    with_pack_input,
)
from presk.kernel.text import kernel_text
from presk.sched import fusion, split

ALIGN = 64

# The recording's functions, under the name the rest of presk knows them by.
FunctionInstance = Function


@dataclass(frozen=True)
class Joinable:
    """The add a product's epilogue may be: its site, and whether it reads its other
    operand first (the order the epilogue keeps)."""

    add: str
    first: bool


@dataclass(frozen=True)
class HostProgram:
    """Every kernel and function instance of an entry, and the entry's interface."""

    kernels: list[tuple[str, kir.Kernel]]
    functions: list[Function]
    entry: Function
    inputs: list[tuple[str, HTensor | HKey]]  # leaf paths of the entry's arguments
    outputs: list[tuple[str, HTensor]]
    launches: int = 0
    launches_unfused: int = 0
    splits: int = 0
    dead: int = 0
    sites: dict[str, list[str]] = field(default_factory=dict)  # kernel → sites, `fn/%N`
    params: tuple[str, ...] = ()  # the entry's parameter names, as the program spells them
    folds: int = 0  # host loops over stacked layers
    nests: dict[str, list[tuple[Launch, str]]] = field(default_factory=dict)  # site → nests
    # A product's site → the add its epilogue may be (stated or not).
    epilogues: dict[str, Joinable] = field(default_factory=dict)

    @property
    def arena_bytes(self) -> int:
        return self.entry.frame_bytes


def _round(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def split_kernel(k: kir.Kernel, chosen: Split | None, threads: int, machine: int) -> kir.Kernel:
    """The kernel split as the default chooses (over `threads`), or as a plan states;
    a stated split is checked on the kernel and against the `machine`'s worker count
    (0: not checked, as `dump` shows kernels without running them)."""
    if chosen is None:
        if threads > 1 and split.splittable(k):
            return replace(k, split=True)
        return k
    if chosen == NO_SPLIT:
        return k
    if machine and chosen.workers not in {machine, max(1, machine // 2)}:
        raise LayoutError(
            f"a split over {chosen.workers} workers, where the machine's count is {machine} "
            "(--threads or PRESK_THREADS): a split takes the machine's count or half of it"
        )
    reason = split.split_reason(k, chosen.depth)
    if reason is not None:
        raise LayoutError(reason)
    # The whole team is the default's count: the same launch as the default's split.
    workers = 0 if chosen.workers == threads else chosen.workers
    return replace(k, split=True, split_depth=chosen.depth, workers=workers)


def kernel_dtype(launch: Launch, default: str) -> str:
    """A kernel computes in its root's arithmetic type (see Note [Fusion])."""
    root = launch.output.dtype
    return root if root in ("f64", "f32", "bf16") else default


class Recorder:
    """Records instances on demand; kernels are shared between identical nests."""

    def __init__(
        self,
        module: core.Module,
        realization: Realization,
        fuse: bool = True,
        threads: int = 1,
        tiles: bool = True,
        layouts: dict[str, Layout] | None = None,
        machine_threads: int | None = None,
    ) -> None:
        self.tiles = tiles
        self.machine_threads = threads if machine_threads is None else machine_threads
        self.layouts = layouts or {}  # a plan's point per site
        self.planned: set[str] = set()  # the sites whose point was used
        # Each site's nests (one per shape it is recorded at), with their kernels' type:
        # what a plan lays out, one point for all of them; and the kernels seen there.
        self.nests: dict[str, list[tuple[Launch, str]]] = {}
        self._nest_kernels: dict[str, set[str]] = {}
        self.functions = {fn.name: fn for fn in module.functions}
        self.realization = realization
        self.dtype = realization.default
        self.fuse = fuse
        self.threads = threads
        self.splits = 0
        self.folds = 0
        self.instances: dict[tuple[object, ...], Function] = {}
        self.numbered = 0  # instances named so far (a callee is named after its caller)
        self.order: list[Function] = []
        self.kernels: dict[tuple[object, ...], tuple[str, kir.Kernel]] = {}
        self.launches = 0
        self.launches_unfused = 0
        self.dead = 0  # launches recorded for values nothing reads
        self.site = ""  # the site being recorded, `fn/%N`
        self.sites: dict[str, list[str]] = {}  # C kernel name → the sites that launch it
        self.epilogues: dict[str, Joinable] = {}  # a product's site → the add it may finish

    # ------------------------------------------------------------ kernels

    def kernel(self, launch: Launch, point: Layout | None = None) -> str:
        """The C name of the kernel of a launch (identical kernels are printed once).

        `point` is the plan's layout of the launch's nest, already checked
        against it (`point_here`); its split is checked here, on the kernel.
        """
        try:
            k = lower(launch, kernel_dtype(launch, self.dtype), self.tiles, point)
        except LoweringError as error:
            raise HostError(str(error)) from None
        except LayoutError as error:
            raise PlanError(f"{self.site}: {error}", "E7002") from None
        k = self._split(k, None if point is None else point.split)
        return self._named(k)

    def keep_nest(self, launch: Launch, c_name: str) -> None:
        """Keep the site's nest `launch`, whose kernel is `c_name`, unless it was kept: a
        nest recorded again is the same kernel (its text is the key of `_named`)."""
        seen = self._nest_kernels.setdefault(self.site, set())
        if c_name not in seen:
            seen.add(c_name)
            self.nests.setdefault(self.site, []).append((launch, kernel_dtype(launch, self.dtype)))

    def _split(self, k: kir.Kernel, chosen: Split | None) -> kir.Kernel:
        try:
            return split_kernel(k, chosen, self.threads, self.machine_threads)
        except LayoutError as error:
            raise PlanError(f"{self.site}: {error}", "E7002") from None

    def _named(self, k: kir.Kernel) -> str:
        key = (kernel_text(k), k.split_depth, k.workers, k.lanes, k.vectorize)
        if key not in self.kernels:
            self.kernels[key] = (f"presk_k{len(self.kernels)}", k)
        c_name = self.kernels[key][0]
        sites = self.sites.setdefault(c_name, [])
        if self.site not in sites:
            sites.append(self.site)
        return c_name

    def point_here(self, launch: Launch) -> Layout | None:
        """The plan's point for the site being recorded, checked against its nest."""
        point = self.layouts.get(self.site)
        if point is None:
            return None
        self.planned.add(self.site)
        try:
            check_point(nest_of(launch), point)
        except LayoutError as error:
            raise PlanError(f"{self.site}: {error}", "E7002") from None
        return point

    def pack(self, launch: Launch) -> str:
        """The kernel that copies a contraction's operand 1 to its panel (a point's pack)."""
        return self._named(lower_pack(launch, kernel_dtype(launch, self.dtype)))

    def launch(self, c_name: str, ptrs: list[h.Ptr]) -> h.Launch:
        """A launch of a kernel: a call, or split among the workers over one of its loops."""
        k = next(kernel for name, kernel in self.kernels.values() if name == c_name)
        if not k.split:
            return h.Launch(c_name, tuple(ptrs))
        self.splits += 1
        return h.Launch(c_name, tuple(ptrs), split.bound_at(k, k.split_depth), k.workers or None)

    # ------------------------------------------------------------ instances

    def instance(self, name: str, dims: dict[str, int], args: list[HValue]) -> Function:
        """The instance of `name` at these dims and argument layouts (recorded once)."""
        key = (name, tuple(sorted(dims.items())), tuple(layout(a) for a in args))
        if key in self.instances:
            return self.instances[key]
        fn = self.functions.get(name)
        if fn is None:
            raise HostError(f"no function `{name}`")
        # Unique by its number; the name is only a reader's trace of the source.
        c_name = f"presk_f{self.numbered}_{names.hint(name)}"
        self.numbered += 1
        params: list[h.Param] = []
        bound: list[HValue] = []
        for arg in args:
            ptrs = [f"in{len(params) + i}" for i in range(len(leaves(arg)))]
            for leaf, pname in zip(leaves(arg), ptrs, strict=True):
                params.append(h.Param(pname, None if isinstance(leaf, HKey) else leaf.dtype))
            bound.append(rebind(arg, list(ptrs)))
        body = _Body(self, fn, dims, bound)
        body.run()
        inst = body.finish(c_name, tuple(params))
        self.instances[key] = inst
        self.order.append(inst)
        return inst


class _Body(FoldRecording):
    """Records one function instance's body."""

    def __init__(
        self,
        rec: Recorder,
        fn: core.Function,
        dims: dict[str, int],
        args: list[HValue],
    ) -> None:
        self.rec = rec
        self.fn = fn
        self.dims = dims
        self.env: dict[int, HValue] = {}
        for param, arg in zip(fn.params, args, strict=True):
            self.env[param.index] = conform(arg, param.type)
        self.prefix: Axes = self._prefix(fn, args)
        self.fused = fusion.members(fn) if rec.fuse else set()
        self.epilogue_adds = fusion.epilogue_adds(fn, self.fused)
        self.deferred: dict[int, _Deferred] = {}  # an add's index → the product it finishes
        self.candidates: dict[int, tuple[str, HTensor]] = {}  # an add → a product it could
        self.let_name: str | None = None
        self.locals: list[h.Local] = []
        self.body: list[h.Stmt] = []
        self.outputs: list[h.Param] = []
        self.frame = 0  # bytes of its own buffers so far
        self.sizes: dict[str, int] = {}  # each buffer's bytes
        self.callee_frame = 0
        self.calls: list[tuple[Function, int]] = []
        self.result: HValue = ()

    def _prefix(self, fn: core.Function, args: list[HValue]) -> Axes:
        for param, arg in zip(fn.params, args, strict=True):
            if isinstance(param.type, Tensor) and param.type.open and isinstance(arg, HTensor):
                return arg.axes[: len(arg.axes) - len(param.type.axes)]
        return ()

    def finish(self, c_name: str, params: tuple[h.Param, ...]) -> Function:
        """The recorded instance: its own frame is known now, and so are its calls' frames."""
        self.locals, self.frame = pack(self.locals, self.body, self.sizes)
        return Function(
            c_name,
            self.fn.name,
            params,
            tuple(self.outputs),
            tuple(self.locals),
            tuple(_at_frame(s, self.frame) for s in self.body),
            self.frame,
            self.callee_frame,
            tuple(self.calls),
            self.result,
        )

    # ------------------------------------------------------------ buffers

    def alloc(self, dtype: str, axes: Axes) -> HTensor:
        """A buffer of this instance's frame."""
        # Buffers are named after the let they hold, when it has a name.
        suffix = f"_{names.hint(self.let_name)}" if self.let_name else ""
        name = f"t{len(self.locals)}{suffix}"
        size = Dtype(dtype).size
        for _, s in axes:
            size *= s
        self.locals.append(h.Alloc(name, dtype, self.frame))
        self.sizes[name] = _round(max(size, 1))
        self.frame += self.sizes[name]
        return HTensor(name, dtype, axes)

    def axes_of(self, ty: Type) -> Axes:
        assert isinstance(ty, Tensor)
        body = tuple((a.name, concrete(a.size, self.dims)) for a in ty.axes)
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

    def emit(self, stmt: h.Stmt) -> None:
        self.body.append(stmt)

    # ------------------------------------------------------------ the body

    def run(self) -> None:
        fn = self.fn
        needed = live(fn)
        for instr in fn.body:
            self.let_name = instr.name
            self.rec.site = where = f"{fn.name}/%{instr.index}"
            start, launches = len(self.body), self.rec.launches
            self.env[instr.index] = conform(self.step(instr), instr.type)
            if instr.index not in needed:
                # Computed as written, but the result never reads it: the summary says so.
                self.rec.dead += self.rec.launches - launches
            if len(self.body) > start:
                # A comment per site, as `dump --stage core` names it.
                self.body.insert(start, h.Site(where, instr.name))
            self.let_name = None
        assert not self.deferred, "a product waits for an add that never came"
        self.rec.site = f"{fn.name}/result"
        result = self._materialize(self.value(fn.result))
        # Results land in the caller's buffers; see Note [Outputs].
        found = leaves(result)
        outputs = [f"out{i}" for i in range(len(found))]
        names = in_place([leaf.ptr for leaf in found], self.locals, outputs)
        for name, leaf in zip(outputs, found, strict=True):
            if isinstance(leaf, HKey):
                raise HostError("a function returning a key is not supported natively")
            self.outputs.append(h.Param(name, leaf.dtype))
            if not (isinstance(leaf.ptr, str) and names.get(leaf.ptr) == name):
                self.emit(h.Copy(name, leaf.ptr, nbytes(leaf)))
        if names:
            self.body = [renamed(s, names) for s in self.body]
            self.locals = [
                local
                for local in self.locals
                if not (isinstance(local, h.Alloc) and local.name in names)
            ]
        consts = [v for v in flatten(result) if isinstance(v, HConst)]
        if consts:
            raise HostError("a function returning a constant is not supported natively")
        self.result = result

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
            case core.FoldFwd(fwd, call_dims, stacked, count, init):
                return self.fold_fwd(fwd, call_dims, self.value(stacked), count, self.value(init))
            case core.FoldBwd(bwd, call_dims, stacked, count, inputs, residuals, ct):
                return self.fold_bwd(
                    bwd,
                    call_dims,
                    self.value(stacked),
                    count,
                    self.value(inputs),
                    self.value(residuals),
                    self.value(ct),
                )
            case core.Field(tree, name):
                value = self.value(tree)
                if not isinstance(value, HTree):
                    raise HostError("a field of something that is not a tree")
                return member(value, name)
            case core.Slice(tree, index):
                return layer_of(self.value(tree), index)
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
            return HConst(Fraction(concrete(size, self.dims)))
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
        if instr.index in self.deferred:
            return self._finish_product(instr, args)
        if instr.index in self.candidates:
            # A product's epilogue this add could be (what `presk plan` may state).
            site, product = self.candidates.pop(instr.index)
            reason, first, _ = self._epilogue_reason(instr, args, product)
            if reason is None:
                self.rec.epilogues[site] = Joinable(self.rec.site, first)
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
        ptrs: list[h.Ptr] = []
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
        launch = Launch(steps, inputs, out_buffer)
        point = self.rec.point_here(launch)
        if point is not None and point.epilogue:
            # The add that alone reads the product finishes its kernel: launched there.
            add = self.epilogue_adds.get(instr.index)
            if add is None:
                raise PlanError(
                    f"{self.rec.site}: `epilogue`: no add alone reads this product's value "
                    "(as a launch of its own, of the product's type)",
                    "E7002",
                )
            self.deferred[add] = _Deferred(launch, ptrs, point, out, self.rec.site)
            return out
        if instr.index in self.epilogue_adds:
            self.candidates[self.epilogue_adds[instr.index]] = (self.rec.site, out)
        self._launch_product(launch, launch, ptrs, point, out)
        return out

    def _launch_product(
        self,
        nest: Launch,
        launch: Launch,
        ptrs: list[h.Ptr],
        point: Layout | None,
        out: HTensor,
    ) -> None:
        """A launch at a plan's point (`nest`'s, which it may finish with an epilogue)
        and, where the point packs, its pack just before."""
        if point is not None and point.pack:
            # The pack is a launch of its own into a panel of the frame, just before.
            panel = panel_of(launch)
            panel_value = self.alloc(panel.dtype, panel.axes)
            read = ptrs[launch.inputs.index(operand_1(launch))]
            self.emit(self.rec.launch(self.rec.pack(launch), [read, panel_value.ptr]))
            self.rec.launches += 1
            self.rec.launches_unfused += 1
            launch = with_pack_input(launch, panel)
            ptrs = [*ptrs, panel_value.ptr]
        c_name = self.rec.kernel(launch, point)
        self.rec.keep_nest(nest, c_name)
        self.emit(self.rec.launch(c_name, [*ptrs, out.ptr]))
        self.rec.launches += 1
        self.rec.launches_unfused += len(launch.steps) + (launch.epilogue is not None)

    def _epilogue_reason(
        self, instr: core.Instr, args: list[HValue], product: HTensor
    ) -> tuple[str | None, bool, HValue]:
        """Why this add cannot be the epilogue of `product` (None: it can), whether it
        reads its other operand first, and that operand."""
        first = not (isinstance(args[0], HTensor) and args[0].ptr == product.ptr)
        other = args[0] if first else args[1]
        stored = (self.dtype_of(instr.type, instr.index), self.axes_of(instr.type))
        if not isinstance(other, HTensor):
            return "the add's other operand is not a tensor of its own", first, other
        if stored != (product.dtype, product.axes) or other.dtype != product.dtype:
            return (
                "the add and its other operand are not stored in the product's type",
                first,
                other,
            )
        return epilogue.fits(other.axes, product.axes), first, other

    def _finish_product(self, instr: core.Instr, args: list[HValue]) -> HValue:
        """The add a product's epilogue does: the product's launch, with the add's operand."""
        d = self.deferred.pop(instr.index)
        here = self.rec.site
        reason, first, other = self._epilogue_reason(instr, args, d.out)
        if reason is None and here in self.rec.layouts:
            reason = f"the add at {here} is this product's epilogue and launches nothing"
        if reason is not None:
            raise PlanError(f"{d.site}: `epilogue`: {reason}", "E7002")
        assert isinstance(other, HTensor)
        self.rec.epilogues[d.site] = Joinable(here, first)
        launch = epilogue.with_epilogue(d.launch, other.dtype, other.axes, first)
        self.rec.site = d.site  # the kernel is the product's nest
        self._launch_product(d.launch, launch, [*d.ptrs, other.ptr], d.point, d.out)
        self.rec.site = here
        return d.out

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
                return HTree(tuple((k, self._zip(v, member(b, k))) for k, v in items))
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
        self.emit(self.rec.launch(c_name, [out.ptr]))
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
        self.emit(self.rec.launch(c_name, [*(a.ptr for a in args), out.ptr]))
        self.rec.launches += 1
        self.rec.launches_unfused += 1
        return out

    # ------------------------------------------------------------ calls and folds

    def call(
        self, callee: str, call_dims: tuple[tuple[str, Lin], ...], args: list[HValue]
    ) -> HValue:
        dims = {d: concrete(size, self.dims) for d, size in call_dims}
        inst = self.rec.instance(callee, dims, args)
        outs = self._outputs_like(inst.result)
        self.emit(self._call(inst, args, outs))
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

    def _call(self, inst: Function, args: list[HValue], outs: HValue, times: int = 1) -> h.Call:
        """A call of an instance; its frame offset is this function's end, set by `finish`."""
        self.calls.append((inst, times))
        self.callee_frame = max(self.callee_frame, inst.frame_bytes)
        ptrs = [leaf.ptr for a in args for leaf in leaves(a)]
        ptrs += [leaf.ptr for leaf in leaves(outs)]
        return h.Call(inst.c_name, 0, tuple(ptrs))

    def _accumulators(self, prefix: str, like: HTensor) -> tuple[str, str]:
        """Two buffers like `like`, and the two pointers a loop uses them through, in turn."""
        a = self.alloc(like.dtype, like.axes)
        b = self.alloc(like.dtype, like.axes)
        cur, nxt = f"{prefix}{len(self.locals)}a", f"{prefix}{len(self.locals)}b"
        assert isinstance(a.ptr, str) and isinstance(b.ptr, str)
        self.locals.append(h.Accumulators(like.dtype, cur, nxt, a.ptr, b.ptr))
        return cur, nxt


@dataclass(frozen=True)
class _Deferred:
    """A product whose plan states its epilogue, waiting for the add that finishes it."""

    launch: Launch
    ptrs: list[h.Ptr]
    point: Layout
    out: HTensor
    site: str


def _at_frame(stmt: h.Stmt, frame: int) -> h.Stmt:
    """A statement with its calls' frames at `frame` (the end of the caller's own buffers)."""
    match stmt:
        case h.Call():
            return replace(stmt, frame=frame)
        case h.Fold(var, layers, order, body):
            return h.Fold(var, layers, order, tuple(_at_frame(s, frame) for s in body))
        case h.Site() | h.Launch() | h.Copy() | h.Swap():
            return stmt
        case _:
            assert_never(stmt)


def _buffer(index: int, value: HTensor | HKey) -> kir.Buffer:
    if isinstance(value, HKey):
        return kir.Buffer(index, "key", ())
    return kir.Buffer(index, value.dtype, value.axes)


def _concrete_attr(value: object, dims: dict[str, int]) -> object:
    if isinstance(value, Lin):
        return concrete(value, dims)
    return value


def record(
    module: core.Module,
    entry: str,
    dims: dict[str, int],
    args: list[HValue],
    realization: Realization,
    threads: int = 1,
    tiles: bool = True,
    layouts: dict[str, Layout] | None = None,
    machine_threads: int | None = None,
) -> HostProgram:
    """Record an entry at concrete dims on arguments of these layouts.

    With `threads` > 1, kernels whose outer loop is parallel and whose work is
    large enough are split over OpenMP workers (presk/sched/split.py).
    """
    rec = Recorder(
        module,
        realization,
        threads=threads,
        tiles=tiles,
        layouts=layouts,
        machine_threads=machine_threads,
    )
    ptrs = [f"in{i}" for i in range(sum(len(leaves(a)) for a in args))]
    entry_args = [rebind(a, ptrs) for a in args]
    inst = rec.instance(entry, dims, entry_args)
    unused = sorted(set(rec.layouts) - rec.planned)
    if unused:
        raise PlanError(
            f"the plan names `{unused[0]}`, which is no nest of `{entry}` at these dims "
            "(sites are named as `presk dump --stage core` names them)"
        )
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
        tuple(p.name for p in rec.functions[entry].params),
        rec.folds,
        rec.nests,
        rec.epilogues,
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
# A function instance receives its callers' output buffers. A result leaf
# computed into a buffer of its own frame is computed straight into the
# output buffer instead (presk/host/inplace.py renames the buffer), so a call
# returns without copying; a gradient's `.fwd` functions return many
# residuals, and each would otherwise be copied once per call. A leaf that
# is an input, a view of a stack, a fold's accumulator or a buffer returned
# twice is still copied: a memcpy of that leaf alone.


__all__ = [
    "Axes",
    "Function",
    "FunctionInstance",
    "HConst",
    "HKey",
    "HPending",
    "HTensor",
    "HTree",
    "HValue",
    "HostError",
    "HostProgram",
    "HostRunError",
    "Joinable",
    "Recorder",
    "layout",
    "leaf_paths",
    "leaves",
    "rebind",
    "record",
]
