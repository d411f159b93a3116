"""Counterfactuals on the same load: what static, the operator autoscaler and Demeter would have
done over the very hours the tuner ran, beside what it did.

Use :func:`same_load_from_twin` to cut the tuned period out of a job's persisted twin (its trace,
its per-second history, the state it started from), then :func:`compare_on_same_load` to replay
the other policies from that same state through the replay harness
(:func:`flinktune.replay.harness.replay_policy`: same trace, seed, noise and failure schedule) and
measure every run with the replay benchmark's own definitions
(:func:`flinktune.replay.metrics.summarize`), plus minutes over the latency target and the priced
cost. The run that happened is measured from the twin's history, profiling charged as run.

Only the twin (or a calibrated profile) can replay the same load: on a real cluster the report
has no counterfactual and says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.pricing import PriceList
from flinktune.replay.harness import ReplaySettings, per_minute
from flinktune.replay.metrics import summarize
from flinktune.report.latency import minutes_p95
from flinktune.report.replays import ReplayJob, RunCache, replay_runs
from flinktune.report.spread import Spread
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import PROFILE_RUN_S, STABLE_S
from flinktune.twin.simulator import TwinJob

__all__ = [
    "COUNTERFACTUAL_POLICIES",
    "POLICY_LABELS",
    "PROFILE_RUN_S",
    "Comparison",
    "Outcome",
    "ProfilingSpend",
    "SameLoad",
    "compare_on_same_load",
    "profiling_spend",
    "same_load_from_twin",
]

#: The policies replayed beside the tuner: the reference, the Flink operator's own autoscaler and Demeter.
COUNTERFACTUAL_POLICIES: tuple[str, ...] = ("static", "autoscaler", "demeter")
#: How the report names each policy.
POLICY_LABELS: dict[str, str] = {
    "static": "static (24 TaskManagers x 1 CPU)",
    "autoscaler": "operator autoscaler",
    "demeter": "Demeter",
    "flinktune": "flinktune",
    "reactive": "reactive (HPA-like)",
    "ds2": "DS2",
    "sage": "Sage rules",
    "barre": "BARRE reserve",
    "oracle": "oracle",
}


@dataclass(frozen=True)
class ProfilingSpend:
    """Resources the tuner's profiling runs reserved (duck-types the replay models for ``summarize``)."""

    cpu_core_s: float = 0.0
    memory_mb_s: float = 0.0
    runs: int = 0


def profiling_spend(
    observations: pd.DataFrame | None, start_ts: float, end_ts: float, *, run_s: float = PROFILE_RUN_S
) -> ProfilingSpend:
    """What the profiling runs started in ``[start_ts, end_ts)`` reserved (``profiling_observations`` rows).

    Each run holds its configuration for ``run_s``, the recovery it measured and the
    ``STABLE_S`` the recovery must hold, as the replay charges Demeter's runs."""
    if observations is None or observations.empty:
        return ProfilingSpend()
    o = observations[(observations["ts_ms"] >= start_ts * 1000) & (observations["ts_ms"] < end_ts * 1000)]
    cpu = mem = 0.0
    for row in o.itertuples(index=False):
        cfg = Configuration(
            int(row.parallelism), int(row.task_slots), float(row.cpu), int(row.memory_mb), int(row.checkpoint_interval_s)
        )
        seconds = run_s + float(row.recovery_s) + STABLE_S
        cpu += cfg.total_cpu * seconds
        mem += cfg.total_memory_mb * seconds
    return ProfilingSpend(cpu, mem, len(o))


@dataclass(frozen=True)
class SameLoad:
    """The tuned period as the twin ran it: the load, the state it started from and what happened.

    ``trace``: input rate at 1 s over the period; ``start_state``: the twin's state at its first
    second (``TwinJob.state_dict()``); ``history``: the twin's per-second history of the period;
    ``reconfigurations``: the changes carried out in it; ``spend``: the tuner's profiling."""

    policy: str
    profile: ClusterProfile
    trace: pd.Series
    start_state: dict[str, Any]
    history: pd.DataFrame
    reconfigurations: list[dict[str, Any]]
    spend: ProfilingSpend = field(default_factory=ProfilingSpend)

    @property
    def hours(self) -> float:
        return len(self.trace) / 3600.0


def _rebuild_start(twin: TwinJob, trace: pd.Series, start_ts: int, first_config: Configuration) -> TwinJob:
    """Re-run the twin from its own start to ``start_ts`` with its recorded changes (same seed: same run)."""
    rebuilt = TwinJob(twin.profile, first_config, job=twin.job, seed=twin.seed, start_ts=twin.start_ts, failures=twin.failures)
    times = (trace.index.as_unit("ns").asi8 // 10**9).astype(np.int64)
    rates = trace.to_numpy(dtype=float)
    changes = sorted((r for r in twin.reconfigurations if r.get("mode") != "noop" and r["ts"] < start_ts), key=lambda r: r["ts"])
    pos = int(np.searchsorted(times, twin.start_ts))
    for change in [*changes, None]:
        until = start_ts if change is None else int(change["ts"])
        end = int(np.searchsorted(times, until))
        rebuilt.run(rates[pos:end], emit=False)
        pos = end
        if change is not None:
            mode = change["mode"] if change["mode"] in ("rescale", "redeploy") else "auto"
            rebuilt.apply(Configuration.from_dict(change["to"], where="twin reconfiguration"), mode=mode)
    return rebuilt


def same_load_from_twin(
    twin: TwinJob,
    trace: pd.Series,
    start_ts: int,
    end_ts: int | None = None,
    *,
    policy: str = "flinktune",
    profiling: pd.DataFrame | None = None,
) -> SameLoad:
    """The period ``[start_ts, end_ts)`` (default: to the twin's clock) of a persisted twin with its history.

    The state at ``start_ts`` is rebuilt by re-running the twin from its start (seeded: the same
    run) and checked against the recorded history; a twin that does not reproduce its own history
    raises ``ValueError`` naming the second where they part, as does a period the twin never ran."""
    end_ts = int(twin.now if end_ts is None else end_ts)
    hist = twin.history()
    if hist.empty:
        raise ValueError(f"job {twin.job!r}: the twin has no recorded history to compare against")
    secs = (hist["ts"].astype("int64") // 10**9).to_numpy()
    if not (secs[0] <= start_ts < end_ts <= secs[-1] + 1):
        raise ValueError(
            f"job {twin.job!r}: the period {start_ts}..{end_ts} is not inside the twin's history {secs[0]}..{secs[-1] + 1}"
        )
    before = sorted((r for r in twin.reconfigurations if r.get("mode") != "noop"), key=lambda r: r["ts"])
    first = Configuration.from_dict(before[0]["from"], where="twin reconfiguration") if before else twin.config
    rebuilt = _rebuild_start(twin, trace, start_ts, first)
    again = rebuilt.history()
    recorded = hist[secs < start_ts].reset_index(drop=True)
    n = min(len(again), len(recorded))
    same = np.ones(max(len(again), len(recorded)), dtype=bool)
    same[n:] = False
    for col in ("lag", "latency_p95_ms", "total_cpu"):  # the state, the noise and the configuration
        same[:n] &= np.isclose(again[col].to_numpy()[:n], recorded[col].to_numpy()[:n], rtol=1e-6, atol=1e-3)
    if not same.all():
        bad = int(np.argmin(same))
        raise ValueError(
            f"job {twin.job!r}: re-running the twin does not reproduce its recorded history (first difference at "
            f"second {bad} of {len(recorded)}); the counterfactuals would not see the same load"
        )
    window = (trace.index >= pd.Timestamp(start_ts, unit="s", tz="UTC")) & (
        trace.index < pd.Timestamp(end_ts, unit="s", tz="UTC")
    )
    period = hist[(secs >= start_ts) & (secs < end_ts)].reset_index(drop=True)
    changes = [r for r in twin.reconfigurations if start_ts <= r["ts"] < end_ts]
    spend = profiling_spend(profiling, start_ts, end_ts)
    return SameLoad(policy, twin.profile, trace[window], rebuilt.state_dict(), period, changes, spend)


@dataclass
class Outcome:
    """One policy over the period: its measures, per-minute series and when it changed the configuration.

    ``measures``: :data:`flinktune.replay.metrics.SUMMARY_COLUMNS` plus ``hours``,
    ``minutes_over_target`` (minutes whose p95 is over the target) and ``priced_cost``; ``latency_p95_ms``
    is the report's one p95 (:data:`flinktune.report.latency.P95_DEFINITION`), not the replay's per-second one."""

    policy: str
    label: str
    measures: dict[str, float]
    minutes: pd.DataFrame
    changes: list[pd.Timestamp]
    actual: bool = False


@dataclass
class Comparison:
    """The tuner's run beside the counterfactuals on the same load (``outcomes``: the run first)."""

    outcomes: dict[str, Outcome]
    actual: str
    hours: float
    prices: PriceList
    latency_target_ms: float
    recovery_limit_s: float
    failures: list[pd.Timestamp]
    note: str = ""
    #: Every policy's measures over several seeds of the same load (None: one seed only).
    spread: Spread | None = None

    @property
    def run(self) -> Outcome:
        return self.outcomes[self.actual]

    def table(self) -> pd.DataFrame:
        """Policies x measures (absolute), the run first."""
        return pd.DataFrame({k: o.measures for k, o in self.outcomes.items()}).T


def _measures(
    summary: dict[str, float], minutes: pd.DataFrame, hours: float, target_ms: float, prices: PriceList
) -> dict[str, float]:
    return {
        **summary,
        "latency_p95_ms": minutes_p95(minutes["latency_p95_max_ms"]),
        "hours": hours,
        "minutes_over_target": float((minutes["latency_p95_max_ms"] > target_ms).sum()),
        "priced_cost": prices.cost(summary["cpu_core_hours"], summary["memory_gib_hours"]),
    }


def compare_on_same_load(
    same: SameLoad,
    space: ConfigSpace,
    *,
    latency_target_ms: float,
    recovery_limit_s: float,
    prices: PriceList,
    policies: tuple[str, ...] = COUNTERFACTUAL_POLICIES,
    workload: str = "ysb",
    workers: int = 2,
    seeds: int = 1,
    cache_dir: Path | None = None,
) -> Comparison:
    """Replay ``policies`` over ``same`` and measure them and the run alike.

    ``workload`` names the generator Demeter's replayed forecaster trains on (a preceding day of it);
    ``workers`` > 1 replays in that many processes (the replays are seeded: the same figures either way,
    in about half the time on two cores), 1 one after the other in this process. ``seeds`` > 1 replays
    the same load on that many seeds (the run's own first; on the others the run's policy is replayed
    too) into :attr:`Comparison.spread`. ``cache_dir``: keep each replay's figures there and read
    back those already replayed from the same state, period, settings and code."""
    base, failures = int(same.start_state["seed"]), str(same.start_state["failures"])
    others = [p for p in dict.fromkeys(policies) if p != same.policy]
    replay_run = seeds > 1 and same.policy in POLICY_LABELS  # every policy the replay harness runs
    jobs: dict[tuple[int, str], ReplayJob] = {}
    for seed in range(base, base + max(1, seeds)):
        settings = ReplaySettings(
            workload=workload,
            latency_target_ms=latency_target_ms,
            recovery_limit_s=recovery_limit_s,
            failures=failures,
            seed=seed,
        )
        state = same.start_state if seed == base else {**same.start_state, "seed": seed}
        for name in [*others, *([same.policy] if replay_run and seed != base else [])]:
            jobs[(seed, name)] = ReplayJob(name, settings, state)
    cache = None
    if cache_dir is not None:
        key = {"start_state": same.start_state, "trace": _digest(same.trace), "profile": same.profile.model_dump(mode="json")}
        cache = RunCache(cache_dir, key)
    runs = replay_runs(same.trace, jobs, profile=same.profile, space=space, workers=workers, cache=cache)
    hours = same.hours
    minutes = per_minute(same.history)  # the same minutes the replay harness keeps for the others
    summary = summarize(same.history, same.reconfigurations, same.spend, recovery_limit_s)
    restarts = same.history["restarts"].to_numpy()
    failed = np.flatnonzero(np.diff(restarts, prepend=restarts[0]) > 0)
    outcomes = {
        same.policy: Outcome(
            same.policy,
            f"{POLICY_LABELS.get(same.policy, same.policy)} (this run)",
            _measures(summary, minutes, hours, latency_target_ms, prices),
            minutes,
            [pd.Timestamp(r["ts"], unit="s", tz="UTC") for r in same.reconfigurations if r.get("mode") != "noop"],
            actual=True,
        )
    }
    for name in others:
        run = runs[(base, name)]
        outcomes[name] = Outcome(
            name,
            POLICY_LABELS.get(name, name),
            _measures(run.summary, run.minutes, hours, latency_target_ms, prices),
            run.minutes,
            [pd.Timestamp(ts, unit="s", tz="UTC") for ts in run.changes],
        )
    spread = None
    if seeds > 1:
        per_seed: dict[str, list[dict[str, float]]] = {name: [o.measures] for name, o in outcomes.items()}
        for (seed, name), run in runs.items():
            if seed != base:
                per_seed[name].append(_measures(run.summary, run.minutes, hours, latency_target_ms, prices))
        spread = Spread(
            tuple(range(base, base + seeds)),
            {k: tuple(v) for k, v in per_seed.items() if len(v) == seeds},
            hours,
            same.policy if replay_run else "",
        )
    note = (
        f"Every policy replays the same {hours:.1f} h of input on the twin, from the state the job was in when tuning "
        f"started, with the same seed and failure schedule ({failures}; each failure lands just before a checkpoint, "
        "so its exact second follows each policy's checkpoint interval). The other policies profile and train their own "
        "models inside the replay; their profiling is charged like the tuner's."
    )
    return Comparison(
        outcomes,
        same.policy,
        hours,
        prices,
        latency_target_ms,
        recovery_limit_s,
        [same.history["ts"].iloc[i] for i in failed],
        note,
        spread,
    )


def _digest(trace: pd.Series) -> str:
    values = np.ascontiguousarray(trace.to_numpy(dtype=float)).tobytes()
    return hashlib.sha256(values + str(trace.index[0]).encode()).hexdigest()
