"""`presk check --summary`: the types of functions and lets, regularity and effects."""

from __future__ import annotations

import os
from collections.abc import Callable

from presk.diagnostics import printable
from presk.syntax import ast
from presk.types.check import CheckedProgram, FnInfo
from presk.types.training import pipeline_parts, sample_type, source_text
from presk.types.values import ServeBlock, TrainingRun


def _signature_line(info: FnInfo) -> str:
    return f"{info.file.basename} {info.name} : {info.ret}"


def _regularity_line(info: FnInfo) -> str:
    classes = ", ".join(f"{name} {reg}" for name, (reg, _) in info.regularity.items())
    effects = ", ".join(sorted(info.effects)) or "none"
    return f"{info.name} : [{classes}] uses {effects}"


# What a run's data file holds, as the summary says it (a later stage opens the file):
# given its path and the checked run (None when the block did not check).
FileType = Callable[[str, TrainingRun | None], str]


# What a serve block's files hold, as the summary says it: (weights line, vocab line).
ServeFiles = Callable[[ServeBlock], tuple[str, str]]


def summary(
    checked: CheckedProgram,
    file_type: FileType | None = None,
    serve_files: ServeFiles | None = None,
) -> str:
    """The summary text: per function its type and lets, then regularity and effects."""
    lines: list[str] = []
    declared = [info for info in checked.functions if not info.generated]
    for info in declared:
        if info.state != "done":
            continue
        lines.append(_signature_line(info))
        lines.extend(f"    let {name} : {ty}" for name, ty in info.lets)
    lines.append("-- regularity and effects --")
    lines.extend(
        _regularity_line(info)
        for info in checked.functions
        if info.state == "done" and not info.block
    )
    training = training_summary(checked, file_type)
    if training:
        lines.append("-- training --")
        lines.extend(training)
    if checked.serves:
        lines.append("-- serving --")
        for block in checked.serves:
            greedy = f", greedy {block.greedy.name}" if block.greedy else ""
            lines.append(
                f"inference {block.name}: model {block.model}, generate {block.generate.name}"
                + greedy
            )
            if serve_files is not None:
                weights, vocab = serve_files(block)
                lines.append(f"    weights : {weights}")
                lines.append(f"    vocab   : {vocab}")
    return "\n".join(lines) + "\n"


def training_summary(checked: CheckedProgram, file_type: FileType | None = None) -> list[str]:
    """The training section: the run's model, objective, optimizer, data and dims."""
    main = checked.program.main
    lines: list[str] = []
    for run in main.trainings:
        fields = {f.name.name: f for f in run.fields}

        def show(key: str, fields: dict[str, ast.Field] = fields) -> str:
            return source_text(fields[key].value).split(".")[-1] if key in fields else "?"

        lines.append(
            f"training {run.name.name}: model {show('model')}, objective {show('objective')}, "
            f"optimizer {show('optimizer')}"
        )
        objective = checked.find(show("objective"))
        batch_ty = objective.params[-1][1] if objective and objective.params else None
        if batch_ty is not None:
            lines.append(f"    batch   : {batch_ty}")
            lines.append(f"    sample  : {sample_type(batch_ty)}")
        data = fields.get("data")
        pipeline = _pipeline(data.value) if data else None
        if pipeline is not None:
            path, steps, _ = pipeline
            holds = ""
            if file_type is not None:
                directory = os.path.dirname(main.path)
                checked_run = next((r for r in checked.trainings if r.name == run.name.name), None)
                holds = " — " + file_type(os.path.join(directory, path), checked_run)
            said = printable(f"{path} ({', '.join(steps)}){holds}")
            lines.append(f"    data    : {said}")
        if "epochs" in fields:
            lines.append(f"    epochs  : {source_text(fields['epochs'].value)}")
        if run.checkpoint is not None:
            every = source_text(run.checkpoint.every)
            lines.append(f"    ckpt    : every {every} steps to {run.checkpoint.to.value}")
        if pipeline is not None and pipeline[2]:
            lines.append("    dims    : " + ", ".join(f"{k} = {v}" for k, v in pipeline[2]))
    return lines


def _pipeline(expr: ast.Expr) -> tuple[str, list[str], list[tuple[str, str]]] | None:
    """`stream "f" |> shuffle(seed = 3) |> batch(B = 8)` as (path, steps, dims)."""
    parts = pipeline_parts(expr)
    if parts is None:
        return None
    stream, stages = parts
    steps: list[str] = []
    dims: list[tuple[str, str]] = []
    for stage in stages:
        assert isinstance(stage.func, ast.Name)
        args = [a for a in stage.args if isinstance(a, ast.KwArg)]
        values = " ".join(source_text(a.value) for a in args)
        steps.append(f"{stage.func.ident.name} {values}".strip())
        if stage.func.ident.name == "batch":
            dims.extend((a.name.name, source_text(a.value)) for a in args)
    return stream.path.value, steps, dims
