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
