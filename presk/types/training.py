"""Training runs and optimizers: checked, then generated as PSK-Core functions.

An `optimizer adamw { … }` block and a `training run { … }` block that names it
become three ordinary Core functions, so that every backend runs them and
`dump --stage core` prints them (Note [The training step is Core]):

    adamw.lr(t, total) -> ℝ[]                       the schedule's rate at step t
    adamw.step(θ, m, v, g, t, lr) -> (θ', m', v')   one AdamW update of every leaf
    run.step{B}(θ, m, v, t, total, batch)
        -> (loss, |g|, lr, θ', m', v')              value and gradient, then the update

`check_trainings` reports a malformed block as E2017 (optimizer) or E2018
(training run) and returns what `presk train` needs to drive the loop.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from fractions import Fraction

from presk.core import ir
from presk.core.build import Builder
from presk.elab.presburger import Lin
from presk.elab.program import ConstError, FileEnv, const_eval
from presk.elab.ty import SCALAR, Elem, Params, Tensor, TupleT, Type, const_lin
from presk.syntax import ast
from presk.types.regularity import Reg
from presk.types.scope import find_module, member_type
from presk.types.values import AdamW, DataPipeline, FnInfo, TrainingRun

# AdamW's constants when a block leaves them out (PyTorch's defaults).
ADAMW_DEFAULTS: dict[str, Fraction] = {
    "lr": Fraction(1, 1000),
    "weight_decay": Fraction(1, 100),
    "beta1": Fraction(9, 10),
    "beta2": Fraction(999, 1000),
    "eps": Fraction(1, 10**8),
}
OPTIMIZER_FIELDS = (*ADAMW_DEFAULTS, "schedule")
TRAINING_FIELDS = ("model", "objective", "optimizer", "data", "epochs")

# A step count: an index, so that every realization holds it exactly.
STEP = Tensor(Elem.IDX, (), bound=const_lin(2**53))

# π to 120 digits: exact far beyond any precision a run asks for (256 bits ≈ 77 digits).
PI = Fraction(
    314159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651328230664709384,
    10**125,
)


class BlockError(Exception):
    """A malformed block: reported by the checker with its code and span."""

    def __init__(self, code: str, message: str, span: object, label: str, help: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.span, self.label = code, message, span, label
        self.help = help or None


def source_text(node: ast.Expr) -> str:
    return node.span.source.text[node.span.start : node.span.end]


# ---------------------------------------------------------------- the optimizer block


def optimizer_constants(file: FileEnv, block: ast.Optimizer) -> AdamW:
    """The block's constants, checked (E2017)."""
    if block.name.name != "adamw":
        raise BlockError(
            "E2017",
            f"unknown optimizer `{block.name.name}`",
            block.name.span,
            "the block's name is its algorithm",
            "the optimizer presk builds is `adamw`",
        )
    values = dict(ADAMW_DEFAULTS)
    cosine, warmup = False, 0
    seen: set[str] = set()
    for f in block.fields:
        key = f.name.name
        if key not in OPTIMIZER_FIELDS:
            raise BlockError(
                "E2017",
                f"`adamw` has no field `{key}`",
                f.name.span,
                "unknown field",
                "its fields are " + ", ".join(f"`{n}`" for n in OPTIMIZER_FIELDS),
            )
        if key in seen:
            raise BlockError("E2017", f"`{key}` is given twice", f.name.span, "again here")
        seen.add(key)
        if key == "schedule":
            cosine, warmup = _schedule(file, f.value)
            continue
        value = _constant(file, f.value, "E2017")
        low_ok = value > 0 if key in ("lr", "eps") else value >= 0
        high_ok = value < 1 if key in ("beta1", "beta2") else True
        if not (low_ok and high_ok):
            wanted = {
                "lr": "positive",
                "eps": "positive",
                "weight_decay": "at least 0",
            }.get(key, "in [0, 1)")
            raise BlockError(
                "E2017", f"`{key}` must be {wanted}", f.value.span, f"this is {float(value):g}"
            )
        values[key] = value
    return AdamW(
        block.name.name,
        values["lr"],
        values["weight_decay"],
        values["beta1"],
        values["beta2"],
        values["eps"],
        cosine,
        warmup,
    )


def _constant(file: FileEnv, expr: ast.Expr, code: str) -> Fraction:
    try:
        return const_eval(file, expr)
    except ConstError as error:
        raise BlockError(code, error.message, error.span, error.label) from None


def _natural(file: FileEnv, expr: ast.Expr, code: str, what: str, least: int = 0) -> int:
    value = _constant(file, expr, code)
    if value.denominator != 1 or value < least:
        raise BlockError(
            code,
            f"{what} must be a whole number of at least {least}",
            expr.span,
            f"this is {source_text(expr)}",
        )
    return int(value)


def _schedule(file: FileEnv, expr: ast.Expr) -> tuple[bool, int]:
    """`constant` or `cosine(warmup = N)`: (cosine, warm-up steps)."""
    match expr:
        case ast.Name(ident) if ident.name == "constant":
            return False, 0
        case ast.Call(ast.Name(ident), args) if ident.name == "cosine":
            warmup = 0
            for arg in args:
                if not (isinstance(arg, ast.KwArg) and arg.name.name == "warmup"):
                    raise BlockError(
                        "E2017",
                        "`cosine` takes one argument, `warmup = N`",
                        arg.span,
                        "not `warmup = N`",
                    )
                warmup = _natural(file, arg.value, "E2017", "`warmup`")
            return True, warmup
    raise BlockError(
        "E2017",
        f"unknown schedule `{source_text(expr)}`",
        expr.span,
        "not a schedule",
        "write `constant` or `cosine(warmup = N)`",
    )


# ---------------------------------------------------------------- the training block


def pipeline_parts(expr: ast.Expr) -> tuple[ast.Stream, list[ast.Call]] | None:
    """`stream "f" |> step(…) |> …` as the stream and its steps, or None."""
    steps: list[ast.Call] = []
    while isinstance(expr, ast.Binary) and expr.op == ast.BinOp.PIPE:
        if not (isinstance(expr.right, ast.Call) and isinstance(expr.right.func, ast.Name)):
            return None
        steps.insert(0, expr.right)
        expr = expr.left
    if isinstance(expr, ast.Stream):
        return expr, steps
    return None


def _pipeline(file: FileEnv, expr: ast.Expr, dims: list[str]) -> DataPipeline:
    parts = pipeline_parts(expr)
    if parts is None:
        raise BlockError(
            "E2018",
            "`data` must be a pipeline",
            expr.span,
            'not `stream "F.psk.d" |> …`',
            'write `stream "F.psk.d" |> shuffle(seed = s) |> batch(B = n)`',
        )
    stream, steps = parts
    seed: int | None = None
    batch: tuple[str, int] | None = None
    for step in steps:
        assert isinstance(step.func, ast.Name)
        kind = step.func.ident.name
        kwargs = [a for a in step.args if isinstance(a, ast.KwArg)]
        if len(kwargs) != len(step.args) or len(kwargs) != 1:
            raise BlockError(
                "E2018",
                f"`{kind}` takes one named argument",
                step.span,
                "here",
                "write `shuffle(seed = s)` and `batch(B = n)`",
            )
        arg = kwargs[0]
        if kind == "shuffle" and arg.name.name == "seed" and seed is None:
            seed = _natural(file, arg.value, "E2018", "a shuffle's seed")
        elif kind == "batch" and batch is None:
            if arg.name.name not in dims:
                raise BlockError(
                    "E2018",
                    f"`batch` binds `{arg.name.name}`, which is not a dimension of the objective",
                    arg.name.span,
                    "not a dimension of the objective",
                    "the objective's dimensions: " + (", ".join(dims) or "none"),
                )
            batch = (arg.name.name, _natural(file, arg.value, "E2018", "a batch size", 1))
        else:
            raise BlockError(
                "E2018",
                f"unexpected pipeline step `{source_text(step)}`",
                step.span,
                "not a step here",
                "a pipeline is a stream, an optional `shuffle(seed = s)`, then `batch(B = n)`",
            )
    if batch is None:
        raise BlockError("E2018", "the pipeline has no `batch(B = n)`", expr.span, "no batch size")
    directory = os.path.dirname(file.path)
    resolved = os.path.normpath(os.path.join(directory, stream.path.value))
    return DataPipeline(stream.path.value, resolved, seed, batch[0], batch[1])


def module_named(file: FileEnv, expr: ast.Expr) -> tuple[object, str]:
    path: list[ast.Ident] = []
    node = expr
    while isinstance(node, ast.Member):
        path.insert(0, node.name)
        node = node.base
    if isinstance(node, ast.Name):
        path.insert(0, node.ident)
        module = find_module(file, tuple(path))
        if module is not None:
            return module, source_text(expr)
    raise BlockError(
        "E2018", f"`{source_text(expr)}` is not a module", expr.span, "expected a module"
    )


def function_named(file: FileEnv, expr: ast.Expr, functions: list[FnInfo], code: str) -> FnInfo:
    """The checked function of this file that a block names (`code` when it is not one)."""
    name = source_text(expr)
    decl = file.fns.get(name) if isinstance(expr, ast.Name) else None
    info = next((i for i in functions if decl is not None and i.decl is decl), None)
    if info is None:
        raise BlockError(
            code, f"`{name}` is not a function of this file", expr.span, "expected a function"
        )
    if info.state != "done":
        raise BlockError(code, f"`{name}` did not check", expr.span, "see its errors above")
    return info


def _objective(
    file: FileEnv, expr: ast.Expr, functions: list[FnInfo], model: object, model_text: str
) -> FnInfo:
    name = source_text(expr)
    info = function_named(file, expr, functions, "E2018")
    shape = (
        len(info.params) == 2
        and isinstance(info.params[0][1], Params)
        and info.params[0][1].inst.module is model
        and info.ret == SCALAR
    )
    if not shape:
        raise BlockError(
            "E2018",
            f"the objective `{name}` must take (θ : params {model_text}, batch) and return ℝ[]",
            expr.span,
            f"`{name}` takes ({', '.join(str(t) for _, t, _ in info.params)}) -> {info.ret}",
        )
    return info


def sample_type(batch: Type) -> Type:
    """A batch type without its `batch` axes: the type of one sample of the data file."""
    match batch:
        case Tensor():
            return batch.with_axes(tuple(a for a in batch.axes if a.name != "batch"))
        case TupleT(items):
            return TupleT(tuple(sample_type(item) for item in items))
    return batch


def _batch_axes(ty: Type, dim: str) -> bool:
    """Every tensor of the batch type has a `batch` axis of size `dim`."""
    match ty:
        case Tensor(axes=axes):
            return any(a.name == "batch" and a.size == Lin.var(dim) for a in axes)
        case TupleT(items):
            return all(_batch_axes(item, dim) for item in items)
    return False


def block_fields(
    fields: tuple[ast.Field, ...],
    allowed: tuple[str, ...],
    required: tuple[str, ...],
    name: ast.Ident,
    code: str,
    what: str,
) -> dict[str, ast.Field]:
    """A block's fields by name: an unknown one, or a required one missing, is `code`."""
    found: dict[str, ast.Field] = {}
    for f in fields:
        if f.name.name not in allowed:
            raise BlockError(
                code,
                f"{what} has no field `{f.name.name}`",
                f.name.span,
                "unknown field",
                "its fields are " + ", ".join(f"`{n}`" for n in allowed),
            )
        found[f.name.name] = f
    for key in required:
        if key not in found:
            raise BlockError(
                code,
                f"{what} has no `{key}`",
                name.span,
                f"`{key}` missing",
                "it names its " + ", ".join(f"`{n}`" for n in required),
            )
    return found


def check_training(
    file: FileEnv,
    block: ast.Training,
    functions: list[FnInfo],
    optimizers: dict[str, AdamW | None],
    taken: set[str],
) -> TrainingRun | None:
    """One training run, checked (E2018), with its generated functions; None when it names
    an optimizer block whose own error is already reported."""
    required = ("model", "objective", "optimizer", "data")
    fields = block_fields(
        block.fields, TRAINING_FIELDS, required, block.name, "E2018", "a training run"
    )
    model, model_text = module_named(file, fields["model"].value)
    objective = _objective(file, fields["objective"].value, functions, model, model_text)
    opt_expr = fields["optimizer"].value
    opt_name = source_text(opt_expr) if isinstance(opt_expr, ast.Name) else ""
    if opt_name in optimizers and optimizers[opt_name] is None:
        return None
    optimizer = optimizers.get(opt_name)
    if optimizer is None:
        raise BlockError(
            "E2018",
            f"no optimizer block `{source_text(opt_expr)}` in this file",
            opt_expr.span,
            "not an optimizer",
            "declare `optimizer adamw { … }`",
        )
    data = _pipeline(file, fields["data"].value, objective.dims)
    batch_ty = objective.params[1][1]
    if not _batch_axes(batch_ty, data.dim):
        raise BlockError(
            "E2018",
            f"every tensor of the objective's batch needs an axis `batch: {data.dim}`",
            fields["data"].value.span,
            f"the batch is {batch_ty}",
        )
    epochs = (
        _natural(file, fields["epochs"].value, "E2018", "`epochs`", 1) if "epochs" in fields else 1
    )
    every: int | None = None
    directory: str | None = None
    if block.checkpoint is not None:
        every = _natural(file, block.checkpoint.every, "E2018", "a checkpoint interval", 1)
        directory = block.checkpoint.to.value
    params = objective.params[0][1]
    assert isinstance(params, Params)
    rate_name = _fresh(f"{optimizer.name}.lr", taken)
    update_name = _fresh(f"{optimizer.name}.step", taken)
    step_name = _fresh(f"{block.name.name}.step", taken)
    dims = [d for d in objective.dims if d in _vars(params)]
    rate = _info(file, rate_name, [], rate_function(rate_name, optimizer))
    update = _info(file, update_name, dims, update_function(update_name, dims, params, optimizer))
    step_fn = step_function(step_name, objective, params, batch_ty, rate_name, update_name, dims)
    step = _info(file, step_name, list(objective.dims), step_fn)
    return TrainingRun(
        block.name.name,
        model_text.split(".")[-1],
        params,
        objective,
        optimizer,
        data,
        epochs,
        every,
        directory,
        step,
        update,
        rate,
    )


def _fresh(name: str, taken: set[str]) -> str:
    out, n = name, 2
    while out in taken:
        out, n = f"{name}{n}", n + 1
    taken.add(out)
    return out


def _vars(params: Params) -> set[str]:
    """The dimensions a parameter tree's shapes depend on (a module's file `dim`s too)."""
    from presk.types.scope import param_leaves

    return {
        name
        for _, leaf, _ in param_leaves(params.inst)
        for axis in leaf.axes
        for name, _ in axis.size.coeffs
    }


def _info(file: FileEnv, name: str, dims: list[str], fn: ir.Function) -> FnInfo:
    info = FnInfo(name, file, None, None, generated=True)
    info.block = True
    info.dims = dims
    info.params = [(p.name, p.type, None) for p in fn.params]
    info.all_params = list(info.params)
    info.ret = fn.ret
    info.regularity = {p.name: (Reg.SMOOTH, None) for p in fn.params}
    info.core = fn
    info.state = "done"
    return info


# ---------------------------------------------------------------- the generated Core


def _real(b: Builder, value: Fraction) -> ir.Operand:
    return b.prim("real", (ir.Lit(value),), SCALAR)


def _count(b: Builder, step: ir.Operand) -> ir.Operand:
    """A step count as a real (exact: counts stay far below 2⁵³)."""
    return b.prim("real", (step,), SCALAR)


def rate_function(name: str, opt: AdamW) -> ir.Function:
    """`lr · min(t, w)/w · ½(1 + cos(π · max(t − w, 0) / max(total − w, 1)))`, branch-free.

    Every factor is exactly 1 where its phase does not apply (min(t, w)/w = 1 after the
    warm-up, cos 0 = 1 during it), so the two phases are one formula.
    """
    b = Builder(name, ())
    t_count = b.param("t", STEP)
    total_count = b.param("total", STEP)
    t, total = _count(b, t_count), _count(b, total_count)
    rate: ir.Operand = _real(b, opt.lr)
    if opt.cosine:
        w = Fraction(opt.warmup)
        past = b.prim("relu", (b.prim("sub", (t, ir.Lit(w)), SCALAR),), SCALAR)
        if opt.warmup > 0:
            ramp = b.prim("div", (b.prim("sub", (t, past), SCALAR), ir.Lit(w)), SCALAR)
            rate = b.prim("mul", (rate, ramp), SCALAR)
        span = b.prim("sub", (total, ir.Lit(w)), SCALAR)
        short = b.prim("relu", (b.prim("sub", (ir.Lit(w + 1), total), SCALAR),), SCALAR)
        length = b.prim("add", (span, short), SCALAR)
        angle = b.prim("div", (b.prim("mul", (ir.Lit(PI), past), SCALAR), length), SCALAR)
        half = b.prim(
            "mul",
            (
                ir.Lit(Fraction(1, 2)),
                b.prim("add", (ir.Lit(Fraction(1)), b.prim("cos", (angle,), SCALAR)), SCALAR),
            ),
            SCALAR,
        )
        rate = b.prim("mul", (rate, half), SCALAR)
    return b.finish(SCALAR, rate)


def _members(ty: Params) -> list[tuple[str, Type]]:
    decl = ty.inst.module.decl
    names = [p.name.name for p in decl.params] + [u.name.name for u in decl.uses]
    out: list[tuple[str, Type]] = []
    for name in names:
        member = member_type(ty.inst, name)
        assert member is not None
        out.append((name, member))
    return out


LeafMap = Callable[[Builder, Tensor, list[ir.Operand]], list[ir.Operand]]


def map_tree(
    b: Builder, ty: Params, trees: list[ir.Operand], leaf: LeafMap, k: int
) -> list[ir.Operand]:
    """k new trees of type `ty`, each leaf computed by `leaf` from the trees' leaves."""
    outs: list[ir.Operand] = [b.prim("zeros_like", (trees[0],), ty) for _ in range(k)]
    for name, member in _members(ty):
        parts = [b.emit(None, member, ir.Field(tree, name)) for tree in trees]
        if isinstance(member, Params):
            made = map_tree(b, member, list(parts), leaf, k)
        else:
            assert isinstance(member, Tensor)
            made = leaf(b, member, list(parts))
        outs = [
            b.prim("set_field", (out, new), ty, (("field", name),))
            for out, new in zip(outs, made, strict=True)
        ]
    return outs


def _leaves(b: Builder, ty: Params, tree: ir.Operand) -> list[tuple[Tensor, ir.Operand]]:
    found: list[tuple[Tensor, ir.Operand]] = []
    for name, member in _members(ty):
        part = b.emit(None, member, ir.Field(tree, name))
        if isinstance(member, Params):
            found.extend(_leaves(b, member, part))
        else:
            assert isinstance(member, Tensor)
            found.append((member, part))
    return found


def update_function(name: str, dims: list[str], params: Params, opt: AdamW) -> ir.Function:
    """AdamW on every leaf x with moments m, v, gradient g, at step t and rate lr:

        m' = β₁m + (1 − β₁)g        v' = β₂v + (1 − β₂)g²
        x' = x − lr·wd·x − lr · (m'/(1 − β₁ᵗ)) / (√(v'/(1 − β₂ᵗ)) + ε)

    (decoupled weight decay, from the leaf before the step, as PyTorch's AdamW).
    """
    b = Builder(name, tuple(dims))
    theta = b.param("θ", params)
    m = b.param("m", params)
    v = b.param("v", params)
    g = b.param("g", params)
    t_count = b.param("t", STEP)
    lr = b.param("lr", SCALAR)
    t = _count(b, t_count)

    def corr(beta: Fraction) -> ir.Operand:
        power = b.prim("pow", (_real(b, beta), t), SCALAR)
        return b.prim("sub", (ir.Lit(Fraction(1)), power), SCALAR)

    c1, c2 = corr(opt.beta1), corr(opt.beta2)
    decay = b.prim("mul", (lr, ir.Lit(opt.weight_decay)), SCALAR) if opt.weight_decay else None

    def leaf(bb: Builder, ty: Tensor, xs: list[ir.Operand]) -> list[ir.Operand]:
        x, mx, vx, gx = xs
        m1 = bb.prim(
            "add",
            (
                bb.prim("mul", (ir.Lit(opt.beta1), mx), ty),
                bb.prim("mul", (ir.Lit(1 - opt.beta1), gx), ty),
            ),
            ty,
        )
        g2 = bb.prim("mul", (gx, gx), ty)
        v1 = bb.prim(
            "add",
            (
                bb.prim("mul", (ir.Lit(opt.beta2), vx), ty),
                bb.prim("mul", (ir.Lit(1 - opt.beta2), g2), ty),
            ),
            ty,
        )
        mhat = bb.prim("div", (m1, c1), ty)
        vhat = bb.prim("div", (v1, c2), ty)
        denom = bb.prim("add", (bb.prim("sqrt", (vhat,), ty), ir.Lit(opt.eps)), ty)
        step = bb.prim("mul", (lr, bb.prim("div", (mhat, denom), ty)), ty)
        base = x
        if decay is not None:
            base = bb.prim("sub", (x, bb.prim("mul", (decay, x), ty)), ty)
        return [bb.prim("sub", (base, step), ty), m1, v1]

    new = map_tree(b, params, [theta, m, v, g], leaf, 3)
    ret = TupleT((params, params, params))
    return b.finish(ret, b.emit(None, ret, ir.MakeTuple(tuple(new))))


def step_function(
    name: str,
    objective: FnInfo,
    params: Params,
    batch_ty: Type,
    rate: str,
    update: str,
    update_dims: list[str],
) -> ir.Function:
    """The whole training step: the objective's value and gradient in θ, |g|, the update."""
    assert objective.core is not None
    b = Builder(name, tuple(objective.dims))
    theta = b.param("θ", params)
    m = b.param("m", params)
    v = b.param("v", params)
    t = b.param("t", STEP)
    total = b.param("total", STEP)
    batch = b.param("batch", batch_ty)
    dims = tuple((d, Lin.var(d)) for d in objective.dims)
    both = TupleT((SCALAR, params))
    vg = b.emit(None, both, ir.GradOf(objective.core.name, dims, (theta, batch), 0, True))
    loss = b.emit("loss", SCALAR, ir.Get(vg, 0))
    g = b.emit("g", params, ir.Get(vg, 1))
    squares: ir.Operand | None = None
    for ty, leaf in _leaves(b, params, g):
        s = b.prim("sum", (b.prim("mul", (leaf, leaf), ty),), SCALAR)
        squares = s if squares is None else b.prim("add", (squares, s), SCALAR)
    norm = b.prim("sqrt", (squares,), SCALAR) if squares is not None else _real(b, Fraction(0))
    lr = b.emit("lr", SCALAR, ir.Call(rate, (), (t, total)))
    new_ty = TupleT((params, params, params))
    at = tuple((d, Lin.var(d)) for d in update_dims)
    new = b.emit(None, new_ty, ir.Call(update, at, (theta, m, v, g, t, lr)))
    parts = [b.emit(None, params, ir.Get(new, i)) for i in range(3)]
    ret = TupleT((SCALAR, SCALAR, SCALAR, params, params, params))
    return b.finish(ret, b.emit(None, ret, ir.MakeTuple((loss, norm, lr, *parts))))


def check_trainings(
    main: FileEnv, functions: list[FnInfo], report: Callable[[BlockError], None]
) -> list[TrainingRun]:
    """Every optimizer and training run of the main file; errors go to `report`."""
    optimizers: dict[str, AdamW | None] = {}
    for name, opt_block in main.optimizers.items():
        try:
            optimizers[name] = optimizer_constants(main, opt_block)
        except BlockError as error:
            optimizers[name] = None
            report(error)
    taken = {info.name for info in functions}
    runs: list[TrainingRun] = []
    for block in main.trainings:
        try:
            run = check_training(main, block, functions, optimizers, taken)
        except BlockError as error:
            report(error)
            continue
        if run is not None:
            runs.append(run)
    return runs


# Note [The training step is Core]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The optimizer could be a Python loop over leaves; it is Core instead, so that the
# reference runs it exactly, the native backend compiles it into the same entry as
# the gradient (one foreign call a step), and an export prints it like any other
# function. The step's count t and the horizon are reals (ℝ[]) because the rate and
# the bias corrections are real functions of them. The gradient comes from a `grad`
# with a value (ir.GradOf(value=True)), which differentiation turns into a call of
# the objective's value_vjp, so the forward pass runs once for both.
