"""The real DAG files in dags/: they load, are wired as designed, parse fast and validate params.

Airflow configures logging and reads its config when imported, so everything Airflow-side runs in
a child process with a prepared AIRFLOW_HOME; the test process never imports Airflow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flinktune.airflow_local.airflow_home import DEFAULT_DAGS_FOLDER, airflow_env, prepare_airflow_home
from flinktune.airflow_local.runner import DagParamsError, run_dag
from flinktune.job_name import JOB_NAME_PATTERN

pytestmark = pytest.mark.airflow

DAG_IDS = {
    "flinktune_ingest",
    "flinktune_train",
    "flinktune_decide",
    "flinktune_report",
    "flinktune_profile",
    "flinktune_replay",
    "flinktune_watch",
}
HEAVY_MODULES = ["jobs", "pyspark", "torch", "mlflow", "darts", "botorch", "great_expectations", "pandas", "scipy"]

# Runs in the child: loads dags/ with Airflow's DagBag, dumps what the tests check as JSON, and
# resolves each probe (dag_id, param, value) against the DAG's Param.
INSPECT = r"""
import json, sys, time
from airflow.dag_processing.dagbag import DagBag
folder, probes = sys.argv[1], json.loads(sys.argv[2])
provider_import_s = None
if len(sys.argv) > 4:  # the provider's operators: timed apart, so that each file's own parse time is measured
    start = time.perf_counter()
    import airflow.providers.cncf.kubernetes.operators.pod, airflow.providers.cncf.kubernetes.operators.spark_kubernetes
    provider_import_s = time.perf_counter() - start
cpu_s = {}
class CpuTimedBag(DagBag):  # CPU seconds per file: the parse's own cost, whatever else the machine runs
    def process_file(self, filepath, *args, **kwargs):
        start = time.process_time()
        try:
            return super().process_file(filepath, *args, **kwargs)
        finally:
            cpu_s[filepath.rsplit("/", 1)[-1]] = time.process_time() - start
bag = CpuTimedBag(dag_folder=folder)
out = {"import_errors": bag.import_errors, "parse_s": {}, "parse_cpu_s": cpu_s, "dags": {}, "probes": [],
       "provider_import_s": provider_import_s,
       "heavy_loaded": [m for m in json.loads(sys.argv[3]) if m in sys.modules]}
for stat in bag.dagbag_stats:
    out["parse_s"][stat.file] = stat.duration.total_seconds()
for dag in bag.dags.values():
    out["dags"][dag.dag_id] = {
        "file": dag.fileloc, "tags": sorted(dag.tags), "doc_md": dag.doc_md or "", "schedule": repr(dag.timetable),
        "catchup": dag.catchup, "max_active_runs": dag.max_active_runs,
        "params": {k: p.schema for k, p in dag.params.items()}, "defaults": dag.params.validate(),
        "tasks": {t.task_id: {
            "retries": t.retries, "retry_delay_s": t.retry_delay.total_seconds(),
            "timeout_s": t.execution_timeout.total_seconds() if t.execution_timeout else None,
            "outlets": [a.uri for a in t.outlets], "upstream": sorted(t.upstream_task_ids),
            "type": type(t).__name__, "task_type": t.task_type,
            "trigger_dag_id": getattr(t, "trigger_dag_id", None) or (getattr(t, "partial_kwargs", None) or {}).get("trigger_dag_id"),
            "max_active_tis_per_dag": t.max_active_tis_per_dag, "trigger_rule": getattr(t.trigger_rule, "value", str(t.trigger_rule)),
            "pool": t.pool, "queue": t.queue,
        } for t in dag.tasks},
    }
out["serialize_errors"] = {}
if provider_import_s is not None:  # what the dag-processor stores and the scheduler reads back
    from airflow.serialization.serialized_objects import DagSerialization
    for dag in bag.dags.values():
        try:
            back = DagSerialization.from_dict(DagSerialization.to_dict(dag))
            out["dags"][dag.dag_id]["serialized_types"] = {t.task_id: t.task_type for t in back.tasks}
        except Exception as exc:
            out["serialize_errors"][dag.dag_id] = f"{type(exc).__name__}: {exc}"
for dag_id, name, value in probes:
    try:
        bag.dags[dag_id].params.get_param(name).resolve(value)
        out["probes"].append(None)
    except Exception as exc:
        out["probes"].append(f"{type(exc).__name__}: {exc}")
print("INSPECT:" + json.dumps(out, default=str))
"""

BAD_VALUES = [
    ("flinktune_ingest", "job", "Bad Name!"),
    ("flinktune_ingest", "job", "-starts-with-dash"),
    ("flinktune_train", "job", "UPPER"),
    ("flinktune_report", "job", "x" * 64),
    ("flinktune_ingest", "hours", 0),
    ("flinktune_ingest", "hours", 49),
    ("flinktune_ingest", "seed", -1),
    ("flinktune_ingest", "metrics_source", "flink"),
    ("flinktune_decide", "ticks", 0),
    ("flinktune_decide", "ticks", 501),
    ("flinktune_decide", "ticks", 2.5),
    ("flinktune_decide", "ticks", "3"),
    ("flinktune_decide", "policy", "yolo"),
    ("flinktune_decide", "dry_run", "yes"),
    ("flinktune_profile", "configs", [{"parallelism": 8}]),
    (
        "flinktune_profile",
        "configs",
        [{"parallelism": 8, "task_slots": 1, "cpu": 1.0, "memory_mb": 1024, "checkpoint_interval_s": 10, "slots": 2}],
    ),
    ("flinktune_profile", "duration_s", 5),
    ("flinktune_profile", "max_runs", 0),
    ("flinktune_profile", "rates", [-1.0]),
    ("flinktune_replay", "failures", "sometimes"),
    ("flinktune_replay", "failures", "every:"),
    ("flinktune_replay", "policies", "ds2;rm -rf"),
    ("flinktune_replay", "trace", "../etc/passwd"),
    ("flinktune_replay", "hours", 0),
]
GOOD_VALUES = [
    ("flinktune_ingest", "job", "wordcount-2"),
    ("flinktune_report", "job", "a" * 63),
    ("flinktune_ingest", "hours", 6.0),
    ("flinktune_decide", "ticks", 500),
    ("flinktune_decide", "policy", "static"),
    ("flinktune_decide", "dry_run", True),
    (
        "flinktune_profile",
        "configs",
        [{"parallelism": 8, "task_slots": 1, "cpu": 1.0, "memory_mb": 1024, "checkpoint_interval_s": 10}],
    ),
    ("flinktune_profile", "rates", [50000.0]),
    ("flinktune_replay", "failures", "random:2/h"),
    ("flinktune_replay", "failures", "every:1.5h"),
    ("flinktune_replay", "policies", "flinktune,ds2,static"),
    ("flinktune_replay", "trace", "/data/traces/ysb-day.csv"),
]


@pytest.fixture(scope="module")
def real_home_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return prepare_airflow_home(tmp_path_factory.mktemp("real-var"))


#: The back ends that make the training and ETL tasks the cncf.kubernetes provider's operators.
ON_KUBERNETES = {"FLINKTUNE_TRAINING": "kubernetes", "FLINKTUNE_SPARK_SUBMIT": "kubernetes"}


def _inspect(var_dir: Path, **backends: str) -> dict:
    env = {**os.environ, **airflow_env(var_dir), **backends}
    probes = json.dumps(BAD_VALUES + GOOD_VALUES)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            INSPECT,
            str(DEFAULT_DAGS_FOLDER),
            probes,
            json.dumps(HEAVY_MODULES),
            *(["provider"] if backends else []),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("INSPECT:")]
    assert proc.returncode == 0 and lines, f"inspector failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("INSPECT:"))


@pytest.fixture(scope="module")
def inspected(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _inspect(tmp_path_factory.mktemp("inspect-var"))


#: A production deployment that gives the decisions a Celery queue (and a worker) of their own.
DECIDE_QUEUE = {"FLINKTUNE_SCHEDULE_DECIDE_QUEUE": "flinktune-decide"}


@pytest.fixture(scope="module")
def inspected_on_kubernetes(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _inspect(tmp_path_factory.mktemp("inspect-k8s-var"), **ON_KUBERNETES, **DECIDE_QUEUE)


def test_dagbag_loads_every_dag_without_import_errors(inspected: dict) -> None:
    assert inspected["import_errors"] == {}
    assert set(inspected["dags"]) == DAG_IDS
    for dag_id, dag in inspected["dags"].items():
        assert Path(dag["file"]).name == f"{dag_id}.py", "one DAG per file, named after it"


def test_each_file_parses_in_under_a_second_without_heavy_imports(inspected: dict) -> None:
    assert set(inspected["parse_s"]) == set(inspected["parse_cpu_s"]) == {f"{dag_id}.py" for dag_id in DAG_IDS}
    # CPU seconds, not wall-clock: the suite runs beside other tests on 2 cores (the wall time is in the message).
    slow = {f: s for f, s in inspected["parse_cpu_s"].items() if s >= 1.0}
    assert not slow, f"DAG files must parse in < 1 CPU-second: {slow} (wall: {inspected['parse_s']})"
    assert inspected["heavy_loaded"] == [], "DAG files must import jobs and heavy libraries inside tasks only"


def test_every_dag_has_tags_docs_params_and_retrying_tasks_with_timeouts(inspected: dict) -> None:
    for dag_id, dag in inspected["dags"].items():
        assert "flinktune" in dag["tags"] and len(dag["tags"]) >= 2, dag_id
        assert dag_id in dag["doc_md"], f"{dag_id}: doc_md should describe the DAG"
        assert dag["catchup"] is False and dag["max_active_runs"] == 1, dag_id
        assert dag["params"]["job"]["pattern"] == JOB_NAME_PATTERN, dag_id  # the one job-name rule
        assert dag["defaults"]["job"] == "demo", dag_id
        for task_id, task in dag["tasks"].items():
            assert task["retries"] >= 1 and task["retry_delay_s"] > 0, f"{dag_id}.{task_id}"
            assert task["timeout_s"] and task["timeout_s"] <= 3600, f"{dag_id}.{task_id} needs an execution_timeout"


def test_wiring_schedules_and_assets(inspected: dict) -> None:
    dags = inspected["dags"]
    ingest, train, decide = dags["flinktune_ingest"], dags["flinktune_train"], dags["flinktune_decide"]
    assert ingest["tasks"]["etl_features"]["upstream"] == ["collect"] and ingest["tasks"]["collect"]["upstream"] == ["fleet"]
    assert ingest["tasks"]["etl_features"]["outlets"] == ["flinktune://lake/features_10s", "flinktune://lake/features_1m"]
    assert "300" in ingest["schedule"] or "*/5" in ingest["schedule"], ingest["schedule"]

    # Retraining has its own cadence: not triggered by every 5-minute landing of features.
    assert "flinktune://lake" not in train["schedule"] and "0 */6 * * *" in train["schedule"], train["schedule"]
    assert train["tasks"]["train_surrogate"]["upstream"] == ["fleet", "profile"]
    # On a real cluster profile skips (twin rows must not reach real observations); the surrogate still trains.
    assert train["tasks"]["train_surrogate"]["trigger_rule"] == "none_failed"
    assert train["tasks"]["train_forecaster"]["upstream"] == ["fleet"], "the forecaster trains in parallel"
    # Over the fleet, as ingest and decide: a scheduled run trains every managed job, not the `job` param's
    # default (the rehearsal found the schedule training job `demo` beside a fleet of two).
    for task_id in ("profile", "train_surrogate", "train_forecaster"):
        assert train["tasks"][task_id]["type"].endswith("MappedOperator"), task_id
    assert train["tasks"]["profile"]["upstream"] == ["fleet"]
    for task_id in ("train_surrogate", "train_forecaster"):
        assert train["tasks"][task_id]["outlets"] == ["flinktune://models/champions"]
        assert train["tasks"][task_id]["retries"] >= 2

    assert "flinktune://models/champions" in decide["schedule"] and "*/5 * * * *" in decide["schedule"]
    assert decide["params"]["dry_run"]["type"] == ["null", "boolean"] and decide["defaults"]["dry_run"] is None, (
        "dry_run empty by default: resolved per run type (manual: dry, schedule: acts)"
    )
    assert decide["params"]["ticks"] == {"type": "integer", "minimum": 1, "maximum": 500, "title": "Ticks"}
    # The fleet: one mapped decide per job, bounded by a pool; the others' requests survive one job's failure.
    assert decide["tasks"]["decide"]["upstream"] == ["fleet"] and decide["tasks"]["decide"]["type"].endswith("MappedOperator")
    assert decide["tasks"]["decide"]["pool"] == "flinktune_fleet"
    assert decide["tasks"]["request_profile"]["upstream"] == ["decide"]
    assert decide["tasks"]["request_profile"]["trigger_rule"] == "all_done"
    trigger = decide["tasks"]["trigger_profile"]
    assert trigger["type"].endswith("MappedOperator") and trigger["trigger_dag_id"] == "flinktune_profile"
    assert trigger["upstream"] == ["request_profile"]
    assert decide["params"]["trigger"]["type"] == "string" and decide["defaults"]["trigger"] == ""

    # Between decisions: every minute, the watch triggers a decide run per job whose backlog outgrew its size.
    watch = dags["flinktune_watch"]
    assert "* * * * *" in watch["schedule"], watch["schedule"]
    assert watch["tasks"]["watch"]["upstream"] == ["fleet"]
    trigger = watch["tasks"]["trigger_decide"]
    assert trigger["type"].endswith("MappedOperator") and trigger["trigger_dag_id"] == "flinktune_decide"
    assert trigger["upstream"] == ["watch"]

    profile, replay = dags["flinktune_profile"], dags["flinktune_replay"]
    assert "NullTimetable" in profile["schedule"] and "NullTimetable" in replay["schedule"], "triggered only"
    assert profile["tasks"]["profile"]["type"].endswith("MappedOperator"), "one mapped task per suggested configuration"
    assert profile["tasks"]["profile"]["upstream"] == ["suggest"]
    assert profile["tasks"]["profile"]["max_active_tis_per_dag"] == 2
    assert profile["tasks"]["train_surrogate"]["upstream"] == ["profile"]
    assert profile["tasks"]["train_surrogate"]["outlets"] == ["flinktune://models/champions"]
    assert set(replay["params"]) == {"job", "trace", "policies", "hours", "failures", "seed"}


def test_on_kubernetes_training_and_etl_are_the_providers_operators_wired_the_same(
    inspected: dict, inspected_on_kubernetes: dict
) -> None:
    k8s = inspected_on_kubernetes
    assert k8s["import_errors"] == {} and set(k8s["dags"]) == DAG_IDS and k8s["serialize_errors"] == {}
    assert k8s["heavy_loaded"] == [], "the provider's operators import no job or heavy library at parse time"
    # The provider (the kubernetes client, mostly) is imported once per parsing process, ~1-3 s on
    # 2 busy cores, timed apart; each file's own parse keeps the embedded budget.
    assert k8s["provider_import_s"] < 10, k8s["provider_import_s"]
    slow = {f: s for f, s in k8s["parse_cpu_s"].items() if s >= 1.0}
    assert not slow, f"DAG files with the provider's operators must parse in < 1 CPU-second: {slow} (wall: {k8s['parse_s']})"
    kinds = {("flinktune_train", "train_surrogate"): "TrainerPodOperator", ("flinktune_train", "train_forecaster"): "TrainerPodOperator",
             ("flinktune_profile", "train_surrogate"): "TrainerPodOperator", ("flinktune_ingest", "etl_features"): "EtlSparkOperator"}  # fmt: skip
    for (dag_id, task_id), kind in kinds.items():
        task, embedded = k8s["dags"][dag_id]["tasks"][task_id], inspected["dags"][dag_id]["tasks"][task_id]
        assert task["task_type"] == kind and embedded["task_type"] != kind, f"{dag_id}.{task_id}"
        # mapped over the fleet's jobs where the in-process task is
        assert task["type"].endswith("MappedOperator") == embedded["type"].endswith("MappedOperator"), f"{dag_id}.{task_id}"
        assert k8s["dags"][dag_id]["serialized_types"][task_id] == kind, "serialized and read back as the scheduler does"
        # The same place in the DAG: upstream, assets, trigger rule, retries and timeout as the in-process task.
        for key in ("upstream", "outlets", "trigger_rule", "retries", "retry_delay_s", "timeout_s", "max_active_tis_per_dag"):
            assert task[key] == embedded[key], f"{dag_id}.{task_id}: {key} {task[key]!r} != {embedded[key]!r}"
    for dag_id, dag in k8s["dags"].items():  # nothing else changes
        assert set(dag["tasks"]) == set(inspected["dags"][dag_id]["tasks"]), dag_id


def test_the_decide_queue_setting_sends_every_decide_task_and_nothing_else_there(
    inspected: dict, inspected_on_kubernetes: dict
) -> None:
    queues = {d: {t["queue"] for t in dag["tasks"].values()} for d, dag in inspected_on_kubernetes["dags"].items()}
    assert queues.pop("flinktune_decide") == {"flinktune-decide"}
    assert queues.pop("flinktune_watch") == {"flinktune-decide"}, "the watch only reads and triggers: beside the decisions"
    default = {t["queue"] for dag in inspected["dags"].values() for t in dag["tasks"].values()}
    assert len(default) == 1 and "flinktune-decide" not in default  # unset: Airflow's default queue everywhere
    assert all(q == default for q in queues.values()), queues


def test_configuration_param_schema_matches_the_knobs(inspected: dict) -> None:
    from flinktune.config_space import KNOBS

    items = inspected["dags"]["flinktune_profile"]["params"]["configs"]["items"]
    assert items["required"] == list(KNOBS) and items["additionalProperties"] is False
    assert set(items["properties"]) == {*KNOBS, "vertex_parallelism"}


def test_failure_pattern_accepts_exactly_what_the_replay_parses() -> None:
    import re

    from flinktune.orchestration.dag_tasks.dag_wiring import FAILURES_PATTERN
    from flinktune.twin.failures import parse_failures

    for spec in ("none", "every:45m", "every:1.5h", "random:3/h", "every:", "random:3h", "daily", "every:10x"):
        try:
            parse_failures(spec)
            parses = True
        except ValueError:
            parses = False
        assert bool(re.fullmatch(FAILURES_PATTERN, spec)) == parses, spec


def test_param_schemas_reject_bad_values_and_accept_good_ones(inspected: dict) -> None:
    results = inspected["probes"]
    for (dag_id, name, value), error in zip(BAD_VALUES, results[: len(BAD_VALUES)]):
        assert error and error.startswith("ParamValidationError"), f"{dag_id}.{name}={value!r} was accepted"
    for (dag_id, name, value), error in zip(GOOD_VALUES, results[len(BAD_VALUES) :]):
        assert error is None, f"{dag_id}.{name}={value!r} was rejected: {error}"


def test_policy_enum_matches_the_policy_registry(inspected: dict) -> None:
    from flinktune.policies import POLICY_NAMES

    enum = inspected["dags"]["flinktune_decide"]["params"]["policy"]["enum"]
    assert sorted(enum) == sorted(POLICY_NAMES), (
        "update POLICIES in flinktune/orchestration/dag_tasks/dag_wiring.py to match flinktune.policies.POLICY_NAMES"
    )


@pytest.mark.parametrize(
    ("dag_id", "conf", "expected"),
    [
        ("flinktune_ingest", {"job": "Bad Name!"}, "Invalid input for param job"),
        ("flinktune_decide", {"ticks": 0}, "Invalid input for param ticks: 0 is less than the minimum of 1"),
        ("flinktune_decide", {"tick": 3}, "unknown param(s) 'tick'"),
    ],
)
def test_dag_test_rejects_bad_params_before_any_task_runs(
    real_home_env: dict[str, str], dag_id: str, conf: dict, expected: str
) -> None:
    # Valid params would start tasks that need the jobs; a rejection must come before any of them.
    with pytest.raises(DagParamsError) as caught:
        run_dag(dag_id, conf, real_home_env)
    assert expected in str(caught.value) and dag_id in str(caught.value)
    assert caught.value.summary["tasks"] == {} and caught.value.summary["run_id"] is None


# Runs in the child: dag.test() of flinktune_decide straight through Airflow (not the runner, which
# refuses unknown keys itself): the conf check inside the tasks must stop the run.
TYPO_RUN = r"""
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
run = dag.test(run_conf={"tick": 3})
print("RESULT:" + json.dumps({"states": {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in run.get_task_instances()},
                              "errors": recorder.errors, "jobs_loaded": "jobs.decide" in sys.modules}))
"""


def test_a_typo_in_a_trigger_conf_fails_before_any_task_acts(real_home_env: dict[str, str], tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", TYPO_RUN],
        env={**os.environ, **real_home_env},
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT:")]
    assert lines, f"child failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    result = json.loads(lines[-1].removeprefix("RESULT:"))
    # The first task (the fleet's jobs) checks the conf: nothing downstream starts.
    assert result["states"]["fleet"] == "failed" and result["states"]["decide"] != "success", result
    assert result["states"]["trigger_profile"] != "success", result
    assert "unknown conf key 'tick' (did you mean 'ticks'?)" in result["errors"]["fleet"], result["errors"]
    assert result["jobs_loaded"] is False, "the decision job must not even be imported"
