"""Which jobs one DAG run acts on: every managed job of the fleet, or the one job the run names.

Use :func:`run_targets` (pure) or, inside an Airflow task, :func:`targets_for_this_run` as the
first task of a DAG that maps over the fleet (``decide.expand(target=...)``). Rules:

- a run that names its job (a trigger whose conf sets ``job``, or an asset-triggered run, whose
  job comes from its events) acts on that job alone;
- any other run (the schedule, a manual trigger without ``job``) acts on every managed job of the
  fleet: ``FLINKTUNE_FLEET_FILE`` (a ``fleet.yaml``), or on Kubernetes with
  ``FLINKTUNE_FLEET_DISCOVER=true`` the labelled FlinkDeployments; held jobs are logged with their
  reason and left out;
- with no fleet configured the fleet is the one job of the run's params (default ``demo``), so a
  single-job install behaves as before.

Each target is a JSON-ready dict ``{"job", "policy", "dry_run", "mode", "mode_source", "goals"}``:
the policy is the run conf's when it sets one, else the job's fleet setting, else the run's param;
``dry_run`` is the run's (already resolved from its type: a manual trigger is dry); ``mode`` is the
job's fleet setting (None: not set, so the job advises unless switched with ``flinktune fleet act``)
and ``mode_source`` where it was read; the decision acts only when the run is not dry and the job's
mode is act (:mod:`flinktune.decision.modes`); ``goals`` are the
job's ``latency_target_ms`` and ``recovery_limit_s`` from the fleet (empty without one), to lay
over the settings its decision runs with.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flinktune.fleet.registry import Fleet, JobSettings, discover_flinkdeployments, load_fleet_file

__all__ = ["FleetTargetError", "configured_fleet", "run_targets", "targets_for_this_run"]

log = logging.getLogger(__name__)


class FleetTargetError(ValueError):
    """The run names a job the fleet holds (its reason in the message) or no job at all."""


def configured_fleet(settings: Any, *, api: Any = None) -> Fleet | None:
    """The fleet ``settings`` name (file, else Kubernetes discovery), or None when none is configured.

    ``api``: a ``CustomObjectsApi`` for discovery (default: the configured cluster's).
    """
    if settings.fleet_file is not None:
        return load_fleet_file(settings.fleet_file)
    if settings.fleet_discover:
        if api is None:
            from flinktune.backends.cluster import kubernetes_api

            api = kubernetes_api()
        return discover_flinkdeployments(api)
    return None


def _target(
    job: str, own: JobSettings | None, params: Mapping[str, Any], conf: Mapping[str, Any], source: str | None = None
) -> dict[str, Any]:
    policy = params.get("policy") if "policy" in conf or own is None else own.policy
    # The job's own goals replace the install's defaults (FLINKTUNE_LATENCY_TARGET_MS, ...) for its decision.
    goals = {} if own is None else {"latency_target_ms": own.latency_target_ms, "recovery_limit_s": own.recovery_limit_s}
    mode = None if own is None else own.mode
    return {
        "job": job,
        "policy": policy,
        "dry_run": bool(params.get("dry_run")),
        "mode": mode,
        "mode_source": source or "no fleet entry",
        "goals": goals,
    }


def run_targets(
    params: Mapping[str, Any], *, conf: Mapping[str, Any] | None, run_type: str, fleet: Fleet | None
) -> list[dict[str, Any]]:
    """The targets of one run (module doc); ``params`` as :func:`~flinktune.orchestration.dag_tasks.triggers.run_params` returns them.

    Raises :class:`FleetTargetError` when the named job is held in the fleet, or when the fleet
    has no managed job (nothing would run, which should not pass silently).
    """
    conf = conf or {}
    named = run_type == "asset_triggered" or "job" in conf
    if fleet is None:
        return [_target(str(params["job"]), None, params, conf)]
    if named:
        job = str(params["job"])
        try:
            entry = fleet.get(job)
        except KeyError:
            log.info("job %s is not in the fleet: acting on it with the run's settings", job)
            return [_target(job, None, params, conf)]
        if entry.settings is None:
            raise FleetTargetError(f"job {job!r} is held in the fleet: {entry.held}")
        return [_target(job, entry.settings, params, conf, entry.source)]
    for entry in fleet.held():
        log.warning("fleet: job %s held, not acted on: %s", entry.name, entry.held)
    if not fleet.managed():
        reasons = "; ".join(f"{e.name}: {e.held}" for e in fleet.held()) or "the fleet lists no job"
        raise FleetTargetError(f"no managed job to act on ({reasons})")
    return [_target(e.name, e.settings, params, conf, e.source) for e in fleet.entries if e.settings is not None]


def targets_for_this_run(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`run_targets` for the running Airflow task (its run's conf and type, the loaded settings)."""
    from airflow.sdk import get_current_context

    from flinktune.settings import load_settings

    run = get_current_context()["dag_run"]
    run_type = getattr(run.run_type, "value", run.run_type)
    return run_targets(params, conf=run.conf, run_type=str(run_type), fleet=configured_fleet(load_settings()))
