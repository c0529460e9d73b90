"""A training log as a picture: the loss and the learning rate against the step."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

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
    target = Path(out)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".png", dir=target.parent or ".")
    os.close(fd)
    try:
        fig.savefig(temp, format="png")
        os.replace(temp, target)
    except OSError as error:
        Path(temp).unlink(missing_ok=True)
        raise CommandError(f"--plot {printable(out)}: {error.strerror}") from None
    finally:
        plt.close(fig)
