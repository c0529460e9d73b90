"""`presk export --target c --train`: a training run as a standalone C program.

The step is the run's `run.step` compiled exactly as `presk train --backend
native` compiles it (the same `NativeStepper`, so the same C text); the loop
around it — each epoch's Fisher–Yates permutation, the batch gathered, one call
a step, the log lines, the checkpoints — is `main.c`. θ₀ and the data file's
samples are written once, already in the types the step takes (the same
rounding as the native backend's conversion), so the C program converts
nothing. `conformance/` holds a native run of a few steps: its log lines and
its `final.psk.d`, which `make check` compares byte for byte.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from presk import __version__
from presk.cgen.program import Unit, _env
from presk.data.format import DataFile, Leaf, reals_as, write
from presk.dtypes import Dtype
from presk.elab.ty import at_dims
from presk.export.c import ExportError, ExportPlan, arena_macro_of, entry_files, expected_leaf
from presk.export.escape import make_comment, markdown, sh_comment, sh_word
from presk.host.program import HostProgram, HTensor
from presk.host.realization import Realization
from presk.kernel.layout import Layout
from presk.names import c_string, comment
from presk.train import checkpoint
from presk.train.data import Batches
from presk.train.loop import NativeStepper, Plan, Trainer, initial_weights
from presk.types.check import CheckedProgram
from presk.types.values import TrainingRun

CODE = {str(d): d.code for d in Dtype}
CHECK_STEPS = 20  # steps of the native run that `make check` repeats (fewer if the run has fewer)


@dataclass(frozen=True)
class CTrain:
    """What `export --target c --train` writes: a run, its data, how far and on what.

    `realize` names the realization as the user gave it; `total` is the trainer's default
    horizon and `available` the most steps its epochs allow. `layouts` are `--plan`'s, which
    the step is compiled under (and the native check run under), `plan` the flag as given.
    """

    checked: CheckedProgram
    run: TrainingRun
    batches: Batches
    source: str
    realization: Realization
    realize: str
    threads: int
    seed: int
    total: int
    available: int
    directory: str
    layouts: Mapping[str, Layout]
    plan: str | None


@dataclass(frozen=True)
class _Layout:
    """The step's leaves: θ's (m and v repeat them), the batch's, the three scalars."""

    state: list[HTensor]
    paths: list[str]  # θ's leaf paths, as a checkpoint names them
    batch: list[HTensor]
    scalars: list[HTensor]


def _layout(unit: Unit, host: HostProgram, batch_leaves: int) -> _Layout:
    """The step's inputs (θ, m, v, t, total, batch) and outputs (loss, |g|, lr, θ', m', v')."""
    inputs = [leaf for _, _, leaf in unit.inputs]
    n = (len(inputs) - 2 - batch_leaves) // 3
    if n < 1 or any(not isinstance(leaf, HTensor) for leaf in inputs):
        raise ExportError("the training step does not take (θ, m, v, t, total, batch)")
    tensors = [leaf for leaf in inputs if isinstance(leaf, HTensor)]
    outputs = [leaf for _, _, leaf in unit.outputs]
    if len(outputs) != 3 + 3 * n:
        raise ExportError("the training step does not return (loss, |g|, lr, θ', m', v')")
    state = tensors[:n]
    for k in range(3 * n):
        given, back = tensors[k], outputs[3 + k]
        if (
            given.dtype != back.dtype
            or given.axes != back.axes
            or given.dtype != state[k % n].dtype
        ):
            raise ExportError(
                "the realization stores the state in other types than the step takes it "
                f"({back.dtype} and {given.dtype}): give the state one type"
            )
    paths = [host.outputs[3 + k][0].split(".", 2)[2] for k in range(n)]
    return _Layout(state, paths, tensors[3 * n + 2 :], outputs[:3])


def _stored(leaf: HTensor, real: str) -> str:
    """How a checkpoint stores a state leaf: as presk train's `real`, which is the leaf's own
    type or f64 (exact widening); anything else would round, which the export refuses."""
    if leaf.dtype == real or real == "f64":
        return real
    raise ExportError(f"checkpoints store {real} but the step keeps {leaf.dtype}: not exact")


def _file_bytes(type_text: str, leaves: list[tuple[str, str, npt.NDArray[Any]]]) -> bytes:
    """A .psk.d file's bytes; each array holds every sample (a leading count axis)."""
    count = leaves[0][2].shape[0]
    data = DataFile(
        type_text,
        count,
        [Leaf(path, dtype, tuple(array.shape[1:])) for path, dtype, array in leaves],
        [array for _, _, array in leaves],
    )
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "file.psk.d"
        write(str(target), data)
        return target.read_bytes()


def _as_taken(array: npt.NDArray[Any], leaf: HTensor) -> npt.NDArray[Any]:
    """Values as the step's buffer holds them: the native backend's conversion (reals_as)."""
    if leaf.dtype == "i64":
        return np.ascontiguousarray(array, dtype=np.int64)
    return reals_as(np.asarray(array, dtype=np.float64), leaf.dtype)


def _flat(tree: dict[str, Any], prefix: str = "") -> list[npt.NDArray[Any]]:
    out: list[npt.NDArray[Any]] = []
    for key, value in tree.items():
        if isinstance(value, dict):
            out.extend(_flat(value, f"{prefix}{key}."))
        else:
            out.append(np.asarray(value))
    return out


def _c_list(items: list[str]) -> str:
    return ", ".join(items)


def _json_parts(meta: checkpoint.Meta) -> tuple[str, str, str]:
    """step_N.json as presk train writes it, cut around the step and the horizon."""
    marks = (-7_340_231, -7_340_232)
    document = checkpoint.Meta(
        marks[0], marks[1], meta.model, meta.backend, meta.realization, meta.bits, meta.seed
    ).to_json()
    text = json.dumps(document, indent=1) + "\n"
    head, rest = text.split(str(marks[0]))
    mid, tail = rest.split(str(marks[1]))
    return head, mid, tail


def _bind(unit: Unit, n: int) -> list[str]:
    """The lines of main.c's bind(): each input and output field to its buffer."""
    lines = []
    for k, (field, ctype, _) in enumerate(unit.inputs):
        if k < 3 * n:
            lines.append(f"in->{field} = ({ctype})cur[{k}];")
        elif k == 3 * n:
            lines.append(f"in->{field} = t;")
        elif k == 3 * n + 1:
            lines.append(f"in->{field} = total;")
        else:
            lines.append(f"in->{field} = ({ctype})batch[{k - 3 * n - 2}];")
    for k, (field, ctype, _) in enumerate(unit.outputs):
        source = f"scalar[{k}]" if k < 3 else f"next[{k - 3}]"
        lines.append(f"out->{field} = ({ctype}){source};")
    return lines


def plan_train(request: CTrain) -> ExportPlan:
    """Compile the step, run the native check, and print every file, before any is written."""
    run, batches, dims = request.run, request.batches, request.batches.dims
    theta0 = initial_weights(run, dims, request.seed)
    stepper = NativeStepper(
        request.checked, run, dims, theta0, request.realization, request.threads, request.layouts
    )
    unit, host = stepper.compiled.unit, stepper.compiled.host
    layout = _layout(unit, host, len(batches.paths))
    n = len(layout.state)
    uniform = request.realization.uniform
    real = request.realization.default if uniform else "f64"
    stored = [_stored(leaf, real) for leaf in layout.state]
    model = str(at_dims(run.params, dims))
    meta = checkpoint.Meta(
        0,
        request.total,
        model,
        "native",
        request.realization.default if uniform else request.realize,
        256,
        request.seed,
    )
    # The native run `make check` repeats, on the stepper that compiled the step.
    steps = min(CHECK_STEPS, request.available)
    trainer = Trainer(run, batches, stepper, Plan(steps, 0, steps), meta, real)
    lines = [record.line() for record in trainer.steps()]
    with tempfile.TemporaryDirectory() as tmp:
        final = trainer.save_final(Path(tmp)).read_bytes()

    files: dict[str, str | bytes] = dict(entry_files(unit))
    files["conformance/native.log"] = "".join(line + "\n" for line in lines)
    files["conformance/final.psk.d"] = final
    theta_leaves = [
        (path, leaf.dtype, _as_taken(array, leaf)[None])
        for path, leaf, array in zip(layout.paths, layout.state, _flat(theta0), strict=True)
    ]
    files["theta0.psk.d"] = _file_bytes(model, theta_leaves)
    samples = batches.samples
    data_leaves = [
        (path, leaf.dtype, _as_taken(samples.arrays[path], leaf))
        for path, leaf in zip(batches.paths, layout.batch, strict=True)
    ]
    files["data.psk.d"] = _file_bytes(samples.type, data_leaves)

    env = _env()
    at = ", ".join(f"{k} = {v}" for k, v in dims.items()) or "no dims"
    banner = f"{request.source}: the training run of {run.model}, at {at}, in {request.realize}"
    head, mid, tail = _json_parts(meta)
    leaf_dims = []
    for k, leaf in enumerate(layout.state):
        sizes = ", ".join(f"{s}u" for _, s in leaf.axes)
        leaf_dims.append(f"static const uint64_t dims{k}[] = {{{sizes or '0u'}}};")
    leaf_dims.append(
        "static const uint32_t leaf_rank[LEAVES] = { "
        + _c_list([f"{len(leaf.axes)}u" for leaf in layout.state])
        + " };"
    )
    leaf_dims.append(
        "static const uint64_t *const leaf_dims[LEAVES] = { "
        + _c_list([f"dims{k}" if leaf.axes else "NULL" for k, leaf in enumerate(layout.state)])
        + " };"
    )
    # data.psk.d's leaves, a sample each: the shape and, for an index leaf, the bound that
    # main.c checks before any step reads them (the step does not check its indices).
    bounds = stepper.compiled.input_bounds()[3 * n + 2 :]
    batch_expected = [
        expected_leaf(path, CODE[dtype], tuple(array.shape[1:]), bound)
        for (path, dtype, array), bound in zip(data_leaves, bounds, strict=True)
    ]
    shuffled = batches.seed is not None
    files["main.c"] = env.get_template("train/main.c.j2").render(
        banner=comment(banner),
        symbol=unit.symbol,
        leaves=n,
        batch_leaves=len(layout.batch),
        batch=batches.size,
        samples=samples.count,
        per_epoch=batches.per_epoch,
        available=request.available,
        steps=request.total,
        every=run.checkpoint_every or 0,
        shuffled=1 if shuffled else 0,
        shuffle_seed=batches.seed if shuffled else 0,
        model=c_string(model),
        state_type=c_string(f"({model}, {model})"),
        run_model=c_string(run.model),
        json_head=c_string(head),
        json_mid=c_string(mid),
        json_tail=c_string(tail),
        state_dtypes=_c_list([f"{CODE[leaf.dtype]}u" for leaf in layout.state]),
        state_elems=_c_list([f"{leaf.size}u" for leaf in layout.state]),
        stored_dtypes=_c_list([f"{CODE[s]}u" for s in stored]),
        leaf_dims=leaf_dims,
        leaf_paths=_c_list([c_string(p) for p in layout.paths]),
        m_paths=_c_list([c_string(f"0.{p}") for p in layout.paths]),
        v_paths=_c_list([c_string(f"1.{p}") for p in layout.paths]),
        batch_dtypes=_c_list([f"{CODE[leaf.dtype]}u" for leaf in layout.batch]),
        batch_expected=batch_expected,
        batch_rows=_c_list([f"{leaf.size // batches.size}u" for leaf in layout.batch]),
        scalar_dtypes=_c_list([f"{CODE[leaf.dtype]}u" for leaf in layout.scalars]),
        bind=_bind(unit, n),
        arena_macro=arena_macro_of(unit),
        threads=request.threads,
    )
    openmp = "-fopenmp" if host.splits else ""
    files["Makefile"] = env.get_template("train/Makefile.j2").render(
        banner=make_comment(banner), openmp=openmp
    )
    native = "presk train --backend native"
    if request.plan is not None:
        native += f" --plan {request.plan}"
    files["conformance/check.sh"] = env.get_template("train/check.sh.j2").render(
        banner=sh_comment(banner),
        steps=steps,
        native_comment=sh_comment(native),
        native_word=sh_word(f"{native}'s"),
    )
    every = run.checkpoint_every
    threads_note = (
        "Split launches are OpenMP regions; `OMP_NUM_THREADS=1` or `make OPENMP=` "
        "give the same bits."
        if host.splits
        else "No launch is split among threads."
    )
    files["README.md"] = env.get_template("train/README.md.j2").render(
        title=markdown(f"The training run of {run.model}, exported by presk"),
        summary=markdown(
            f"`{run.model}` trained on `{run.data.resolved}` in batches of {batches.size}, "
            f"in {request.realize}: {host.launches} launches a step."
        ),
        version=__version__,
        source=markdown(request.source),
        steps=request.total,
        available=request.available,
        check_steps=steps,
        checkpoint_note=(f"Every {every} steps and at the end" if every else "At the end")
        + " DIR receives `step_N.psk.d`, `step_N.state.psk.d` and `step_N.json`, as "
        "`presk train` writes them (so `presk train --resume DIR` continues a run).",
        threads_note=threads_note,
        native=markdown(native),
        plan_note=_plan_note(request),
        seed=request.seed,
        data_note=markdown(f"a copy of {run.data.resolved}'s {samples.count} samples"),
    )
    summary = (
        f"presk export: the training run of {run.model} ({host.launches} launches a step, "
        f"{request.total} steps of {batches.size} samples) into {request.directory}; "
        f"`make -C {sh_word(request.directory)} check` builds it and compares {steps} steps "
        f"with {native}"
    )
    return ExportPlan(files, summary)


def _plan_note(request: CTrain) -> str:
    """The README's word on `--plan`: which nests it lays out, and that the bits are kept."""
    if not request.layouts:
        return ""
    sites = ", ".join(f"`{site}`" for site in sorted(request.layouts))
    return " " + markdown(
        f"The step's kernels are laid out by the plan {request.plan} ({sites}); every "
        "layout computes the bits of the default one, so only the time differs."
    )


__all__ = ["CHECK_STEPS", "CTrain", "plan_train"]
