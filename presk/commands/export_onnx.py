"""`presk export FILE --target onnx --entry E --dim … [--const …] -o DIR`: the entry's
forward graph as `model.onnx`, with a conformance test on onnxruntime (docs/pytorch.md)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from presk.commands.common import choose_entry, const_overrides, say_summary
from presk.commands.export_pytorch import conformance_case
from presk.diagnostics import UsageError, printable
from presk.export.budget import Choice, choice_of
from presk.export.c import ExportPlan
from presk.export.onnx import (
    OPSET,
    builder_file,
    feeds,
    inexpressible,
    onnx_test_file,
    outputs,
    precision,
)
from presk.export.pytorch.body import Options
from presk.export.pytorch.files import write_files
from presk.export.pytorch.layout import Unsupported
from presk.export.write import check_target, write_plan
from presk.pipeline import front_end
from presk.types.check import CheckedProgram

PACKAGES = ("torch", "onnx", "onnxruntime")
# Loading torch and tracing a small model takes seconds; this bounds a stuck child.
TRACE_SECONDS = 600


def export_onnx(args: argparse.Namespace) -> int:
    for flag, value in (("--conformance-entry", args.conformance_entry), ("--shapes", args.shapes),
                        ("--stack", args.stack), ("--steps", args.steps),
                        ("--epochs", args.epochs), ("--seed", args.seed)):  # fmt: skip
        if value is not None:
            raise UsageError(f"{flag} is not a flag of --target onnx")
    if args.train or args.serve:
        sys.stderr.write(
            "presk export: not built yet: --target onnx of a training or serving run\n"
        )
        return 2
    if args.mode != "program":
        raise UsageError("--mode is not a flag of --target onnx")
    if args.entry is None:
        raise UsageError("--entry is required")
    if len(args.entry) > 1:
        raise UsageError("--entry is given more than once: --target onnx exports one entry")
    if args.output is None:
        raise UsageError("-o DIR is required")
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"--target onnx needs {', '.join(missing)} (pip install 'presk[export]')")
    check_target(args.output)
    checked, _ = front_end(args.file, const_overrides(args.const))
    text: str = args.entry[0]
    chosen = choose_entry(checked, text, args.dim)
    reason = inexpressible(checked.core, chosen.entry.info.name)
    if reason is not None:
        sys.stderr.write(f"presk export: cannot export {text} to ONNX: {reason}\n")
        return 2
    try:
        made = _files(checked, text, args.dim, choice_of(args.reference, args.no_reference))
    except Unsupported as error:
        sys.stderr.write(f"presk export: cannot export {text} to ONNX yet: {error}\n")
        return 2
    if made is None:
        return 2
    files, words = made
    written = ", ".join(f"{args.output.rstrip('/')}/{name}" for name in files)
    plan = ExportPlan(files, f"presk export: wrote {written} (opset {OPSET}, {words})")
    write_plan(plan, args.output, text)
    say_summary(plan.summary)
    return 0


def _files(
    checked: CheckedProgram, text: str, dims: list[str], reference: Choice
) -> tuple[dict[str, str | bytes], str] | None:
    """model.onnx, its test and the reference's documents, with the graph's dtype in words
    (None: the failure is said)."""
    conformance, inputs, expected = conformance_case(checked, text, dims, reference)
    count = outputs(expected["output"])
    if count is None:
        sys.stderr.write(f"presk export: cannot export {text} to ONNX: its result is θ\n")
        return None
    values = inputs["inputs"]
    assert isinstance(values, dict)
    feed = feeds(conformance, values)
    documents = {"inputs.json": _json(inputs), "expected.json": _json(expected)}
    with tempfile.TemporaryDirectory(prefix="presk-onnx-") as tmp:
        root = Path(tmp)
        for source in write_files(checked, Options(False, False)):
            (root / source.name).write_text(source.text, encoding="utf-8")
        (root / "conformance").mkdir()
        for name, document in documents.items():
            (root / "conformance" / name).write_text(document, encoding="utf-8")
        (root / "_onnx_build.py").write_text(
            builder_file(conformance, feed, count), encoding="utf-8"
        )
        traced = _trace(root)
        if traced is None:
            return None
        dtype, _, missing = traced.partition(" ")
        model = (root / "model.onnx").read_bytes()
    files: dict[str, str | bytes] = {
        "model.onnx": model,
        "test_conformance.py": onnx_test_file(conformance, feed, dtype, missing or None),
        "conformance/inputs.json": documents["inputs.json"],
        "conformance/expected.json": documents["expected.json"],
    }
    return files, precision(dtype, missing or None)


def _json(document: object) -> str:
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


def _trace(root: Path) -> str | None:
    """Run the tracing in a child Python: `float64`, or `float32 OP` (OP: the operator
    without a float64 kernel); None once the failure is said."""
    script = "import _onnx_build; print(_onnx_build.export_onnx('model.onnx'))"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=root, env=env, capture_output=True,
            text=True, check=False, timeout=TRACE_SECONDS,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"presk export: torch.onnx.export ran past {TRACE_SECONDS} s\n")
        return None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("float"):
        last = [line for line in done.stderr.splitlines() if line.strip()]
        why = printable(last[-1].strip()) if last else f"exit {done.returncode}"
        sys.stderr.write(f"presk export: torch.onnx.export failed: {why}\n")
        return None
    return lines[-1]
