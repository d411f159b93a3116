"""What a decide run needs on a real cluster (Kubernetes or a local Flink): its backend and space,
the job's fleet setting, which policies it refuses there, and how a decision reads in a run's
summary. Use :func:`cluster_backend` for ``FLINKTUNE_CLUSTER=kubernetes`` or ``local-flink``;
:data:`IN_PROCESS_MEMORY` names the policies one decide run per decision would make forget;
:func:`summary_row` is a decision as every decide run's JSON summary lists it (the twin's too).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from flinktune.backends import Backend
from flinktune.backends.kubernetes import kubernetes_backend
from flinktune.config_space import ConfigSpace, default_space
from flinktune.decision.loop import StepOutcome
from flinktune.lake import Lake
from flinktune.settings import Settings

__all__ = ["FROZEN_AFTER_S", "IN_PROCESS_MEMORY", "cluster_backend", "fleet_setting", "summary_row"]

#: Hold when the live metrics have not moved for this long (a metrics pipeline that stopped refreshing);
#: at most 3/4 of the evaluated window (flinktune.metrics.quality.frozen_limit_s), so it can fire.
FROZEN_AFTER_S = 300.0

#: Policies that remember what they saw (reactive: its recent recommendations; autoscaler: its metric
#: window and a pending scale-down; sage: its last scale-down per resource; demeter: its 10-minute and
#: profiling clocks) in the policy object only, not as ``PolicyMemory`` in the state store. The twin
#: and the replay keep one object for a whole run; a real cluster's decide run per decision would not.
IN_PROCESS_MEMORY: frozenset[str] = frozenset({"reactive", "autoscaler", "sage", "demeter"})


def fleet_setting(settings: Settings, job: str) -> tuple[str | None, str | None]:
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

    source = fresh_metrics_source(settings, Lake(settings.lake_dir))  # type: ignore[arg-type]  # filled by the settings' validator
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
    backend = kubernetes_backend(
        job,
        source,
        dry_run=dry_run,
        timeouts=settings.timeouts,
        budget_s=settings.timeouts.apply_budget(settings.decision_interval_s),
    )
    return backend, default_space()


def summary_row(outcome: StepOutcome, now: float, **extra: Any) -> dict[str, Any]:
    """A decision as the run's JSON summary lists it (``data_age_s``: seconds from the newest sample it used)."""
    age = float(outcome.state.data_age_s)
    return {
        "ts": now,
        "action": outcome.decision.action.value,
        "reason": outcome.decision.reason,
        "changed": bool(outcome.result and outcome.result.changed),
        **extra,
        "data_age_s": None if np.isnan(age) else age,
    }
