"""dag.test() of flinktune_decide mapped over a 3-job fleet on the twin, through real Airflow.

Two jobs have a simulated twin; the third has none, so its decision fails (``jobs.decide``: "no
twin for job"). The run must decide the other two, fail only that job's mapped instance, and a
trigger whose conf names one job must act on that job alone. Airflow runs in a child process (the
test process never imports it), with a prepared AIRFLOW_HOME and the fleet file in the env.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flinktune.airflow_local.airflow_home import prepare_airflow_home
from flinktune.decision.store import SqliteStateStore
from flinktune.settings import Settings

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.xdist_group("fleet-dags")]  # one worker builds fleet_run

# Runs in the child: two dag.test() runs of flinktune_decide, then every task instance's state by map index.
RUN = r"""
import json, sys
from airflow.configuration import conf
from airflow.dag_processing.dagbag import DagBag
from airflow.sdk.listener import get_listener_manager
from flinktune.airflow_local.in_process import _failure_recorder
recorder = _failure_recorder()
get_listener_manager().add_listener(recorder)
dag = DagBag(dag_folder=conf.get("core", "dags_folder")).dags["flinktune_decide"]
for task in dag.tasks:
    task.retries = 0
out = {}
for name, run_conf in (("fleet", {"dry_run": False}), ("one", {"job": "fleet-b", "dry_run": False})):
    run = dag.test(run_conf=run_conf)
    out[name] = {"state": str(getattr(run.state, "value", run.state)),
                 "tis": sorted([ti.task_id, ti.map_index, ti.rendered_map_index, str(getattr(ti.state, "value", ti.state))]
                               for ti in run.get_task_instances()),
                 "errors": dict(recorder.errors)}
print("RESULT:" + json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def fleet_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    from jobs import simulate

    var = tmp_path_factory.mktemp("fleet-var")
    settings = Settings(var_dir=var)
    for job in ("fleet-a", "fleet-b"):  # fleet-c gets no twin: its decision fails
        simulate.run(job=job, hours=0.25, settings=settings)
    fleet_file = var / "fleet.yaml"
    fleet_file.write_text(
        "defaults:\n  policy: reactive\njobs:\n  - name: fleet-a\n  - name: fleet-b\n    kind: ysb\n  - name: fleet-c\n"
    )
    env = {**os.environ, **prepare_airflow_home(var), "FLINKTUNE_VAR_DIR": str(var), "FLINKTUNE_FLEET_FILE": str(fleet_file),
           "MLFLOW_DISABLE_TELEMETRY": "true"}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=900, cwd=var)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT:")]
    assert lines, f"child failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("RESULT:")), var


def _states(run: dict, task_id: str) -> dict[str, str]:
    return {label: state for tid, _, label, state in run["tis"] if tid == task_id}


def test_one_failing_job_fails_only_its_own_mapped_decision(fleet_run: tuple[dict, Path]) -> None:
    result, var = fleet_run
    run = result["fleet"]
    assert list(_states(run, "fleet").values()) == ["success"], run
    assert _states(run, "decide") == {"fleet-a": "success", "fleet-b": "success", "fleet-c": "failed"}, run
    assert "no twin for job 'fleet-c'" in run["errors"]["decide"], run["errors"]
    # The jobs that decided still go on to profiling requests (none on the twin: it profiles inline).
    assert list(_states(run, "request_profile").values()) == ["success"], run
    # The run's state follows its leaves (trigger_profile); the failed job shows as its own red instance.
    assert run["state"] == "success", run
    decided = SqliteStateStore(var / "state" / "flinktune.db")
    for job in ("fleet-a", "fleet-b"):
        assert len(decided.decisions(job, limit=10)) >= 1, job
    assert decided.decisions("fleet-c", limit=10).empty


def test_a_trigger_naming_one_job_acts_on_that_job_alone(fleet_run: tuple[dict, Path]) -> None:
    result, _ = fleet_run
    run = result["one"]
    assert run["state"] == "success", run
    assert _states(run, "decide") == {"fleet-b": "success"}, run
