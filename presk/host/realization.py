"""Realizations: the machine type of every site, from `--realize f64|f32|bf16|@FILE`.

A realization is an object: `default` (the storage type of every site the
map does not name), `storage` (per site `"<function>/%<index>"`, as `dump
--stage core` numbers them: the type of that fusion group's root buffer),
`accum` (the type a contraction sums in; kernels sum in their storage's
arithmetic type, so any other is refused with E7002), `order` (sequential
or blocked, which are bit-identical; a reassociating order is refused), and
`params` (a parameter leaf's type at rest, by its dotted path). A uniform
realization is the object with empty maps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from presk.diagnostics import read_json
from presk.kernel.ir import arith

TYPES = ("f64", "f32", "bf16")


class RealizationError(Exception):
    """A realization that cannot run: `code` is E7002 for a refused one, else a usage error."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Realization:
    """The storage type of each site and parameter."""

    default: str = "f64"
    storage: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)

    def site(self, function: str, index: int) -> str:
        """The storage type of a site's buffer."""
        return self.storage.get(f"{function}/%{index}", self.default)

    def param(self, path: str) -> str:
        """The type a parameter leaf is stored in."""
        return self.params.get(path, self.default)

    @property
    def uniform(self) -> bool:
        return not self.storage and not self.params


def parse(spec: str) -> Realization:
    """`f64`, `f32`, `bf16`, or `@FILE` naming a JSON realization."""
    if spec in TYPES:
        return Realization(spec)
    if not spec.startswith("@"):
        raise RealizationError(f"--realize {spec}: expected f64, f32, bf16 or @FILE")
    path = spec[1:]
    return from_object(read_json(path, f"--realize {spec}", RealizationError), path)


def _type(value: object, where: str) -> str:
    if value not in TYPES:
        raise RealizationError(f"{where}: `{value}` is not f64, f32 or bf16")
    return str(value)


def from_object(doc: object, path: str = "<realization>") -> Realization:
    """A realization from its JSON object; refusals raise RealizationError with E7002."""
    if not isinstance(doc, dict):
        raise RealizationError(f"{path}: a realization is a JSON object")
    known = {"default", "storage", "accum", "order", "params", "envelope"}
    for key in doc:
        if key not in known:
            raise RealizationError(f"{path}: unknown field `{key}`")
    default = _type(doc.get("default", "f64"), f"{path}: default")
    storage = {str(k): _type(v, f"{path}: storage {k}") for k, v in _map(doc, "storage", path)}
    params = {str(k): _type(v, f"{path}: params {k}") for k, v in _map(doc, "params", path)}
    for site, accum in _map(doc, "accum", path):
        accum_type = _type(accum, f"{path}: accum {site}")
        stored = storage.get(str(site), default)
        if accum_type != arith(stored):
            raise RealizationError(
                f"`accum` {accum_type} at {site} is not the arithmetic type of its storage "
                f"({stored} sums in {arith(stored)}): kernels sum in their storage's type",
                "E7002",
            )
    order = doc.get("order", {"kind": "sequential"})
    kind = order.get("kind") if isinstance(order, dict) else order
    if kind not in ("sequential", "blocked"):
        raise RealizationError(
            f"`order` {kind!r} reassociates sums: only sequential and blocked (which keep every "
            "addition in index order) run",
            "E7002",
        )
    return Realization(default, storage, params)


def _map(doc: dict[str, object], key: str, path: str) -> list[tuple[str, object]]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise RealizationError(f"{path}: `{key}` is a JSON object")
    return [(str(k), v) for k, v in value.items()]
