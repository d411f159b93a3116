"""How fast the twin runs: 18 h at 1 s in-process, and a whole static ``flinktune replay`` from a fresh process.

Run: ``.venv/bin/python -m benchmarks.scale.twin_speed [--hours 18] [--workload ysb] [--no-emit] [--replay [--repeats 3]]``.
Prints one JSON line per measurement, each with the 1-minute load average when it started (on a
shared node wall time follows the load; CPU time, user + sys, is the steadier figure):

- ``twin``: ``TwinJob.run`` over the trace (raw frame included unless --no-emit): wall and CPU
  seconds, rows emitted, restarts, and the process's peak RSS in MiB. Budget: 10 s on one core, < 1 GiB.
- ``replay`` (with --replay): ``flinktune replay --trace <workload> --policies static --hours <hours>``
  in a new process, start-up (imports), the decision loop over the twin and the written table and
  plots included: wall and CPU seconds of that process (its children's rusage), median over
  --repeats, and the slowest. Target: at most 7 s wall on 2 cores for 18 h.

docs/results/twin-speed.md holds the current figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flinktune.config_space import ConfigSpace
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob
from flinktune.twin.workload import generate_trace

__all__ = ["main", "time_replay", "time_twin"]

ROOT = Path(__file__).resolve().parents[1]


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def time_twin(hours: float, workload: str, seed: int, emit: bool) -> dict:
    """One in-process run of the twin at static max over ``hours`` of ``workload``."""
    trace = generate_trace(workload, hours, seed)
    twin = TwinJob(ClusterProfile.default(workload), ConfigSpace().maximum, seed=seed, failures="every:45m")
    load = _load()
    wall, cpu = time.perf_counter(), time.process_time()
    frame = twin.run(trace.to_numpy(), emit=emit)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    h = twin.history()
    return {
        "what": "twin",
        "hours": hours,
        "workload": workload,
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "rows": len(frame),
        "restarts": twin.restarts,
        "p95_latency_ms_median": round(float(h["latency_p95_ms"].median()), 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_1m": load,
    }


def time_replay(hours: float, workload: str, repeats: int) -> dict:
    """``flinktune replay`` of static in a fresh process, ``repeats`` times: wall and CPU seconds."""
    walls, cpus, loads = [], [], []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for _ in range(max(1, repeats)):
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-m", "flinktune.cli", "replay", "--trace", workload, "--policies", "static"]
            cmd += ["--hours", f"{hours:g}", "--out", out]
            loads.append(_load())
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, env=env)
            walls.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {
        "what": "replay",
        "command": f"flinktune replay --trace {workload} --policies static --hours {hours:g}",
        "repeats": len(walls),
        "seconds": round(statistics.median(walls), 2),
        "seconds_max": round(max(walls), 2),
        "cpu_seconds": round(statistics.median(cpus), 2),
        "load_1m": loads,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--workload", default="ysb", choices=["ysb", "tsw"])
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-emit", action="store_true", help="skip building the raw-metrics frame")
    p.add_argument("--replay", action="store_true", help="also time a static `flinktune replay` in a new process")
    p.add_argument("--repeats", type=int, default=3, help="replays timed with --replay (the median is reported)")
    a = p.parse_args(argv)
    rows = [time_twin(a.hours, a.workload, a.seed, not a.no_emit)]
    print(json.dumps(rows[-1]), flush=True)
    if a.replay:
        rows.append(time_replay(a.hours, a.workload, a.repeats))
        print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
