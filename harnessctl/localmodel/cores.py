"""How many threads the local model server should use: the cores that are actually free.

llama.cpp splits each token's work evenly among its threads and waits for the slowest at a
barrier: one thread preempted by another process stalls all the others. On two cores busy
with other work, two threads generated 0.33 tokens/s where one generated 7.7 (issue 51).
So the server counts only the cores this process may use (its CPU affinity, capped by a
cgroup CPU quota) and, of those, how much was idle over a short window (``/proc/stat``, per
core); a core counts when it was idle for most of the window, and never fewer than one
thread is used. ``--threads`` overrides the choice.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

#: How long the idle share is sampled: long enough to see a busy loop or a test run, short
#: enough not to delay a start noticeably.
WINDOW_S = 0.5
#: A core's idle share counts towards a thread once the free shares add up to within this
#: of a whole core: 1.8 idle cores (two cores 90% idle) are two threads, 1.5 are one.
SLACK = 0.25
PROC_STAT = Path("/proc/stat")
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


@dataclass(frozen=True)
class CoreCount:
    """The thread choice and what it was made from, for the server's start line."""

    threads: int
    """Threads to use."""
    allowed: int
    """Cores this process may run on (affinity, capped by a cgroup CPU quota)."""
    idle: float | None
    """Idle cores among the allowed ones over the window (0.0 to ``allowed``); None where
    ``/proc/stat`` cannot be read (then every allowed core counts as free)."""
    load: float | None
    """The 1-minute load average, for the record."""

    def describe(self) -> str:
        idle = "idle share unknown" if self.idle is None else f"{self.idle:.1f} of them idle"
        load = "" if self.load is None else f", load average {self.load:.1f}"
        return f"{self.threads} of {self.allowed} cores ({idle} over {WINDOW_S:g} s{load})"


def pick_threads(window_s: float = WINDOW_S) -> CoreCount:
    """The cores that are free now, as a thread count (at least 1, at most the allowed)."""
    cpus = _affinity()
    allowed = min(len(cpus), quota(len(cpus)))
    idle = _idle_cores(cpus, window_s)
    return CoreCount(threads_for(idle, allowed), allowed, idle, _load())


def threads_for(idle: float | None, allowed: int) -> int:
    """The rule of :func:`pick_threads` alone: idle cores (None: all) -> threads."""
    free = allowed if idle is None else min(float(allowed), idle)
    return max(1, min(allowed, math.floor(free + SLACK)))


def _affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return set(range(os.cpu_count() or 1))


def quota(cpus: int, path: Path = CGROUP_CPU_MAX) -> int:
    """The cgroup v2 CPU quota in whole cores (rounded up), or ``cpus`` when unlimited."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return cpus
    if quota == "max":
        return cpus
    try:
        return max(1, math.ceil(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return cpus


def _idle_cores(cpus: set[int], window_s: float, stat: Path = PROC_STAT) -> float | None:
    """The allowed cores' idle time over ``window_s``, in cores (idle and iowait count)."""
    before = per_core(_read(stat))
    if not before:
        return None
    time.sleep(window_s)
    return idle_between(before, per_core(_read(stat)), cpus)


def idle_between(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], cpus: set[int]
) -> float | None:
    """The idle cores among ``cpus`` between two :func:`per_core` readings (a core whose
    counters did not move counts as idle); None when a core is missing from either."""
    idle = 0.0
    for cpu in cpus:
        if cpu not in before or cpu not in after:
            return None
        (idle0, total0), (idle1, total1) = before[cpu], after[cpu]
        elapsed = total1 - total0
        idle += (idle1 - idle0) / elapsed if elapsed > 0 else 1.0
    return idle


def _read(stat: Path) -> str:
    try:
        return stat.read_text()
    except OSError:
        return ""


def per_core(text: str) -> dict[int, tuple[int, int]]:
    """``{cpu: (idle ticks, total ticks)}`` from the text of ``/proc/stat``."""
    cores = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        # user nice system idle iowait irq softirq steal (guest time is inside user)
        ticks = [int(v) for v in rest.split()[:8]]
        cores[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    return cores


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None
