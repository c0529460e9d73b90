"""A sweep: every point of every nest of an entry measured, and the directory it leaves.

`presk autotune` writes one directory a day: `meta.json` (what was swept:
the file, entry, dims, realization, workers, space, repeats, the profile
and the sweep's times) and one `<nest>.jsonl` per nest (`scores/%2` is
`scores__2.jsonl`), a JSON line per point with its layout, its times, its
median and median absolute deviation, the model's prediction if a profile
was given, and its bit verdict against point zero. `presk rank` and
`presk reprice` read these directories. Where a product's add could be its
bias epilogue, `epilogues.jsonl` holds a line per product point timed with
the add in its kernel, beside the two launches it replaces
(presk/tune/epilogue.py); `rank` leaves it out, as its statements are about
one nest's points.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from presk.data.format import write_atomically
from presk.host.plan import PlanError, point_of
from presk.kernel.layout import Layout
from presk.tune import harness
from presk.tune.capture import Capture, Captured, points_of

META = "meta.json"
EPILOGUES = "epilogues.jsonl"
NESTS = "nests"  # meta.json's list of the sweep's nest files


def nest_file(site: str) -> str:
    """The file of a nest's lines: `scores/%2` → `scores__2.jsonl`."""
    return site.replace("/", "_").replace("%", "_") + ".jsonl"


def mad(values: Iterable[float]) -> float:
    """The median absolute deviation from the median."""
    values = list(values)
    if not values:
        return float("nan")
    middle = statistics.median(values)
    return statistics.median(abs(v - middle) for v in values)


# The model's price of a point (µs), or None where there is no model.
Pricer = Callable[[Captured, harness.Lowered], float | None]


@dataclass
class NestSweep:
    """One nest's points, measured."""

    nest: Captured
    lines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def measured(self) -> int:
        return sum(1 for line in self.lines if line["same"] is not None)

    @property
    def differing(self) -> int:
        return sum(1 for line in self.lines if line["same"] is False)

    @property
    def interp_differing(self) -> int:
        return sum(1 for line in self.lines if line.get("interp_same") is False)

    def best(self) -> dict[str, Any] | None:
        ran = [line for line in self.lines if line["same"]]
        return min(ran, key=lambda line: line["median_us"]) if ran else None


def sweep(
    captured: Capture,
    size: str,
    threads: int,
    repeat: int,
    config: str,
    dtype: str,
    price: Pricer | None = None,
    progress: Callable[[int], None] | None = None,
    interp: bool = False,
) -> tuple[list[NestSweep], float, float, float]:
    """Every point of every nest compiled (one unit), run, compared and timed; with
    `interp`, each also run on the kernel interpreter and compared with point zero's
    native bytes.

    Returns the nests' sweeps and the seconds spent costing (the model), measuring and
    interpreting (kept apart, so that a sweep's measured time is the same with or
    without the interpreter: `rank`'s statements N and Q read it)."""
    spaces = [(nest, points_of(nest, threads, size)) for nest in captured.nests]
    start = time.perf_counter()
    benches = harness.prepare_all(spaces, threads)
    costed = interpreted = 0.0
    out: list[NestSweep] = []
    for bench in benches:
        result = NestSweep(bench.nest)
        measured = harness.check(bench, threads, repeat)
        t0 = time.perf_counter()
        zero = bench.run(0, 1) if interp else []
        interpreted += time.perf_counter() - t0
        for index, (lowered, m) in enumerate(zip(bench.points, measured, strict=True)):
            predicted = None
            if price is not None and lowered.refused is None:
                t0 = time.perf_counter()
                predicted = price(bench.nest, lowered)
                costed += time.perf_counter() - t0
            times = [t * 1e6 for t in m.times]
            interp_same = None
            if interp and lowered.refused is None:
                t0 = time.perf_counter()
                got = bench.interpret(index)
                interpreted += time.perf_counter() - t0
                interp_same = harness.same_bytes(got, zero)
            result.lines.append(
                {
                    "nest": bench.nest.site,
                    "index": index,
                    "point": m.point.to_json(),
                    "text": m.point.text(),
                    "type": dtype,
                    "config": config,
                    "operands": bench.nest.operands,
                    "times_us": times,
                    "median_us": statistics.median(times) if times else None,
                    "mad_us": mad(times) if times else None,
                    "predicted_us": predicted,
                    "same": m.same,
                    "interp_same": interp_same,
                    "refused": m.refused,
                }
            )
            if progress is not None:
                progress(1)
        out.append(result)
    return out, costed, time.perf_counter() - start - costed - interpreted, interpreted


# What every sweep's meta.json states: a directory whose meta.json lacks them is not one
# presk wrote, whatever the file's name (a data set's own meta.json is left alone).
META_KEYS = ("file", "entry", "dims", "space", "repeat")


def check_day(directory: str) -> None:
    """Refuse a directory presk did not write as a sweep (nothing of it is replaced)."""
    if directory.strip() == "":
        raise SweepError("--out: an empty name; name the sweep's directory")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise SweepError(f"--out {directory}: a file, not a directory")
    if os.path.isdir(directory) and os.listdir(directory):
        if not _is_meta(os.path.join(directory, META)):
            raise SweepError(
                f"--out {directory}: a directory with files presk did not write as a sweep "
                f"(no sweep's {META}); give an empty or new directory"
            )


def _meta_at(path: str) -> dict[str, Any] | None:
    """The object in the JSON file at `path` (None: no such file, or no object)."""
    try:
        with open(path, encoding="utf-8") as handle:
            meta = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def _is_meta(path: str) -> bool:
    """Whether `path` is a meta.json as a sweep writes it."""
    meta = _meta_at(path)
    return meta is not None and all(key in meta for key in META_KEYS)


class SweepError(Exception):
    """A sweep directory that cannot be written or read (one line for the user)."""


def _lines(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines).encode()


def write_day(
    directory: str,
    meta: dict[str, Any],
    nests: list[NestSweep],
    epilogues: list[dict[str, Any]] | None = None,
) -> list[str]:
    """The sweep's files, each written whole; returns the nests' file paths."""
    lines = {result.nest.site: result.lines for result in nests}
    return write_lines(directory, meta, lines, epilogues)


def write_lines(
    directory: str,
    meta: dict[str, Any],
    nests: dict[str, list[dict[str, Any]]],
    epilogues: list[dict[str, Any]] | None = None,
) -> list[str]:
    """A sweep's files from its lines by site, each written whole, meta.json last and
    naming the nest files it covers; then the files of the sweep written there before
    that this one did not write again are removed (presk's own, named by its meta.json),
    so a later read never takes an earlier sweep's nest for this one's."""
    check_day(directory)
    if not os.path.exists(directory):
        # A new directory is written whole beside it and renamed into place: stopped
        # half-way, the sweep leaves no directory a later run would refuse as foreign.
        parent = os.path.dirname(os.path.abspath(directory))
        os.makedirs(parent, exist_ok=True)
        building = tempfile.mkdtemp(prefix=f".{os.path.basename(directory)}.", dir=parent)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(building, 0o777 & ~mask)  # as os.makedirs would have made it
        try:
            written = write_lines(building, meta, nests, epilogues)
            os.rename(building, directory)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)  # presk's own, half-written
            raise
        return [os.path.join(directory, os.path.basename(path)) for path in written]
    before = _listed(directory)
    paths = []
    for site, nest_lines in nests.items():
        path = os.path.join(directory, nest_file(site))
        write_atomically(path, _lines(nest_lines))
        paths.append(path)
    joined = os.path.join(directory, EPILOGUES)
    if epilogues:
        write_atomically(joined, _lines(epilogues))
    elif os.path.isfile(joined):  # a sweep before this one's (check_day: presk's directory)
        os.remove(joined)
    names = sorted(os.path.basename(path) for path in paths)
    text = json.dumps({**meta, NESTS: names}, indent=2) + "\n"
    write_atomically(os.path.join(directory, META), text.encode())
    for stale in sorted(set(before) - set(names)):
        path = os.path.join(directory, stale)
        if os.path.isfile(path):
            os.remove(path)
    return paths


def _listed(directory: str) -> list[str]:
    """The nest files the sweep in `directory` wrote, as its meta.json names them (none
    for a sweep from before the list, or no sweep): plain names of .jsonl files only."""
    names = (_meta_at(os.path.join(directory, META)) or {}).get(NESTS)
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str) and _nest_name(n)]


def _nest_name(name: str) -> bool:
    """Whether `name` is a file name a sweep gives a nest (no directory, no other file)."""
    plain = name == os.path.basename(name) and name not in ("", ".", "..")
    return plain and name.endswith(".jsonl") and name != EPILOGUES


@dataclass(frozen=True)
class Day:
    """A sweep read back: what was swept and each nest's lines, by site."""

    path: str
    meta: dict[str, Any]
    nests: dict[str, list[dict[str, Any]]]
    epilogues: list[dict[str, Any]] = field(default_factory=list)  # as autotune wrote them


def read_day(directory: str) -> Day:
    meta_path = os.path.join(directory, META)
    try:
        with open(meta_path, encoding="utf-8") as handle:
            meta = json.load(handle)
        nests: dict[str, list[dict[str, Any]]] = {}
        listed = meta.get(NESTS) if isinstance(meta, dict) else None
        if listed is not None and not (
            isinstance(listed, list) and all(isinstance(n, str) and _nest_name(n) for n in listed)
        ):
            raise SweepError(f"{meta_path}: `{NESTS}` is not a list of nest files")
        # A sweep from before meta.json listed its files: every .jsonl but the epilogues'.
        names = listed if listed is not None else sorted(os.listdir(directory))
        for name in names:
            if not _nest_name(name):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as handle:
                lines = [json.loads(line) for line in handle if line.strip()]
            if lines:
                site = _nest_lines(lines, path)
                if site in nests:
                    raise SweepError(f"{path}: a second file of nest {site}")
                nests[site] = lines
        joined = os.path.join(directory, EPILOGUES)
        epilogues = []
        if os.path.isfile(joined):
            with open(joined, encoding="utf-8") as handle:
                epilogues = [json.loads(line) for line in handle if line.strip()]
    except OSError as error:
        raise SweepError(
            f"{directory}: not a sweep of `presk autotune` ({error.strerror})"
        ) from None
    except (ValueError, RecursionError) as error:  # not JSON, or not UTF-8
        raise SweepError(
            f"{directory}: a sweep file is not as autotune writes it ({error})"
        ) from None
    if not isinstance(meta, dict):
        raise SweepError(f"{meta_path}: not a sweep's description")
    _check_meta(meta, meta_path)
    return Day(directory, meta, nests, epilogues)


def _check_meta(meta: dict[str, Any], path: str) -> None:
    """The fields rank and reprice read, of the kinds autotune writes."""
    for key, kind in (("entry", str), ("dims", dict)):
        if not isinstance(meta.get(key), kind):
            raise SweepError(f"{path}: `{key}` is missing or not as autotune writes it")
    for key in ("repeat", "captured_s", "costed_s", "measured_s"):
        if key in meta and not _time(meta[key]):
            raise SweepError(f"{path}: `{key}` is not a finite number of 0 or more")


def _time(value: object) -> bool:
    """A time or a count as a sweep writes one: a finite number, not negative."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value >= 0


# What every line of a sweep holds (a time or a verdict may be null: a refused point's).
LINE_KEYS = ("nest", "index", "point", "median_us", "mad_us", "predicted_us", "same")


def _nest_lines(lines: list[Any], path: str) -> str:
    """The nest a file's lines measure; SweepError for a line not as a sweep writes it
    (rank and reprice read these fields without asking again)."""
    site = lines[0].get("nest") if isinstance(lines[0], dict) else None
    for n, line in enumerate(lines, 1):
        where = f"{path} line {n}"
        if not isinstance(line, dict) or line.get("nest") != site or not isinstance(site, str):
            raise SweepError(f"{where}: not a point of the file's nest")
        missing = [key for key in LINE_KEYS if key not in line]
        if missing:
            raise SweepError(f"{where}: no `{missing[0]}`")
        index = line.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise SweepError(f"{where}: `index` is not a whole number")
        for key in ("median_us", "mad_us", "predicted_us"):
            if line.get(key) is not None and not _time(line[key]):
                raise SweepError(f"{where}: `{key}` is not a finite time")
        times = line.get("times_us", [])
        if not isinstance(times, list) or not all(_time(t) for t in times):
            raise SweepError(f"{where}: `times_us` is not a list of finite times")
        for key in ("same", "interp_same"):
            if line.get(key) is not None and not isinstance(line[key], bool):
                raise SweepError(f"{where}: `{key}` is not true, false or null")
        try:
            point_of(line.get("point"), where)
        except PlanError as error:
            raise SweepError(error.message) from None
    return str(site)


def layout_of(line: dict[str, Any]) -> Layout:
    """A line's point, as the plan file states it."""
    return point_of(line["point"], str(line.get("nest", "?")))


__all__ = [
    "EPILOGUES",
    "META",
    "Day",
    "NestSweep",
    "Pricer",
    "SweepError",
    "check_day",
    "layout_of",
    "mad",
    "nest_file",
    "read_day",
    "sweep",
    "write_day",
    "write_lines",
]
