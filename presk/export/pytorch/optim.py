"""The generated functions of a training run (presk/types/training.py) as PyTorch code.

presk builds `adamw.lr`, `adamw.step` and `run.step` as Core, leaf by leaf; here they are
written as a reader of PyTorch would write them, over the dicts of tensors that
`torch.func` uses (keyed like `named_parameters()`): `adamw_lr(t, total)`,
`adamw_step(θ, m, v, g, t, lr)` and `run_step(model, θ, m, v, t, total, batch)`. They let
a conformance test check one optimizer step against the 256-bit reference; `train.py`
steps torch's own AdamW (presk_run.py), which computes the same update.
"""

from __future__ import annotations

from collections.abc import Callable

from presk.export.pytorch.body import signature_names
from presk.export.pytorch.names import number
from presk.types.values import FnInfo, TrainingRun


def optimizer_functions(
    run: TrainingRun,
    function_ref: Callable[[FnInfo], str],
    function_name: Callable[[FnInfo], str],
) -> str:
    """The three functions' text, for the file holding the `training run` block
    (`function_name`: each one's name, chosen beside the file's own; naming.py)."""
    opt = run.optimizer
    source = run.objective.file.basename
    rate, update, step = (function_name(f) for f in (run.rate, run.update, run.step))
    w = opt.warmup
    if not opt.cosine:
        schedule = [f"    return {number(opt.lr)}"]
        words = "a constant rate"
    else:
        schedule = [f"    past = max(t - {w}, 0)"]
        rate_text = number(opt.lr)
        if w > 0:
            schedule.append(f"    rate = {number(opt.lr)} * ((t - past) / {w})")
            rate_text = "rate"
        schedule += [
            f"    length = (total - {w}) + max({w + 1} - total, 0)",
            f"    return {rate_text} * (0.5 * (1 + math.cos(math.pi * past / length)))",
        ]
        words = f"a warm-up of {w} steps, then half a cosine to 0 at `total`"
    decay = f"x - lr * {number(opt.weight_decay)} * x" if opt.weight_decay else "x"
    objective = run.objective
    assert objective.core is not None
    call: list[str] = []  # the objective takes (θ, batch), θ with its module beside it
    for _, companion in signature_names(objective, objective.core):
        call += ["model", "θ"] if companion is not None else ["batch"]
    call_text = ", ".join(call)
    return f'''def {rate}(t, total):
    """Generated from `optimizer {opt.name}` ({source}): the rate of step t of total,
    {words} (presk's `{run.rate.name}`)."""
{chr(10).join(schedule)}


def {update}(θ, m, v, g, t, lr):
    """Generated from `optimizer {opt.name}` ({source}): one AdamW update of every leaf
    (presk's `{run.update.name}`), the weight decay decoupled as in torch.optim.AdamW."""
    c1, c2 = 1 - {number(opt.beta1)} ** t, 1 - {number(opt.beta2)} ** t
    new_θ, new_m, new_v = {{}}, {{}}, {{}}
    for name, x in θ.items():
        new_m[name] = {number(opt.beta1)} * m[name] + {number(1 - opt.beta1)} * g[name]
        new_v[name] = {number(opt.beta2)} * v[name] + {number(1 - opt.beta2)} * g[name] * g[name]
        step = lr * ((new_m[name] / c1) / ((new_v[name] / c2).sqrt() + {number(opt.eps)}))
        new_θ[name] = {decay} - step
    return new_θ, new_m, new_v


def {step}(model, θ, m, v, t, total, batch):
    """Generated from `training run` ({source}): one step of presk train (presk's
    `{run.step.name}`): the objective and its gradient in θ, |g|, the rate, the update."""
    g, value = torch.func.grad_and_value(lambda θ: {function_ref(objective)}({call_text}))(θ)
    norm = torch.sqrt(sum((leaf * leaf).sum() for leaf in g.values()))
    lr = {rate}(t, total)
    new_θ, new_m, new_v = {update}(θ, m, v, g, t, lr)
    return value, norm, lr, new_θ, new_m, new_v'''


__all__ = ["optimizer_functions"]
