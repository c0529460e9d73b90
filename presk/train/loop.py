"""The training loop: θ₀, the state (θ, m, v), one step at a time, on either backend.

A step is one call of the run's generated `run.step` (presk/types/training.py):
on the reference interpreter at `bits`, or natively as one compiled entry and
one foreign call. The loop around it — batches, the schedule's step count,
checkpoints — is here, and is the same for both, so a seed gives the same θ₀
and the same batches everywhere.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import gmpy2
import numpy as np

from presk.diagnostics import CommandError, printable
from presk.elab.ty import SCALAR, Params, Type, dims_env, subst
from presk.entries import Binding, Entry
from presk.host.realization import Realization
from presk.interp.adjoints import zeros_like
from presk.interp.reference import Value
from presk.interp.run import reference_interpreter
from presk.interp.synth import draw, to_reference
from presk.interp.tensor import Kind, Tensor
from presk.interp.tree import Tree
from presk.kernel.layout import Layout
from presk.pipeline import compile_entry, core_module
from presk.train import checkpoint
from presk.train.data import Batches
from presk.types.check import CheckedProgram
from presk.types.values import TrainingRun


def exponent(x: float, digits: int) -> str:
    """`1.000e-2`: a mantissa of `digits` decimals and a bare exponent."""
    mantissa, power = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(power)}"


@dataclass(frozen=True)
class StepLog:
    """One step's record, as log.jsonl holds it."""

    step: int
    epoch: int
    loss: float
    lr: float
    gnorm: float
    ms: float

    def line(self) -> str:
        """The line `presk train` prints: `step 20  epoch 2  loss 0.695551  lr 1.000e-2  |g| …`."""
        rate, norm = exponent(self.lr, 3), exponent(self.gnorm, 4)
        return f"step {self.step}  epoch {self.epoch}  loss {self.loss:.6f}  lr {rate}  |g| {norm}"

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "epoch": self.epoch,
            "loss": self.loss,
            "lr": self.lr,
            "|g|": self.gnorm,
            "ms": round(self.ms, 4),
        }


class Stepper(Protocol):
    """A backend's side of the loop."""

    def step(self, t: int, total: int, batch: list[Any]) -> tuple[float, float, float]: ...

    def weights(self) -> dict[str, Any]: ...

    def moments(self) -> tuple[dict[str, Any], dict[str, Any]]: ...

    def exact(self) -> dict[str, Any] | None: ...

    def restore(self, loaded: checkpoint.Loaded) -> None: ...


def _as_dict(tree: Tree) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items:
        if isinstance(value, Tree):
            out[key] = _as_dict(value)
        else:
            assert isinstance(value, Tensor)
            out[key] = np.array([float(x) for x in value.data.reshape(-1)]).reshape(
                value.data.shape
            )
    return out


def _scalar(value: Any) -> float:
    if isinstance(value, Tensor):
        return float(value.data.reshape(-1)[0])
    return float(np.asarray(value).reshape(-1)[0])


class ReferenceStepper:
    """The step on the reference interpreter, at `bits`; the state stays exact."""

    def __init__(
        self,
        checked: CheckedProgram,
        run: TrainingRun,
        dims: dict[str, int],
        theta0: dict[str, Any],
        bits: int,
    ) -> None:
        self.bits = bits
        self.dims = dims
        self.run = run
        self.interp = reference_interpreter(core_module(checked))
        env = dims_env(dims)
        self.params_ty: Type = subst(run.params, env)
        self.batch_ty: Type = subst(run.objective.params[1][1], env)
        with gmpy2.context(precision=bits):
            theta = to_reference(theta0, self.params_ty, dims, None)
        assert isinstance(theta, Tree)
        self.theta: Tree = theta
        self.m: Tree = zeros_like(theta)
        self.v: Tree = zeros_like(theta)

    def step(self, t: int, total: int, batch: list[Any]) -> tuple[float, float, float]:
        with gmpy2.context(precision=self.bits):
            value = to_reference(_structured(batch, self.batch_ty), self.batch_ty, self.dims, None)
            args: list[Value] = [
                self.theta,
                self.m,
                self.v,
                _count(t),
                _count(total),
                value,
            ]
            out = self.interp.call(self.run.step.name, self.dims, args)
        assert isinstance(out, tuple)
        loss, gnorm, lr, theta, m, v = out
        self.theta, self.m, self.v = theta, m, v
        return _scalar(loss), _scalar(lr), _scalar(gnorm)

    def weights(self) -> dict[str, Any]:
        return _as_dict(self.theta)

    def moments(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return _as_dict(self.m), _as_dict(self.v)

    def exact(self) -> dict[str, Any] | None:
        return {
            "theta": checkpoint.exact_tree(self.theta),
            "m": checkpoint.exact_tree(self.m),
            "v": checkpoint.exact_tree(self.v),
        }

    def restore(self, loaded: checkpoint.Loaded) -> None:
        if loaded.exact is None:
            raise CommandError("the checkpoint has no exact values for the reference")
        try:
            self.theta = checkpoint.from_exact(self.theta, loaded.exact["theta"])
            self.m = checkpoint.from_exact(self.m, loaded.exact["m"])
            self.v = checkpoint.from_exact(self.v, loaded.exact["v"])
        except (KeyError, ValueError, TypeError) as error:
            raise CommandError(f"the checkpoint's exact values are damaged ({error})") from None


def _count(step: int) -> Tensor:
    """A step count as the reference holds an `idx[2⁵³][]`."""
    return Tensor(Kind.IDX, (), np.array(step, dtype=object), 2**53)


def _structured(leaves: list[Any], ty: Type) -> Any:
    """A batch's leaves (in storage order) as the value its type has: a tuple or a tensor."""
    from presk.elab.ty import TupleT

    items = list(leaves)

    def build(t: Type) -> Any:
        if isinstance(t, TupleT):
            return tuple(build(item) for item in t.items)
        return items.pop(0)

    return build(ty)


class NativeStepper:
    """The step as one compiled entry: one foreign call a step."""

    def __init__(
        self,
        checked: CheckedProgram,
        run: TrainingRun,
        dims: dict[str, int],
        theta0: dict[str, Any],
        realization: Realization,
        threads: int,
        layouts: Mapping[str, Layout] | None = None,
    ) -> None:
        entry = Entry(run.step, run.step.name, {})
        self.compiled = compile_entry(
            checked,
            entry,
            Binding(dict(dims), None),
            optimizer_scalars_in_f64(realization, run),
            threads,
            banner=f"training step {run.step.name}",
            layouts=layouts,
        )
        env = dims_env(dims)
        self.batch_ty: Type = subst(run.objective.params[1][1], env)
        self.theta: Any = theta0
        self.m: Any = _zeros(theta0)
        self.v: Any = _zeros(theta0)

    @property
    def launches(self) -> tuple[int, int]:
        host = self.compiled.host
        return host.launches, host.launches_unfused

    def step(self, t: int, total: int, batch: list[Any]) -> tuple[float, float, float]:
        when = np.array(t, dtype=np.int64)
        horizon = np.array(total, dtype=np.int64)
        out = self.compiled(
            self.theta, self.m, self.v, when, horizon, _structured(batch, self.batch_ty)
        )
        loss, gnorm, lr, theta, m, v = out
        self.theta, self.m, self.v = theta, m, v
        return _scalar(loss), _scalar(lr), _scalar(gnorm)

    def weights(self) -> dict[str, Any]:
        return self.theta  # type: ignore[no-any-return]

    def moments(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.m, self.v

    def exact(self) -> dict[str, Any] | None:
        return None  # the stored machine numbers are exact already

    def restore(self, loaded: checkpoint.Loaded) -> None:
        self.theta, (self.m, self.v) = loaded.theta, loaded.moments


def optimizer_scalars_in_f64(realization: Realization, run: TrainingRun) -> Realization:
    """The realization with the optimizer's scalar sites (the rate, the bias corrections
    1 − βᵗ) in f64, unless it gives them a type itself.

    They cost nothing, and in f32 the corrections cancel: 1 − 0.999 keeps four of its
    digits, which AdamW's division by √v̂ carries into every update.
    """
    sites = {
        f"{fn.name}/%{instr.index}"
        for fn in (run.rate.core, run.update.core)
        if fn is not None
        for instr in fn.body
        if instr.type == SCALAR
    }
    storage = {site: "f64" for site in sorted(sites)} | realization.storage
    return Realization(realization.default, storage, realization.params)


def _zeros(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _zeros(v) for k, v in tree.items()}
    return np.zeros_like(np.asarray(tree, dtype=np.float64))


@dataclass(frozen=True)
class Plan:
    """How far to go: the schedule's horizon and where this invocation stops."""

    total: int  # the schedule's last step (--steps, else epochs × batches an epoch)
    start: int  # the last step already done (0, or the resumed checkpoint's)
    stop: int  # the last step this invocation runs


def initial_weights(run: TrainingRun, dims: dict[str, int], seed: int) -> dict[str, Any]:
    """θ₀ from the model's initializers at `seed` (the paths of docs/rng.md)."""
    env = dims_env(dims)
    ty = subst(run.params, env)
    assert isinstance(ty, Params)
    theta = draw(ty, "θ", "theta", dims, None, seed, None)
    assert isinstance(theta, dict)
    return theta


@dataclass
class Trainer:
    """The loop's state between steps; `steps()` runs them, `save()` checkpoints."""

    run: TrainingRun
    batches: Batches
    stepper: Stepper
    plan: Plan
    meta: checkpoint.Meta
    real: str  # how the weights are stored in a checkpoint
    done: int = 0

    def __post_init__(self) -> None:
        self.done = self.plan.start

    def steps(self) -> Iterator[StepLog]:
        order_epoch, order = 0, None
        for step in range(self.plan.start + 1, self.plan.stop + 1):
            epoch, _ = self.batches.position(step)
            if epoch != order_epoch:
                order_epoch, order = epoch, self.batches.order(epoch)
            assert order is not None
            batch = self.batches.batch(step, order)
            start = time.perf_counter()
            loss, lr, gnorm = self.stepper.step(step, self.plan.total, batch)
            ms = (time.perf_counter() - start) * 1e3
            self.done = step
            yield StepLog(step, epoch, loss, lr, gnorm, ms)

    def save(self, directory: Path) -> Path:
        meta = checkpoint.Meta(
            self.done,
            self.plan.total,
            self.meta.model,
            self.meta.backend,
            self.meta.realization,
            self.meta.bits,
            self.meta.seed,
        )
        return checkpoint.save(
            directory,
            meta,
            self.stepper.weights(),
            self.stepper.moments(),
            self.real,
            self.stepper.exact(),
        )

    def save_final(self, directory: Path) -> Path:
        return checkpoint.save_final(directory, self.meta.model, self.stepper.weights(), self.real)


def check_resumable(loaded: checkpoint.Loaded, meta: checkpoint.Meta, where: str) -> None:
    """A checkpoint resumes only the run that wrote it: the same model, backend, types."""
    for what, have, want in (
        ("parameters", loaded.meta.model, meta.model),
        ("backend", loaded.meta.backend, meta.backend),
        ("realization", loaded.meta.realization, meta.realization),
        ("precision (--bits)", str(loaded.meta.bits), str(meta.bits)),
        ("seed", str(loaded.meta.seed), str(meta.seed)),
    ):
        if have != want:
            raise CommandError(
                f"--resume {printable(where)}: the checkpoint's {what} is {have}, "
                f"this run's is {want}"
            )
