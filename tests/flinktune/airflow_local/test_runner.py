"""run_dag / run_pipeline against a throwaway DAG in a tmp dags folder, with real Airflow dag.test()."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from flinktune.airflow_local.airflow_home import prepare_airflow_home
from flinktune.airflow_local.runner import DagParamsError, DagRunError, LocalPipeline, main, run_dag, run_pipeline
from flinktune.airflow_local.session import DagSession

pytestmark = pytest.mark.airflow

# produce -> consume. `marker` lets a test see whether any task ran; `explode` makes consume fail.
TINY_DAG = """
import os
from datetime import datetime, timedelta
from pathlib import Path
from airflow.sdk import Param, dag, task

@dag(dag_id="tiny", schedule=None, start_date=datetime(2025, 1, 1), catchup=False,
     default_args={"retries": 3, "retry_delay": timedelta(minutes=10)},
     params={"n": Param(2, type="integer", minimum=1, maximum=5), "explode": Param(False, type="boolean"),
             "marker": Param("", type="string")})
def tiny():
    @task
    def produce(params=None):
        if params["marker"]:
            Path(params["marker"]).write_text("ran")
        return {"n": params["n"], "var_dir": os.environ.get("FLINKTUNE_VAR_DIR"), "mark": os.environ.get("TINY_MARK"),
                "pid": os.getpid()}

    @task
    def consume(value, params=None):
        if params["explode"]:
            raise ValueError(f"boom: refusing n={value['n']}")
        return {"double": value["n"] * 2}

    consume(produce())

tiny()
"""


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runner")
    (root / "dags").mkdir()
    (root / "dags" / "tiny.py").write_text(TINY_DAG)
    return root / "var"


@pytest.fixture(scope="module")
def env(var_dir: Path) -> dict[str, str]:
    return prepare_airflow_home(var_dir, dags_folder=var_dir.parent / "dags")


def test_run_dag_returns_states_and_xcom_returns(env: dict[str, str]) -> None:
    summary = run_dag("tiny", {"n": 3}, env)
    assert summary["state"] == "success"
    assert summary["tasks"] == {"produce": "success", "consume": "success"}
    assert summary["returns"]["produce"]["n"] == 3 and summary["returns"]["consume"] == {"double": 6}
    assert summary["errors"] == {} and summary["run_id"].startswith("manual__")
    assert Path(summary["log"]).is_file() and "[DAG TEST] end task task_id=consume" in Path(summary["log"]).read_text()


def test_bad_param_is_rejected_before_any_task_runs(env: dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(DagParamsError, match=r"DAG tiny rejected .*param n: 0 is less than the minimum of 1"):
        run_dag("tiny", {"n": 0, "marker": str(marker)}, env)
    assert not marker.exists()


def test_unknown_param_is_rejected_naming_the_known_ones(env: dict[str, str]) -> None:
    with pytest.raises(DagParamsError, match=r"unknown param\(s\) 'm'.*it takes: explode, marker, n"):
        run_dag("tiny", {"m": 1}, env)


def test_missing_dag_names_the_folder_and_what_is_there(env: dict[str, str]) -> None:
    with pytest.raises(DagRunError, match=r"DAG 'nope' not found in .*dags; DAGs there: tiny"):
        run_dag("nope", {}, env)


def test_a_dag_file_that_fails_to_import_is_named_with_its_error(var_dir: Path, env: dict[str, str]) -> None:
    broken = var_dir.parent / "dags" / "broken.py"
    broken.write_text("from airflow.sdk import dag\nimport flinktune_no_such_module\n")
    try:
        with pytest.raises(
            DagRunError,
            match=r"DAG 'broken' not found .*import errors: .*broken.py: "
            r"ModuleNotFoundError: No module named 'flinktune_no_such_module'",
        ):
            run_dag("broken", {}, env)
    finally:
        broken.unlink()


def test_conf_must_be_json(env: dict[str, str]) -> None:
    with pytest.raises(TypeError, match="conf for DAG 'tiny' is not JSON-serialisable"):
        run_dag("tiny", {"n": object()}, env)


def test_timeout_kills_the_run_and_says_so(env: dict[str, str]) -> None:
    with pytest.raises(DagRunError, match=r"DAG tiny did not finish within 1 s; log: ") as caught:
        run_dag("tiny", {}, env, timeout_s=1)
    session_arg = str(Path(caught.value.log).parent)  # the session's folder is on the child's command line
    survivors = [p for p in Path("/proc").glob("[0-9]*") if _cmdline(p).count(session_arg)]
    assert survivors == [], "the timed-out child must be killed"


def _cmdline(proc_dir: Path) -> str:
    try:
        return (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_pipeline_prints_progress_and_stops_at_the_failing_task(var_dir: Path, env: dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "third-step-ran"
    out = io.StringIO()
    steps = [("tiny", {"n": 1}), ("tiny", {"n": 4, "explode": True}), ("tiny", {"marker": str(marker)})]
    # The DAG retries 3 times, 10 minutes apart: only run_pipeline's retries=0 lets it fail within the timeout.
    with pytest.raises(DagRunError) as caught:
        run_pipeline(steps, var_dir, dags_folder=var_dir.parent / "dags", timeout_s=120, env={"TINY_MARK": "x"}, out=out)
    message = str(caught.value)
    assert message.startswith("pipeline stopped at step 2/3: DAG tiny failed: task consume failed:")
    assert "ValueError: boom: refusing n=4" in message
    assert caught.value.task_id == "consume" and caught.value.summary["tasks"]["produce"] == "success"
    produced = {k: v for k, v in caught.value.summary["returns"]["produce"].items() if k != "pid"}
    assert produced == {"n": 4, "var_dir": str(var_dir.resolve()), "mark": "x"}, "tasks see FLINKTUNE_VAR_DIR and env"
    assert not marker.exists(), "no step may run after a failure"
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("airflow home ")
    assert lines[1].startswith("[1/3] tiny ... ok in ") and lines[1].endswith(" s")
    assert lines[2].startswith("[2/3] tiny ... FAILED in ")


def test_pipeline_rejects_malformed_steps_before_doing_anything(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"pipeline step 2 must be a \(dag_id, conf dict\) pair"):
        run_pipeline([("a", {}), ("b", "n=1")], tmp_path / "var")
    assert not (tmp_path / "var").exists()


def test_cli_rejects_a_non_object_conf(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--dag", "tiny", "--conf", "[1, 2]"])
    assert "--conf must be a JSON object, got list" in capsys.readouterr().err


def test_a_child_that_dies_before_reporting_is_an_error_with_its_last_log_lines(env: dict[str, str]) -> None:
    # Airflow refuses a relative SQLite path while importing, so the child never reaches dag.test().
    broken = dict(env, AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///relative.db")
    with pytest.raises(
        DagRunError, match=r"(?s)exited with code 1 before reporting a result; last lines of .*relative"
    ) as caught:
        run_dag("tiny", {}, broken)
    assert caught.value.task_id is None and Path(caught.value.log).is_file()


def test_a_session_runs_every_dag_in_one_child_and_survives_a_failed_run(env: dict[str, str]) -> None:
    with DagSession(env) as session:
        first = run_dag("tiny", {"n": 1}, env, session=session)
        with pytest.raises(DagRunError, match="boom: refusing n=2"):
            run_dag("tiny", {"n": 2, "explode": True}, env, retries=0, session=session)
        third = run_dag("tiny", {"n": 3}, env, session=session)
    pids = {first["returns"]["produce"]["pid"], third["returns"]["produce"]["pid"]}
    assert len(pids) == 1, "one child process for the whole session"
    assert first["log"] != third["log"] and "task_id=consume" in Path(third["log"]).read_text(), "a log file per run"
    assert not Path(f"/proc/{pids.pop()}").exists(), "closing the session ends its child"


def test_a_pipeline_hands_results_to_its_next_steps_in_the_same_child(var_dir: Path) -> None:
    out = io.StringIO()
    with LocalPipeline(var_dir, dags_folder=var_dir.parent / "dags", out=out) as pipeline:
        [first] = pipeline.run([("tiny", {"n": 2})])
        [second] = pipeline.run([("tiny", {"n": first["returns"]["consume"]["double"]})])
    assert second["returns"]["consume"] == {"double": 8}
    assert first["returns"]["produce"]["pid"] == second["returns"]["produce"]["pid"]
    assert [line.split(" ... ")[0] for line in out.getvalue().splitlines()[1:]] == ["[1/1] tiny", "[1/1] tiny"]
