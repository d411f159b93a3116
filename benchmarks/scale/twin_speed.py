"""How fast the twin replays 18 h at 1 s resolution, and its peak memory.

Run: ``.venv/bin/python -m benchmarks.scale.twin_speed [--hours 18] [--workload ysb] [--no-emit]``.
Prints one JSON line: seconds for the run (raw frame included unless --no-emit), rows emitted,
CPU seconds, and the process's peak RSS in MiB. The budget is 10 s on one core and < 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from flinktune.config_space import ConfigSpace
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob
from flinktune.twin.workload import generate_trace

__all__ = ["main"]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--workload", default="ysb", choices=["ysb", "tsw"])
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-emit", action="store_true", help="skip building the raw-metrics frame")
    a = p.parse_args(argv)
    trace = generate_trace(a.workload, a.hours, a.seed)
    twin = TwinJob(ClusterProfile.default(a.workload), ConfigSpace().maximum, seed=a.seed, failures="every:45m")
    wall, cpu = time.perf_counter(), time.process_time()
    frame = twin.run(trace.to_numpy(), emit=not a.no_emit)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    h = twin.history()
    out = {
        "hours": a.hours,
        "workload": a.workload,
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "rows": len(frame),
        "restarts": twin.restarts,
        "p95_latency_ms_median": round(float(h["latency_p95_ms"].median()), 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
