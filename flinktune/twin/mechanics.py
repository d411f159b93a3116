"""The twin's mechanisms as pure, vectorised functions of (profile, configuration, rate).

The simulator, the analytic steady state, profiling, the oracle and calibration all use these,
so a mechanism is written once. Rates are numpy arrays of job input rec/s (any length); results
are arrays of the same length unless a docstring says otherwise.

Model (docs/DESIGN.md section 6):
- Slot sharing puts one subtask of every vertex in a slot; slots of a TaskManager share its cores
  (``cpu / task_slots`` each, worth less above ``core_knee``). A vertex's subtask is one thread and
  can use at most one core. Capacity is the job input rate at which the busiest slot saturates:
  ``min(c_eff / sum_v a_v, min_v 1 / a_v)`` with ``a_v`` the core-seconds one subtask of ``v``
  spends per record/s of job input, which includes shuffle and coordination overheads growing with
  parallelism (sub-linear scaling) and the GC slowdown from memory pressure.
- Memory pressure = heap a slot needs (tasks, network buffers, state) / heap it has.
- Checkpoints pause the task threads briefly and slow them while uploading; both grow with state.
- Latency = fixed path latency + queueing (exponential sojourn quantiles, growing with
  utilisation) + waiting behind the lag + pauses (GC, checkpoints), times seeded noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flinktune.config_space import ConfigError, Configuration
from flinktune.decision.reconfig import same_shape
from flinktune.twin.profile import ClusterProfile

__all__ = [
    "RECOVERY_CAP_S",
    "Layout",
    "busy_cores",
    "capacity",
    "checkpoint",
    "cpu_used",
    "failure_downtime_s",
    "gc_factor",
    "latency_quantiles",
    "layout",
    "memory_pressure",
    "memory_used",
    "oom_rate_per_s",
    "reconfiguration",
    "restart_downtime_s",
    "steady_state",
]

#: Recovery times are capped here (a run that never recovers reports this), seconds.
RECOVERY_CAP_S = 600.0
# Quantiles of an exponential sojourn time relative to its mean: -ln(1 - q).
_Q50, _Q95, _Q99 = math.log(2.0), math.log(20.0), math.log(100.0)


@dataclass(frozen=True)
class Layout:
    """What a configuration means for the job's threads and slots (rate independent).

    ``a`` is core-seconds per record/s of job input for one subtask of each vertex (no GC);
    ``ratio`` is each vertex's busy fraction relative to the bottleneck's (the heaviest thread); ``work`` is the total
    core-seconds per job input record over all subtasks (no GC).
    """

    config: Configuration
    vertices: tuple[str, ...]
    parallelism: np.ndarray
    input_share: np.ndarray
    a: np.ndarray
    ratio: np.ndarray
    bottleneck: int
    cores_per_slot: float
    effective_cores: float
    base_capacity: float
    work: float
    channels_per_slot: float
    fixed_latency_ms: float

    @property
    def taskmanagers(self) -> int:
        return self.config.taskmanagers


def effective_cores(profile: ClusterProfile, cores: float) -> float:
    """Worth of ``cores`` per slot in full cores (diminishing above the knee, and below the
    shared-core knee where several slots contend for one core)."""
    k = profile.core_knee
    if cores <= k:
        s = profile.shared_core_knee
        if 0 < cores < s:
            return cores * (cores / s) ** profile.shared_core_exponent
        return cores
    return k + profile.extra_core_efficiency * (cores - k) ** profile.extra_core_exponent


def layout(profile: ClusterProfile, config: Configuration) -> Layout:
    """Threads, slots and base capacity of ``config`` for the profile's job.

    Raises :class:`ConfigError` for a vertex override naming an unknown vertex or exceeding the
    job parallelism (slot sharing gives only ``parallelism`` slots).
    """
    flow = profile.dataflow
    names = flow.vertex_names
    overrides = config.vertex_overrides()
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ConfigError(f"vertex_parallelism: unknown vertex(es) {unknown}; job {flow.name!r} has {list(names)}")
    for v, pv in overrides.items():
        if pv > config.parallelism:
            raise ConfigError(f"vertex_parallelism: {v!r}={pv} exceeds the job parallelism {config.parallelism}")
    p = np.array([overrides.get(v, config.parallelism) for v in names], dtype=float)
    share = np.array(flow.input_share())
    cost = np.array([v.cost_us for v in flow.vertices]) * 1e-6
    shuffled = np.array([v.partitioning != "forward" for v in flow.vertices])
    overhead = 1.0 + profile.coordination_overhead * (p - 1.0) + np.where(shuffled, profile.shuffle_overhead * (p - 1.0), 0.0)
    per_subtask = share * cost * overhead / p
    c = config.cpu / config.task_slots
    c_eff = effective_cores(profile, c)
    total = float(per_subtask.sum())
    # Each thread gets its proportional share of the slot's cores, at most one core.
    core_share = np.minimum(1.0, c_eff * per_subtask / total)
    load = per_subtask / core_share
    base_capacity = float(1.0 / load.max())
    # The heaviest thread is the bottleneck; lighter threads get the CPU they need and then wait
    # on it (backpressured upstream, idle downstream), so busy time scales with per-thread work.
    bottleneck = int(np.argmax(per_subtask))
    upstream = np.concatenate([[1.0], p[:-1]])
    channels = float(np.where(shuffled, upstream, 1.0).sum())
    fixed = profile.base_latency_ms + sum(v.latency_ms for v in flow.vertices) + float((cost * 1e3).sum())
    return Layout(
        config=config,
        vertices=names,
        parallelism=p,
        input_share=share,
        a=per_subtask,
        ratio=per_subtask / per_subtask.max(),
        bottleneck=bottleneck,
        cores_per_slot=c,
        effective_cores=c_eff,
        base_capacity=base_capacity,
        work=float((per_subtask * p).sum()),
        channels_per_slot=channels,
        fixed_latency_ms=fixed,
    )


def _arr(rates: np.ndarray | float) -> np.ndarray:
    return np.atleast_1d(np.asarray(rates, dtype=float))


def state_mb(profile: ClusterProfile, rates: np.ndarray | float) -> np.ndarray:
    """Checkpointed state of the whole job, MB, at each rate."""
    r = _arr(rates) / 1000.0
    flow = profile.dataflow
    return sum(v.state_mb + v.state_mb_per_krps * r for v in flow.vertices) + 0.0 * r


def memory_pressure(profile: ClusterProfile, lay: Layout, rates: np.ndarray | float) -> np.ndarray:
    """Heap a slot needs / heap it has (> 1: cannot fit)."""
    cfg = lay.config
    available = (cfg.memory_mb - profile.tm_overhead_mb) * profile.slot_heap_fraction / cfg.task_slots
    need = (
        profile.task_base_mb
        + profile.network_mb_per_channel * lay.channels_per_slot
        + profile.state_heap_factor * state_mb(profile, rates) / cfg.parallelism
    )
    if available <= 0:
        return np.full_like(need, 10.0)
    return need / available


def gc_factor(profile: ClusterProfile, pressure: np.ndarray) -> np.ndarray:
    """Processing slowdown (>= 1) from garbage collection at each memory pressure."""
    x = np.clip((pressure - profile.gc_pressure_start) / (1.0 - profile.gc_pressure_start), 0.0, None)
    return np.minimum(1.0 + profile.gc_slowdown * x**2, profile.gc_max_slowdown)


def oom_rate_per_s(profile: ClusterProfile, pressure: np.ndarray) -> np.ndarray:
    """Probability per second of an out-of-memory failure at each memory pressure."""
    span = max(1.0 - profile.oom_pressure_start, 1e-6)
    x = np.clip((pressure - profile.oom_pressure_start) / span, 0.0, None)
    return np.minimum(profile.oom_failures_per_hour * x / 3600.0, 0.5)


def capacity(lay: Layout, gc: np.ndarray) -> np.ndarray:
    """Job input rec/s the configuration can process at full speed (no pauses)."""
    return lay.base_capacity / gc


def checkpoint(profile: ClusterProfile, lay: Layout, rates: np.ndarray | float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(size MB, duration s, synchronous pause s) of a checkpoint taken at each rate."""
    size = state_mb(profile, rates)
    per_subtask = size / lay.config.parallelism
    duration = profile.checkpoint_base_s + per_subtask / profile.checkpoint_upload_mb_s
    pause = profile.checkpoint_sync_base_s + profile.checkpoint_sync_s_per_mb * per_subtask
    return size, duration, np.minimum(pause, 1.0)


def failure_downtime_s(profile: ClusterProfile, lay: Layout, size_mb: float) -> float:
    """Seconds from a fault until the job runs again: detection, restart, state restore."""
    return float(
        profile.failure_detection_s
        + profile.restart_base_s
        + profile.restart_per_tm_s * lay.taskmanagers
        + size_mb / (profile.restore_mb_s * lay.config.parallelism)
    )


def restart_downtime_s(profile: ClusterProfile, old: Configuration, new: Configuration, size_mb: float) -> float:
    """Downtime of a restart from the last checkpoint at ``new``'s parallelism (Flink's reactive
    mode rescaling): new TaskManagers start first, then the job restarts and restores its state."""
    down = (
        profile.restart_base_s + profile.restart_per_tm_s * new.taskmanagers + size_mb / (profile.restore_mb_s * new.parallelism)
    )
    if new.taskmanagers > old.taskmanagers:
        down += profile.tm_start_s
    return float(down)


def reconfiguration(
    profile: ClusterProfile, old: Configuration, new: Configuration, size_mb: float, mode: str = "auto"
) -> tuple[str, float]:
    """How a change from ``old`` to ``new`` is carried out and its downtime: (mode, seconds).

    Modes: ``noop`` (same configuration), ``rescale`` (in place, parallelism only, adaptive
    scheduler on) and ``redeploy`` (savepoint, tear down, redeploy, restore). ``mode`` may force
    ``redeploy``, or ask for ``rescale`` (a ``ConfigError`` when that is impossible).
    """
    if mode not in ("auto", "rescale", "redeploy"):
        raise ConfigError(f"reconfiguration mode must be auto, rescale or redeploy, got {mode!r}")
    if old == new:
        return "noop", 0.0
    can_rescale = profile.adaptive_scheduler and same_shape(old, new)
    if mode == "rescale" and not can_rescale:
        others = [k for k in ("task_slots", "cpu", "memory_mb", "checkpoint_interval_s") if getattr(old, k) != getattr(new, k)]
        why = f"knob(s) {others} need a redeploy" if others else "the profile's adaptive scheduler is off"
        raise ConfigError(f"cannot rescale in place: {why}")
    if can_rescale and mode != "redeploy":
        down = profile.rescale_base_s + size_mb / (profile.restore_mb_s * min(old.parallelism, new.parallelism))
        if new.taskmanagers > old.taskmanagers:
            down += profile.tm_start_s
        return "rescale", float(down)
    down = (
        profile.savepoint_base_s
        + size_mb / (profile.checkpoint_upload_mb_s * old.parallelism)
        + profile.redeploy_base_s
        + profile.redeploy_per_tm_s * new.taskmanagers
        + size_mb / (profile.restore_mb_s * new.parallelism)
    )
    return "redeploy", float(down)


def latency_quantiles(
    profile: ClusterProfile,
    lay: Layout,
    utilisation: np.ndarray,
    wait_ms: np.ndarray,
    gc: np.ndarray,
    pause_s: np.ndarray,
    noise: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p50, p95, p99) end-to-end latency, ms.

    ``utilisation`` is throughput / capacity, ``wait_ms`` the time a record waits behind the lag
    (and behind downtime), ``pause_s`` the checkpoint pause in that second, ``noise`` standard
    normal draws.
    """
    u = np.clip(utilisation, 0.0, profile.utilisation_cap)
    mean_queue = profile.queue_ms * u / (1.0 - u)
    gc_pause = profile.gc_pause_ms * (gc - 1.0)
    frac = pause_s  # share of the second's records held by the pause
    pause_ms = pause_s * 1000.0
    base = lay.fixed_latency_ms + wait_ms
    p50 = base + _Q50 * mean_queue + pause_ms * np.clip(frac / 0.5, 0, 1)
    p95 = base + _Q95 * mean_queue + 0.5 * gc_pause + pause_ms * np.clip(frac / 0.05, 0, 1)
    p99 = base + _Q99 * mean_queue + gc_pause + pause_ms * np.clip(frac / 0.01, 0, 1)
    f = np.exp(profile.latency_noise * noise)
    return p50 * f, p95 * f, p99 * f


def busy_cores(lay: Layout, throughput: np.ndarray, gc: np.ndarray) -> np.ndarray:
    """Core-seconds per second the capacity model charges the job's threads at ``throughput`` (busy
    work, GC and the cores lost to sharing included; no idle TaskManager cost, no cap)."""
    waste = lay.cores_per_slot / lay.effective_cores if lay.effective_cores > 0 else 1.0
    return throughput * lay.work * gc * waste


def cpu_used(profile: ClusterProfile, lay: Layout, throughput: np.ndarray, gc: np.ndarray) -> np.ndarray:
    """Cores used by the TaskManagers (capped at what they reserve).

    The busy work (:func:`busy_cores`) times ``cpu_per_busy`` (calibrated on measured CPU load
    where there is some) plus the idle TaskManagers' cost; busy time itself stays the capacity model's.
    """
    cfg = lay.config
    used = busy_cores(lay, throughput, gc) * profile.cpu_per_busy + profile.idle_cores_per_tm * cfg.taskmanagers
    return np.minimum(used, cfg.total_cpu)


def memory_used(profile: ClusterProfile, lay: Layout, throughput: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Heap used across TaskManagers, MB (capped at what they reserve)."""
    cfg = lay.config
    used = (
        profile.jvm_base_used_mb * cfg.taskmanagers
        + cfg.parallelism * (0.8 * profile.task_base_mb + profile.network_mb_per_channel * lay.channels_per_slot)
        + profile.state_heap_factor * state_mb(profile, rates)
        + profile.inflight_mb_per_krps * throughput / 1000.0
    )
    return np.minimum(used, 0.95 * cfg.total_memory_mb)


def steady_state(
    profile: ClusterProfile, config: Configuration, rates: np.ndarray | float, *, horizon_s: float = 300.0
) -> dict[str, np.ndarray]:
    """Analytic long-run behaviour at constant rates (arrays, one value per rate).

    Keys: ``capacity`` (mean, checkpoint overhead included), ``throughput``, ``latency_ms`` (p95),
    ``latency_p50_ms``, ``latency_p99_ms``, ``cpu_used``, ``memory_used_mb``, ``recovery_s`` (a
    fault just before a checkpoint is due, capped at :data:`RECOVERY_CAP_S`), ``memory_pressure``.
    Above capacity there is no steady state: latency is that of a lag that has grown for
    ``horizon_s / 2`` seconds on average (a run of ``horizon_s``). Failures from memory pressure
    lower the mean capacity by the time they cost.
    """
    r = _arr(rates)
    lay = layout(profile, config)
    pressure = memory_pressure(profile, lay, r)
    gc = gc_factor(profile, pressure)
    cap_full = capacity(lay, gc)
    size, duration, pause = checkpoint(profile, lay, r)
    interval = float(config.checkpoint_interval_s)
    lost = (pause + profile.checkpoint_async_overhead * np.minimum(duration, interval)) / interval
    down = np.array([failure_downtime_s(profile, lay, float(s)) for s in size])
    # Memory-pressure failures: each costs its downtime, on average half an interval of replay
    # and the warm-up deficit, so the long-run capacity is scaled by the availability.
    per_failure = down + interval / 2.0 + profile.warmup_s * (1.0 - profile.warmup_initial_capacity) / 2.0
    availability = 1.0 / (1.0 + oom_rate_per_s(profile, pressure) * per_failure)
    cap = cap_full * np.clip(1.0 - lost, 0.05, 1.0) * availability
    thr = np.minimum(r, cap)
    excess = np.maximum(r - cap, 0.0)
    wait_ms = excess * horizon_s / 2.0 / cap * 1000.0
    # Average the checkpoint bump over the interval, as per-second samples would.
    p50, p95, p99 = latency_quantiles(profile, lay, thr / cap_full, wait_ms, gc, np.zeros_like(r), np.zeros_like(r))
    bump = pause * 1000.0 / interval
    p50, p95, p99 = p50 + bump * np.clip(pause / 0.5, 0, 1), p95 + bump * np.clip(pause / 0.05, 0, 1), p99 + bump
    replay = thr * max(interval - profile.failure_lead_s, 0.0)
    warm_deficit = cap * (1.0 - profile.warmup_initial_capacity) * profile.warmup_s / 2.0
    spare = cap - r
    with np.errstate(divide="ignore", invalid="ignore"):
        recovery = np.where(spare > 0, down + (replay + r * down + warm_deficit) / spare, RECOVERY_CAP_S)
    return {
        "capacity": cap,
        "throughput": thr,
        "latency_ms": p95,
        "latency_p50_ms": p50,
        "latency_p99_ms": p99,
        "cpu_used": cpu_used(profile, lay, thr, gc),
        "memory_used_mb": memory_used(profile, lay, thr, r),
        "recovery_s": np.minimum(recovery, RECOVERY_CAP_S),
        "memory_pressure": pressure,
    }
