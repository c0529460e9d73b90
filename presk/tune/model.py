"""The layout cost model and the roofline: a profile, its fit, a prediction.

A profile is a JSON file `presk bench --calibrate` writes: the machine it
was measured on, its samples (each a layout's or a kernel's static terms and
its measured median), the form and the fitted constants, and the fit's
uncertainty u (the median relative residual) and Spearman's ρ against the
measurements.

The layout model (kind "layout", tutorial step 17): one worker's share of a
point's kernels costs

    λ·launches + spawn·splits
        + ‖W/π[g], R/ρ[g], A/α[g], S/σ, B_L2/β_L2, B_L3/β_L3, B_mem/β_mem, B_s/β_s‖

where g is the point's group (type, lanes, workers) and the norm is the
form's: "pnorm" (Σ tᵢ^q)^(1/q) with q fitted in [1, 8], "sum" (q = 1) or
"max". S counts the loop iterations that wait for the one before (an
accumulator's add, features.py) and σ is one rate for all groups, an add's
latency being the same at any width; a profile fitted without it has σ = 0
and no such term. B_s counts the bytes past L2 that a loop walks across lines
rather than along them (the rule `streams`), which the prefetchers do not
fetch ahead; β_s = 0 (a profile fitted without) drops the term. A counts the
arithmetic operations (a vector's one), whose rate α[g] is the floor a compute-bound
point reaches whatever its tile: W counts a tile's body once, so a 12 × 32 tile and a
4 × 32 one differ by three in the arithmetic one iteration does; a profile fitted
without α has no such term. The roofline
(kind "roofline") is λ + max(W/π, Q/β) for each kernel an entry launches.
Both are fitted by least squares on the logarithm of predicted over measured
time, with every rate fitted through its logarithm
(so it stays positive, and may run off towards infinity: a term the fit
does better without vanishes).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from presk.data.format import write_atomically
from presk.diagnostics import read_json
from presk.kernel.layout import Layout
from presk.tune.capture import Captured
from presk.tune.features import RULES, Features, features, features_of
from presk.tune.harness import Lowered
from presk.tune.machine import Machine, machine_of

FORMS = ("pnorm", "sum", "max")
KINDS = ("layout", "roofline")
LOG_BOUND = 60.0  # a rate's logarithm stays within ±60 (a vanished term: e^60 per µs)
# λ and spawn are a launch's fixed costs: a call, the pool's wake-up. Unbounded, the
# fit made λ 478 µs, since among the calibration points only a pack's have two
# launches, and so charged its cost to every launch of every nest priced after.
LAUNCH_MAX_US = 10.0


class ProfileError(Exception):
    """A profile file that cannot be read: one line for the user."""


@dataclass(frozen=True)
class Sample:
    """A layout (or a kernel) measured: its terms and its median time."""

    layout: str
    group: str
    features: Features
    measured_us: float
    site: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "layout": self.layout,
            "site": self.site,
            "group": self.group,
            "features": self.features.to_json(),
            "measured_us": self.measured_us,
        }


@dataclass(frozen=True)
class Fit:
    """The fitted constants: times in µs, rates per second."""

    lam_us: float
    spawn_us: float = 0.0
    beta: tuple[float, float, float] = (1.0, 1.0, 1.0)  # L2, L3, memory (roofline: Q's)
    q: float = 1.0
    pi: dict[str, float] = field(default_factory=dict)
    rho: dict[str, float] = field(default_factory=dict)
    sigma: float = 0.0  # dependent steps per second (0: no such term)
    beta_strided: float = 0.0  # strided bytes past L2 per second (0: no such term)
    alpha: dict[str, float] = field(default_factory=dict)  # arithmetic per second (none: no term)

    def to_json(self) -> dict[str, object]:
        return {
            "lambda_us": self.lam_us,
            "spawn_us": self.spawn_us,
            "beta_l2": self.beta[0],
            "beta_l3": self.beta[1],
            "beta_mem": self.beta[2],
            "q": self.q,
            "pi": dict(self.pi),
            "rho": dict(self.rho),
            "sigma": self.sigma,
            "beta_strided": self.beta_strided,
            "alpha": dict(self.alpha),
        }


@dataclass(frozen=True)
class Profile:
    """A machine, its samples, the form fitted and the constants, u and Spearman."""

    kind: str
    machine: Machine
    samples: tuple[Sample, ...]
    form: str
    fit: Fit
    u: float
    spearman: float
    rules: str = RULES

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "machine": self.machine.to_json(),
            "form": self.form,
            "rules": self.rules,
            "fit": self.fit.to_json(),
            "u": self.u,
            "spearman": self.spearman,
            "samples": [s.to_json() for s in self.samples],
        }


# ---------------------------------------------------------------- reading and writing


def _number(doc: dict[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ProfileError(f"{where}: `{key}` is not a finite number")
    return float(value)


def _rates(doc: dict[str, Any], key: str, where: str) -> dict[str, float]:
    table = doc.get(key, {})
    if not isinstance(table, dict):
        raise ProfileError(f"{where}: `{key}` is not an object of groups")
    return {str(g): _number(table, g, f"{where} {key}") for g in table}


def profile_of(doc: object, where: str) -> Profile:
    """A profile from its JSON object."""
    if not isinstance(doc, dict):
        raise ProfileError(f"{where}: a profile is a JSON object")
    kind, form = doc.get("kind"), doc.get("form")
    if kind not in KINDS:
        raise ProfileError(f"{where}: `kind` is one of {', '.join(KINDS)}")
    if form not in FORMS:
        raise ProfileError(f"{where}: `form` is one of {', '.join(FORMS)}")
    machine = machine_of(doc.get("machine"))
    if isinstance(machine, str):
        raise ProfileError(f"{where}: `machine` is not a machine to price on: {machine}")
    raw = doc.get("fit")
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: `fit` is not an object")
    fit = Fit(
        _number(raw, "lambda_us", where),
        _number(raw, "spawn_us", where),
        (
            _number(raw, "beta_l2", where),
            _number(raw, "beta_l3", where),
            _number(raw, "beta_mem", where),
        ),
        _number(raw, "q", where),
        _rates(raw, "pi", where),
        _rates(raw, "rho", where),
        # Terms a profile written before them lacks: none.
        sigma=_number(raw, "sigma", where) if "sigma" in raw else 0.0,
        beta_strided=_number(raw, "beta_strided", where) if "beta_strided" in raw else 0.0,
        alpha=_rates(raw, "alpha", where),
    )
    samples = doc.get("samples", [])
    if not isinstance(samples, list):
        raise ProfileError(f"{where}: `samples` is not a list")
    kept: list[Sample] = []
    for i, s in enumerate(samples):
        terms = features_of(s.get("features")) if isinstance(s, dict) else None
        if not isinstance(s, dict) or terms is None:
            raise ProfileError(f"{where}: sample {i} is not a measured layout")
        kept.append(
            Sample(
                str(s.get("layout", "")),
                terms.group,
                terms,
                _number(s, "measured_us", f"{where} sample {i}"),
                str(s.get("site", "")),
            )
        )
    rules = doc.get("rules", RULES)
    profile = Profile(
        str(kind),
        machine,
        tuple(kept),
        str(form),
        fit,
        _number(doc, "u", where),
        _number(doc, "spearman", where),
        str(rules),
    )
    problem = _unusable(profile)
    if problem is not None:
        raise ProfileError(f"{where}: {problem}")
    return profile


def _unusable(profile: Profile) -> str | None:
    """Why a profile of finite numbers cannot price or be fitted again (None: it can): a
    rate of 0 or below would divide by zero (or raise a negative to a fraction) in every
    price, a sample of no time has no logarithm for the fit."""
    fit = profile.fit
    rates = {"beta_l2": fit.beta[0], "pi": min(fit.pi.values(), default=1.0)}
    if profile.kind == "layout":  # a roofline reads π and β_L2 alone
        rates |= {"beta_l3": fit.beta[1], "beta_mem": fit.beta[2], "q": fit.q}
        rates |= {"rho": min(fit.rho.values(), default=1.0)}
        rates |= {"alpha": min(fit.alpha.values(), default=1.0)}
    for name, value in rates.items():
        if not value > 0:
            return f"`{name}` holds {value}, not a positive rate"
    times = {"lambda_us": fit.lam_us, "spawn_us": fit.spawn_us, "sigma": fit.sigma}
    times |= {"beta_strided": fit.beta_strided, "u": profile.u}
    for name, value in times.items():
        if value < 0:
            return f"`{name}` is negative"
    for i, sample in enumerate(profile.samples):
        terms = [getattr(sample.features, f.name) for f in fields(sample.features)]
        numbers = [t for t in terms if isinstance(t, int | float)]
        if not sample.measured_us > 0 or not all(math.isfinite(t) and t >= 0 for t in numbers):
            return f"sample {i} is not a positive time with finite, non-negative terms"
    return None


def read(path: str) -> Profile:
    """The profile at `path`; ProfileError with one line if it is not one."""
    return profile_of(read_json(path, path, ProfileError), path)


def write(profile: Profile, path: str) -> None:
    """The profile at `path`, written whole or not at all."""
    text = json.dumps(profile.to_json(), indent=1) + "\n"
    write_atomically(path, text.encode())


# ---------------------------------------------------------------- prediction


def _parts(group: str) -> tuple[str, int, int]:
    dtype, _, rest = group.partition("+lanes")
    lanes, _, workers = rest.partition("+w")
    try:
        return dtype, int(lanes), int(workers)
    except ValueError:
        return dtype, 1, 1


def rate(table: dict[str, float], group: str) -> float:
    """A group's rate; a group the calibration did not see takes the nearest one's:
    the same type first, then the nearest lanes and workers (in octaves), more
    lanes on a tie."""
    if group in table:
        return table[group]
    if not table:
        return 1.0
    dtype, lanes, workers = _parts(group)

    def distance(other: str) -> tuple[bool, float, int]:
        d, lane, work = _parts(other)
        gap = abs(math.log2(max(lane, 1) / max(lanes, 1)))
        gap += abs(math.log2(max(work, 1) / max(workers, 1)))
        return d != dtype, gap, -lane

    return table[min(table, key=distance)]


def combine(terms: list[float], form: str, q: float) -> float:
    match form:
        case "sum":
            return sum(terms)
        case "max":
            return max(terms)
        case _:
            top = max(terms)
            if top <= 0:
                return 0.0
            return float(top * sum((t / top) ** q for t in terms) ** (1 / q))


def predict(terms: Features, profile: Profile) -> float:
    """The predicted µs of one point (or, for a roofline profile, one kernel)."""
    fit = profile.fit
    if profile.kind == "roofline":
        return fit.lam_us + max(
            1e6 * roofline_work(terms) / rate(fit.pi, ""), 1e6 * terms.bytes / fit.beta[0]
        )
    parts = [
        terms.work / rate(fit.pi, terms.group),
        terms.loads / rate(fit.rho, terms.group),
        terms.ops / rate(fit.alpha, terms.group) if fit.alpha else 0.0,
        terms.steps / fit.sigma if fit.sigma > 0 else 0.0,
        terms.l2 / fit.beta[0],
        terms.l3 / fit.beta[1],
        terms.mem / fit.beta[2],
        terms.strided / fit.beta_strided if fit.beta_strided > 0 else 0.0,
    ]
    norm = combine([1e6 * t for t in parts], profile.form, fit.q)
    return fit.lam_us * terms.launches + fit.spawn_us * terms.spawns + norm


def plan_choice(layouts: Sequence[Layout], costs: Sequence[float], u: float) -> int:
    """The point a plan takes, by its index among `layouts` (priced `costs`): the
    cheapest predicted (the first of equals), unless the default `Layout()`, if it is
    among them, is predicted within 1 + u of it. u is the model's median relative
    error: a point it cannot tell from its best is no reason to leave the layout every
    nest has without a plan. (On 2026-12-04 the model put attention's scores `ein` split
    over its two heads 0.1 % under the default's split over the batch; the first
    measured 1.0–2.8 times the second over three runs.)"""
    best = min(range(len(costs)), key=costs.__getitem__)
    default = next((i for i, layout in enumerate(layouts) if layout == Layout()), None)
    if default is not None and costs[default] <= costs[best] * (1 + u):
        return default
    return best


def roofline_work(terms: Features) -> float:
    """The roofline's W: loop iterations and arithmetic operations."""
    return terms.work + terms.ops


def price(
    nest: Captured, lowered: Lowered, profile: Profile, threads: int | None = None
) -> float | None:
    """The predicted µs of a point of `nest` lowered for `threads` workers (the
    calibration machine's, by default); None for a refused point."""
    if lowered.refused is not None:
        return None
    team = profile.machine.workers if threads is None else threads
    return predict(features(lowered.kernels, nest.dtype, profile.machine, team), profile)


# ---------------------------------------------------------------- fitting


@dataclass(frozen=True)
class Fitted:
    fit: Fit
    u: float
    spearman: float
    predicted: tuple[float, ...]


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (0 where it is undefined: fewer than two values or
    a constant side)."""
    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return 0.0
    from scipy import stats  # scipy takes a second to import: only where a fit runs

    value = float(stats.spearmanr(a, b).statistic)
    return value if math.isfinite(value) else 0.0


def _quality(predicted: list[float], measured: list[float]) -> tuple[float, float]:
    u = float(np.median([abs(p / m - 1) for p, m in zip(predicted, measured, strict=True)]))
    return u, spearman(predicted, measured)


def fit_layout(samples: list[Sample], form: str, prior: Fit | None = None) -> Fitted:
    """λ, spawn, β_L2, β_L3, β_mem, σ, β_s, q and π, ρ, α per group, fitted to `samples`;
    from `prior` too (the fit of the calibration before), keeping whichever start ends
    best."""
    groups = sorted({s.group for s in samples})
    g = np.array([groups.index(s.group) for s in samples])
    columns = ("work", "loads", "ops", "l2", "l3", "mem", "steps", "strided", "launches", "spawns")
    x = {c: np.array([float(getattr(s.features, c)) for s in samples]) for c in columns}
    measured = np.array([s.measured_us for s in samples])
    ng = len(groups)
    at_strided = 6 + 2 * ng  # β_s's place in the parameters: after π and ρ
    at_alpha = at_strided + 1  # then α per group, then q

    def model(p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        lam, spawn = np.exp(p[0]), np.exp(p[1])
        b2, b3, bm, sigma = np.exp(p[2]), np.exp(p[3]), np.exp(p[4]), np.exp(p[5])
        pi, rho = np.exp(p[6 : 6 + ng]), np.exp(p[6 + ng : at_strided])
        strided, alpha = np.exp(p[at_strided]), np.exp(p[at_alpha : at_alpha + ng])
        terms = np.stack(
            [
                x["work"] / pi[g],
                x["loads"] / rho[g],
                x["ops"] / alpha[g],
                x["steps"] / sigma,
                x["l2"] / b2,
                x["l3"] / b3,
                x["mem"] / bm,
                x["strided"] / strided,
            ]
        )
        if form == "sum":
            norm = terms.sum(axis=0)
        elif form == "max":
            norm = terms.max(axis=0)
        else:
            q = p[-1]
            top = np.maximum(terms.max(axis=0), 1e-300)
            norm = top * ((terms / top) ** q).sum(axis=0) ** (1 / q)
        return np.asarray(lam * x["launches"] + spawn * x["spawns"] + norm, dtype=np.float64)

    def residuals(p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(np.log(np.maximum(model(p), 1e-12) / measured), dtype=np.float64)

    scale = float(np.median(measured))

    def start(column: str) -> float:
        # Each term about a fifth of the median time to begin with: a rate per µs.
        values = x[column][x[column] > 0]
        return math.log(max(float(np.median(values)) if values.size else 1.0, 1e-9) / scale * 5)

    p0 = [math.log(max(scale / 10, 1e-3)), math.log(max(scale / 100, 1e-4))]
    p0 += [start("l2"), start("l3"), start("mem"), start("steps")]
    p0 += [start("work")] * ng + [start("loads")] * ng + [start("strided")]
    p0 += [start("ops")] * ng
    lo = [-LOG_BOUND] * len(p0)
    hi = [LOG_BOUND] * len(p0)
    hi[0] = hi[1] = math.log(LAUNCH_MAX_US)
    p0[0], p0[1] = (min(v, hi[0] - 0.1) for v in (p0[0], p0[1]))
    from scipy import optimize  # scipy takes a second to import: only where a fit runs

    pnorm = form == "pnorm"
    starts = [p0 + [q0] * pnorm for q0 in ((1.0, 2.0, 4.0) if pnorm else (1.0,))]
    if prior is not None:
        # The fit of fewer samples is often near this one's optimum, and the starts of
        # a fifth of the median each can end where a rate has run off (a term vanished)
        # that this one's samples needed.
        def log_rate(value: float, fallback: float) -> float:
            return math.log(value / 1e6) if value > 0 else fallback

        warm = [math.log(max(prior.lam_us, 1e-3)), math.log(max(prior.spawn_us, 1e-4))]
        warm += [log_rate(b, p0[2 + i]) for i, b in enumerate(prior.beta)]
        warm.append(log_rate(prior.sigma, p0[5]))
        warm += [log_rate(prior.pi.get(gr, 0.0), p0[6 + i]) for i, gr in enumerate(groups)]
        warm += [log_rate(prior.rho.get(gr, 0.0), p0[6 + ng + i]) for i, gr in enumerate(groups)]
        warm.append(log_rate(prior.beta_strided, p0[at_strided]))
        warm += [
            log_rate(prior.alpha.get(gr, 0.0), p0[at_alpha + i]) for i, gr in enumerate(groups)
        ]
        starts.append(
            [min(max(v, a), b) for v, a, b in zip(warm, lo, hi, strict=True)] + [prior.q] * pnorm
        )
    bounds = (lo + [1.0] * pnorm, hi + [8.0] * pnorm)
    best: optimize.OptimizeResult | None = None
    for begin in starts:
        p = np.array(begin)
        if pnorm:
            p[-1] = min(max(p[-1], 1.0), 8.0)
        result = optimize.least_squares(residuals, p, bounds=bounds, method="trf", max_nfev=400)
        if best is None or result.cost < best.cost:
            best = result
    assert best is not None
    p = best.x
    per_s = 1e6  # a rate per µs is 10⁶ per second
    betas = [float(np.exp(p[2 + i]) * per_s) for i in range(3)]
    seen = [x[c].any() for c in ("l2", "l3", "mem")]
    # A level no sample brought bytes from is unconstrained: take it to be as slow
    # as the slowest level seen (memory is no faster than a cache).
    slowest = min((b for b, ok in zip(betas, seen, strict=True) if ok), default=1e10)
    betas = [b if ok else slowest for b, ok in zip(betas, seen, strict=True)]
    fit = Fit(
        float(np.exp(p[0])),
        float(np.exp(p[1])) if x["spawns"].any() else 0.0,
        (betas[0], betas[1], betas[2]),
        float(p[-1]) if form == "pnorm" else 1.0,
        {gr: float(np.exp(p[6 + i]) * per_s) for i, gr in enumerate(groups)},
        {gr: float(np.exp(p[6 + ng + i]) * per_s) for i, gr in enumerate(groups)},
        # Without a sample that waits on its accumulators σ is unconstrained: no term.
        float(np.exp(p[5]) * per_s) if x["steps"].any() else 0.0,
        # Likewise without a sample that walks a large buffer across lines.
        float(np.exp(p[at_strided]) * per_s) if x["strided"].any() else 0.0,
        {gr: float(np.exp(p[at_alpha + i]) * per_s) for i, gr in enumerate(groups)},
    )
    predicted = [float(v) for v in model(p)]
    u, rho = _quality(predicted, [s.measured_us for s in samples])
    return Fitted(fit, u, rho, tuple(predicted))


def fit_roofline(samples: list[Sample]) -> Fitted:
    """λ, π and β of λ + max(W/π, Q/β), fitted to kernels measured."""
    w = np.array([roofline_work(s.features) for s in samples])
    q = np.array([s.features.bytes for s in samples])
    measured = np.array([s.measured_us for s in samples])

    def model(p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(np.exp(p[0]) + np.maximum(w / np.exp(p[1]), q / np.exp(p[2])))

    def residuals(p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(np.log(np.maximum(model(p), 1e-12) / measured), dtype=np.float64)

    scale = float(np.median(measured))
    p0 = np.array(
        [
            math.log(max(scale / 4, 1e-3)),
            math.log(max(float(np.median(w)), 1.0) / scale),
            math.log(max(float(np.median(q)), 1.0) / scale),
        ]
    )
    from scipy import optimize

    result = optimize.least_squares(
        residuals, p0, bounds=([-LOG_BOUND] * 3, [LOG_BOUND] * 3), method="trf"
    )
    p = result.x
    fit = Fit(
        float(np.exp(p[0])),
        0.0,
        (float(np.exp(p[2]) * 1e6), 0.0, 0.0),
        1.0,
        {"": float(np.exp(p[1]) * 1e6)},
        {},
    )
    predicted = [float(v) for v in model(p)]
    u, rho = _quality(predicted, [s.measured_us for s in samples])
    return Fitted(fit, u, rho, tuple(predicted))


def fit(samples: list[Sample], form: str, kind: str = "layout", prior: Fit | None = None) -> Fitted:
    """The model of `kind` fitted to `samples` in `form` (from `prior` too, a layout's)."""
    if not samples:
        raise ProfileError("no samples to fit")
    return fit_roofline(samples) if kind == "roofline" else fit_layout(samples, form, prior)


def fitted_profile(
    kind: str, machine: Machine, samples: list[Sample], form: str, prior: Fit | None = None
) -> tuple[Profile, Fitted]:
    done = fit(samples, form, kind, prior)
    profile = Profile(kind, machine, tuple(samples), form, done.fit, done.u, done.spearman)
    return profile, done


def fit_lines(profile: Profile, form_name: str | None = None) -> list[str]:
    """The fit as `bench --calibrate --space calib` and `refit` print it."""
    f = profile.fit
    if profile.kind == "roofline":
        return [
            f"-- roofline: π = {rate(f.pi, ''):.3e} ops/s, β = {f.beta[0]:.3e} bytes/s, "
            f"λ = {f.lam_us:.2f} µs per launch"
        ]
    name = form_name or {"pnorm": "p-norm", "sum": "sum", "max": "max"}[profile.form]
    q = f"q = {f.q:.2f}, " if profile.form == "pnorm" else ""
    out = [
        f"-- fit ({name}, {q}load term, rules {profile.rules}): λ = {f.lam_us:.2f} µs, "
        f"spawn = {f.spawn_us:.2f} µs, β_L2 = {f.beta[0]:.3e}, β_L3 = {f.beta[1]:.3e}, "
        f"β_mem = {f.beta[2]:.3e} bytes/s, σ = {f.sigma:.3e} steps/s, "
        f"β_strided = {f.beta_strided:.3e} bytes/s"
    ]
    out += [f"--      π[{g}] = {v:.3e} ops/s" for g, v in sorted(f.pi.items())]
    out += [f"--      ρ[{g}] = {v:.3e} loads/s" for g, v in sorted(f.rho.items())]
    out += [f"--      α[{g}] = {v:.3e} arithmetic/s" for g, v in sorted(f.alpha.items())]
    out.append(
        f"-- uncertainty u = {profile.u:.3f} (median relative residual over "
        f"{len(profile.samples)} samples), Spearman {profile.spearman:.3f}"
    )
    return out


__all__ = [
    "FORMS",
    "Fit",
    "Fitted",
    "Profile",
    "ProfileError",
    "Sample",
    "combine",
    "fit",
    "fit_layout",
    "fit_lines",
    "fit_roofline",
    "fitted_profile",
    "plan_choice",
    "predict",
    "price",
    "profile_of",
    "rate",
    "read",
    "spearman",
    "write",
]
