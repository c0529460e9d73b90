"""The machine as the layout cost model reads it.

The model's footprints are compared with the caches of one CPU: the first
the process may run on (its affinity), since unpinned the scheduler may put
it anywhere and cpu0 is as good a guess as any; pinned with `taskset`, it is
the first of the pinned set. The caches come from
/sys/devices/system/cpu/cpuN/cache (level, type, size, shared_cpu_list), or
from `lscpu` where /sys does not say; the vector registers are the ones the
lowering shapes its tiles by (presk/machine.py, `vector_unit`).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

from presk.machine import default_threads, vector_unit

SYS_CPU = Path("/sys/devices/system/cpu")
LINE_BYTES = 64  # a cache line on every machine the model has met

# Where a machine says nothing: a small core of today (the model still runs).
FALLBACK = {"l1d": 32 << 10, "l2": 512 << 10, "l3": 8 << 20}


@dataclass(frozen=True)
class Machine:
    """One CPU's caches (bytes), the workers and the vector registers."""

    cpu: int
    l1d: int
    l2: int
    l3: int
    l3_shared: int  # the CPUs sharing its L3
    workers: int
    registers: int
    vector_bytes: int
    l1d_ways: int = 0  # the L1d's associativity (0: not known, no conflicts are counted)

    def line(self, site: str, dtype: str) -> str:
        """The line `bench --calibrate --space calib` prints first."""
        ways = f" {self.l1d_ways}-way" if self.l1d_ways else ""
        return (
            f"-- {site} on cpu{self.cpu} ({dtype}): L1d {self.l1d >> 10} KiB{ways}, "
            f"L2 {self.l2 >> 10} KiB, L3 {self.l3 >> 10} KiB shared by {self.l3_shared}, "
            f"{self.workers} workers, {self.registers} vector registers"
        )

    def to_json(self) -> dict[str, int]:
        return asdict(self)


# What a machine must have for the model to price on it: caches and workers it can divide
# by, a register file (the counts are bounded so a price stays a float).
_AT_LEAST = {"l1d": LINE_BYTES, "l2": LINE_BYTES, "l3": LINE_BYTES, "l3_shared": 1}
_AT_LEAST |= {"workers": 1, "registers": 1, "vector_bytes": 16}
_AT_MOST = 1 << 50


def machine_of(doc: object) -> Machine | str:
    """A Machine from a profile's object, or why it is not one a price can be made on."""
    if not isinstance(doc, dict):
        return "not an object"
    # A field a profile was written before has its default (the L1d's ways: 0, not known).
    values = {
        f.name: doc.get(f.name, None if f.default is MISSING else f.default)
        for f in fields(Machine)
    }
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool):
            return f"`{name}` is not a whole number"
        if not _AT_LEAST.get(name, 0) <= value <= _AT_MOST:
            return f"`{name}` holds {value}, not in [{_AT_LEAST.get(name, 0)}, 2^50]"
    return Machine(**values)  # type: ignore[arg-type]


def _size(text: str) -> int | None:
    """`48K`, `2048K`, `1M`, `262144` as bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text)
    if match is None:
        return None
    return int(match.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[match.group(2)]


def _cpu_count(text: str) -> int:
    """The CPUs of a list like `0-3,8-11`."""
    count = 0
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def _from_sys(cpu: int) -> dict[str, int]:
    """The caches /sys lists for `cpu` (what it lists; nothing where it cannot be read)."""
    out: dict[str, int] = {}
    try:
        indices = sorted((SYS_CPU / f"cpu{cpu}" / "cache").glob("index*"))
        for index in indices:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _size((index / "size").read_text())
            if size is None or kind == "Instruction":
                continue
            name = {"1": "l1d", "2": "l2", "3": "l3"}.get(level)
            if name is None:
                continue
            out[name] = size
            if name == "l1d":
                ways = (index / "ways_of_associativity").read_text().strip()
                if ways.isdigit():
                    out["l1d_ways"] = int(ways)
            if name == "l3":
                out["l3_shared"] = _cpu_count((index / "shared_cpu_list").read_text())
    except (OSError, ValueError):
        return out
    return out


def _lscpu(*flags: str) -> list[list[str]]:
    try:
        done = subprocess.run(
            ["lscpu", *flags], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [line.split() for line in done.stdout.splitlines() if line and not line.startswith("#")]
    return rows if done.returncode == 0 else []


def _from_lscpu(cpu: int) -> dict[str, int]:
    """The caches `lscpu` reports: one size of each, and the CPUs beside `cpu` on its L3."""
    out: dict[str, int] = {}
    for row in _lscpu("-B", "-C=NAME,ONE-SIZE,WAYS"):
        if len(row) == 3 and row[0] in ("L1d", "L2", "L3") and row[1].isdigit():
            out[row[0].lower()] = int(row[1])
            if row[0] == "L1d" and row[2].isdigit():
                out["l1d_ways"] = int(row[2])
    shared: dict[str, int] = {}
    mine = None
    for row in _lscpu("-p=CPU,CACHE"):
        fields = row[0].split(",")
        if len(fields) >= 2 and fields[0].isdigit():
            l3 = fields[-1]
            shared[l3] = shared.get(l3, 0) + 1
            if int(fields[0]) == cpu:
                mine = l3
    if mine is not None:
        out["l3_shared"] = shared[mine]
    return out


def read_machine() -> Machine:
    """This process's first CPU, its caches, the workers and the registers."""
    try:
        cpu = min(os.sched_getaffinity(0))
    except (AttributeError, OSError, ValueError):
        cpu = 0
    found = _from_sys(cpu)
    if not {"l1d", "l2", "l3", "l3_shared"} <= set(found):
        found = {**_from_lscpu(cpu), **found}
    unit = vector_unit()
    return Machine(
        cpu=cpu,
        l1d=found.get("l1d", FALLBACK["l1d"]),
        l2=found.get("l2", FALLBACK["l2"]),
        l3=found.get("l3", FALLBACK["l3"]),
        l3_shared=max(1, found.get("l3_shared", 1)),
        workers=default_threads(),
        registers=unit.registers,
        vector_bytes=unit.bytes,
        l1d_ways=found.get("l1d_ways", 0),
    )


def unlike(there: Machine, here: Machine) -> list[str]:
    """What of a profile's machine (`there`) this one (`here`) does not share: its caches
    and registers, the model's inputs a price depends on. The CPU index and the workers are
    a run's choice, not the machine's."""
    sizes = ("l1d", "l2", "l3")
    said = []
    for name in ("l1d", "l1d_ways", "l2", "l3", "l3_shared", "registers", "vector_bytes"):
        a, b = getattr(there, name), getattr(here, name)
        if a != b:
            a, b = (f"{a >> 10} KiB", f"{b >> 10} KiB") if name in sizes else (a, b)
            said.append(f"{name} {a} there, {b} here")
    return said


__all__ = ["LINE_BYTES", "Machine", "machine_of", "read_machine", "unlike"]
