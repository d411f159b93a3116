"""Lower bound on the CPU any policy needs on a replay trace while keeping recovery within the limit.

``python benchmarks/replay_bound.py [--traces ysb,tsw] [--seed 7] [--hours 18] [--recovery-limit-s 180]``

Uses the twin's ground truth (:func:`flinktune.twin.mechanics.steady_state`), which no policy may
use: for every candidate configuration, the highest constant rate at which a failure (timed just
before a checkpoint, as ``--failures every:45m`` times them) recovers within the limit; then, for
every second of the trace, the cheapest configuration that would carry that second's rate so.
The mean over seconds (free, instant reconfiguration, perfect knowledge of the rate, no profiling,
latency ignored) is a bound for any policy that must keep recovery within the limit wherever a
failure falls. Also prints the best single shape with free in-place parallelism. Relative to
static (the space's maximum, reserved all the time).
"""

from __future__ import annotations

import argparse

import numpy as np

from flinktune.config_space import ConfigSpace, default_space
from flinktune.twin.mechanics import steady_state
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.workload import generate_trace


def bound(trace: str, seed: int, hours: float, recovery_limit_s: float) -> dict[str, float]:
    """{"per_second": ..., "single_shape": ...} CPU relative to static for a built-in trace on its built-in profile."""
    rates = generate_trace(trace, hours, seed).to_numpy()
    return bound_for_rates(rates, ClusterProfile.default(trace), recovery_limit_s, label=trace)


def bound_for_rates(
    rates: np.ndarray,
    profile: ClusterProfile,
    recovery_limit_s: float,
    *,
    space: ConfigSpace | None = None,
    label: str = "trace",
) -> dict[str, float]:
    """:func:`bound` for any per-second rate series on any cluster profile (e.g. a real trace on
    the calibrated ``ads`` profile); ``space`` defaults to the replay's (:func:`default_space`)."""
    space = space or default_space()
    rates = np.asarray(rates, dtype=float)
    grid = np.arange(1000.0, rates.max() * 1.3, 50.0)
    cands = space.candidates()
    carry = np.zeros(len(cands))  # highest rate each candidate recovers within the limit at
    for k, cfg in enumerate(cands):
        ss = steady_state(profile, cfg, grid)
        ok = (ss["recovery_s"] <= recovery_limit_s) & (ss["throughput"] >= grid * 0.9999)
        carry[k] = grid[ok].max() if ok.any() else 0.0
    cpu = np.array([c.total_cpu for c in cands])
    # Cheapest CPU that carries each rate level, over every candidate; then per second.
    order = np.argsort(-carry)
    levels, best = carry[order], np.minimum.accumulate(cpu[order])
    idx = np.searchsorted(-levels, -rates, side="right") - 1
    if (idx < 0).any():
        raise ValueError(f"{label}: some rates exceed what any configuration recovers from within {recovery_limit_s} s")
    per_second = float(best[idx].mean())
    shapes: dict[tuple, list[int]] = {}
    for k, c in enumerate(cands):
        shapes.setdefault((c.task_slots, c.cpu, c.memory_mb, c.checkpoint_interval_s), []).append(k)
    single = np.inf
    for members in shapes.values():
        m = np.array(members)
        o = m[np.argsort(-carry[m])]
        lv, bc = carry[o], np.minimum.accumulate(cpu[o])
        j = np.searchsorted(-lv, -rates, side="right") - 1
        if (j >= 0).all():
            single = min(single, float(bc[j].mean()))
    static = space.maximum.total_cpu
    return {"per_second": per_second / static, "single_shape": single / static}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--traces", default="ysb,tsw")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--recovery-limit-s", type=float, default=180.0)
    a = p.parse_args(argv)
    for trace in a.traces.split(","):
        b = bound(trace, a.seed, a.hours, a.recovery_limit_s)
        print(f"{trace} seed {a.seed}: CPU relative to static >= {b['per_second']:.3f} (per-second perfect sizing), "
              f"{b['single_shape']:.3f} (best single shape, parallelism free); recovery <= {a.recovery_limit_s:g} s")  # fmt: skip


if __name__ == "__main__":
    main()
