"""Replay one policy on the twin through the real decision loop (collect, evaluate, plan, guard, realize).

Use :func:`replay_policy` for one policy on one trace; :mod:`flinktune.replay.runner` runs many
in parallel and writes the tables. Everything happens in-process: the twin is the cluster
(:class:`TwinMetricsSource`, :class:`TwinRealizer`), a :class:`ManualClock` follows the twin, and
each policy decides at its own published cadence (:data:`DECISION_INTERVAL_S`) over the samples
since its previous decision; :class:`~flinktune.decision.twin_driver.TwinDriver` steps the twin and
the watch, as ``jobs.decide`` does on the twin. Same trace, seed and failure schedule for every policy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack

import pandas as pd

from flinktune.clock import ManualClock
from flinktune.config_space import ConfigSpace
from flinktune.decision.guard import GuardRules
from flinktune.decision.loop import DecisionLoop, LoopSettings, StepOutcome, build_decision_loop
from flinktune.decision.store import MemoryStateStore
from flinktune.decision.twin_driver import TwinDriver
from flinktune.decision.watch import WATCHED_POLICIES, WatchRule
from flinktune.policies import MODEL_POLICIES, make_policy
from flinktune.replay.metrics import recoveries, summarize
from flinktune.replay.models import ReplayModels, TraceForecast, make_forecaster
from flinktune.tuner.shapes import startup_design
from flinktune.twin.backend import twin_backend
from flinktune.twin.oracle import oracle_schedule
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import PROFILE_RUN_S
from flinktune.twin.reconfig_modes import change_priors, failure_prior, reconfiguration_costs
from flinktune.twin.simulator import TwinJob
from flinktune.twin.workload import generate_trace

__all__ = [
    "DECISION_INTERVAL_S",
    "OWN_PACING",
    "REACTIVE_MODE",
    "PolicyRun",
    "ReplayRig",
    "ReplaySettings",
    "RigOptions",
    "guard_rules_for",
    "per_minute",
    "prepare_replay",
    "replay_loop",
    "replay_policy",
    "run_replay",
]

#: Seconds between decisions per policy: the cadence each system publishes (HPA and the operator
#: evaluate often and rely on their own windows; Demeter checks every 60 s whether its 10-minute
#: clock, which failures reset, has run out: the policy keeps that clock).
DECISION_INTERVAL_S: dict[str, int] = {
    "static": 600,
    "reactive": 60,
    "ds2": 60,
    "autoscaler": 60,
    "sage": 300,
    "barre": 300,
    "demeter": 60,
    "flinktune": 300,
    "oracle": 600,
}


#: Published baselines that pace themselves: they run under the guard's data checks and bounds only,
#: without flinktune's own stabilization, one-scale-down-per-window and rollback rules, which the
#: published systems do not have (Demeter: 10-minute clock, docs/baselines.md, demeter; the operator: its
#: stabilization, metric window and scale-down interval, section 3; the HPA: its scale-down
#: stabilization window). Under those rules a replayed baseline changes less often than it did for real.
OWN_PACING: frozenset[str] = frozenset({"demeter", "autoscaler", "reactive"})

#: Policies whose twin runs in Flink's reactive mode (``TwinJob(reactive=True)``): every rescale
#: restarts the job from its last checkpoint, and a lost TaskManager means a restart without it
#: and another when it registers back (the reactive + HPA baseline, Demeter's evaluation).
REACTIVE_MODE: frozenset[str] = frozenset({"reactive"})


def guard_rules_for(name: str, rules: GuardRules) -> GuardRules:
    """``rules`` as policy ``name`` runs under them: for :data:`OWN_PACING` baselines without
    flinktune's stabilization, scale-down window and rollback (bounds, quotas and data checks stay)."""
    if name not in OWN_PACING:
        return rules
    return replace(rules, stabilization_s=0.0, scale_down_window_s=0.0, rollback_window_s=0.0)


#: Configurations flinktune profiles (at each of two rates) before its first shape choice: its
#: shapes are ranked by measured capacity, so the surrogate is only a check and 3 are enough.
FLINKTUNE_STARTUP_RUNS = 3

#: How each model policy's profiling runs go in the twin (``ReplayModels`` fields; the recovery wait
#: as a multiple of the recovery limit). Demeter's published runs wait 180 s, measure 60 s, inject a
#: failure and wait out the recovery up to its 360 s cap (twice its 180 s limit; "did not recover"
#: is recorded as 360 s, docs/baselines.md, demeter): the twin's 300 s (a 60 s warm-up, then 240 s) and a
#: recovery wait of twice the limit stand for that. flinktune's profiler settles and measures for well under a
#: minute per observation on a real Flink (steady capacities within 5 % across runs,
#: docs/results/local-flink.md), so its runs measure 120 s; it skips the failure of a run that fell
#: behind (such a job never catches up) and stops waiting for a recovery at twice the limit
#: (Demeter's published profiler stops at 360 s for its 180 s limit): beyond that only "too slow"
#: matters to the goals. Demeter's profiler reads the recovery at its checks, not when the backlog
#: has drained (``recovery_measure="demeter"``, :mod:`flinktune.twin.recovery_checks`): its
#: recorded recoveries are what its constraint models learn from.
PROFILE_RUNS: dict[str, dict[str, Any]] = {
    "demeter": {"profile_duration_s": 300, "recovery_wait_limits": 2.0, "recovery_measure": "demeter"},
    "flinktune": {"profile_duration_s": PROFILE_RUN_S, "recovery_wait_limits": 2.0, "skip_failure_when_behind": True},
}


def _profiling_fields(name: str, recovery_limit_s: float) -> dict[str, Any]:
    """``PROFILE_RUNS[name]`` as ``ReplayModels`` fields (the recovery wait in seconds); {} keeps the defaults."""
    fields = dict(PROFILE_RUNS.get(name, {}))
    waits = fields.pop("recovery_wait_limits", None)
    if waits is not None:
        fields["recovery_wait_s"] = float(waits) * recovery_limit_s
    return fields


@dataclass(frozen=True)
class ReplaySettings:
    """What every policy of one benchmark shares."""

    workload: str = "ysb"
    latency_target_ms: float = 1000.0
    recovery_limit_s: float = 180.0
    failures: str = "every:45m"
    seed: int = 7
    forecast_horizon_s: int = 600
    forecaster: str = "peak"
    confidence: float = 0.95
    guard: GuardRules = field(default_factory=GuardRules)
    #: Seconds between watch checks for the watched policies (:mod:`flinktune.decision.watch`); 0: off.
    watch_every_s: int = 60
    #: The trace's own rates before the replayed span (1 s steps, ending one second before it), e.g.
    #: a trace file's first hours (:func:`flinktune.replay.runner.split_history`): the forecasters
    #: are fitted on it and forecast from it at the start. None: a preceding synthetic day of
    #: ``workload`` (another seed), which is all a generated trace has.
    history: pd.Series | None = field(default=None, compare=False, repr=False)


def per_minute(hist: pd.DataFrame) -> pd.DataFrame:
    """A twin history's minutes: means, plus ``latency_p95_max_ms``, each minute's highest per-second p95
    (what a curated ``features_1m`` row holds as its p95, which the run report counts in)."""
    cols = hist.set_index("ts")[["rate", "latency_p95_ms", "lag", "total_cpu", "total_memory_mb"]].resample("1min")
    return cols.mean().assign(latency_p95_max_ms=cols["latency_p95_ms"].max())


@dataclass
class PolicyRun:
    """The outcome of one replay: its summary row, per-minute series for plots (:func:`per_minute`), and its decisions."""

    policy: str
    summary: dict[str, float]
    minutes: pd.DataFrame
    decisions: list[dict[str, Any]]
    wall_s: float
    #: What each change would cost by mode (redeploy, rescale, live migration); see flinktune.twin.reconfig_modes.
    mode_costs: pd.DataFrame | None = None
    #: One row per failure: the twin's recovery and the detector-like one (flinktune.replay.metrics.recoveries).
    recoveries: pd.DataFrame | None = None
    #: The model policy's profile database at the end (carried rows first, then this run's), for the
    #: next replay's ``prior_observations``; None for a policy without models.
    observations: pd.DataFrame | None = None
    #: How many of :attr:`observations` were carried in (not profiled, not charged, in this run).
    prior_profiles: int = 0


@dataclass
class ReplayRig:
    """One policy's replay, ready to run: the twin at static max, the policy, its models (already
    bootstrapped) and its decision interval (s). Built by :func:`prepare_replay`."""

    name: str
    twin: TwinJob
    policy: Any
    models: ReplayModels | None
    space: ConfigSpace
    settings: ReplaySettings
    interval: int
    #: The watch between decisions (:data:`~flinktune.decision.watch.WATCHED_POLICIES` only), or None.
    watch: WatchRule | None = None


class RigOptions(TypedDict, total=False):
    """The keyword options :func:`replay_policy` passes on to :func:`prepare_replay` (see its doc)."""

    interval_s: int | None
    policy_options: dict[str, Any] | None
    start_state: dict[str, Any] | None
    prior_observations: pd.DataFrame | None


def prepare_replay(
    name: str,
    trace: pd.Series,
    profile: ClusterProfile,
    space: ConfigSpace,
    settings: ReplaySettings,
    *,
    interval_s: int | None = None,
    policy_options: dict[str, Any] | None = None,
    start_state: dict[str, Any] | None = None,
    prior_observations: pd.DataFrame | None = None,
) -> ReplayRig:
    """The twin, policy and models of a replay of ``trace`` under ``name`` (see :func:`replay_policy`).

    ``start_state``: a twin state (``TwinJob.state_dict()``, taken at the trace's first second) to
    continue instead of static max, e.g. a job after the hours it ran before: its configuration, lag,
    noise and failure schedule go on from there (the run report's counterfactuals on the same load).

    ``prior_observations`` (model policies only): a profile database carried from an earlier run (its
    ``PolicyRun.observations``), loaded by :meth:`ReplayModels.carry` without charging it; the start-up
    profiling design is then skipped. Demeter's published optimiser has no separate start-up design:
    its Sobol step profiles a rate chunk only while that chunk holds fewer than ``num_init`` = 3
    profiles, and its profiling thread's rounds go on as before (docs/baselines.md, demeter), so a database
    that already covers the chunks starts the next run without it; the replay's bootstrap stands for
    those first Sobol rounds on an empty database."""
    interval = int(interval_s or DECISION_INTERVAL_S.get(name, 600))
    options = dict(policy_options or {})
    if prior_observations is not None and name not in MODEL_POLICIES:
        raise ValueError(
            f"replay {name}: prior observations are a profile database; only the profiling policies "
            f"({', '.join(sorted(MODEL_POLICIES))}) have one"
        )
    start_ts = int(trace.index[0].timestamp())
    if start_state is not None:
        # Only what happens from the trace's first second on is measured: no earlier history or changes.
        state = {k: v for k, v in start_state.items() if k != "history"}
        twin = TwinJob.from_state_dict({**state, "job": "replay", "retain_s": interval + 60, "reconfigurations": []})
        twin.reactive = name in REACTIVE_MODE
        if twin.now != start_ts:
            raise ValueError(f"replay {name}: the start state is at t={twin.now}, the trace starts at t={start_ts}")
    else:
        twin = TwinJob(
            profile,
            space.maximum,
            job="replay",
            seed=settings.seed,
            start_ts=start_ts,
            failures=settings.failures,
            retain_s=interval + 60,
            reactive=name in REACTIVE_MODE,
        )
    if options.get("rescales_in_place") is False and twin.profile.adaptive_scheduler:
        # The policy's changes are full savepoint upgrades (the operator autoscaler 1.6 on Flink 1.17,
        # which has no in-place rescaling): the twin carries them out that way.
        twin.profile = twin.profile.with_(adaptive_scheduler=False)
    models: ReplayModels | None = None
    if name in MODEL_POLICIES or name == "barre":
        # Train the forecaster on the trace's own history when there is one, else on a preceding
        # day of the same generator with another seed: never on the replayed span itself.
        if settings.history is not None:
            past = settings.history
        elif settings.workload in ("ysb", "tsw"):
            past = generate_trace(settings.workload, 24.0, settings.seed + 1000, start=trace.index[0] - pd.Timedelta(hours=24))
        else:  # no generator and no history (benchmarks/fidelity/twin_fidelity.py): the trace itself, in-sample
            past = trace
        fc = make_forecaster(settings.forecaster, horizon_s=settings.forecast_horizon_s, seed=settings.seed).fit(past)
        # The seasonal naive one forecasts from 10 min of history; it answers until the main one can.
        fallback = (
            make_forecaster("naive", horizon_s=settings.forecast_horizon_s, seed=settings.seed).fit(past)
            if settings.forecaster != "naive"
            else None
        )
        models = ReplayModels(
            profile, space, fc, seed=settings.seed, fallback=fallback, **_profiling_fields(name, settings.recovery_limit_s)
        )
        if prior_observations is not None:  # a carried database: no start-up design (see the docstring)
            models.carry(prior_observations)
        elif name in MODEL_POLICIES:  # barre plans from the forecast and measured rates only: no profiling
            first = float(trace.iloc[: settings.forecast_horizon_s].max())
            # Demeter profiles its published design; flinktune only the shapes it chooses among
            # (0.5-1 core per slot; fewer runs, and the models learn the shapes that matter).
            design = startup_design(space, FLINKTUNE_STARTUP_RUNS, settings.seed) if name == "flinktune" else None
            models.bootstrap([0.5 * first, first * 1.1], design=design)
    if name == "flinktune":
        # The change-cost model's prior comes from the calibrated profile, as a user's calibration would give it.
        options.setdefault("change_priors", change_priors(profile))
        options.setdefault("failure_prior", failure_prior(profile))
    if name == "oracle":
        options.setdefault(
            "schedule", oracle_schedule(profile, trace, space, settings.latency_target_ms, settings.recovery_limit_s, interval)
        )
    policy = (
        make_policy(name, space, confidence=settings.confidence, **options)
        if name in MODEL_POLICIES or name == "oracle"
        else make_policy(name, space, **options)
    )
    watch = WatchRule(every_s=settings.watch_every_s) if name in WATCHED_POLICIES and settings.watch_every_s > 0 else None
    return ReplayRig(name, twin, policy, models, space, settings, interval, watch)


def replay_loop(rig: ReplayRig, trace: pd.Series, store: Any, clock: ManualClock) -> DecisionLoop:
    """The decision loop of ``rig`` on its twin (``clock`` follows the twin's time), built by
    :func:`~flinktune.decision.loop.build_decision_loop` with ``store``'s memory restored."""
    s = rig.settings
    backend = twin_backend(rig.twin, clock, profiler=rig.models)
    # The twin is a simulation: the replay acts on it (a job's advice/act mode gates jobs.decide, not the loop).
    return build_decision_loop(
        backend,
        LoopSettings("replay", s.latency_target_ms, s.recovery_limit_s, window_s=rig.interval, max_staleness_s=rig.interval),
        policy=rig.policy,
        space=rig.space,
        store=store,
        guard_rules=guard_rules_for(rig.name, s.guard),
        models=rig.models,
        forecaster=TraceForecast(rig.models, trace, s.forecast_horizon_s, before=s.history) if rig.models is not None else None,
    )


def replay_policy(
    name: str,
    trace: pd.Series,
    profile: ClusterProfile,
    space: ConfigSpace,
    settings: ReplaySettings,
    *,
    store: Any = None,
    **options: Unpack[RigOptions],
) -> PolicyRun:
    """Replay ``trace`` (rec/s, 1 s steps) under policy ``name``; the job starts at static max,
    or from ``start_state``; a model policy with ``prior_observations`` starts from that carried
    profile database (see :func:`prepare_replay`; the run's ``observations`` carry on to the next).

    ``store`` (default a fresh ``MemoryStateStore``) receives every decision, keeps included.
    """
    started = time.perf_counter()
    rig = prepare_replay(name, trace, profile, space, settings, **options)
    return run_replay(rig, trace, store=store, started=started)


def _note(decisions: list[dict[str, Any]], out: StepOutcome, now: float) -> None:
    """Keep what a replay reports of a step: every decision that did something."""
    if out.decision.action.value != "keep" or (out.result and out.result.changed):
        decisions.append(
            {
                "ts": now,
                "action": out.decision.action.value,
                "reason": out.decision.reason,
                "policy": out.decision.policy,
                "changed": bool(out.result and out.result.changed),
                "mode": out.result.mode if out.result else None,
                # The configuration a change went to, as the measured side can be read against it.
                "target": out.decision.target.to_dict() if out.decision.target is not None else None,
            }
        )


def run_replay(rig: ReplayRig, trace: pd.Series, *, store: Any = None, started: float | None = None) -> PolicyRun:
    """Run a prepared replay over the whole ``trace`` in this process, one decision per interval."""
    started = time.perf_counter() if started is None else started
    twin, models, interval = rig.twin, rig.models, rig.interval
    clock = ManualClock(twin.now)
    loop = replay_loop(rig, trace, MemoryStateStore() if store is None else store, clock)
    driver = TwinDriver(twin, clock, loop, watch=rig.watch)
    values = trace.to_numpy(dtype=float)
    decisions: list[dict[str, Any]] = []
    for lo in range(0, len(values), interval):
        for early in driver.run_interval(values[lo : lo + interval], interval):
            _note(decisions, early, clock.now())
        if lo + interval > len(values):
            break
        _note(decisions, driver.decide(), clock.now())
    hist = twin.history()
    summary = summarize(hist, twin.reconfigurations, models, rig.settings.recovery_limit_s)
    minutes = per_minute(hist)
    costs = reconfiguration_costs(twin.profile, twin.reconfigurations, hist)
    obs = models.observations if models is not None else None
    return PolicyRun(
        rig.name,
        summary,
        minutes,
        decisions,
        time.perf_counter() - started,
        mode_costs=costs,
        recoveries=recoveries(hist),
        observations=obs.copy() if obs is not None else None,
        prior_profiles=models.prior_rows if models is not None else 0,
    )
