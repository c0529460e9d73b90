"""A training log as a picture: the loss and the learning rate against the step."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from presk.data.format import DataError, write_atomically
from presk.diagnostics import CommandError, printable


def read_log(path: Path) -> list[dict[str, Any]]:
    """The records of a log.jsonl (one-line errors for a file that is not one)."""
    records: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CommandError(f"{printable(str(path))}: no such log") from None
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"{printable(str(path))}: cannot read ({error})") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            float(record["step"]), float(record["loss"]), float(record["lr"])
        except (ValueError, KeyError, TypeError):
            raise CommandError(
                f"{printable(str(path))}:{number}: not a training log line"
            ) from None
        records.append(record)
    if not records:
        raise CommandError(f"{printable(str(path))}: the log is empty")
    return records


def plot_log(records: list[dict[str, Any]], out: str, title: str) -> None:
    """Draw the loss (left axis) and the rate (right axis) into `out` (PNG), atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    fig, loss_ax = plt.subplots(figsize=(7, 4), dpi=120)
    loss_ax.plot(steps, [r["loss"] for r in records], color="tab:blue", lw=1.2)
    loss_ax.set_xlabel("step")
    loss_ax.set_ylabel("loss", color="tab:blue")
    rate_ax = loss_ax.twinx()
    rate_ax.plot(steps, [r["lr"] for r in records], color="tab:orange", lw=1.0, ls="--")
    rate_ax.set_ylabel("learning rate", color="tab:orange")
    loss_ax.set_title(f"{title}: {len(records)} steps")
    fig.tight_layout()
    image = io.BytesIO()
    try:
        fig.savefig(image, format="png")
    finally:
        plt.close(fig)
    try:
        write_atomically(out, image.getvalue())
    except DataError as error:
        raise CommandError(f"--plot {printable(out)}: {error}") from None
