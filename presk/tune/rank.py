"""How well the layout cost model ranks what two days of sweeps measured.

The unit is a close pair: two points of one nest that differ in one
decision (the tile, the order, the pack, the lanes, the split, …). A pair
is distinguished when its two medians differ by more than twice the larger
median absolute deviation on both days, in the same direction; the model
orders it right when its predictions order it the same way, and a pair it
predicts equal is tied, which is not right. The statements (L, M, N, O, P,
Q) are the research programme's: every point exact; more than 90 % of at
least 10³ distinguished pairs right; choosing statically at least 10³×
cheaper than sweeping; the model's pick within 1.25× of the best measured;
the GEMM's best point at least 3× the default; and measuring only the
points predicted within 1 + u of the model's best finding one within 1.05×
of the best at no more than 10 % of the sweep's cost.
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
from dataclasses import dataclass, fields
from typing import Any

from presk.diagnostics import printable
from presk.kernel.layout import Layout
from presk.tune.model import plan_choice
from presk.tune.sweep import Day, layout_of

DECISIONS = tuple(f.name for f in fields(Layout))


@dataclass(frozen=True)
class Point:
    """One point of one nest, as both days measured it."""

    nest: str
    layout: Layout
    medians: tuple[float, float]
    mads: tuple[float, float]
    predicted: float | None
    same: tuple[bool | None, bool | None]
    timed: tuple[float, float]  # each day's timed launches, warm-up included (s)

    @property
    def median(self) -> float:
        return statistics.fmean(self.medians)


def points(day1: Day, day2: Day) -> dict[str, list[Point]]:
    """The points both days measured, by nest."""
    repeats = (int(day1.meta.get("repeat", 1)), int(day2.meta.get("repeat", 1)))
    out: dict[str, list[Point]] = {}
    for nest, lines in day1.nests.items():
        other = {line["index"]: line for line in day2.nests.get(nest, [])}
        for line in lines:
            twin = other.get(line["index"])
            if twin is None or line["median_us"] is None or twin["median_us"] is None:
                continue
            medians = (float(line["median_us"]), float(twin["median_us"]))
            predicted = line.get("predicted_us")
            out.setdefault(nest, []).append(
                Point(
                    nest,
                    layout_of(line),
                    medians,
                    (float(line["mad_us"]), float(twin["mad_us"])),
                    None if predicted is None else float(predicted),
                    (line["same"], twin["same"]),
                    tuple(m * 1e-6 * (r + 1) for m, r in zip(medians, repeats, strict=True)),  # type: ignore[arg-type]
                )
            )
    return out


def decision(a: Layout, b: Layout) -> str | None:
    """The one decision two points differ in, or None (none, or several)."""
    differ = [name for name in DECISIONS if getattr(a, name) != getattr(b, name)]
    return differ[0] if len(differ) == 1 else None


@dataclass
class ClassCount:
    pairs: int = 0
    distinguished: int = 0
    right: int = 0
    decided: int = 0  # distinguished pairs the model does not predict within 1 + u
    right_decided: int = 0
    tied: int = 0


def pairs(points_by_nest: dict[str, list[Point]], u: float) -> dict[str, ClassCount]:
    """Close pairs by decision class, over every nest."""
    counts: dict[str, ClassCount] = {}
    for pts in points_by_nest.values():
        for a, b in itertools.combinations(pts, 2):
            name = decision(a.layout, b.layout)
            if name is None:
                continue
            c = counts.setdefault(name, ClassCount())
            c.pairs += 1
            signs = [(a.medians[d] - b.medians[d], 2 * max(a.mads[d], b.mads[d])) for d in (0, 1)]
            if not all(abs(diff) > band for diff, band in signs):
                continue
            if (signs[0][0] > 0) != (signs[1][0] > 0):
                continue
            c.distinguished += 1
            if a.predicted is None or b.predicted is None:
                continue
            low, high = sorted((a.predicted, b.predicted))
            decided = high > (1 + u) * low
            c.decided += decided
            if a.predicted == b.predicted:
                c.tied += 1
                continue
            right = (a.predicted < b.predicted) == (signs[0][0] < 0)
            c.right += right
            c.right_decided += right and decided
    return counts


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "—"


@dataclass(frozen=True)
class Report:
    statements: list[tuple[str, str, str, str]]  # letter, statement, measured, verdict
    q_rows: list[list[str]]
    classes: list[list[str]]


def rank(day1: Day, day2: Day, entry: str, profile_u: float | None) -> Report:
    """The statements and tables of `presk rank`."""
    by_nest = points(day1, day2)
    u = profile_u if profile_u is not None else 0.0
    contractions = {n: p for n, p in by_nest.items() if any(x.layout.form for x in p)}
    predicted = all(x.predicted is not None for p in by_nest.values() for x in p)
    config = ",".join(f"{k}={v}" for k, v in day1.meta.get("dims", {}).items())
    dtype = str(day1.meta.get("realize", "?"))
    statements = [_l(day1, day2), _m(contractions, u, predicted, entry, config, dtype)]
    statements += [_n(day1, day2, entry, config, dtype), _o(contractions, predicted, entry, u)]
    statements += [_p(by_nest, entry), _q(contractions, day1, u, predicted, profile_u)[0]]
    q_rows = _q(contractions, day1, u, predicted, profile_u)[1]
    counts = pairs(by_nest, u)
    classes = [
        [
            name,
            str(c.pairs),
            str(c.distinguished),
            *(
                (
                    _percent(c.right, c.distinguished),
                    _percent(c.right_decided, c.decided),
                    _percent(c.distinguished - c.decided, c.distinguished),
                    _percent(c.tied, c.distinguished),
                )
                if predicted
                else ("—",) * 4
            ),
        ]
        for name, c in sorted(counts.items())
    ]
    return Report(statements, q_rows, classes)


def _l(day1: Day, day2: Day) -> tuple[str, str, str, str]:
    checked = differing = interpreted = interp_differing = 0
    for day in (day1, day2):
        for lines in day.nests.values():
            for line in lines:
                if line["same"] is not None:
                    checked += 1
                    differing += line["same"] is False
                if line.get("interp_same") is not None:  # a sweep with --interp
                    interpreted += 1
                    interp_differing += line["interp_same"] is False
    verdict = "**holds**" if differing == 0 == interp_differing and checked else "**fails**"
    what, measured = (
        "natively",
        f"{checked} point runs over two sweeps; {differing} outputs differing",
    )
    if interpreted:
        what = "natively and on the kernel interpreter"
        measured += f"; {interpreted} interpreted, {interp_differing} differing"
    return ("L", f"every point bit-identical to point 0, {what}", measured, verdict)


def _m(
    contractions: dict[str, list[Point]],
    u: float,
    predicted: bool,
    entry: str,
    config: str,
    dtype: str,
) -> tuple[str, str, str, str]:
    text = (
        "more than 90 % of the distinguished close pairs ranked right, "
        f"{_code(entry)} at {_text(config)}, {_text(dtype)}"
    )
    if not predicted:
        return ("M", text, "no predictions (autotune without --profile)", "not measured")
    parts, total, right = [], 0, 0
    for nest, pts in sorted(contractions.items()):
        c = pairs({nest: pts}, u)
        d = sum(x.distinguished for x in c.values())
        r = sum(x.right for x in c.values())
        total, right = total + d, right + r
        parts.append(f"{_code(nest)} {_percent(r, d)} of {d}")
    if total < 1000:
        verdict = "inconclusive: fewer than 10³ distinguished pairs"
    else:
        verdict = "**holds**" if right > 0.9 * total else "**fails**"
    return ("M", text, "; ".join(parts) or "no contraction nest", verdict)


def _n(day1: Day, day2: Day, entry: str, config: str, dtype: str) -> tuple[str, str, str, str]:
    ratios = []
    for day in (day1, day2):
        static = float(day.meta.get("captured_s", 0)) + float(day.meta.get("costed_s", 0))
        ratios.append(float(day.meta.get("measured_s", 0)) / static if static > 0 else 0.0)
    text = f"choosing statically at least 10³× cheaper than the exhaustive sweep, {_code(entry)}"
    measured = "; ".join(f"{_text(config)} {_text(dtype)} {r:.0f}×" for r in ratios)
    return ("N", text, measured, "**holds**" if min(ratios) >= 1000 else "**fails**")


def _o(
    contractions: dict[str, list[Point]], predicted: bool, entry: str, u: float
) -> tuple[str, str, str, str]:
    text = "the model's pick within 1.25× of the best measured, every contraction nest of "
    text += _code(entry)
    if not predicted or not contractions:
        return ("O", text, "no predictions (autotune without --profile)", "not measured")
    parts, worst = [], 0.0
    for nest, pts in sorted(contractions.items()):
        costs = [p.predicted or 0.0 for p in pts]
        pick = pts[plan_choice([p.layout for p in pts], costs, u)]
        ratio = pick.median / min(p.median for p in pts)
        worst = max(worst, ratio)
        parts.append(f"{_code(nest)} {ratio:.2f}")
    return ("O", text, "; ".join(parts), "**holds**" if worst <= 1.25 else "**fails**")


def _p(by_nest: dict[str, list[Point]], entry: str) -> tuple[str, str, str, str]:
    text = "the best point of the GEMM space at least 3× the default, `gemm` at N=1024, f32"
    if entry != "gemm":
        return ("P", text, "—", "not measured")
    parts, worst = [], float("inf")
    for nest, pts in sorted(by_nest.items()):
        default = next((p for p in pts if p.layout == Layout()), None)
        if default is None or not any(p.layout.form for p in pts):
            continue
        ratio = default.median / min(p.median for p in pts)
        worst = min(worst, ratio)
        parts.append(f"{_code(nest)} {ratio:.2f}×")
    if not parts:
        return ("P", text, "—", "not measured")
    return ("P", text, "; ".join(parts), "**holds**" if worst >= 3 else "**fails**")


def _q(
    contractions: dict[str, list[Point]],
    day1: Day,
    u: float,
    predicted: bool,
    profile_u: float | None,
) -> tuple[tuple[str, str, str, str], list[list[str]]]:
    text = (
        "measuring only the points predicted within 1 + u of the model's best finds one within "
        "1.05× of the best measured, at no more than 10 % of the exhaustive sweep's time"
    )
    if not predicted or profile_u is None or not contractions:
        return ("Q", text, "no predictions or no u (autotune --profile)", "not measured"), []
    static = float(day1.meta.get("captured_s", 0)) + float(day1.meta.get("costed_s", 0))
    rows, holds = [], True
    for nest, pts in sorted(contractions.items()):
        best_predicted = min(p.predicted or 0.0 for p in pts)
        candidates = [p for p in pts if (p.predicted or 0.0) <= (1 + u) * best_predicted]
        regret = min(p.median for p in candidates) / min(p.median for p in pts)
        exhaustive = sum(p.timed[0] for p in pts)
        cost = (static + sum(p.timed[0] for p in candidates)) / exhaustive if exhaustive else 1.0
        ok = regret <= 1.05 and cost <= 0.10
        holds = holds and ok
        rows.append(
            [
                _code(nest),
                str(len(pts)),
                str(len(candidates)),
                f"{regret:.2f}",
                f"{100 * cost:.1f} %",
                f"{static:.2f}, {sum(p.timed[0] for p in candidates):.2f}, {exhaustive:.2f}",
                "**holds**" if ok else "**fails**",
            ]
        )
    worst = max(rows, key=lambda r: float(r[3]))
    measured = f"{len(rows)} contraction nests; worst regret {worst[3]} ({worst[0]})"
    return ("Q", text, measured, "**holds**" if holds else "**fails**"), rows


def _line(value: object) -> str:
    """A string from a sweep (an entry, a nest, dims, a realization's @FILE) as one
    line of printable text: a table row ends at a newline."""
    return " ".join(printable(str(value)).split())


def _text(value: object) -> str:
    """A sweep's string as plain text in a table cell, its Markdown escaped (a row splits
    at every unescaped pipe)."""
    return re.sub(r"([\\`*_\[\]<>|~&])", r"\\\1", _line(value))


def _code(value: object) -> str:
    """A sweep's name as code in a table cell: fenced by more backticks than it holds
    in a run, so its own cannot end the code; a pipe is escaped even there."""
    body = _line(value).replace("|", "\\|")
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", body)), default=0))
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def markdown(report: Report) -> str:
    """The report as `presk rank --out` writes it."""
    out = ["## Statements", "", "| | statement | measured | verdict |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in report.statements]
    out += ["", "## Statement Q, per contraction nest", ""]
    out += [
        "| nest | points | candidates | regret | cost | static, candidates, exhaustive (s) "
        "| verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    out += ["| " + " | ".join(row) + " |" for row in report.q_rows]
    out += ["", "## Per decision class", ""]
    out += [
        "| class | close pairs | distinguished | right | right, decided | undecided | tied |",
        "|---|---|---|---|---|---|---|",
    ]
    out += ["| " + " | ".join(row) + " |" for row in report.classes]
    return "\n".join(out) + "\n"


def profile_u(path: object) -> float | None:
    """The fit's uncertainty u of the profile a sweep was priced with (None: none)."""
    if not isinstance(path, str):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            doc: Any = json.load(handle)
    except (OSError, json.JSONDecodeError):
        return None
    u = doc.get("u") if isinstance(doc, dict) else None
    return float(u) if isinstance(u, (int, float)) else None


__all__ = ["DECISIONS", "Report", "decision", "markdown", "pairs", "points", "profile_u", "rank"]
