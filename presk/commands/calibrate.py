"""`presk bench --calibrate PROFILE.json`: measure, fit a cost model, write its profile.

With `--space calib`, the entry's first contraction nest is timed under the
calibration layouts (tutorial step 17): five register tiles, [1, 4] to
[4, 16], in one lane or the register's width, and the wide tiles in the
register's width; the orders IJ and JI, every order of IJK with a block of
128 and two with a block of 32; the default; one worker, half the machine or
all of it — 393 points on a machine of more than two cores, compiled as one
unit and each timed `--repeat` times. The layout model (tune/model.py) is
fitted to them and to the samples a profile of the same machine already holds.

Without it, every nest the entry launches is timed at its default point and
the roofline λ + max(W/π, Q/β) is fitted.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from presk.commands.common import Chosen, write_out
from presk.commands.plan import checked_profile
from presk.diagnostics import CommandError, UsageError
from presk.kernel.layout import (
    NO_SPLIT,
    WIDE_TILES,
    Layout,
    NestKind,
    Split,
    lane_choices,
    point_zero,
)
from presk.kernel.text import kernel_text
from presk.pipeline import Request
from presk.tune.capture import Captured, capture, check_fits
from presk.tune.features import RULES, features
from presk.tune.harness import check, lower_point, prepare_all
from presk.tune.machine import Machine, read_machine
from presk.tune.model import (
    FORMS,
    Fit,
    Profile,
    Sample,
    fit_lines,
    fitted_profile,
    predict,
    spearman,
    write,
)

TILES = ((1, 4), (1, 8), (2, 8), (4, 8), (4, 16))
ORDERS = (
    (0, "IJ"),
    (0, "JI"),
    *((128, o) for o in ("IJK", "IKJ", "JIK", "JKI", "KIJ", "KJI")),
    (32, "IJK"),
    (32, "KJI"),
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """bench's flags of a calibration."""
    parser.add_argument(
        "--calibrate",
        default=None,
        metavar="PROFILE.json",
        help="time the entry's kernels, fit a cost model and write its profile "
        "(keeping the samples a profile of this machine there already holds)",
    )
    parser.add_argument(
        "--space",
        default=None,
        choices=("calib",),
        help="with --calibrate: a GEMM's nest under the calibration layouts (hundreds), "
        "fitting the layout cost model",
    )
    parser.add_argument(
        "--combine",
        default=None,
        choices=FORMS,
        help="with --space calib: how the model's terms combine (default pnorm)",
    )


def calibration_points(nest: Captured, threads: int) -> list[Layout]:
    """The calibration layouts of a contraction nest (splits at depth 0 for now: the
    depth is chosen per point once it is lowered, see `_split_depths`): TILES in one
    lane and in the register's width, the wide tiles in the register's width only (one
    lane of them spills), and the default, on each worker count."""
    counts = sorted({1, max(1, threads // 2), threads})
    splits = [NO_SPLIT if workers == 1 else Split(0, workers) for workers in counts]
    out: list[Layout] = []
    for tile in (*TILES, *WIDE_TILES):
        for kblock, order in ORDERS:
            if kblock and kblock >= nest.nest.k:
                continue  # one block: the same kernel as no block
            lanes_of = lane_choices(nest.dtype, tile[1])
            for lanes in lanes_of if tile in TILES else lanes_of[-1:]:
                pack = None if nest.nest.contiguous else lanes > 1
                for split in splits:
                    out.append(Layout("tiled", tile, kblock, order, lanes, pack, split))
    return out + [Layout(split=split) for split in splits]


def _split_depths(nest: Captured, points: list[Layout], threads: int) -> list[Layout]:
    """Each split at the shallowest depth its kernel may be split at (a loop over
    blocks of K first is not parallel); a point no depth admits stays as it is,
    to be reported ill-formed."""
    out: list[Layout] = []
    for p in points:
        if p.split is None or p.split == NO_SPLIT:
            out.append(p)
            continue
        chosen = p
        for depth in (0, 1, 2):
            candidate = replace(p, split=Split(depth, p.split.workers))
            if lower_point(nest, candidate, threads).refused is None:
                chosen = candidate
                break
        out.append(chosen)
    return out


def _kept(path: str, kind: str, machine: Machine) -> tuple[list[Sample], str, Fit | None]:
    """The samples and the fit of an earlier profile at `path` (of this kind and machine)."""
    if not os.path.exists(path):
        return [], "", None
    try:
        old = checked_profile(path, "--calibrate")
    except CommandError as error:
        raise CommandError(f"{error} (give another file, or remove it)") from None
    if old.kind != kind:
        raise CommandError(
            f"--calibrate {path}: a {old.kind} profile; this calibration fits a {kind} one"
        )
    if old.machine != machine:
        return [], " (another machine's: none kept)", None
    if old.kind == "layout" and old.rules != RULES:
        return [], f" (costed under the rules {old.rules}: none kept)", None
    return list(old.samples), "", old.fit


def _write(profile: Profile, path: str) -> None:
    write_out("--calibrate", path, lambda: write(profile, path))


def calibrate(args: argparse.Namespace, chosen: Chosen, request: Request, repeat: int) -> int:
    """The calibration bench's --calibrate asks for; its exit code."""
    if args.space == "calib":
        return _layouts(args, chosen, request, repeat)
    if args.combine is not None:
        raise UsageError("--combine chooses the layout model's form: give it with --space calib")
    return _roofline(args, request, repeat)


def _first_contraction(request: Request) -> tuple[Captured, float]:
    captured = capture(request)
    for nest in captured.nests:
        if nest.nest.kind == NestKind.CONTRACTION:
            return nest, captured.seconds
    raise CommandError(
        f"--space calib: {request.entry.text} launches no contraction to calibrate on "
        "(a program with a product `a · b` has one)"
    )


def _layouts(args: argparse.Namespace, chosen: Chosen, request: Request, repeat: int) -> int:
    path = args.calibrate
    machine = read_machine()
    threads = request.threads
    kept, why, prior = _kept(path, "layout", machine)  # a profile refused before timing
    nest, _ = _first_contraction(request)
    check_fits([nest], "the calibration")
    points = _split_depths(nest, calibration_points(nest, threads), threads)
    bench = prepare_all([(nest, [point_zero(nest.nest), *points])], threads)[0]
    measured = check(bench, threads, repeat)[1:]
    dims = ",".join(f"{k}={v}" for k, v in sorted(chosen.binding.dims.items()))
    fresh: list[Sample] = []
    refused = differing = 0
    for lowered, m in zip(bench.points[1:], measured, strict=True):
        if m.refused is not None:
            refused += 1
            continue
        differing += m.same is False
        terms = features(lowered.kernels, nest.dtype, machine, threads)
        site = f"{nest.site} {dims}"
        fresh.append(Sample(m.point.text(), terms.group, terms, m.median * 1e6, site))
    if not fresh:
        raise CommandError(f"--space calib: no layout of {nest.site} could be timed")
    form = args.combine or "pnorm"
    profile, done = fitted_profile("layout", machine, [*kept, *fresh], form, prior)
    _write(profile, path)
    out = [machine.line(nest.site, nest.dtype), f"-- costed under the rules {RULES}"]
    out.append(f"{'layout':<65}{'group':<20}{'measured µs':>11}{'predicted µs':>13}")
    for s, p in zip(fresh, done.predicted[len(kept) :], strict=True):
        out.append(f"{s.layout:<64} {s.group:<19}{s.measured_us:>11.2f}{p:>13.2f}")
    out.append(
        f"-- {len(measured)} layouts timed ({refused} ill-formed at these shapes), "
        f"{len(kept)} samples kept from {path}{why}, {repeat} calls each"
    )
    if differing:
        out.append(f"-- {differing} layouts' outputs DIFFER from point zero's")
    out += fit_lines(profile)
    out.append(f"-- profile written to {path}")
    sys.stdout.write("\n".join(out) + "\n")
    return 1 if differing else 0


def _roofline(args: argparse.Namespace, request: Request, repeat: int) -> int:
    path = args.calibrate
    machine = read_machine()
    threads = request.threads
    kept, why, _ = _kept(path, "roofline", machine)  # a profile refused before timing
    captured = capture(request)
    if not captured.nests:
        raise CommandError(f"{request.entry.text} launches no kernel to time")
    check_fits(captured.nests, "the calibration")
    benches = prepare_all([(n, [Layout()]) for n in captured.nests], threads)
    fresh: list[Sample] = []
    for nest, bench in zip(captured.nests, benches, strict=True):
        (m,) = check(bench, threads, repeat)
        lowered = bench.points[0]
        if m.refused is not None:
            continue
        terms = features(lowered.kernels, nest.dtype, machine, threads)
        head = kernel_text(lowered.kernels[-1]).split("{", 1)[0].strip()
        fresh.append(Sample(head, terms.group, terms, m.median * 1e6, nest.site))
    profile, done = fitted_profile("roofline", machine, [*kept, *fresh], "max")
    _write(profile, path)
    out = [f"{'kernel':<44}{'work':>13}{'bytes':>13}{'measured µs':>12}{'predicted µs':>13}"]
    for s in fresh:
        text = s.layout if len(s.layout) <= 43 else s.layout[:43] + "…"
        work = s.features.work + s.features.ops
        out.append(
            f"{text:<44}{work:>13.0f}{s.features.bytes:>13.0f}{s.measured_us:>12.2f}"
            f"{predict(s.features, profile):>13.2f}"
        )
    measured = [s.measured_us for s in profile.samples]
    predicted = list(done.predicted)
    out.append(
        f"-- {len(fresh)} kernels timed ({len(kept)} kept from {path}{why}), {repeat} calls, "
        f"{request.realization.default}"
    )
    out += fit_lines(profile)
    out.append(
        "-- Spearman with the measured times: operation counts "
        f"{spearman([s.features.ops for s in profile.samples], measured):.3f}, work "
        f"{spearman([s.features.work + s.features.ops for s in profile.samples], measured):.3f}, "
        f"roofline {spearman(predicted, measured):.3f}"
    )
    out.append(f"-- profile written to {path}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


__all__ = ["add_flags", "calibrate", "calibration_points"]
