"""The decision task: load the champion models and run the decision loop for one job.

On the embedded default (``FLINKTUNE_CLUSTER=twin``) the cluster is the twin: each tick lets the
persisted twin run one decision interval on its trace (its metrics land in the raw lake), then
makes one decision with :class:`flinktune.loop.DecisionLoop` and applies it to the twin. A profile
decision runs the profiling jobs on the twin at the planned rate and retrains the surrogate before
the next tick, as the profiling and surrogate-retraining DAGs do in production.

With ``FLINKTUNE_CLUSTER=kubernetes`` the same loop makes one decision per run on the wall clock,
reading the raw lake the extractor keeps fresh and patching the FlinkDeployment (a dry run
computes the patch and prints it as a diff, changing nothing); profile decisions are carried out
by the ``flinktune_profile`` DAG that the decide DAG triggers.

``python -m jobs.decide --job demo --ticks 6 --policy flinktune`` prints a JSON summary.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
import pandas as pd

from flinktune.entry import OneLineParser, run_main
from flinktune.job_name import job_name
from flinktune.clock import ManualClock, SystemClock
from flinktune.config_space import Configuration, default_space
from flinktune.decision import JobState
from flinktune.evaluation import rate_series
from flinktune.guard import SafetyGuard
from flinktune.lake import PROFILING_OBSERVATIONS, Lake, LakeMetricsSource
from flinktune.loop import DecisionLoop
from flinktune.policies import POLICY_NAMES, make_policy
from flinktune.settings import Settings, load_settings
from flinktune.stages import PolicyContext
from flinktune.store import SqliteStateStore
from flinktune.twin.job_store import job_dir
from flinktune.twin.simulator import TwinJob

__all__ = ["run", "main", "FORECAST_HISTORY_S"]

log = logging.getLogger(__name__)

#: How much input-rate history the forecaster sees at predict time.
FORECAST_HISTORY_S = 6 * 3600
#: Hold when the live metrics have not moved for this long (a metrics pipeline that stopped refreshing).
FROZEN_AFTER_S = 300.0


def _load_champion(name: str) -> Any | None:
    from models.registry import load_champion

    try:
        return load_champion(name)
    except Exception as exc:  # a missing champion is a hold, not a crash: the guard says why
        log.warning("no champion %s: %s", name, exc)
        return None


def _profiled_max_rate(settings: Settings, job: str) -> float:
    frames = Lake(settings.lake_dir).read_dataset(PROFILING_OBSERVATIONS, job, columns=["input_rate"])
    if not frames:
        return 0.0
    rates = np.concatenate([f["input_rate"].to_numpy(dtype=float) for f in frames])
    return float(np.nanmax(rates)) if rates.size else 0.0


def run(*, job: str, ticks: int = 1, policy: str = "flinktune", dry_run: bool = False, settings: Settings | None = None) -> dict:
    if policy not in POLICY_NAMES:
        raise ValueError(f"unknown policy {policy!r}; known policies: {', '.join(POLICY_NAMES)}")
    if ticks < 1:
        raise ValueError(f"ticks must be >= 1, got {ticks}")
    job = job_name(job)  # before it reaches any path, model name or API call
    settings = settings or load_settings()
    from models.registry import configure

    configure(settings.mlflow_tracking_uri, settings.mlflow_artifact_root)
    from flinktune.orchestration.backends import load_backends
    from flinktune.orchestration.cluster import make_realizer

    on_twin = load_backends().cluster == "twin"
    twin_dir = job_dir(settings.twin_dir, job)
    twin_path, trace_path = twin_dir / "twin.json", twin_dir / "trace.parquet"
    twin, trace = None, None
    if on_twin:
        if not twin_path.exists() or not trace_path.exists():
            raise FileNotFoundError(f"no twin for job {job!r} under {twin_dir}; run jobs.simulate first")
        twin = TwinJob.load(twin_path)
        trace = pd.read_parquet(trace_path)["rate"]
    elif ticks != 1:
        raise ValueError(f"ticks={ticks}: on a real cluster each run makes one decision (the DAG runs every interval)")
    space = default_space()
    lake = Lake(settings.lake_dir)
    store = SqliteStateStore(settings.state_db)
    clock = ManualClock(twin.now) if twin is not None else SystemClock()
    guard = SafetyGuard(space, settings.latency_target_ms).restore(store.decisions(job))
    models: dict[str, Any] = {
        "forecaster": _load_champion(f"flinktune-forecaster-{job}"),
        "surrogate": _load_champion(f"flinktune-surrogate-{job}"),
        "profiled_max_rate": _profiled_max_rate(settings, job),
    }

    def context(state: JobState) -> PolicyContext:
        forecast = None
        if models["forecaster"] is not None:
            now_ms = int(clock.now() * 1000)
            hist = lake.read_raw(job, now_ms - FORECAST_HISTORY_S * 1000, now_ms + 1, metrics=["workloadRate"])
            forecast = models["forecaster"].predict(rate_series(hist, job), settings.forecast_horizon_s)
        models["last_forecast"] = forecast
        return PolicyContext(
            latency_target_ms=settings.latency_target_ms,
            recovery_limit_s=settings.recovery_limit_s,
            forecast=forecast,
            surrogate=models["surrogate"],
            extras={"profiled_max_rate": models["profiled_max_rate"]},
        )

    def profile_on_twin(configs: list[Configuration], rate: float) -> None:
        from jobs import profile as profile_job
        from jobs import train_surrogate

        profile_job.run(job=job, configs=[c.to_dict() for c in configs], rates=[rate], settings=settings)
        train_surrogate.run(job=job, settings=settings)
        models["surrogate"] = _load_champion(f"flinktune-surrogate-{job}")
        models["profiled_max_rate"] = _profiled_max_rate(settings, job)

    loop = DecisionLoop(
        job=job,
        source=LakeMetricsSource(lake),
        realizer=make_realizer(job, twin=twin, dry_run=dry_run),
        policy=make_policy(policy, space, confidence=settings.confidence),
        guard=guard,
        store=store,
        clock=clock,
        context=context,
        profiler=profile_on_twin if on_twin else None,
        window_s=settings.decision_interval_s,
        frozen_after_s=FROZEN_AFTER_S,  # the metric quality gates (flinktune.metric_quality) hold on frozen values
        # On Kubernetes a dry run still asks the realizer, which only computes the patch and its diff.
        dry_run=dry_run and on_twin,
    )
    interval = settings.decision_interval_s
    summaries = []
    for i in range(ticks):
        if twin is None:
            outcome = loop.step()
            diff = getattr(loop.realizer, "last_diff", None)
            if dry_run and diff:
                print(diff, flush=True)
            summaries.append({"ts": clock.now(), "action": outcome.decision.action.value, "reason": outcome.decision.reason,
                              "changed": bool(outcome.result and outcome.result.changed), "diff": diff if dry_run else None})
            print(f"[decide] {outcome.line()}", flush=True)
            continue
        start = pd.Timestamp(twin.now, unit="s", tz="UTC")
        rates = trace[(trace.index >= start) & (trace.index < start + pd.Timedelta(seconds=interval))]
        if len(rates) < interval:
            raise ValueError(
                f"the twin's trace for job {job!r} ends at {trace.index[-1]}: not enough left for tick {i + 1} of {ticks} "
                f"({len(rates)} of {interval} s); simulate a longer trace"
            )
        lake.write_raw(twin.run(rates.to_numpy()))
        clock.set(twin.now)
        outcome = loop.step()
        fc = models.pop("last_forecast", None)
        if fc is not None and outcome.decision.inputs.get("planned_rate") is not None:
            store.record_forecast(job, clock.now(), fc.model, float(outcome.decision.inputs["planned_rate"]), fc.to_frame())
        summaries.append({"ts": clock.now(), "action": outcome.decision.action.value, "reason": outcome.decision.reason,
                          "changed": bool(outcome.result and outcome.result.changed)})
        print(f"[decide {i + 1}/{ticks}] {outcome.line()}", flush=True)
    if twin is not None:
        twin.save(twin_path)
    return {"job": job, "policy": policy, "decisions": summaries, "end_ms": int(clock.now() * 1000)}


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.decide``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.decide", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.decide", description=__doc__)
    p.add_argument("--job", required=True)
    p.add_argument("--ticks", type=int, default=1)
    p.add_argument("--policy", choices=POLICY_NAMES, default="flinktune")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    print(json.dumps(run(job=a.job, ticks=a.ticks, policy=a.policy, dry_run=a.dry_run)))


if __name__ == "__main__":
    raise SystemExit(main())
