"""What this machine has: its cores, its memory and its vector registers (a ground-floor module)."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class VectorUnit:
    """The vector registers the native code is shaped for: their width and their number.

    The lowering sizes its vectors and register tiles by these (kernel/lower/tiles.py):
    a vector wider than a register is split by the compiler into pieces that spill, and
    a tile with more accumulators than registers spills too. No choice changes a bit:
    a lane is one output element, whatever the width.
    """

    bytes: int
    registers: int

    def lanes(self, element_bytes: int) -> int:
        return self.bytes // element_bytes


VECTOR_UNITS = {64: VectorUnit(64, 32), 32: VectorUnit(32, 16), 16: VectorUnit(16, 16)}


@functools.cache
def _cpu_vector_bytes() -> int:
    """64 with AVX-512, 32 with AVX, else 16 (SSE2, every x86-64), read from /proc/cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return 16
    flags = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    have = set(flags.group(1).split()) if flags else set()
    return 64 if "avx512f" in have else 32 if "avx" in have else 16


def vector_unit() -> VectorUnit:
    """`PRESK_VECTOR_BYTES` (16, 32 or 64: code shaped for another machine), else this CPU's."""
    env = os.environ.get("PRESK_VECTOR_BYTES")
    if env is None or not env.strip():
        return VECTOR_UNITS[_cpu_vector_bytes()]
    try:
        return VECTOR_UNITS[int(env.strip(), 10)]
    except (ValueError, KeyError):
        raise UsageError(f"PRESK_VECTOR_BYTES={env}: expected 16, 32 or 64") from None
