"""The decision task: load the champion models and run the decision loop for one job.

On the embedded default (``FLINKTUNE_CLUSTER=twin``) the cluster is the twin: each tick lets the
persisted twin run one decision interval on its trace (its metrics land in the raw lake), then
makes one decision with the loop :func:`flinktune.decision.loop.build_decision_loop` assembles
(the guard's history and the policy's memory read back from the state store) and applies it to the twin. A profile
decision runs the profiling jobs on the twin at the planned rate and retrains the surrogate before
the next tick, as the profiling and surrogate-retraining DAGs do in production.

With ``FLINKTUNE_CLUSTER=kubernetes`` the same loop makes one decision per run on the wall clock,
reading the raw lake the extractor keeps fresh and patching the FlinkDeployment (a dry run
computes the patch and prints it as a diff, changing nothing); profile decisions are carried out
by the ``flinktune_profile`` DAG that the decide DAG triggers.

With ``FLINKTUNE_CLUSTER=local-flink`` (the production rehearsal, :mod:`flinktune.rehearsal`) the
job runs on a local Flink cluster the rehearsal started: the run attaches to it through
``FLINKTUNE_FLINK_JOBS_DIR/<job>.json`` (:mod:`flinktune.localflink.attach`), decides in the job's
own small space on the raw lake the Prometheus extract keeps fresh, and rescales in place.

On the twin, ``--models FILE`` takes the models from a file instead of MLflow: a saved
:class:`flinktune.replay.models.ReplayModels` (the replay's forecaster, surrogate and profiler), with
the forecast from the twin's trace, as the replay has it; the file is written back after each tick
(profiling refits the surrogate). One run per tick then makes the replay's decisions, as
``tests/flinktune/decision/test_durable_memory.py`` checks.

``python -m jobs.decide --job demo --ticks 6 --policy flinktune`` prints a JSON summary.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flinktune.backends import Backend
from flinktune.backends.kubernetes import kubernetes_backend
from flinktune.clock import ManualClock
from flinktune.config_space import ConfigSpace, Configuration, default_space
from flinktune.decision.evaluation import rate_series
from flinktune.decision.loop import LoopSettings, build_decision_loop
from flinktune.decision.modes import resolve_mode
from flinktune.decision.store import open_state_store
from flinktune.decision.watch import WATCHED_POLICIES, WatchRule, step_if_alarmed, watch_chunks
from flinktune.entry import OneLineParser, run_main
from flinktune.job_name import job_name
from flinktune.lake import PROFILING_OBSERVATIONS, Lake, LakeMetricsSource
from flinktune.policies import POLICY_NAMES, make_policy
from flinktune.settings import Settings, load_settings
from flinktune.twin.backend import twin_backend
from flinktune.twin.job_store import job_dir
from flinktune.twin.reconfig_modes import change_priors, failure_prior
from flinktune.twin.simulator import TwinJob

__all__ = ["FORECAST_HISTORY_S", "ChampionModels", "LakeForecast", "TwinProfiler", "cluster_backend", "main", "run"]

log = logging.getLogger(__name__)

#: How much input-rate history the forecaster sees at predict time.
FORECAST_HISTORY_S = 6 * 3600
#: Hold when the live metrics have not moved for this long (a metrics pipeline that stopped refreshing);
#: at most 3/4 of the evaluated window (flinktune.metrics.quality.frozen_limit_s), so it can fire.
FROZEN_AFTER_S = 300.0


def _load_champion(name: str) -> tuple[Any | None, str | None]:
    """(the champion or None, the problem when the model store itself failed). A missing champion is
    the policy's business (it says so); an unreachable store is a hold with its reason (the loop adds
    it to the state's problems), reported within MLflow's request timeout, not as "no champion"."""
    from models.registry import ModelStoreUnavailable, load_champion

    try:
        return load_champion(name), None
    except ModelStoreUnavailable as exc:
        log.warning("model store unavailable for %s: %s", name, exc)
        return None, f"model store unreachable: {exc}"
    except Exception as exc:  # a missing champion is a hold, not a crash: the guard says why
        log.warning("no champion %s: %s", name, exc)
        return None, None


def _profiled_max_rate(settings: Settings, job: str) -> float:
    frames = Lake(settings.lake_dir).read_dataset(PROFILING_OBSERVATIONS, job, columns=["input_rate"])
    if not frames:
        return 0.0
    rates = np.concatenate([f["input_rate"].to_numpy(dtype=float) for f in frames])
    return float(np.nanmax(rates)) if rates.size else 0.0


class ChampionModels:
    """The ``ModelProvider`` of a decide run: the job's champion surrogate and the reach of its
    profiling observations in the lake; :meth:`refresh` reloads both (after profiling retrained)."""

    def __init__(self, settings: Settings, job: str) -> None:
        self.settings, self.job = settings, job
        self.refresh()

    def refresh(self) -> None:
        self.surrogate, self.problem = _load_champion(f"flinktune-surrogate-{self.job}")
        self.profiled_max_rate = _profiled_max_rate(self.settings, self.job)


class LakeForecast:
    """The ``ForecastProvider`` of a decide run: the champion forecaster over the last
    :data:`FORECAST_HISTORY_S` of the job's input rate in the raw lake."""

    def __init__(self, lake: Lake, job: str, horizon_s: int) -> None:
        self.lake, self.horizon_s = lake, int(horizon_s)
        self.model, self.problem = _load_champion(f"flinktune-forecaster-{job}")

    def forecast(self, job: str, now: float):
        if self.model is None:
            return None
        now_ms = int(now * 1000)
        hist = self.lake.read_raw(job, now_ms - FORECAST_HISTORY_S * 1000, now_ms + 1, metrics=["workloadRate"])
        return self.model.predict(rate_series(hist, job), self.horizon_s)


class TwinProfiler:
    """The twin's ``Profiler``: the profiling jobs at the planned rate, then the surrogate retrained
    (what the profiling and surrogate-retraining DAGs do on a real cluster)."""

    def __init__(self, settings: Settings, job: str) -> None:
        self.settings, self.job = settings, job

    def profile(self, configs: list[Configuration], rate: float, now: float) -> None:
        from jobs import profile as profile_job
        from jobs import train_surrogate

        profile_job.run(job=self.job, configs=[c.to_dict() for c in configs], rates=[rate], settings=self.settings)
        train_surrogate.run(job=self.job, settings=self.settings)


def _fleet_setting(settings: Settings, job: str) -> tuple[str | None, str | None]:
    """The job's ``mode`` in the fleet file and where it is set ((None, None) without a file or entry)."""
    if settings.fleet_file is None:
        return None, None
    from flinktune.fleet import load_fleet_file

    try:
        entry = load_fleet_file(settings.fleet_file).get(job)
    except KeyError:
        return None, None
    return (entry.settings.mode if entry.settings is not None else None), entry.source


def cluster_backend(job: str, settings: Settings, cluster: str, *, dry_run: bool) -> tuple[Backend, ConfigSpace]:
    """The backend and configuration space of ``job`` on a real cluster (``kubernetes`` or
    ``local-flink``), reading metrics from the raw lake and, after its newest sample, from Prometheus."""
    from flinktune.extract.recent import fresh_metrics_source

    source = fresh_metrics_source(settings, Lake(settings.lake_dir))
    if cluster == "local-flink":  # the rehearsal: a job on a local cluster another process started
        from flinktune.backends.local_flink import local_flink_backend
        from flinktune.localflink.attach import AttachError, attach
        from flinktune.settings import LocalFlinkSettings, read_group

        jobs_dir = read_group(LocalFlinkSettings).jobs_dir
        if jobs_dir is None:
            raise AttachError("FLINKTUNE_CLUSTER=local-flink needs FLINKTUNE_FLINK_JOBS_DIR (the jobs' attachment files)")
        realizer, space = attach(jobs_dir, job)
        return local_flink_backend(realizer, source), space
    # Kubernetes: profile decisions are carried out by the flinktune_profile DAG the decide DAG triggers
    backend = kubernetes_backend(job, source, dry_run=dry_run, timeouts=settings.timeouts,
                                 budget_s=settings.timeouts.apply_budget(settings.decision_interval_s))  # fmt: skip
    return backend, default_space()


def run(
    *,
    job: str,
    ticks: int = 1,
    policy: str = "flinktune",
    apply: bool = False,
    settings: Settings | None = None,
    models_file: Path | None = None,
    trigger: str | None = None,
    fleet_mode: str | None = None,
    fleet_source: str | None = None,
) -> dict:
    """Make ``ticks`` decisions for ``job`` (one on a real cluster) and return their summary.

    ``models_file``: the twin's models from a saved ``ReplayModels`` instead of the MLflow champions
    (see the module docstring); refused on a real cluster. ``trigger``: why this run decides before its
    interval (from ``flinktune_watch``; a real cluster only: on the twin the run watches between its ticks).

    Nothing is changed unless ``apply`` (the run may act: ``--apply``, the schedule) and the job's mode
    is act (:mod:`flinktune.decision.modes`); otherwise every decision is made and recorded as advice.
    ``fleet_mode``/``fleet_source``: the job's fleet setting as the caller read it (the DAG's fleet
    task); left out, the fleet file is read here. The whole run holds the job's decider lock: a
    second run for the same job at the same time decides nothing and says so."""
    if policy not in POLICY_NAMES:
        raise ValueError(f"unknown policy {policy!r}; known policies: {', '.join(POLICY_NAMES)}")
    if ticks < 1:
        raise ValueError(f"ticks must be >= 1, got {ticks}")
    job = job_name(job)  # before it reaches any path, model name or API call
    if models_file is not None:
        from flinktune.signing import read_signed

        # The file's signature, before anything else starts (its pickle is read only further down).
        read_signed(models_file, "saved ReplayModels file")
    settings = settings or load_settings()
    from flinktune.backends.choice import load_backends

    cluster = load_backends().cluster
    on_twin = cluster == "twin"
    twin_dir = job_dir(settings.twin_dir, job)
    twin_path, trace_path = twin_dir / "twin.json", twin_dir / "trace.parquet"
    twin, trace = None, None
    if on_twin:
        if not twin_path.exists() or not trace_path.exists():
            raise FileNotFoundError(f"no twin for job {job!r} under {twin_dir}; run jobs.simulate first")
        twin = TwinJob.load(twin_path)
        trace = pd.read_parquet(trace_path)["rate"]
        if trigger:
            raise ValueError("trigger: a watch trigger is for a real cluster; on the twin the decide run watches between its ticks")
    elif ticks != 1:
        raise ValueError(f"ticks={ticks}: on a real cluster each run makes one decision (the DAG runs every interval)")
    elif models_file is not None:
        raise ValueError("--models: models from a file run on the twin only (FLINKTUNE_CLUSTER=twin); a cluster uses the MLflow champions")
    # After every refusal above: configuring the store records its home under the state folder.
    from models.registry import configure

    configure(settings.mlflow_tracking_uri, settings.mlflow_artifact_root, request_timeout_s=settings.timeouts.mlflow_request_s,
              max_retries=settings.timeouts.mlflow_retries)  # fmt: skip
    replay_models = None
    if models_file is not None:
        from flinktune.replay.models import ReplayModels  # the replay's models: only for a run from a file

        replay_models = ReplayModels.load(models_file)
    lake = Lake(settings.lake_dir)
    store = open_state_store(settings)
    if fleet_source is None:
        fleet_mode, fleet_source = _fleet_setting(settings, job)
    mode = resolve_mode(job, store.job_mode(job), fleet_mode, fleet_source)
    dry_run = not (apply and mode.acting)  # both keys: the run may act (--apply, the schedule) and the job acts
    advice = {"mode": mode.mode, "mode_why": mode.line(), "dry_run": dry_run}
    if apply and not mode.acting:
        print(f"[decide] {job}: {mode.line()}", flush=True)
    with store.decision_lock(job) as held:
        if not held:  # one decider per job: another run is deciding (and may be acting) right now
            why = f"another decide run holds job {job!r}'s decider lock; this run decided nothing and changed nothing"
            print(f"[decide] {why}", flush=True)
            return {"job": job, "policy": policy, "decisions": [], "held": why, **advice}
        if twin is not None:
            twin = TwinJob.load(twin_path)  # again under the lock: a run that held it before may have saved it since
        # Both read the raw lake: the twin writes each interval there as it runs, the extractor keeps it fresh on Kubernetes.
        twin_clock: ManualClock | None = None
        if twin is not None:
            twin_clock = ManualClock(twin.now)
            profiler = replay_models if replay_models is not None else TwinProfiler(settings, job)
            backend, space = twin_backend(twin, twin_clock, job=job, source=LakeMetricsSource(lake), profiler=profiler), default_space()
        else:
            backend, space = cluster_backend(job, settings, cluster, dry_run=dry_run)
        # On Kubernetes a dry run still asks the realizer, which only computes the patch and its diff.
        # frozen_after_s: the metric quality gates (flinktune.metrics.quality) hold on frozen values.
        loop_settings = LoopSettings(job, settings.latency_target_ms, settings.recovery_limit_s, window_s=settings.decision_interval_s,
                                     frozen_after_s=FROZEN_AFTER_S, dry_run=dry_run and cluster != "kubernetes")  # fmt: skip
        # The guard's history and the policy's memory come back from the state store (one run, one tick in production).
        forecaster: Any
        if replay_models is not None:
            from flinktune.replay.models import TraceForecast

            assert trace is not None  # models from a file run on the twin only
            forecaster, models = TraceForecast(replay_models, trace, settings.forecast_horizon_s), replay_models
        else:
            forecaster, models = LakeForecast(lake, job, settings.forecast_horizon_s), ChampionModels(settings, job)
        # The local realizer rescales the whole job (every vertex alike): per-vertex DS2 overrides would be
        # recorded but not run, and the next run would read the uniform parallelism back and decide again.
        options: dict[str, Any] = {"per_vertex": False} if policy == "ds2" and cluster == "local-flink" else {}
        if twin is not None and policy == "flinktune":  # the twin's calibration is the change-cost prior, as in the replay
            options.update(change_priors=change_priors(twin.profile), failure_prior=failure_prior(twin.profile))
        loop = build_decision_loop(backend, loop_settings, policy=make_policy(policy, space, confidence=settings.confidence, **options),
                                   space=space, store=store, forecaster=forecaster, models=models)  # fmt: skip
        clock = backend.clock
        interval = settings.decision_interval_s
        summaries = []
        for i in range(ticks):
            if twin is None:
                # A watch-triggered run reads the minutes that raised the alarm, as the twin's early decisions do.
                outcome = loop.step(trigger=trigger or None, window_s=WatchRule().window_s if trigger else None)
                diff = getattr(loop.realizer, "last_diff", None)
                if dry_run and diff:
                    print(diff, flush=True)
                summaries.append({"ts": clock.now(), "action": outcome.decision.action.value, "reason": outcome.decision.reason,
                                  "changed": bool(outcome.result and outcome.result.changed), "diff": diff if dry_run else None,
                                  "data_age_s": _age(outcome)})
                print(f"[decide] {outcome.line()}", flush=True)
                continue
            start = pd.Timestamp(twin.now, unit="s", tz="UTC")
            rates = trace[(trace.index >= start) & (trace.index < start + pd.Timedelta(seconds=interval))]
            if len(rates) < interval:
                raise ValueError(
                    f"the twin's trace for job {job!r} ends at {trace.index[-1]}: not enough left for tick {i + 1} of {ticks} "
                    f"({len(rates)} of {interval} s); simulate a longer trace"
                )
            assert twin_clock is not None  # there is one whenever there is a twin
            values, done = rates.to_numpy(), 0
            for chunk in watch_chunks(interval, settings.watch_every_s if policy in WATCHED_POLICIES else 0):
                lake.write_raw(twin.run(values[done : done + chunk]))
                done += chunk
                twin_clock.set(twin.now)
                if done < interval:  # between scheduled decisions: the watch may ask for one now
                    early = _watch_step(loop, twin.now)
                    if early is not None:
                        twin.save(twin_path)
                        summaries.append(early)
                        print(f"[decide {i + 1}/{ticks}, early] {early['action']}: {early['reason']}", flush=True)
            decided = store.decisions(job, limit=1)
            if not decided.empty and float(decided["ts"].iloc[-1]) >= twin.now:
                # A run killed after this tick's decision was stored but before the twin was saved: the tick is
                # decided already. Deciding it again would duplicate it; the next tick's reconciliation records
                # any difference between the stored outcome and the twin (which lost the change with the kill).
                twin.save(twin_path)
                summaries.append({"ts": clock.now(), "action": "skipped", "reason": f"tick at t={twin.now:.0f} already decided "
                                  f"(decision {int(decided['id'].iloc[-1])})", "changed": False})  # fmt: skip
                print(f"[decide {i + 1}/{ticks}] {summaries[-1]['reason']}", flush=True)
                continue
            outcome = loop.step()
            twin.save(twin_path)  # per tick, after its decision: a kill never makes a later run decide a tick twice
            if replay_models is not None and models_file is not None:
                replay_models.save(models_file)  # a profiling decision refitted the surrogate
            summaries.append({"ts": clock.now(), "action": outcome.decision.action.value, "reason": outcome.decision.reason,
                              "changed": bool(outcome.result and outcome.result.changed), "data_age_s": _age(outcome)})
            print(f"[decide {i + 1}/{ticks}] {outcome.line()}", flush=True)
        return {"job": job, "policy": policy, "decisions": summaries, "end_ms": int(clock.now() * 1000), **advice}


def _age(outcome: Any) -> float | None:
    """Seconds from the newest sample the decision used to the decision (None without any sample)."""
    age = float(outcome.state.data_age_s)
    return None if np.isnan(age) else age


def _watch_step(loop: Any, now: float) -> dict | None:
    """The summary of a decision the watch asked for now (:mod:`flinktune.decision.watch`), else None."""
    outcome = step_if_alarmed(loop, now)
    if outcome is None:
        return None
    return {"ts": now, "action": outcome.decision.action.value, "reason": outcome.decision.reason,
            "changed": bool(outcome.result and outcome.result.changed), "early": True, "data_age_s": _age(outcome)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.decide``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.decide", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.decide", description=__doc__)
    p.add_argument("--job", required=True)
    p.add_argument("--ticks", type=int, default=1)
    p.add_argument("--policy", choices=POLICY_NAMES, default="flinktune")
    p.add_argument("--apply", action="store_true", help="act on a job whose mode is act (default: a dry run, advice only)")
    p.add_argument("--models", type=Path, default=None, help="twin only: a saved ReplayModels instead of the MLflow champions")
    a = p.parse_args(argv)
    print(json.dumps(run(job=a.job, ticks=a.ticks, policy=a.policy, apply=a.apply, models_file=a.models)))


if __name__ == "__main__":
    raise SystemExit(main())
