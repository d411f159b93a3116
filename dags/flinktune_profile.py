"""flinktune_profile: profile suggested configurations (one mapped task each), then retrain the surrogate.

Wiring only: the work lives in ``flinktune.orchestration.dag_tasks.tasks``, imported inside the tasks.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, task

from flinktune.orchestration.dag_tasks.dag_wiring import (
    CHAMPIONS,
    CONFIGURATION_SCHEMA,
    TRAINING,
    backends,
    dag_arguments,
    mark_outlets,
    task_params,
)

DOC = """
### flinktune_profile
Triggered by `flinktune_decide` when a decision says *profile* (production cluster), or by hand.

1. **suggest**: the `configs` to profile, checked against the configuration space, or a
   space-filling design of `max_runs` when empty; more than `max_runs` fails before any run.
2. **profile** (dynamic task mapping, one task per configuration): a short-lived profiling
   deployment of `duration_s` seconds per rate (on the twin: one twin profiling run) ->
   validated `profiling_observations`.
3. **train_surrogate**: retrains the surrogate on all observations; updates the asset
   `flinktune://models/champions`, which triggers `flinktune_decide`.
"""


@dag(
    dag_id="flinktune_profile",
    schedule=None,
    **dag_arguments(
        "profile",
        "mlflow",
        doc=DOC,
        params={
            "configs": Param(
                [],
                type="array",
                items=CONFIGURATION_SCHEMA,
                maxItems=32,
                title="Configurations",
                description="Configurations to profile; empty: a space-filling design of max_runs.",
            ),
            "rates": Param(
                [],
                type="array",
                items={"type": "number", "exclusiveMinimum": 0},
                maxItems=8,
                title="Input rates (rec/s)",
                description="Rates to profile at; empty: from the job's history.",
            ),
            "duration_s": Param(300, type="integer", minimum=30, maximum=1800, title="Seconds per profiling run"),
            "max_runs": Param(6, type="integer", minimum=1, maximum=32, title="Budget: profiling deployments"),
            "seed": Param(0, type="integer", minimum=0, title="Seed"),
        },
    ),
)
def flinktune_profile() -> None:
    @task(execution_timeout=timedelta(minutes=5))
    def suggest(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import suggest_profile_configs

        return suggest_profile_configs(params["job"], params["configs"], max_runs=params["max_runs"], seed=params["seed"])

    # At most two profiling deployments at once: each holds cluster resources while it runs.
    @task(execution_timeout=timedelta(minutes=30), max_active_tis_per_dag=2)
    def profile(config: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import profile_config

        return profile_config(params["job"], config, rates=params["rates"], duration_s=params["duration_s"], seed=params["seed"])

    @task(outlets=[CHAMPIONS], **TRAINING)
    def train_surrogate(params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import train

        summary = train("surrogate", params["job"])
        mark_outlets(params["job"], CHAMPIONS)
        return summary

    if backends().training == "kubernetes":  # a trainer pod on a GPU node
        from flinktune.orchestration.dag_tasks.k8s_operators import trainer_pod_task

        surrogate = trainer_pod_task("surrogate", **TRAINING)
    else:
        surrogate = train_surrogate()
    profile.expand(config=suggest()) >> surrogate


flinktune_profile()
