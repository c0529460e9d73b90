"""What this machine has: its cores and its memory (a ground-floor module)."""

from __future__ import annotations

import os


def memory_bytes() -> int:
    """The physical memory, in bytes (what no single run may exceed)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40  # a platform that does not say: only absurd sizes are refused


def cores() -> int:
    """The machine's cores (the default number of native workers)."""
    return os.cpu_count() or 1
