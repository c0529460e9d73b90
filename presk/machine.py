"""What this machine has: its cores and its memory (a ground-floor module)."""

from __future__ import annotations

import os

from presk.diagnostics import UsageError

MAX_THREADS = 1024


def memory_bytes() -> int:
    """The physical memory, in bytes (what no single run may exceed)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40  # a platform that does not say: only absurd sizes are refused


def size_text(n: int) -> str:
    """A byte count for a message, in binary units: `23.5 GiB`; exact integers only, so a
    count of any size prints (`1.2e+400 bytes` past the units)."""
    units = (("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10))
    if n >= 1 << 70:
        digits = str(n)
        return f"{digits[0]}.{digits[1:3]}e+{len(digits) - 1} bytes"
    for unit, shift in units:
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def cores() -> int:
    """The machine's cores (the default number of native workers)."""
    return os.cpu_count() or 1


def default_threads() -> int:
    """`PRESK_THREADS` (checked as `--threads` is), else the machine's cores."""
    env = os.environ.get("PRESK_THREADS")
    if env is None or not env.strip():
        return min(cores(), MAX_THREADS)
    try:
        value = int(env.strip(), 10)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_THREADS:
        raise UsageError(f"PRESK_THREADS={env}: expected a whole number in [1, {MAX_THREADS}]")
    return value
