"""The bad-input corpus across entry points, through the error boundary (:mod:`flinktune.entry`).

Every case feeds one piece of nonsense to a real entry point: the ``flinktune`` CLI (typer's
runner, in process), a ``python -m jobs.<name>`` main (called in process), or a library reader
that those entry points use, run inside :func:`flinktune.entry.run_main`. Each must be refused:
exit code 2, exactly one line on stderr that starts with ``error:`` and names what is wrong
(the fragment given with the case), no traceback, no hang (an alarm stops a case after 60 s), and
nothing written under the case's var folder. The raw-metric contract corpus lives in
``tests/data_contracts/test_raw_metrics_corpus.py``; plugin requests are at the end of this file. A
few cases run as real subprocesses to prove the exit code and the single line end to end.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pytest
from typer.testing import CliRunner

from flinktune.cli.main import app
from flinktune.entry import run_main

REPO = Path(__file__).resolve().parents[2]
HEADER = "parallelism,task_slots,cpu,memory_mb,checkpoint_interval_s,input_rate,throughput,latency_ms,recovery_s\n"
GOOD_ROW = "8,1,1,1024,10,1000,1000,50,30\n"


class Outcome(NamedTuple):
    code: int
    stderr: str


def cli(*args: str) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        res = CliRunner().invoke(app, [a.replace("{tmp}", str(tmp)) for a in args])
        return Outcome(res.exit_code, res.stderr if hasattr(res, "stderr") else res.output)

    return run


def job(module: str, *args: str) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = importlib.import_module(f"jobs.{module}").main([a.replace("{tmp}", str(tmp)) for a in args])
        return Outcome(code, err.getvalue())

    return run


def lib(call: Callable[[Path], object]) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = run_main("library", lambda argv: call(tmp), [])
        return Outcome(code, err.getvalue())

    return run


def file(name: str, body: str | bytes) -> Callable[[Path], str]:
    """A path maker: writes ``body`` to ``<tmp>/in/<name>`` (outside the var folder) and returns it."""

    def make(tmp: Path) -> str:
        path = tmp / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body if isinstance(body, bytes) else body.encode())
        return str(path)

    return make


def with_file(maker: Callable[[Path], str], runner: Callable[[str], Callable[[Path], Outcome]]) -> Callable[[Path], Outcome]:
    return lambda tmp: runner(maker(tmp))(tmp)


# --- job names -----------------------------------------------------------------------------------
BAD_NAMES = ["../../x", "/etc/x", "Demo", "demo_1", "-demo", "demo-", "", "a" * 64, "de mo", "démo", "demo/x", ".."]
CASES: dict[str, tuple[Callable[[Path], Outcome], str]] = {}
for i, name in enumerate(BAD_NAMES):
    CASES[f"job_name[{i}]"] = (
        lib(lambda tmp, n=name: __import__("flinktune.job_name").job_name.job_name(n)),
        "not a valid job name",
    )
    CASES[f"cli_report_job[{i}]"] = (cli("report", "--job", name), "not a valid job name")
for module, extra in [
    ("report", []),
    ("simulate", []),
    ("decide", []),
    ("extract_metrics", ["--start-ms", "0", "--end-ms", "1000"]),
    ("etl_features", []),
    ("profile", []),
    ("train_surrogate", []),
    ("train_forecaster", []),
]:
    for name in ("../../x", "/etc/x"):
        CASES[f"jobs.{module}_job[{name}]"] = (job(module, "--job", name, *extra), "not a valid job name")
CASES["lake_raw_dir_job"] = (
    lib(lambda tmp: __import__("flinktune.lake").lake.Lake(tmp / "var").raw_job_dir("../x")),
    "not a valid job name",
)
CASES["lake_curated_dir_job"] = (
    lib(lambda tmp: __import__("flinktune.lake").lake.Lake(tmp / "var").curated_job_dir("features_1m", "/x")),
    "not a valid job name",
)
CASES["twin_dir_job"] = (
    lib(lambda tmp: __import__("flinktune.twin.job_store").twin.job_store.job_dir(tmp / "var", "../x")),
    "not a valid job name",
)


def _raw_of(job_value: str) -> pd.DataFrame:
    return pd.DataFrame(
        {"job": [job_value], "metric": ["workloadRate"], "vertex": [""], "subtask": [-1], "ts_ms": [0], "value": [1.0]}
    )


CASES["raw_batch_job"] = (
    lib(lambda tmp: __import__("flinktune.lake").lake.Lake(tmp / "var" / "lake").write_raw(_raw_of("../../x"))),
    "not a valid job name",
)

# --- traces ----------------------------------------------------------------------------------------
TRACES: dict[str, tuple[str | bytes, str]] = {
    "one_row": ("0,100\n", "spans 0 s (1 line(s))"),
    "one_ms_step": ("".join(f"{1704067200000 + i},100\n" for i in range(1000)), "at least 600 s"),
    "rate_1e30": ("0,1e30\n600,1\n", "below 1e+09 rec/s"),
    "negative": ("0,5\n600,-1\n", "finite number >= 0"),
    "nan": ("0,5\n600,nan\n", "finite number >= 0"),
    "inf": ("0,5\n600,inf\n", "finite number >= 0"),
    "empty": ("", "empty trace"),
    "header_only": ("timestamp,value\n", "empty trace"),
    "not_increasing": ("0,1\n600,2\n300,3\n", "does not increase"),
    "irregular": ("0,1\n600,2\n1800,3\n", "irregular step"),
    "text_value": ("0,1\n600,lots\n", "not a number"),
    "three_columns": ("0,1,2\n", "expected 'timestamp,value'"),
    "binary": (b"\xff\xfe\x00\x01", "cannot read trace"),
}
for kind, (body, fragment) in TRACES.items():
    CASES[f"trace_simulate[{kind}]"] = (
        with_file(file(f"{kind}.csv", body), lambda p: job("simulate", "--trace-file", p, "--hours", "0.1")),
        fragment,
    )
for kind in ("one_row", "one_ms_step", "rate_1e30"):
    body, fragment = TRACES[kind]
    CASES[f"trace_demo[{kind}]"] = (
        with_file(file(f"{kind}.csv", body), lambda p: cli("demo", "--trace-file", p, "--var-dir", "{tmp}/var/demo")),
        fragment,
    )
    CASES[f"trace_replay[{kind}]"] = (
        with_file(
            file(f"{kind}.csv", body), lambda p: cli("replay", "--trace", p, "--policies", "static", "--out", "{tmp}/var/out")
        ),
        fragment,
    )
CASES["trace_missing"] = (job("simulate", "--trace-file", "{tmp}/in/none.csv", "--hours", "1"), "none.csv")
CASES["trace_is_a_folder"] = (job("simulate", "--trace-file", "{tmp}", "--hours", "1"), "cannot read trace")

# --- observations (twin calibrate) ----------------------------------------------------------------
OBSERVATIONS: dict[str, tuple[str, str]] = {
    "parallelism_0": ("0,1,1,1024,10,1000,1000,50,30\n", "row 1: parallelism"),
    "parallelism_1e12": ("1e12,1,1,1024,10,1000,1000,50,30\n", "row 1: parallelism"),
    "slots_2.7": ("8,2.7,1,1024,10,1000,1000,50,30\n", "row 1: task_slots: 2.7 is not a whole number"),
    "cpu_negative": ("8,1,-1,1024,10,1000,1000,50,30\n", "row 1: cpu"),
    "cpu_0": ("8,1,0,1024,10,1000,1000,50,30\n", "row 1: cpu"),
    "memory_fraction": ("8,1,1,1024.5,10,1000,1000,50,30\n", "row 1: memory_mb"),
    "checkpoint_0": ("8,1,1,1024,0,1000,1000,50,30\n", "row 1: checkpoint_interval_s"),
    "rate_1e30": ("8,1,1,1024,10,1e30,1000,50,30\n", "row 1: input_rate"),
    "rate_negative": ("8,1,1,1024,10,-5,1000,50,30\n", "row 1: input_rate"),
    "parallelism_nan": ("nan,1,1,1024,10,1000,1000,50,30\n", "row 1: parallelism"),
    "parallelism_text": ("many,1,1,1024,10,1000,1000,50,30\n", "row 1: parallelism"),
}
for kind, (row, fragment) in OBSERVATIONS.items():
    CASES[f"calibrate[{kind}]"] = (
        with_file(
            file("obs.csv", HEADER + GOOD_ROW + row),
            lambda p: cli("twin", "calibrate", "--observations", p, "--out", "{tmp}/in/p.yaml"),
        ),
        fragment,
    )
CASES["calibrate[missing_column]"] = (
    with_file(
        file("obs.csv", "parallelism,cpu\n8,1\n"),
        lambda p: cli("twin", "calibrate", "--observations", p, "--out", "{tmp}/in/p.yaml"),
    ),
    "missing column(s)",
)
CASES["calibrate[empty]"] = (
    with_file(file("obs.csv", ""), lambda p: cli("twin", "calibrate", "--observations", p, "--out", "{tmp}/in/p.yaml")),
    "cannot read observations",
)
CASES["calibrate[out_is_a_folder]"] = (
    with_file(file("obs.csv", HEADER + GOOD_ROW), lambda p: cli("twin", "calibrate", "--observations", p, "--out", "{tmp}")),
    "is a folder",
)
CASES["calibrate[out_in_missing_folder]"] = (
    with_file(
        file("obs.csv", HEADER + GOOD_ROW),
        lambda p: cli("twin", "calibrate", "--observations", p, "--out", "{tmp}/no/such/p.yaml"),
    ),
    "does not exist",
)
CASES["predict[parallelism_1e12]"] = (
    with_file(file("obs.csv", HEADER + OBSERVATIONS["parallelism_1e12"][0]), lambda p: cli("twin", "predict", "--input", p)),
    "parallelism",
)
CASES["predict[out_is_a_folder]"] = (
    with_file(file("obs.csv", HEADER + GOOD_ROW), lambda p: cli("twin", "predict", "--input", p, "--out", "{tmp}")),
    "is a folder",
)
CASES["replay[out_is_a_file]"] = (
    with_file(file("taken", "x"), lambda p: cli("replay", "--out", p, "--policies", "static")),
    "is a file, not a folder",
)

# --- configurations ------------------------------------------------------------------------------
GOOD_CONFIG = {"parallelism": 8, "task_slots": 2, "cpu": 1.0, "memory_mb": 2048, "checkpoint_interval_s": 30}
CONFIGS: dict[str, tuple[dict, str]] = {
    "slots_2.7": ({"task_slots": 2.7}, "task_slots: 2.7 is not a whole number"),
    "parallelism_0": ({"parallelism": 0}, "parallelism: 0 is outside"),
    "parallelism_1e12": ({"parallelism": 1e12}, "parallelism: 1000000000000.0 is outside"),
    "parallelism_negative": ({"parallelism": -1}, "parallelism: -1 is outside"),
    "parallelism_text": ({"parallelism": "abc"}, "parallelism: 'abc' is not a number"),
    "parallelism_none": ({"parallelism": None}, "parallelism: None is not a number"),
    "parallelism_bool": ({"parallelism": True}, "parallelism: True is not a whole number"),
    "cpu_0": ({"cpu": 0}, "cpu: 0 is outside"),
    "cpu_inf": ({"cpu": float("inf")}, "cpu: inf is outside"),
    "memory_0": ({"memory_mb": 0}, "memory_mb: 0 is outside"),
    "checkpoint_0": ({"checkpoint_interval_s": 0}, "checkpoint_interval_s: 0 is outside"),
    "unknown_key": ({"replicas": 3}, "unknown key(s) ['replicas']"),
    "vertex_0": ({"vertex_parallelism": {"Window": 0}}, "vertex_parallelism['Window']: 0 is outside"),
    "vertex_2.5": ({"vertex_parallelism": {"Window": 2.5}}, "vertex_parallelism['Window']: 2.5 is not a whole number"),
}
for kind, (change, fragment) in CONFIGS.items():
    CASES[f"config[{kind}]"] = (
        lib(
            lambda tmp, c=change: __import__("flinktune.config_space").config_space.Configuration.from_dict(
                {**GOOD_CONFIG, **c}, where="configs[0]"
            )
        ),
        f"configs[0]: {fragment}",
    )
CASES["config[missing_key]"] = (
    lib(
        lambda tmp: __import__("flinktune.config_space").config_space.Configuration.from_dict(
            {"parallelism": 8}, where="configs[0]"
        )
    ),
    "configs[0]: missing key(s)",
)
CASES["profile[slots_2.7]"] = (
    job("profile", "--job", "demo", "--configs", json.dumps([{**GOOD_CONFIG, "task_slots": 2.7}])),
    "configs[0]: task_slots: 2.7",
)
CASES["profile[configs_not_json]"] = (job("profile", "--job", "demo", "--configs", "[{oops"), "--configs is not JSON")
CASES["profile[configs_not_a_list]"] = (job("profile", "--job", "demo", "--configs", "{}"), "--configs must be a JSON list")
CASES["profile[rate_1e30]"] = (job("profile", "--job", "demo", "--rates", "1e30"), "rates[0]: rate 1e+30 rec/s is not below")
CASES["profile[rate_negative]"] = (job("profile", "--job", "demo", "--rates", "-5"), "rates[0]: -5.0 is outside")
CASES["profile[rate_text]"] = (job("profile", "--job", "demo", "--rates", "fast"), "--rates 'fast'")
CASES["profile[duration_0]"] = (
    job("profile", "--job", "demo", "--rates", "100", "--duration-s", "0"),
    "duration_s (--duration-s) must be > 0",
)

# --- settings ------------------------------------------------------------------------------------
SETTINGS = {
    "decision_interval_s": 0,
    "confidence": 2.0,
    "device": "tpu",
    "spark_shuffle_partitions": 0,
    "latency_target_ms": -1,
    "recovery_limit_s": 0,
}
for key, value in SETTINGS.items():
    CASES[f"settings[{key}]"] = (
        lib(lambda tmp, k=key, v=value: __import__("flinktune.settings").settings.load_settings(**{k: v})),
        key,
    )
CASES["settings[env_not_a_number]"] = (
    lambda tmp: _with_env({"FLINKTUNE_DECISION_INTERVAL_S": "often"}, job("report", "--job", "demo"), tmp),
    "decision_interval_s",
)

# --- CLI options and job options -----------------------------------------------------------------
CASES.update(
    {
        "cli_decide[ticks_0]": (cli("decide", "--job", "demo", "--ticks", "0"), "--ticks"),
        "cli_decide[ticks_501]": (cli("decide", "--job", "demo", "--ticks", "501"), "--ticks"),
        "cli_decide[policy]": (cli("decide", "--job", "demo", "--policy", "magic"), "--policy"),
        "cli_decide[no_job]": (cli("decide"), "--job"),
        "cli_replay[hours_0]": (cli("replay", "--hours", "0"), "--hours"),
        "cli_replay[workers_0]": (cli("replay", "--workers", "0"), "--workers"),
        "cli_replay[policy_option_malformed]": (
            cli("replay", "--policies", "reactive", "--policy-option", "reactive=0.35"),
            "expected POLICY.ARGUMENT=NUMBER",
        ),
        "cli_replay[policy_option_not_replayed]": (
            cli("replay", "--policies", "static", "--policy-option", "reactive.target_utilization=0.35"),
            "is not replayed",
        ),
        "cli_replay[policy_option_refused]": (
            cli("replay", "--policies", "reactive", "--policy-option", "reactive.colour=1"),
            "refused",
        ),
        "cli_demo[history_1h]": (cli("demo", "--history-hours", "1"), "--history-hours"),
        "cli_demo[job]": (cli("demo", "--job", "../../x", "--var-dir", "{tmp}/var/demo"), "not a valid job name"),
        "cli_calibrate[holdout_2]": (
            with_file(
                file("obs.csv", HEADER + GOOD_ROW),
                lambda p: cli("twin", "calibrate", "--observations", p, "--out", "{tmp}/in/p.yaml", "--holdout", "2"),
            ),
            "--holdout",
        ),
        "cli_local_flink[port_80]": (cli("local-flink", "up", "--rest-port", "80"), "--rest-port"),
        "cli[unknown_option]": (cli("report", "--job", "demo", "--colour"), "No such option"),
        "jobs.extract_metrics[step_0]": (
            job("extract_metrics", "--job", "demo", "--start-ms", "0", "--end-ms", "1000", "--step-s", "0"),
            "--step-s",
        ),
        "jobs.extract_metrics[step_negative]": (
            job("extract_metrics", "--job", "demo", "--start-ms", "0", "--end-ms", "1000", "--step-s", "-1"),
            "--step-s",
        ),
        "jobs.extract_metrics[end_before_start]": (
            job("extract_metrics", "--job", "demo", "--start-ms", "1000", "--end-ms", "0"),
            "must be after start_ms",
        ),
        "jobs.extract_metrics[source]": (
            job("extract_metrics", "--job", "demo", "--start-ms", "0", "--end-ms", "1", "--source", "kafka"),
            "--source",
        ),
        "jobs.extract_metrics[start_not_int]": (
            job("extract_metrics", "--job", "demo", "--start-ms", "soon", "--end-ms", "1"),
            "--start-ms",
        ),
        "jobs.decide[ticks_0]": (job("decide", "--job", "demo", "--ticks", "0"), "ticks must be >= 1"),
        "jobs.decide[policy]": (job("decide", "--job", "demo", "--policy", "magic"), "--policy"),
        "jobs.decide[no_job]": (job("decide"), "--job"),
        "jobs.decide[no_twin]": (job("decide", "--job", "demo"), "no twin for job 'demo'"),
        "jobs.simulate[hours_0]": (job("simulate", "--job", "demo", "--hours", "0"), "hours must be > 0"),
        "jobs.simulate[hours_negative]": (job("simulate", "--job", "demo", "--hours", "-1"), "hours must be > 0"),
        "jobs.simulate[workload]": (job("simulate", "--job", "demo", "--workload", "nexmark"), "--workload"),
        "jobs.report[no_features]": (job("report", "--job", "demo"), "no curated features for job 'demo'"),
        "jobs.train_surrogate[no_observations]": (job("train_surrogate", "--job", "demo"), "has no parquet files for job 'demo'"),
        "jobs.etl_features[end_before_start]": (
            job("etl_features", "--job", "demo", "--start-ms", "10", "--end-ms", "5"),
            "must be after start_ms",
        ),
        "kubeconfig[missing]": (
            lib(
                lambda tmp: __import__("flinktune.backends.cluster").backends.cluster.kubernetes_api(
                    {"KUBECONFIG": str(tmp / "in" / "kubeconfig")}
                )
            ),
            "cannot load the kubeconfig",
        ),
        "kubeconfig[in_cluster_without_token]": (
            lib(
                lambda tmp: __import__("flinktune.backends.cluster").backends.cluster.kubernetes_api(
                    {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
                )
            ),
            "in-cluster service account",
        ),
    }
)


def _with_env(env: dict[str, str], runner: Callable[[Path], Outcome], tmp: Path) -> Outcome:
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return runner(tmp)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_the_corpus_has_at_least_100_cases_across_the_entry_kinds():
    assert len(CASES) >= 100
    kinds = {name.split("[")[0].split("_")[0] for name in CASES}
    assert {"job", "cli", "trace", "calibrate", "config", "settings", "profile", "kubeconfig"} <= kinds | {"cli"}


@pytest.fixture
def no_hang():
    def hang(signum, frame):
        raise TimeoutError("the case ran for 60 s: a hang")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_refused_in_one_line(name, tmp_path, monkeypatch, no_hang):
    monkeypatch.setenv("FLINKTUNE_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.delenv("FLINKTUNE_CLUSTER", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / "in").mkdir()
    runner, fragment = CASES[name]
    outcome = runner(tmp_path)
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert outcome.code == 2, f"accepted or crashed (exit {outcome.code}): {outcome.stderr}"
    assert len(lines) == 1 and lines[0].startswith("error: "), outcome.stderr
    assert "Traceback" not in outcome.stderr and fragment in lines[0], lines[0]
    written = [p for p in (tmp_path / "var").rglob("*") if p.is_file()] if (tmp_path / "var").exists() else []
    assert not written, f"a refusal wrote {written}"
    assert not (tmp_path / "in" / "p.yaml").exists()


def test_an_unexpected_error_is_one_line_and_exit_1_and_debug_keeps_the_traceback():
    def buggy(argv):
        raise ZeroDivisionError("division by zero")

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert run_main("python -m jobs.x", buggy, ["--job", "demo"]) == 1
    assert err.getvalue().count("\n") == 1 and "unexpected ZeroDivisionError" in err.getvalue() and "--debug" in err.getvalue()
    with pytest.raises(ZeroDivisionError):
        run_main("python -m jobs.x", buggy, ["--job", "demo", "--debug"])


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["-m", "jobs.report", "--job", "../../x"], "error: python -m jobs.report: job '../../x' is not a valid job name"),
        (["-m", "jobs.extract_metrics", "--job", "demo", "--start-ms", "0", "--end-ms", "9", "--step-s", "0"], "--step-s"),
        (["-m", "flinktune.cli", "decide", "--job", "demo", "--ticks", "0"], "Invalid value for '--ticks'"),
    ],
)
def test_as_a_subprocess_the_exit_code_is_2_and_stderr_one_line(argv, fragment, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "FLINKTUNE_VAR_DIR": str(tmp_path / "var")}
    proc = subprocess.run([sys.executable, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and fragment in lines[0], proc.stderr
    assert not (tmp_path / "var").exists()


# --- plugin requests -------------------------------------------------------------------------------
@pytest.fixture
def plugin_client(tmp_path, monkeypatch):
    """The plugin's FastAPI app in process. Airflow's plugin base class is all the module needs from
    Airflow, and importing Airflow here would configure its logging for the whole test run (the
    plugin's own test loads it through Airflow in a child process). Authentication is Airflow's and
    is tested there, through Airflow's real app (tests/plugins/): here the caller is let through, so
    what is checked is the request validation behind it."""
    from fastapi.testclient import TestClient

    fake = types.ModuleType("airflow.plugins_manager")
    fake.AirflowPlugin = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "airflow.plugins_manager", fake)
    monkeypatch.setitem(sys.modules, "airflow", types.ModuleType("airflow"))
    monkeypatch.syspath_prepend(str(REPO / "plugins"))
    module = importlib.import_module("flinktune_plugin")
    monkeypatch.delitem(sys.modules, "flinktune_plugin")
    app = module.create_app(state_db=tmp_path / "state.db")
    app.dependency_overrides[module.require_airflow_reader] = lambda: None
    return TestClient(app)


@pytest.mark.parametrize(
    "path,status",
    [
        ("/decisions?job=../x", 422),
        ("/decisions?job=Demo", 422),
        ("/decisions?job=demo&limit=0", 422),
        ("/decisions?job=demo&limit=100000", 422),
        ("/decisions", 422),
        ("/job/..%2Fx", 404),
        ("/job/Demo", 422),
        ("/job/demo/plots/..%2F..%2Fsecret.png", 404),
        ("/job/demo/plots/x.svg", 422),
        ("/job/demo/plots/.png", 422),
    ],
)
def test_plugin_refuses_bad_requests(plugin_client, path, status):
    response = plugin_client.get(path)
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
