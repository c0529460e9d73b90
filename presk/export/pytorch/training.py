"""`--train` and `--conformance-entry train:K`: the file's training run as a PyTorch loop.

Beside the modules the export writes `presk_run.py` (the model, the objective, AdamW and its
schedule), `train.py` (the loop), `pskd.py` (a NumPy reader and writer of `.psk.d`), the
data file as `data.psk.d` and presk's θ₀ as `theta0.psk.d`. With `train:K` it also runs
K steps of the 256-bit reference on the batches presk's pipeline gives and writes the
K-step `test_conformance.py` and its `conformance/` files, and the same K steps natively
in f64 and in f32 (`native_f64.json`, `native_f32.json`: how far presk's own machine
arithmetic lands from the reference, beside PyTorch's; experiments/exact_vs_almost.py).
"""

from __future__ import annotations

import json
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from presk.data import samples as store
from presk.data.format import tensor_types
from presk.diagnostics import CommandError
from presk.elab.ty import Elem, Instance, Params, TupleT, Type, dims_env, subst
from presk.entries import Binding, Entry
from presk.export.budget import budget, entry_ops, over_budget
from presk.export.pytorch.conformance import parameter_paths
from presk.export.pytorch.draws import constructor_args
from presk.export.pytorch.naming import Naming, import_line, imported, naming, words
from presk.export.pytorch.pskd_text import PSKD
from presk.export.pytorch.train_text import RUN, TEST, TRAIN
from presk.host.realization import Realization
from presk.train import checkpoint
from presk.train.data import Batches
from presk.train.data import load as load_data
from presk.train.loop import NativeStepper, Plan, ReferenceStepper, Trainer, initial_weights
from presk.types.check import CheckedProgram
from presk.types.training import sample_type
from presk.types.values import TrainingRun

RTOL = "1e-9"
# presk_run.py's own names (module level, and Objective.forward's): an imported model
# class or objective meeting one is imported under a fresh name.
RUN_NAMES = words(
    """
    math torch MODEL_TYPE PARAMETERS LEAVES BATCH BATCH_SIZE SHUFFLE_SEED EPOCHS
    CHECKPOINT_EVERY LR BETAS EPS WEIGHT_DECAY COSINE WARMUP build rate_factor optimizer
    Objective step load leaves batch_of batch
    """
)


def train_files(
    checked: CheckedProgram,
    run: TrainingRun,
    seed: int,
    steps: int | None,
    force: bool = False,
) -> dict[str, str | bytes]:
    """The loop's files; with `steps` (train:K) the K-step conformance test too, refused
    when K reference steps are estimated over the budget unless `force` (`--reference`)."""
    batches = load_data(run)
    dims = batches.dims
    env = dims_env(dims)
    params = subst(run.params, env)
    assert isinstance(params, Params)
    theta0 = initial_weights(run, dims, seed)
    names = naming(checked)
    module_file, cls, args = constructor_call(params.inst, dims, names)
    model = (module_file, cls)
    objective = (names.file(run.objective.file), names.function(run.objective))
    local = imported(RUN_NAMES, [model, objective])
    imports: dict[str, dict[str, str]] = {}
    for (module, name), alias in local.items():
        imports.setdefault(module, {})[name] = alias
    batch_ty = subst(run.objective.params[1][1], env)
    opt = run.optimizer
    paths = parameter_paths(params.inst, names)
    table = "\n".join(f"    ({p!r}, {t!r}, {n!r})," for p, t, n in paths)
    files: dict[str, str | bytes] = {
        "presk_run.py": RUN.format(
            source=run.objective.file.basename,
            imports="\n".join(import_line(f, n) for f, n in sorted(imports.items())),
            model_type=str(params),
            table=table,
            leaves=_leaves(batches, batch_ty),
            structure=_structure(batch_ty, iter(range(len(batches.paths)))),
            batch=batches.size,
            seed=batches.seed,
            epochs=run.epochs,
            every=run.checkpoint_every,
            lr=_real(opt.lr),
            beta1=_real(opt.beta1),
            beta2=_real(opt.beta2),
            eps=_real(opt.eps),
            weight_decay=_real(opt.weight_decay),
            cosine=opt.cosine,
            warmup=opt.warmup,
            build=f"{local[model]}({args})",
            objective=local[objective],
        ),
        "train.py": TRAIN.format(model=cls, source=run.objective.file.basename, theta_seed=seed),
        "pskd.py": PSKD,
        "data.psk.d": Path(run.data.resolved).read_bytes(),
        "theta0.psk.d": _psk_d(theta0, str(params)),
        "README.md": _readme(cls, run.objective.file.basename, steps),
    }
    if steps is not None:
        if not force:
            _within_budget(checked, run, batches, steps)
        files.update(_conformance(checked, run, batches, theta0, seed, steps))
    return files


def constructor_call(inst: Instance, sizes: dict[str, int], names: Naming) -> tuple[str, str, str]:
    """(Python module, class, `3, 8`): how to build the model at the run's sizes."""
    module = inst.module
    env = dict(zip(module.dims, inst.args, strict=True))

    def value(name: str) -> int:
        if name not in env:
            return sizes[name]
        lin = env[name]
        return int(lin.const + sum(c * sizes[v] for v, c in lin.coeffs))

    args = ", ".join(str(value(name)) for name in constructor_args(module))
    return names.file(module.file), names.cls(module), args


def _real(value: Fraction) -> str:
    return repr(float(value))


def _leaves(batches: Batches, batch_ty: Type) -> list[tuple[str, str]]:
    kinds = dict(tensor_types(sample_type(batch_ty)))
    out = []
    for path in batches.paths:
        elem = kinds[path].elem
        out.append((path, "real" if elem == Elem.REAL else "bool" if elem == Elem.BOOL else "idx"))
    return out


def _structure(ty: Type, counter: Any) -> Any:
    """The batch's nesting with each leaf as its index in the data's leaves."""
    if isinstance(ty, TupleT):
        return [_structure(item, counter) for item in ty.items]
    return next(counter)


def _psk_d(theta: dict[str, Any], type_text: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "theta.psk.d"
        store.write(path, [theta], type_text, "f64")
        return path.read_bytes()


def _tensor(value: Any, kind: str) -> dict[str, Any]:
    array = np.asarray(value)
    flat = array.reshape(-1).tolist()
    data = [float(x).hex() for x in flat] if kind == "real" else [int(x) for x in flat]
    return {"kind": kind, "shape": list(array.shape), "data": data}


def _within_budget(checked: CheckedProgram, run: TrainingRun, batches: Batches, steps: int) -> None:
    """Refuse K reference steps estimated over the budget (export/budget.py)."""
    one = entry_ops(checked, Entry(run.step, run.step.name, {}), Binding(dict(batches.dims), None))
    if one is not None and one * steps > budget():
        raise CommandError(
            f"the conformance test of train:{steps} needs {steps} steps of the exact reference: "
            + over_budget(one * steps, budget())
        )


def _conformance(
    checked: CheckedProgram,
    run: TrainingRun,
    batches: Batches,
    theta0: dict[str, Any],
    seed: int,
    steps: int,
) -> dict[str, str | bytes]:
    """K steps of the 256-bit reference (presk train's Trainer with ReferenceStepper)."""
    total = batches.horizon(run.epochs, None)
    if steps > total:
        raise CommandError(f"--conformance-entry train:{steps}: the run has {total} steps")
    stepper = ReferenceStepper(checked, run, batches.dims, theta0, 256)
    meta = checkpoint.Meta(0, total, run.model, "interp", "f64", 256, seed)
    trainer = Trainer(run, batches, stepper, Plan(total, 0, steps), meta, "f64")
    env = dims_env(batches.dims)
    batch_ty = subst(run.objective.params[1][1], env)
    kinds = [k for _, k in _leaves(batches, batch_ty)]
    recorded: list[list[dict[str, Any]]] = []
    log = []
    order_epoch, order = 0, None
    for record in trainer.steps():
        if record.epoch != order_epoch:
            order_epoch, order = record.epoch, batches.order(record.epoch)
        assert order is not None
        leaves = batches.batch(record.step, order)
        recorded.append([_tensor(v, k) for v, k in zip(leaves, kinds, strict=True)])
        log.append({"loss": record.loss.hex(), "lr": record.lr.hex(), "|g|": record.gnorm.hex()})
    real = {p: _tensor(v, "real") for p, v in store.flatten(theta0).items()}
    after = {p: _tensor(v, "real") for p, v in store.flatten(stepper.weights()).items()}
    document = {"entry": f"train:{steps}", "steps": steps, "total": total, "bits": 256}
    native = {
        f"conformance/native_{real_type}.json": _json(
            {**document, "bits": None, "realization": real_type, "seed": seed,
             **_native(checked, run, batches, theta0, seed, steps, total, real_type)}
        )
        for real_type in ("f64", "f32")
    }  # fmt: skip
    return {
        **native,
        "test_conformance.py": TEST.format(source=run.objective.file.basename, steps=steps,
                                           rtol=RTOL),
        "conformance/theta0.json": _json(real),
        "conformance/batches.json": _json(recorded),
        "conformance/expected.json": _json({**document, "seed": seed, "log": log,
                                            "theta": after}),
    }  # fmt: skip


def _native(
    checked: CheckedProgram,
    run: TrainingRun,
    batches: Batches,
    theta0: dict[str, Any],
    seed: int,
    steps: int,
    total: int,
    real_type: str,
) -> dict[str, Any]:
    """The same K steps by `presk train --backend native --realize real_type` (one thread,
    so that the sums' order is fixed): each step's log and the parameters after them."""
    stepper = NativeStepper(checked, run, batches.dims, theta0, Realization(real_type), 1)
    meta = checkpoint.Meta(0, total, run.model, "native", real_type, 0, seed)
    trainer = Trainer(run, batches, stepper, Plan(total, 0, steps), meta, real_type)
    log = [{"loss": r.loss.hex(), "lr": r.lr.hex(), "|g|": r.gnorm.hex()} for r in trainer.steps()]
    flat = store.flatten(stepper.weights())
    return {"log": log, "theta": {p: _tensor(v, "real") for p, v in flat.items()}}


def _json(document: object) -> str:
    return json.dumps(document, ensure_ascii=False) + "\n"


def _readme(cls: str, source: str, steps: int | None) -> str:
    test = ""
    if steps is not None:
        test = (
            "\n`test_conformance.py` replays the first "
            f"{steps} steps in float64 on the batches presk's pipeline gave (stored in "
            "`conformance/`, unshuffled here) and compares the parameters with the 256-bit "
            f"reference's (`presk train`'s reference stepper) to a relative {RTOL}:\n\n"
            "    python -m pytest -q -s test_conformance.py\n"
        )
    return f"""# `{cls}` trained with PyTorch

Generated by presk from the `training run` of {source}. Do not edit by hand.

    python train.py --steps 100 --log-every 25 --ckpt ckpt [--dtype float32|float64]

`train.py` starts from presk's θ₀ (`theta0.psk.d`; `--init pytorch` uses the modules' own
initializers instead), reads `data.psk.d` with `pskd.py` (NumPy, no presk), and steps
`torch.optim.AdamW` with the optimizer block's constants; a `LambdaLR` gives each step the
rate of presk's `adamw.lr`. It prints presk train's log lines and the median time of a step.
`--device auto` (the default) steps on CUDA when torch finds it, else on the CPU.
Each epoch's order is drawn with `torch.randperm`, not presk's permutation, so after the
first batch the losses are not presk train's.

`--ckpt DIR` receives, every `checkpoint every` steps and at the end, `step_N.pt` /
`final.pt` (torch's state dicts of the model, the optimizer and the schedule) and
`step_N.psk.d` / `final.psk.d` (the weights as one sample of the parameters' presk type, the
reals in the run's dtype), which `presk run --weights` reads.
{test}{_DISTRIBUTED}"""


_DISTRIBUTED = """
## On several processes and machines

`train.py` runs unchanged under `torchrun`; with its environment (`RANK`, `WORLD_SIZE`,
`LOCAL_RANK`) set it joins a process group (nccl when torch finds CUDA, each process on the
GPU of its `LOCAL_RANK`; gloo on the CPU, or with `--device cpu`) and wraps the objective in
`DistributedDataParallel`. The batch size and the schedule stay the single process's: of W
processes, rank r takes rows r·B/W … (r+1)·B/W − 1 of every batch, DDP averages the
gradients, and the loss logged is the mean of the ranks' means, the whole batch's. So the
run is the single process's, up to the order of the sums, as long as the objective is a
mean over its batch (a sum would be divided by W). B must be a multiple of W. Rank 0 alone
prints and writes `--ckpt`; the others print nothing.

One machine, 4 processes:

    torchrun --nproc_per_node=4 train.py --steps 100 --ckpt ckpt

Several machines: copy this directory to each and start the same command on every one,
with the count of machines, this one's index and the address of machine 0 (any free port):

    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 \\
        --rdzv-endpoint=node0.example:29500 train.py --steps 100 --ckpt ckpt

(`--node_rank=1` on the second.) With `--rdzv-backend=c10d --rdzv-id=JOB` torchrun hands
out the machines' ranks itself and `--node_rank` is left out. The checkpoints land on
machine 0's disk.
"""

__all__ = ["train_files"]
