"""flinktune_replay: what-if replay of a rate trace under several policies, with failures.

Wiring only: the work lives in ``flinktune.replay`` (via ``flinktune.orchestration.dag_tasks.tasks``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, task

from flinktune.orchestration.dag_tasks.dag_wiring import FAILURES_PATTERN, dag_arguments, task_params

DOC = """
### flinktune_replay
On demand: replays an input-rate `trace` (a built-in workload such as `ysb`, or a CSV path on the
workers) for `hours` under each of `policies` on the twin, injecting `failures`, and writes a
comparison table (Markdown, JSON) and plots under `<reports dir>/replay/<run id>/`.
Nothing touches a real cluster.
"""


@dag(
    dag_id="flinktune_replay",
    schedule=None,
    # its job param is a label only: the replay runs on the twin
    **dag_arguments(
        "replay",
        doc=DOC,
        retries=1,
        params={
            "trace": Param(
                "ysb",
                type="string",
                pattern=r"^([a-z0-9_-]+|/[^\0]+\.csv)$",
                title="Trace",
                description="Built-in workload name (ysb, tsw) or an absolute path to a CSV rate trace.",
            ),
            "policies": Param(
                "all",
                type="string",
                pattern=r"^(all|[a-z0-9_]+(,[a-z0-9_]+)*)$",
                title="Policies",
                description="'all' or a comma-separated list, e.g. flinktune,ds2,static.",
            ),
            "hours": Param(6.0, type="number", exclusiveMinimum=0, maximum=168, title="Hours to replay"),
            "failures": Param(
                "every:45m",
                type="string",
                pattern=FAILURES_PATTERN,
                title="Failures",
                description="none, every:<n>[s|m|h] or random:<n>/[s|m|h].",
            ),
            "seed": Param(7, type="integer", minimum=0, title="Seed"),
        },
    ),
)
def flinktune_replay() -> None:
    @task(execution_timeout=timedelta(minutes=60))
    def replay(params: dict[str, Any] | None = None, run_id: str | None = None) -> dict[str, Any]:
        params = task_params(params)  # first: a bad trigger fails before anything acts
        from flinktune.orchestration.dag_tasks.tasks import replay as replay_task

        return replay_task(
            trace=params["trace"],
            policies=params["policies"],
            hours=params["hours"],
            failures=params["failures"],
            seed=params["seed"],
            run_id=run_id or "manual",
        )

    replay()


flinktune_replay()
