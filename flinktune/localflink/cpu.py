"""Machine CPU next to the CPU of the local cluster's own processes, over an interval (Linux /proc).

Use :class:`CpuMeter` around a measurement on the shared 2-core box: a
capacity measured while the machine used much more CPU than Flink did was measured with a
neighbour taking cores, and says so. ``mark()`` starts an interval, ``read()`` returns
``(machine_cores, flink_cores)`` used since then (cores = CPU seconds per second).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["CpuMeter", "machine_cpu_s", "process_cpu_s"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_cpu_s(stat: str | None = None) -> float:
    """CPU seconds the whole machine spent busy (all but idle and iowait) since boot."""
    text = stat if stat is not None else Path("/proc/stat").read_text()
    fields = [float(x) for x in text.splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    # guest time is already counted in user; the first 8 fields are the disjoint ones
    return (sum(fields[:8]) - idle) / _TICKS


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (0 when it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    after = text.rsplit(")", 1)[1].split()
    return (float(after[11]) + float(after[12])) / _TICKS  # utime, stime (fields 14, 15)


class CpuMeter:
    """Cores used by the machine and by ``pids()`` (re-read at every call: TaskManagers come and go)."""

    def __init__(self, pids: Callable[[], Iterable[int]]) -> None:
        self.pids = pids
        self._start: tuple[float, float, dict[int, float]] | None = None

    def mark(self) -> None:
        self._start = (time.monotonic(), machine_cpu_s(), {p: process_cpu_s(p) for p in self.pids()})

    def read(self) -> tuple[float, float]:
        """(machine cores, cluster cores) since :meth:`mark`; a process started since counts from 0."""
        if self._start is None:
            raise RuntimeError("CpuMeter.read() before mark()")
        t0, m0, p0 = self._start
        dt = max(time.monotonic() - t0, 1e-6)
        flink = sum(process_cpu_s(p) - p0.get(p, 0.0) for p in self.pids())
        return (machine_cpu_s() - m0) / dt, max(flink, 0.0) / dt
