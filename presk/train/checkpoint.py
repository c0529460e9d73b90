"""Checkpoints: the weights, the optimizer's state and the position, each written atomically.

A checkpoint of step N in DIR is three files:

    step_N.psk.d        the parameters, one sample of `params M` (the reals as the
                        backend keeps them: f64, f32 or bf16; the reference's as f64)
    step_N.state.psk.d  the moments (m, v), one sample of `(params M, params M)`
    step_N.json         the step, the schedule's horizon, what produced it, and for the
                        reference its exact values (MPFR, in hexadecimal)

The JSON is written last, so a run killed mid-checkpoint leaves at most stray
temporary files and the previous checkpoint stays the latest one. Nothing is
ever deleted here: a later checkpoint of the same step replaces its files. The
directory is marked as presk's (`.presk-ckpt`) when training first writes into
it, and a directory that holds anything else is refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gmpy2
import numpy as np

from presk.data import samples as store
from presk.data.format import DataError, write_atomically
from presk.diagnostics import CommandError, printable
from presk.elab.ty import Params, dims_env, subst
from presk.elab.ty import Tensor as TensorT
from presk.interp.tensor import Tensor
from presk.interp.tree import Tree
from presk.train.data import MAX_STEPS
from presk.types.scope import param_leaves

_STEP = re.compile(r"^step_(\d+)\.json$")
FORMAT = 1


@dataclass(frozen=True)
class Meta:
    """What a checkpoint's JSON says besides the exact values."""

    step: int
    total: int
    model: str  # the type text of the parameters
    backend: str
    realization: str
    bits: int
    seed: int

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "step": self.step,
            "total": self.total,
            "model": self.model,
            "backend": self.backend,
            "realization": self.realization,
            "bits": self.bits,
            "seed": self.seed,
        }


# What marks a directory as presk's checkpoints: training writes into no other.
MARKER = ".presk-ckpt"


def _ours(path: Path) -> bool:
    """Whether `path` holds presk's checkpoints: the marker, or (a run before the marker
    was written) a complete checkpoint that reads as one."""
    if (path / MARKER).is_file():
        return True
    step = latest(str(path))
    if step is None:
        return False
    try:
        load(str(path), step)
    except CommandError:
        return False
    return True


def check(directory: str) -> None:
    """Refuse, before any work, a checkpoint directory presk may not write into: a file,
    or a directory holding anything but presk's checkpoints (the log it would rewrite
    and the files it would replace might be someone else's)."""
    path, said = Path(directory), printable(directory)
    if path.exists() and not path.is_dir():
        raise CommandError(f"checkpoint directory {said}: a file, not a directory")
    try:
        foreign = path.is_dir() and any(path.iterdir()) and not _ours(path)
    except OSError as error:
        raise CommandError(f"checkpoint directory {said}: {error.strerror}") from None
    if foreign:
        raise CommandError(
            f"checkpoint directory {said}: holds files presk did not write (no {MARKER}); "
            "name a new or empty directory (--ckpt DIR)"
        )


def prepare(directory: str) -> Path:
    """The checkpoint directory, made if absent and marked as presk's; a one-line error
    if it cannot be, or if it holds what presk did not write."""
    check(directory)
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        said = printable(directory)
        raise CommandError(f"checkpoint directory {said}: {error.strerror}") from None
    if not (path / MARKER).is_file():
        _write_json(path / MARKER, {"presk": "checkpoints", "format": FORMAT})
    return path


def _write_json(path: Path, document: dict[str, Any]) -> None:
    text = json.dumps(document, indent=1) + "\n"
    try:
        write_atomically(path, text.encode("utf-8"))
    except DataError as error:
        raise CommandError(str(error)) from None


def save(
    directory: Path,
    meta: Meta,
    theta: dict[str, Any],
    moments: tuple[dict[str, Any], dict[str, Any]],
    real: str,
    exact: dict[str, Any] | None = None,
) -> Path:
    """Write step `meta.step`'s checkpoint; returns the weights' path."""
    weights = directory / f"step_{meta.step}.psk.d"
    try:
        store.write(weights, [theta], meta.model, real)
        store.write(
            directory / f"step_{meta.step}.state.psk.d",
            [moments],
            f"({meta.model}, {meta.model})",
            real,
        )
    except (OSError, DataError) as error:
        raise CommandError(
            f"{printable(str(directory))}: cannot write a checkpoint ({error})"
        ) from None
    document = meta.to_json()
    if exact is not None:
        document["exact"] = exact
    _write_json(directory / f"step_{meta.step}.json", document)
    return weights


def save_final(directory: Path, model: str, theta: dict[str, Any], real: str) -> Path:
    path = directory / "final.psk.d"
    try:
        store.write(path, [theta], model, real)
    except (OSError, DataError) as error:
        raise CommandError(f"{printable(str(path))}: cannot write ({error})") from None
    return path


def latest(directory: str) -> int | None:
    """The newest step with a complete checkpoint in `directory`, or None."""
    path = Path(directory)
    if not path.is_dir():
        raise CommandError(f"--resume {printable(directory)}: not a directory")
    steps = []
    for entry in path.iterdir():
        match = _STEP.match(entry.name)
        if match and (path / f"step_{match.group(1)}.psk.d").is_file():
            steps.append(int(match.group(1)))
    return max(steps) if steps else None


@dataclass(frozen=True)
class Loaded:
    meta: Meta
    theta: dict[str, Any]
    moments: tuple[dict[str, Any], dict[str, Any]]
    exact: dict[str, Any] | None


def _whole(document: dict[str, Any], key: str) -> int:
    """A count of a checkpoint's JSON: a whole number, not a float or a boolean."""
    value = document[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"`{key}` is {value!r}, not a whole number")
    return value


def load(directory: str, step: int) -> Loaded:
    """Step `step`'s checkpoint (one-line errors for a damaged one)."""
    base = Path(directory)
    where = printable(str(base / f"step_{step}.json"))
    try:
        document = json.loads((base / f"step_{step}.json").read_text(encoding="utf-8"))
        meta = Meta(
            _whole(document, "step"),
            _whole(document, "total"),
            str(document["model"]),
            str(document["backend"]),
            str(document["realization"]),
            _whole(document, "bits"),
            _whole(document, "seed"),
        )
        if document.get("format") != FORMAT:
            raise ValueError(f"format {document.get('format')!r}, expected {FORMAT}")
        weights = store.read(base / f"step_{step}.psk.d")
        state = store.read(base / f"step_{step}.state.psk.d")
    except (OSError, ValueError, KeyError, TypeError, DataError) as error:
        raise CommandError(f"{where}: not a checkpoint presk can resume ({error})") from None
    if not 1 <= meta.step <= meta.total <= MAX_STEPS:
        raise CommandError(f"{where}: step {meta.step} of {meta.total} is not a step of a run")
    if weights.type != meta.model or weights.count != 1 or state.count != 1:
        raise CommandError(f"{where}: the checkpoint's files do not agree")
    moments = state[0]
    if not (isinstance(moments, tuple) and len(moments) == 2):
        raise CommandError(f"{where}: the optimizer's state is not (m, v)")
    exact = document.get("exact")
    return Loaded(meta, weights[0], (moments[0], moments[1]), exact)


def read_weights(path: str, ty: Params, dims: dict[str, int]) -> dict[str, Any]:
    """A weights file of type `ty` (`params M` at `dims`), as nested arrays; a one-line
    error when it is not one or holds other parameters."""
    where = printable(path)
    try:
        weights = store.read(path)
    except FileNotFoundError:
        raise CommandError(f"--weights {where}: no such file") from None
    except (OSError, DataError) as error:
        raise CommandError(f"--weights {where}: {error}") from None
    if weights.type != str(ty):
        raise CommandError(
            f"--weights {where}: the file holds {printable(weights.type)}, the entry takes {ty}"
        )
    env = dims_env(dims)
    expected = {}
    for leaf_path, leaf, _ in param_leaves(ty.inst):
        concrete = subst(leaf, env)
        assert isinstance(concrete, TensorT)
        expected[leaf_path] = tuple(int(a.size.const) for a in concrete.axes)
    held = {p: tuple(a.shape[1:]) for p, a in weights.arrays.items()}
    if weights.count != 1 or expected != held:
        raise CommandError(f"--weights {where}: its leaves are not those of {ty}")
    value = weights[0]
    assert isinstance(value, dict)
    return value


# ---------------------------------------------------------------- exact reference values


def exact_tree(tree: Tree) -> dict[str, list[str]]:
    """Every leaf of a reference tree as MPFR's exact binary form, in hexadecimal."""
    return {
        path: [gmpy2.to_binary(x).hex() for x in leaf.data.reshape(-1)]
        for path, leaf in tree.leaves()
    }


def from_exact(template: Tree, leaves: dict[str, list[str]]) -> Tree:
    """A reference tree shaped as `template`, its values from `exact_tree`."""

    def rebuild(tree: Tree, prefix: str) -> Tree:
        items: list[tuple[str, Any]] = []
        for key, value in tree.items:
            path = prefix + key
            if isinstance(value, Tree):
                items.append((key, rebuild(value, path + ".")))
            else:
                assert isinstance(value, Tensor)
                words = leaves[path]
                if len(words) != value.data.size:
                    raise CommandError(f"the checkpoint's `{path}` has {len(words)} values")
                data = np.empty(value.data.shape, dtype=object)
                flat = data.reshape(-1)
                for i, word in enumerate(words):
                    flat[i] = gmpy2.from_binary(bytes.fromhex(word))
                items.append((key, Tensor(value.kind, value.axes, data, value.bound)))
        return Tree(tuple(items))

    return rebuild(template, "")
