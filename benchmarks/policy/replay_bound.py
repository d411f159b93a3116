"""Lower bound on the CPU any policy needs on a replay trace while keeping recovery within the limit.

``python -m benchmarks.policy.replay_bound [--traces ysb,tsw] [--seed 7] [--hours 18] [--recovery-limit-s 180]``

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
from collections.abc import Sequence

import numpy as np

from flinktune.config_space import ConfigSpace, default_space
from flinktune.twin.mechanics import steady_state
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.workload import generate_trace


def bound(trace: str, seed: int, hours: float, recovery_limit_s: float) -> dict[str, float]:
    """{"per_second": ..., "single_shape": ...} CPU relative to static for a built-in trace on its built-in profile."""
    rates = generate_trace(trace, hours, seed).to_numpy()
    return bound_for_rates(rates, ClusterProfile.default(trace), recovery_limit_s, label=trace)


def _carry(rates: np.ndarray, profile: ClusterProfile, recovery_limit_s: float, cands: list) -> np.ndarray:
    """The highest rate (50 rec/s steps up to 1.3x the trace's peak) each candidate carries and recovers within the limit at."""
    grid = np.arange(1000.0, rates.max() * 1.3, 50.0)
    carry = np.zeros(len(cands))
    for k, cfg in enumerate(cands):
        ss = steady_state(profile, cfg, grid)
        ok = (ss["recovery_s"] <= recovery_limit_s) & (ss["throughput"] >= grid * 0.9999)
        carry[k] = grid[ok].max() if ok.any() else 0.0
    return carry


def _cheapest_carrying(
    rates: np.ndarray, profile: ClusterProfile, recovery_limit_s: float, space: ConfigSpace
) -> tuple[list, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The candidates, what each carries, their CPU, and the cheapest CPU that carries each rate
    level (``levels`` descending, ``best[i]`` the cheapest CPU carrying ``levels[i]``)."""
    cands = space.candidates()
    carry = _carry(rates, profile, recovery_limit_s, cands)
    cpu = np.array([c.total_cpu for c in cands])
    order = np.argsort(-carry)
    return cands, carry, cpu, carry[order], np.minimum.accumulate(cpu[order])


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
    cands, carry, cpu, levels, best = _cheapest_carrying(rates, profile, recovery_limit_s, space)
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


def bound_with_changes(
    rates: np.ndarray,
    profile: ClusterProfile,
    recovery_limit_s: float,
    changes: Sequence[int],
    *,
    step_s: int = 300,
    space: ConfigSpace | None = None,
) -> dict[int, float]:
    """CPU relative to static of the cheapest schedule with at most k reconfigurations, for each k of ``changes``.

    Use it beside :func:`bound_for_rates` when a policy is also held to a reconfiguration cap: the
    per-second bound changes configuration as often as the rate moves, which no capped policy can.
    Same ground truth (each candidate's highest rate recovered within the limit), the same perfect
    knowledge of the rate and free, instant changes, but the schedule is ``changes + 1`` segments
    on a ``step_s`` grid (a policy's decision cadence), each held at the cheapest configuration
    that carries the segment's highest second. The first segment is free to choose (the replay's
    start at static max and its first change are not charged): a lower bound still.
    """
    if not changes or min(changes) < 0:
        raise ValueError(f"changes must be counts >= 0, got {list(changes)}")
    space = space or default_space()
    rates = np.asarray(rates, dtype=float)
    _, _, _, levels, best = _cheapest_carrying(rates, profile, recovery_limit_s, space)

    def cost(rate: float) -> float:
        i = int(np.searchsorted(-levels, -rate, side="right")) - 1
        return float(best[i]) if i >= 0 else np.inf

    n = int(np.ceil(len(rates) / step_s))
    peaks = np.array([rates[i * step_s : (i + 1) * step_s].max() for i in range(n)])
    sizes = np.array([min(step_s, len(rates) - i * step_s) for i in range(n)], dtype=float)
    # seg[i][j]: CPU-seconds of one segment over steps i..j-1 (its highest second sets the size)
    seg = np.full((n + 1, n + 1), np.inf)
    for i in range(n):
        top, secs = 0.0, 0.0
        for j in range(i + 1, n + 1):
            top, secs = max(top, peaks[j - 1]), secs + sizes[j - 1]
            seg[i, j] = cost(top) * secs
    dp = seg[0].copy()  # one segment: steps 0..j-1
    out: dict[int, float] = {}
    for k in range(max(changes) + 1):
        if k:
            dp = np.minimum(dp, np.min(dp[:, None] + seg, axis=0))
        if k in changes:
            out[k] = float(dp[n] / (space.maximum.total_cpu * len(rates)))
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--traces", default="ysb,tsw")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--recovery-limit-s", type=float, default=180.0)
    a = p.parse_args(argv)
    for trace in a.traces.split(","):
        b = bound(trace, a.seed, a.hours, a.recovery_limit_s)
        print(
            f"{trace} seed {a.seed}: CPU relative to static >= {b['per_second']:.3f} (per-second perfect sizing), "
            f"{b['single_shape']:.3f} (best single shape, parallelism free); recovery <= {a.recovery_limit_s:g} s"
        )


if __name__ == "__main__":
    main()
