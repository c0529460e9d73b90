"""`presk train FILE`: run the file's `training run`, on the reference or natively.

Prints a log line every `--log-every` steps (and at the last), then the step's
time and where the weights went; `DIR/log.jsonl` holds every step. A progress
bar runs on standard error when it is a terminal. Ctrl-C finishes the step in
flight, writes a checkpoint and stops; a second Ctrl-C stops at once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from presk.commands.common import (
    check_out_file,
    file_args,
    guard,
    plan_arg,
    program_of,
    realization_arg,
    refuse_later_flags,
    run_flags,
)
from presk.data.format import DataError, write_atomically
from presk.diagnostics import CommandError, UsageError, printable
from presk.elab.ty import at_dims
from presk.entries import natural
from presk.train import checkpoint
from presk.train.data import load as load_data
from presk.train.loop import (
    NativeStepper,
    Plan,
    ReferenceStepper,
    StepLog,
    Stepper,
    Trainer,
    check_resumable,
    initial_weights,
)
from presk.train.plot import plot_log, read_log

NAME = "train"
HELP = "Run the `training run` of a file, on the reference interpreter or natively"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    train = sub.add_parser(NAME, help=HELP, description=HELP)
    file_args(train)
    train.add_argument("--steps", help="the schedule's horizon: train this many steps in all")
    train.add_argument("--epochs", help="passes over the data (default: the block's `epochs`)")
    train.add_argument("--until", help="stop after this step (the horizon stays --steps)")
    train.add_argument("--log-every", default="10", help="a log line every K steps (default 10)")
    train.add_argument(
        "--ckpt", metavar="DIR", help="the checkpoint directory (default: the block's)"
    )
    train.add_argument("--resume", metavar="DIR", help="continue from DIR's latest checkpoint")
    train.add_argument("--backend", default="interp", help="interp (the exact reference) or native")
    realization_arg(train, "native: the machine types of the step")
    train.add_argument("--threads", default=None, help="native workers (default: the machine's)")
    train.add_argument("--seed", default="0", help="the seed of θ₀ (default 0)")
    train.add_argument("--bits", default="256", help="the reference's MPFR precision (default 256)")
    train.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw loss and learning rate against the step; with a log.jsonl as FILE, redraw it",
    )
    plan_arg(train)
    train.set_defaults(handler=main)


class _Stop:
    """Ctrl-C: the first asks the loop to stop after its step, the second stops now."""

    def __init__(self) -> None:
        self.asked = False
        self.previous: Any = None

    def __enter__(self) -> _Stop:
        try:
            self.previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread (the Python API): no handler
            self.previous = None
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def main(args: argparse.Namespace) -> int:
    with _Stop() as stop:
        return guard(NAME, lambda: _train(args, stop))


def _train(args: argparse.Namespace, stop: _Stop) -> int:
    refuse_later_flags(args)
    if args.file.endswith(".jsonl"):
        return _redraw(args)
    flags = run_flags(args)
    if flags is None:
        return 1
    seed, bits, realization, threads = flags.seed, flags.bits, flags.realization, flags.threads
    log_every = natural("--log-every", args.log_every, 1)
    checked = program_of(args)
    if not checked.trainings:
        raise UsageError(f"{printable(args.file)} has no `training run` block")
    run = checked.trainings[0]
    batches = load_data(run)
    epochs = natural("--epochs", args.epochs, 1) if args.epochs else run.epochs
    total = batches.horizon(epochs, natural("--steps", args.steps, 1) if args.steps else None)
    directory = args.ckpt or args.resume
    if directory is None and run.checkpoint_dir is not None:
        directory = os.path.join(os.path.dirname(args.file), run.checkpoint_dir)
    if args.plot is not None and directory is None:
        raise UsageError("--plot draws the run's log: give --ckpt DIR")
    if directory is not None:  # before anything is compiled or drawn
        checkpoint.check(directory)
    if args.plot is not None:
        check_plot(args.plot, [args.file, os.path.join(directory or "", "log.jsonl")])
    dims = batches.dims
    model = str(at_dims(run.params, dims))
    meta = checkpoint.Meta(
        0,
        total,
        model,
        args.backend,
        realization.default if realization.uniform else flags.realize_text,
        bits,
        seed,
    )
    theta0 = initial_weights(run, dims, seed)
    stepper: Stepper
    launches: tuple[int, int] | None = None
    if args.backend == "native":
        native = NativeStepper(checked, run, dims, theta0, realization, threads, flags.layouts)
        launches = native.launches
        stepper = native
    else:
        stepper = ReferenceStepper(checked, run, dims, theta0, bits)
    start = 0
    if args.resume:
        found = checkpoint.latest(args.resume)
        if found is None:
            raise CommandError(f"--resume {printable(args.resume)}: no checkpoint there")
        loaded = checkpoint.load(args.resume, found)
        check_resumable(loaded, meta, args.resume)
        stepper.restore(loaded)
        start = found
        if not args.steps:
            total = loaded.meta.total
    stop_at = natural("--until", args.until, start + 1, total) if args.until else total
    if start >= total:
        raise CommandError(f"the run is complete: step {start} of {total}")
    real = realization.default if realization.uniform and args.backend == "native" else "f64"
    trainer = Trainer(run, batches, stepper, Plan(total, start, stop_at), meta, real)
    out_dir = checkpoint.prepare(directory) if directory else None
    log = _Log(out_dir, start)
    if batches.dropped:
        sys.stderr.write(
            f"presk train: {batches.samples.count} samples in batches of {batches.size}: "
            f"the last {batches.dropped} of each epoch are left out\n"
        )
    times: list[float] = []
    last: StepLog | None = None
    bar = _bar(stop_at - start, start)
    interrupted = False
    try:
        for record in trainer.steps():
            last = record
            times.append(record.ms)
            log.write(record)
            if bar is not None:
                bar.update(1)
            if record.step % log_every == 0 or record.step == stop_at:
                _emit(bar, record.line())
            every = run.checkpoint_every
            if out_dir is not None and every and record.step % every == 0:
                trainer.save(out_dir)
            if stop.asked:
                interrupted = True
                break
    finally:
        if bar is not None:
            bar.close()
        log.close()
    if last is None:
        raise CommandError("no step ran")
    if launches is not None:
        fused, unfused = launches
        saved = 100 * (unfused - fused) // unfused if unfused else 0
        print(
            f"presk train: {fused} kernel launches a step, "
            f"{unfused} without fusion ({saved}% removed)"
        )
    print(f"presk train: {_timing(times)}")
    weights = "not saved (no checkpoint directory: give --ckpt DIR)"
    if out_dir is not None:
        every = run.checkpoint_every
        if not every or last.step % every != 0:
            trainer.save(out_dir)  # the last step's, unless the interval just wrote it
        weights = f"in {printable(str(trainer.save_final(out_dir)))}"
    if interrupted:
        sys.stderr.write(
            f"presk train: interrupted after step {last.step}; "
            + (
                f"resume with --resume {printable(str(out_dir))}\n"
                if out_dir
                else "nothing saved\n"
            )
        )
        return 130
    print(
        f"presk train: {last.step - start} steps of {run.model}, final loss {last.loss:.6f}, "
        f"weights {weights}"
    )
    if args.plot is not None and out_dir is not None:
        plot_log(read_log(out_dir / "log.jsonl"), args.plot, run.model)
        print(f"presk train: drew {printable(args.plot)}")
    return 0


def _timing(times: list[float]) -> str:
    if len(times) > 1:
        rest = times[1:]
        return f"{_ms(statistics.median(rest))} a step, median of {len(rest)} (the first excluded)"
    return f"{_ms(times[0])} a step (one step)"


def _ms(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.2g} ms" if value < 1 else f"{value:.1f} ms"


class _Log:
    """DIR/log.jsonl: every step; a resumed run keeps the lines up to its checkpoint."""

    def __init__(self, directory: Path | None, start: int) -> None:
        self.out = None
        if directory is None:
            return
        path = directory / "log.jsonl"
        kept: list[str] = []
        if start and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    if int(json.loads(line)["step"]) <= start:
                        kept.append(line)
                except (ValueError, KeyError, TypeError):
                    continue
        try:
            write_atomically(path, "".join(k + "\n" for k in kept).encode("utf-8"))
        except DataError as error:
            raise CommandError(str(error)) from None
        self.out = path.open("a", encoding="utf-8")

    def write(self, record: StepLog) -> None:
        if self.out is not None:
            self.out.write(json.dumps(record.to_json()) + "\n")
            self.out.flush()

    def close(self) -> None:
        if self.out is not None:
            self.out.close()


def _bar(count: int, start: int) -> Any:
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm  # type: ignore[import-untyped]

    return tqdm(
        total=count,
        initial=0,
        desc=f"steps from {start}",
        unit="step",
        file=sys.stderr,
        leave=False,
    )


def _emit(bar: Any, line: str) -> None:
    if bar is not None:
        bar.write(line, file=sys.stdout)
    else:
        print(line, flush=True)


def check_plot(path: str, inputs: list[str]) -> None:
    """`--plot FILE.png`, refused before any work: a name that cannot be written, one
    without the `.png` of the image it gets, or one of the command's own inputs."""
    check_out_file("--plot", path, inputs)
    if not path.lower().endswith(".png"):
        raise UsageError(f"--plot {printable(path)}: the image is a PNG; name it FILE.png")


def _redraw(args: argparse.Namespace) -> int:
    if args.plot is None:
        raise UsageError(f"{printable(args.file)}: a log is redrawn with --plot FILE.png")
    check_plot(args.plot, [args.file])
    try:
        records = read_log(Path(args.file))
    except OSError as error:
        raise CommandError(f"{printable(args.file)}: {error.strerror}") from None
    plot_log(records, args.plot, Path(args.file).parent.name or "run")
    print(f"presk train: drew {printable(args.plot)}")
    return 0
