"""Layout plans: `--plan @FILE`, a realization and a layout per nest.

A plan is a JSON object, `{"realization": …, "layout": {site: point}}`:
`realization` is what `--realize` takes (a type, or a realization object),
and each site is named as `dump --stage core` names its binding
(`scores/%2`). A point states what it chooses (kernel/layout.py); what it
leaves out is the default's. Every point computes point zero's bits, so a
plan changes only time; a point a nest cannot take is refused before
anything runs (E7002, with the condition's reason).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from presk.data.format import write_atomically
from presk.diagnostics import read_json
from presk.host.realization import TYPES, Realization, RealizationError, from_object
from presk.host.realization import parse as parse_realization
from presk.kernel.layout import NO_SPLIT, Layout, Split


class PlanError(RealizationError):
    """A plan that cannot run: `code` E7002 for a refused point, else a usage error."""


@dataclass(frozen=True)
class Plan:
    """A realization (None: `--realize`'s) and the layout of each named nest."""

    realization: Realization | None = None
    layouts: dict[str, Layout] = field(default_factory=dict)
    realization_json: object = None  # as the file states it, to write the plan back

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.realization_json is not None:
            out["realization"] = self.realization_json
        out["layout"] = dict(self.layouts_json())
        return out

    def layouts_json(self) -> list[tuple[str, dict[str, object]]]:
        return [(site, point.to_json()) for site, point in self.layouts.items()]


FIELDS = ("form", "tile", "kblock", "order", "lanes", "pack", "split", "passes", "epilogue")


def parse(spec: str) -> Plan:
    """`@FILE` naming a JSON plan."""
    if not spec.startswith("@"):
        raise PlanError(f"--plan {spec}: expected @FILE (a JSON plan)")
    path = spec[1:]
    return from_json(read_json(path, f"--plan {spec}", PlanError), path)


def from_json(doc: object, path: str = "<plan>") -> Plan:
    if not isinstance(doc, dict):
        raise PlanError(f"{path}: a plan is a JSON object")
    for key in doc:
        if key not in ("realization", "layout"):
            raise PlanError(f"{path}: unknown field `{key}` (a plan has realization and layout)")
    realization = None
    stated = doc.get("realization")
    if isinstance(stated, str) and stated not in TYPES and not stated.startswith("@"):
        said = json.dumps(stated)
        raise PlanError(f"{path}: `realization` {said}: expected f64, f32, bf16 or @FILE")
    try:
        if isinstance(stated, str):
            realization = parse_realization(stated)
        elif stated is not None:
            realization = from_object(stated, path)
    except RealizationError as error:
        # from_object's messages name the file already; an @FILE's name theirs.
        said = error.message if error.message.startswith(path) else f"{path}: {error.message}"
        raise PlanError(said, error.code) from None
    layouts = doc.get("layout", {})
    if not isinstance(layouts, dict):
        raise PlanError(f"{path}: `layout` is an object from sites to points")
    points = {str(site): point_of(value, f"{path}: {site}") for site, value in layouts.items()}
    return Plan(realization, points, stated)


# Far above any tile, block, lane or worker count: a number past it is refused as it is
# read, so no message or C text carries a number of thousands of digits.
LARGEST = 2**31 - 1


def _int(value: object, where: str, least: int = -LARGEST) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{where}: expected a whole number, not {json.dumps(value)}")
    if abs(value) > LARGEST:
        shown = value if abs(value) < 10**12 else "a number that large"
        raise PlanError(f"{where}: {shown} is out of range")
    if value < least:
        raise PlanError(f"{where}: expected a whole number of at least {least}, not {value}")
    return value


def point_of(value: object, where: str) -> Layout:
    """One point from its JSON object."""
    if not isinstance(value, dict):
        raise PlanError(f"{where}: a layout is a JSON object")
    for key in value:
        if key not in FIELDS:
            raise PlanError(f"{where}: unknown field `{key}` (one of {', '.join(FIELDS)})")
    tile = value.get("tile")
    if tile is not None:
        if not isinstance(tile, list) or len(tile) != 2:
            raise PlanError(f"{where}: `tile` is [rows, columns]")
        tile = (_int(tile[0], f"{where} tile"), _int(tile[1], f"{where} tile"))
    kblock = value.get("kblock")
    if kblock == "none":
        kblock = 0
    form, order = value.get("form"), value.get("order")
    for name, text in (("form", form), ("order", order)):
        if text is not None and not isinstance(text, str):
            raise PlanError(f"{where}: `{name}` is a string")
    pack, epilogue = value.get("pack"), value.get("epilogue")
    for name, flag in (("pack", pack), ("epilogue", epilogue)):
        if flag is not None and not isinstance(flag, bool):
            raise PlanError(f"{where}: `{name}` is true or false")
    if form is None and any(value.get(f) is not None for f in ("tile", "kblock", "order", "pack")):
        form = "tiled"  # a tile (a block of K, an order, a pack) is the tiled form's
    return Layout(
        form=form if isinstance(form, str) else None,
        tile=tile,
        kblock=None if kblock is None else _int(kblock, f"{where} kblock"),
        order=order if isinstance(order, str) else None,
        # Lanes of 0 or fewer would be read as one lane: refused, as a stated count.
        lanes=None if value.get("lanes") is None else _int(value["lanes"], f"{where} lanes", 1),
        pack=pack,
        split=_split(value.get("split"), where),
        passes=None if value.get("passes") is None else _int(value["passes"], f"{where} passes"),
        epilogue=epilogue,
    )


def _split(value: object, where: str) -> Split | None:
    if value is None:
        return None
    if value == "none":
        return NO_SPLIT
    if not isinstance(value, dict) or set(value) != {"depth", "workers"}:
        raise PlanError(f'{where}: `split` is "none" or {{"depth": d, "workers": p}}')
    depth = _int(value["depth"], f"{where} split depth")
    workers = _int(value["workers"], f"{where} split workers")
    if depth < 0 or workers < 1:
        raise PlanError(f"{where}: a split needs a depth of 0 or more and at least one worker")
    return Split(depth, workers)


def write(plan: Plan, path: str) -> None:
    """The plan as JSON at `path`, a point a line, written whole or not at all."""
    doc = plan.to_json()
    lines = ["{"]
    if "realization" in doc:
        lines.append(f'  "realization": {json.dumps(doc["realization"])},')
    points = [f"    {json.dumps(site)}: {json.dumps(point)}" for site, point in plan.layouts_json()]
    lines += (
        ['  "layout": {', ",\n".join(points), "  }", "}"] if points else ['  "layout": {}', "}"]
    )
    write_atomically(path, ("\n".join(lines) + "\n").encode())


__all__ = ["FIELDS", "Plan", "PlanError", "from_json", "parse", "point_of", "write"]
