"""One decide run of one job: its models, its backend and the decision loop, then one decision on a
real cluster or ``ticks`` decisions on the twin.

Use :func:`decide` (``python -m jobs.decide``, the ``flinktune_decide`` DAG's task, ``flinktune
decide``). On the embedded default (``FLINKTUNE_CLUSTER=twin``) each tick lets the persisted twin
run one decision interval on its trace (its metrics land in the raw lake) through
:class:`~flinktune.decision.twin_driver.TwinDriver`, which watches between decisions as the replay
does, then decides and saves the twin. A profile decision runs the profiling jobs on the twin at
the planned rate and retrains the surrogate before the next tick (:class:`TwinProfiler`), as the
profiling and surrogate-retraining DAGs do in production.

With ``FLINKTUNE_CLUSTER=kubernetes`` the loop makes one decision per run on the wall clock, reading
the raw lake the extractor keeps fresh and patching the FlinkDeployment (a dry run computes the
patch and prints it as a diff, changing nothing); profile decisions are carried out by the
``flinktune_profile`` DAG that the decide DAG triggers. With ``FLINKTUNE_CLUSTER=local-flink`` (the
production rehearsal) the run attaches to a job on a local Flink cluster through
``FLINKTUNE_FLINK_JOBS_DIR/<job>.json`` and rescales it in place. On a real cluster each run is a new
process, so a policy that keeps what it saw only in its object (:data:`IN_PROCESS_MEMORY`) is refused.

On the twin, ``models_file`` takes the models from a saved
:class:`flinktune.replay.models.ReplayModels` instead of MLflow, with the forecast from the twin's
trace, as the replay has it; the file is written back after each tick (profiling refits the
surrogate). One run per tick then makes the replay's decisions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flinktune.config_space import Configuration, default_space
from flinktune.decision.loop import DecisionLoop, LoopSettings, build_decision_loop
from flinktune.decision.modes import resolve_mode
from flinktune.decision.providers import ChampionModels, LakeForecast
from flinktune.decision.stages import ForecastProvider, ModelProvider, PatchPreview
from flinktune.decision.store import open_state_store
from flinktune.decision.watch import WatchRule
from flinktune.job_name import job_name
from flinktune.lake import Lake
from flinktune.policies import POLICY_NAMES, make_policy
from flinktune.runs.decide_cluster import FROZEN_AFTER_S, IN_PROCESS_MEMORY, cluster_backend, fleet_setting, summary_row
from flinktune.runs.decide_twin import TwinRun
from flinktune.runs.model_store import configure_store
from flinktune.settings import Settings, load_settings

__all__ = ["FROZEN_AFTER_S", "IN_PROCESS_MEMORY", "TwinProfiler", "decide"]


@dataclass(frozen=True)
class TwinProfiler:
    """The twin's ``Profiler``: the profiling jobs at the planned rate, then the surrogate retrained
    (what the profiling and surrogate-retraining DAGs do on a real cluster)."""

    settings: Settings
    job: str

    def profile(self, configs: list[Configuration], rate: float, now: float) -> None:
        from flinktune.runs.surrogate_training import train_surrogate
        from flinktune.runs.twin_profiling import profile_on_twin

        profile_on_twin(job=self.job, configs=[c.to_dict() for c in configs], rates=[rate], settings=self.settings)
        train_surrogate(job=self.job, settings=self.settings)


def decide(
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
    twin_run = TwinRun.open(settings, job) if cluster == "twin" else None
    if twin_run is not None and trigger:
        raise ValueError("trigger: a watch trigger is for a real cluster; on the twin the decide run watches between its ticks")
    if twin_run is None:
        if ticks != 1:
            raise ValueError(f"ticks={ticks}: on a real cluster each run makes one decision (the DAG runs every interval)")
        if models_file is not None:
            raise ValueError(
                "--models: models from a file run on the twin only (FLINKTUNE_CLUSTER=twin); a cluster uses the MLflow champions"
            )
        if policy in IN_PROCESS_MEMORY:
            raise ValueError(
                f"policy {policy}: it remembers earlier decisions only in the process, and on FLINKTUNE_CLUSTER={cluster} each "
                f"decide run is a new process that would forget them; use a policy without memory or with durable memory "
                f"({', '.join(p for p in POLICY_NAMES if p not in IN_PROCESS_MEMORY and p != 'oracle')})"
            )
    # After every refusal above: configuring the store records its home under the state folder.
    configure_store(settings)
    replay_models = None
    if models_file is not None:
        from flinktune.replay.models import ReplayModels  # the replay's models: only for a run from a file

        replay_models = ReplayModels.load(models_file)
    lake = Lake(settings.lake_dir)  # type: ignore[arg-type]  # filled by the settings' validator
    store = open_state_store(settings)
    if fleet_source is None:
        fleet_mode, fleet_source = fleet_setting(settings, job)
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
        options: dict[str, Any] = {}
        forecaster: ForecastProvider
        models: ModelProvider
        if twin_run is not None:
            twin_run.reload()  # under the lock: a run that held it before may have saved it since
            profiler = replay_models if replay_models is not None else TwinProfiler(settings, job)
            backend, space = twin_run.backend(lake, profiler), default_space()
            if policy == "flinktune":  # the twin's calibration is the change-cost prior, as in the replay
                options.update(twin_run.change_priors())
        else:
            backend, space = cluster_backend(job, settings, cluster, dry_run=dry_run)
            # The local realizer rescales the whole job (every vertex alike): per-vertex DS2 overrides would be
            # recorded but not run, and the next run would read the uniform parallelism back and decide again.
            if policy == "ds2" and cluster == "local-flink":
                options["per_vertex"] = False
        if replay_models is not None:
            assert twin_run is not None  # models from a file run on the twin only
            forecaster, models = twin_run.trace_forecast(replay_models, settings.forecast_horizon_s), replay_models
        else:
            forecaster, models = LakeForecast(lake, job, settings.forecast_horizon_s), ChampionModels(lake, job)
        # On Kubernetes a dry run still asks the realizer, which only computes the patch and its diff.
        # frozen_after_s: the metric quality gates (flinktune.metrics.quality) hold on frozen values.
        loop_settings = LoopSettings(
            job,
            settings.latency_target_ms,
            settings.recovery_limit_s,
            window_s=settings.decision_interval_s,
            frozen_after_s=FROZEN_AFTER_S,
            dry_run=dry_run and cluster != "kubernetes",
        )
        # The guard's history and the policy's memory come back from the state store (one run, one tick in production).
        loop = build_decision_loop(
            backend,
            loop_settings,
            policy=make_policy(policy, space, confidence=settings.confidence, **options),
            space=space,
            store=store,
            forecaster=forecaster,
            models=models,
        )
        if twin_run is not None:
            decisions = twin_run.ticks(
                loop,
                ticks,
                policy=policy,
                settings=settings,
                lake=lake,
                store=store,
                models=replay_models,
                models_file=models_file,
            )
        else:
            decisions = [_cluster_step(loop, trigger, dry_run)]
        return {"job": job, "policy": policy, "decisions": decisions, "end_ms": int(loop.clock.now() * 1000), **advice}


def _cluster_step(loop: DecisionLoop, trigger: str | None, dry_run: bool) -> dict[str, Any]:
    """The one decision of a run on a real cluster (a watch-triggered run reads the minutes that
    raised the alarm, as the twin's early decisions do)."""
    outcome = loop.step(trigger=trigger or None, window_s=WatchRule().window_s if trigger else None)
    diff = loop.realizer.last_diff if isinstance(loop.realizer, PatchPreview) else None
    if dry_run and diff:
        print(diff, flush=True)
    print(f"[decide] {outcome.line()}", flush=True)
    return summary_row(outcome, loop.clock.now(), diff=diff if dry_run else None)
