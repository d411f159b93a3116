"""The pieces the DAG files in ``dags/`` share: assets, typed params, the common ``@dag`` arguments and default task arguments.

Use it from DAG files only. It imports the Airflow task SDK (already loaded when Airflow parses a
DAG file) and nothing else, so the DAG files stay fast to parse. Params are JSON-schema checked by
Airflow when a run is triggered (UI, API or ``dag.test(run_conf=...)``), so a bad value fails
before any task starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from airflow.sdk import Asset, Param, task

if TYPE_CHECKING:
    from flinktune.settings import ScheduleSettings

from flinktune.job_name import JOB_NAME_PATTERN  # a Kubernetes name: part of model names and lake paths

__all__ = [
    "CHAMPIONS",
    "CONFIGURATION_SCHEMA",
    "DECIDE_CRON",
    "DECIDE_QUEUE",
    "FAILURES_PATTERN",
    "FEATURES_1M",
    "FEATURES_10S",
    "INGEST_EVERY",
    "JOB_NAME_PATTERN",
    "POLICIES",
    "RETRAIN_CRON",
    "START_DATE",
    "TAGS",
    "TRAINING",
    "WATCH_CRON",
    "DagBackends",
    "backends",
    "dag_arguments",
    "default_args",
    "dry_run_param",
    "fleet_targets",
    "job_param",
    "mark_outlets",
    "task_params",
]

FEATURES_1M = Asset("flinktune://lake/features_1m")
"""Updated when new curated one-minute features land in the lake (``flinktune_ingest``)."""

FEATURES_10S = Asset("flinktune://lake/features_10s")
"""Updated with :data:`FEATURES_1M`: the same ETL task writes the 10-second features too."""

CHAMPIONS = Asset("flinktune://models/champions")
"""Updated when a forecaster or surrogate champion is registered in MLflow (``flinktune_train``)."""


# Must equal flinktune.policies.POLICY_NAMES (a test checks it); not imported here because the
# policies pull in scipy, which would blow the DAG parse budget.
POLICIES: tuple[str, ...] = (
    "flinktune",
    "demeter",
    "static",
    "reactive",
    "ds2",
    "autoscaler",
    "sage",
    "barre",
    "oracle",
)

# Must match flinktune.config_space.KNOBS (a test checks it); a literal for the parse budget.
CONFIGURATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "parallelism": {"type": "integer", "minimum": 1},
        "task_slots": {"type": "integer", "minimum": 1},
        "cpu": {"type": "number", "exclusiveMinimum": 0},
        "memory_mb": {"type": "integer", "minimum": 1},
        "checkpoint_interval_s": {"type": "integer", "minimum": 1},
        "vertex_parallelism": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
    },
    "required": ["parallelism", "task_slots", "cpu", "memory_mb", "checkpoint_interval_s"],
    "additionalProperties": False,
}
"""JSON schema of one :class:`flinktune.config_space.Configuration` in a param (grid membership is checked in the task)."""

# The forms flinktune.twin.failures.parse_failures accepts.
FAILURES_PATTERN = r"^(none|every:[0-9]+(\.[0-9]+)?[smh]|random:[0-9]+(\.[0-9]+)?/[smh])$"


def _schedules() -> ScheduleSettings:
    # Typed and checked like every setting; a bad value fails the parse with the variable's name.
    from flinktune.settings import ScheduleSettings, read_group

    return read_group(ScheduleSettings)


_SCHEDULES = _schedules()

RETRAIN_CRON: str = _SCHEDULES.retrain_cron
"""When ``flinktune_train`` retrains: every 6 hours by default, its own cadence (ingest lands features every 5
minutes; retraining on each landing would retrain every 5 minutes). ``FLINKTUNE_SCHEDULE_RETRAIN_CRON``."""

INGEST_EVERY = timedelta(seconds=_SCHEDULES.ingest_every_s)
"""Between ``flinktune_ingest`` runs: 5 minutes by default (``FLINKTUNE_SCHEDULE_INGEST_EVERY_S``)."""

DECIDE_CRON: str = _SCHEDULES.decide_cron
"""When ``flinktune_decide`` runs on its own: every 5 minutes by default (``FLINKTUNE_SCHEDULE_DECIDE_CRON``)."""

WATCH_CRON: str | None = None if _SCHEDULES.watch_cron == "off" else _SCHEDULES.watch_cron
"""When ``flinktune_watch`` looks at the fleet between decisions: every minute by default
(``FLINKTUNE_SCHEDULE_WATCH_CRON``; ``off``: None, no schedule)."""

DECIDE_QUEUE: str = _SCHEDULES.decide_queue
"""The Celery queue of ``flinktune_decide``'s tasks (``FLINKTUNE_SCHEDULE_DECIDE_QUEUE``); empty: Airflow's default."""

TRAINING: dict[str, Any] = {"execution_timeout": timedelta(minutes=45), "retries": 2, "retry_delay": timedelta(minutes=2)}
"""Task arguments of every training task: a timeout and retries with back-off."""

START_DATE = datetime(2025, 1, 1, tzinfo=UTC)
TAGS = ["flinktune"]


class DagBackends(NamedTuple):
    """The two back-end switches that change a DAG's shape (see :func:`backends`)."""

    training: str
    spark_submit: str


# Must equal the values flinktune.settings.BackendSettings accepts (a test checks it); literals, as
# importing the settings (pydantic-settings) at parse time would cost most of the parse budget.
_DAG_BACKENDS = {
    "FLINKTUNE_TRAINING": ("in_process", "kubernetes"),
    "FLINKTUNE_SPARK_SUBMIT": ("", "client", "cluster", "kubernetes"),
}


def backends(environ: Mapping[str, str] | None = None) -> DagBackends:
    """``FLINKTUNE_TRAINING`` and ``FLINKTUNE_SPARK_SUBMIT``, read when a DAG file is parsed.

    Their ``kubernetes`` values make the training and ETL tasks provider operators
    (:mod:`flinktune.orchestration.dag_tasks.k8s_operators`), so they must be the same for the
    dag-processor and the workers. A bad value is an import error of the DAG file naming the variable,
    as :func:`flinktune.backends.choice.load_backends` words it.
    """
    env = os.environ if environ is None else environ
    values = []
    for name, allowed in _DAG_BACKENDS.items():
        value = env.get(name, "").strip().lower() or allowed[0]
        if value not in allowed:
            raise ValueError(f"{name}={env[name]!r}: must be {' or '.join(repr(a) for a in allowed)}")
        values.append(value)
    return DagBackends(*values)


def job_param(default: str = "demo") -> Param:
    """The ``job`` param every DAG takes: the Flink job's name, checked against :data:`JOB_NAME_PATTERN`."""
    return Param(
        default,
        type="string",
        pattern=JOB_NAME_PATTERN,
        title="Flink job",
        description="Name of the Flink job to act on: lowercase letters, digits and '-', at most 63 characters.",
    )


def fleet_targets() -> Any:
    """The ``fleet`` task of a DAG that acts per fleet job (ingest, train, decide): call it inside the DAG;
    its output, the run's targets (:func:`flinktune.fleet.targets.targets_for_this_run`), is what the
    per-job tasks are mapped over."""

    @task(task_id="fleet", execution_timeout=timedelta(minutes=5))
    def fleet(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        # first: a bad trigger fails before anything acts (Airflow injects ``params``; None only outside a run)
        params = task_params(params if params is not None else {})
        from flinktune.fleet.targets import targets_for_this_run

        return targets_for_this_run(params)

    return fleet()


def default_args(*, retries: int = 2, retry_delay: timedelta = timedelta(minutes=1), queue: str = "") -> dict[str, Any]:
    """Task defaults: retries with exponential back-off, owner ``flinktune``; ``queue`` (a Celery queue) when given."""
    return {
        "owner": "flinktune",
        "retries": retries,
        "retry_delay": retry_delay,
        "retry_exponential_backoff": 2.0,  # multiplier: 1, 2, 4 x retry_delay
        "max_retry_delay": timedelta(minutes=15),
        **({"queue": queue} if queue else {}),
    }


def dag_arguments(
    *tags: str,
    doc: str,
    params: Mapping[str, Param] | None = None,
    retries: int = 2,
    retry_delay: timedelta = timedelta(minutes=1),
    queue: str = "",
) -> dict[str, Any]:
    """The ``@dag`` arguments every flinktune DAG shares, besides its id and schedule: the start date, no
    catch-up, one run at a time, the ``flinktune`` tag and ``tags``, ``doc`` as its doc, the task
    defaults (:func:`default_args` with ``retries``, ``retry_delay``, ``queue``) and its ``params``
    after the ``job`` param every DAG takes (:func:`job_param`)."""
    return {
        "start_date": START_DATE,
        "catchup": False,
        "max_active_runs": 1,
        "tags": [*TAGS, *tags],
        "doc_md": doc,
        "default_args": default_args(retries=retries, retry_delay=retry_delay, queue=queue),
        "params": {"job": job_param(), **(params or {})},
    }


def dry_run_param() -> Param:
    """The ``dry_run`` param: empty (the default) is dry for a run started by hand, acting for the schedule."""
    return Param(
        None,
        type=["null", "boolean"],
        title="Dry run",
        description="Decide and store, never apply. Empty: true for a manual trigger, false for the schedule.",
    )


def task_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Call first in a task body: the run's params, checked (:func:`flinktune.orchestration.dag_tasks.triggers.run_params`).

    Unknown conf keys fail here, an asset-triggered run gets its job from the triggering events,
    and an empty ``dry_run`` is resolved from the run type. ``params`` is what Airflow injects (a task
    body's ``params=None`` default; None reads as no params).
    """
    from airflow.sdk import get_current_context

    from flinktune.orchestration.dag_tasks.triggers import run_params

    context = get_current_context()
    dag = context["dag"]
    return run_params(params or {}, dag_id=dag.dag_id, known=dag.params.keys(), dag_run=context["dag_run"])


def mark_outlets(job: str, *assets: Asset) -> None:
    """Write the job into the asset events this task emits, so that the runs they trigger act on it."""
    from airflow.sdk import get_current_context

    from flinktune.orchestration.dag_tasks.triggers import asset_extra

    events = get_current_context()["outlet_events"]
    for asset in assets:
        events[asset].extra.update(asset_extra(job))
