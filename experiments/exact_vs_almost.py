"""Exact versus almost: how far four machine-arithmetic trainings land from the exact one.

    presk export FILE --target pytorch --mode readable --conformance-entry train:K -o DIR
    python experiments/exact_vs_almost.py DIR

The export's `conformance/` holds the parameters after K steps of presk's 256-bit reference
(`expected.json`) and of presk's native backend in f64 and f32 (`native_f64.json`,
`native_f32.json`), all from the same θ₀ on the same batches. This script replays the K
steps with the exported PyTorch model and torch's AdamW in float64 and in float32 and prints
the four gaps to the reference: the largest difference of a leaf after K steps, relative
to that leaf's largest magnitude, the worst over the leaves (the K-step test's measure).
It imports nothing of presk: only the export, NumPy and torch.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def read(directory: Path, name: str) -> Any:
    return json.loads((directory / "conformance" / name).read_text(encoding="utf-8"))


def array(value: dict[str, Any]) -> np.ndarray[Any, Any]:
    """A stored tensor: reals as exact hexadecimal doubles, indices as integers."""
    data = value["data"]
    if value["kind"] == "real":
        data = [float.fromhex(x) for x in data]
    kinds = {"real": np.float64, "idx": np.int64, "bool": np.bool_}
    return np.array(data, dtype=kinds[value["kind"]]).reshape(value["shape"])


def gap(theta: dict[str, np.ndarray[Any, Any]], reference: dict[str, Any]) -> float:
    """The worst leaf's largest difference relative to its largest reference magnitude."""
    worst = 0.0
    for path, stored in reference.items():
        want = array(stored)
        scale = max(float(np.abs(want).max(initial=0.0)), np.finfo(np.float64).tiny)
        got = np.asarray(theta[path], dtype=np.float64)
        worst = max(worst, float(np.abs(got - want).max(initial=0.0)) / scale)
    return worst


def pytorch_run(directory: Path, dtype_name: str) -> dict[str, np.ndarray[Any, Any]]:
    """The K steps of the export's presk_run.py in `dtype_name`, from presk's θ₀."""
    import torch

    sys.path.insert(0, str(directory))
    run: Any = importlib.import_module("presk_run")  # the export's, found only now

    dtype = getattr(torch, dtype_name)
    torch.set_default_dtype(dtype)
    torch.set_num_threads(1)
    expected = read(directory, "expected.json")
    model = run.build()
    run.load(model, {path: array(v) for path, v in read(directory, "theta0.json").items()})
    opt, schedule = run.optimizer(model, expected["total"])
    for leaves in read(directory, "batches.json"):
        tensors = [torch.as_tensor(array(leaf)) for leaf in leaves]
        tensors = [t.to(dtype) if t.is_floating_point() else t for t in tensors]
        run.step(model, opt, schedule, run.batch_of(tensors))
    return {path: value.astype(np.float64) for path, value in run.leaves(model)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path, help="a train:K export's directory")
    args = parser.parse_args(argv)
    directory: Path = args.export
    missing = [
        name
        for name in ("expected.json", "native_f64.json", "native_f32.json", "batches.json")
        if not (directory / "conformance" / name).is_file()
    ]
    if missing:
        sys.stderr.write(
            f"exact_vs_almost: {directory} is not a train:K export (no conformance/{missing[0]})\n"
        )
        return 2
    expected = read(directory, "expected.json")
    reference = expected["theta"]
    rows = []
    for real_type in ("f64", "f32"):
        native = read(directory, f"native_{real_type}.json")
        theta = {path: array(v) for path, v in native["theta"].items()}
        rows.append((f"presk native {real_type}", gap(theta, reference)))
    for dtype in ("float64", "float32"):
        rows.append((f"PyTorch {dtype}", gap(pytorch_run(directory, dtype), reference)))
    print(
        f"{expected['steps']} steps of {expected['total']}: parameters' worst relative gap "
        "to the 256-bit reference"
    )
    for name, value in rows:
        print(f"  {name:<18} {value:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
