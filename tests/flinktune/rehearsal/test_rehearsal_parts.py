"""The rehearsal's pure parts, without servers: attachments, the Prometheus window and queries of a
Flink-reporter job, the schedules from settings, the Celery workers, the verdict words, the run's own capacities and the end's drain of the ingest DAG."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from flinktune.decision.stages import DecisionRecord
from flinktune.extract.prometheus import QUERY_PRESETS, metric_queries, operator_gauge_queries
from flinktune.extract.sink import ExtractError
from flinktune.localflink.attach import AttachError, Attachment, read_attachment, write_attachment
from flinktune.localflink.audit import Change
from flinktune.rehearsal.servers import Stack, StackError, session_members
from flinktune.rehearsal.stack import DECIDE_WORKER_PRELOAD, plan_celery_workers
from flinktune.rehearsal.verdicts import change_timing, change_verdict, job_report, measured_capacities, render_markdown
from flinktune.settings import ScheduleSettings, SettingsError, read_group


def test_an_attachment_round_trips_and_a_missing_one_names_the_file(tmp_path: Path) -> None:
    a = Attachment("bench-small", str(tmp_path / "c"), "/x.jar", "/r.txt", 2500, 500, (1, 2))
    path = write_attachment(tmp_path, a)
    assert path.name == "bench-small.json" and read_attachment(tmp_path, "bench-small") == a
    assert a.space().parallelism == (1, 2) and a.space().task_slots == (1,)
    with pytest.raises(AttachError, match=r"no attachment .*other\.json"):
        read_attachment(tmp_path, "other")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(AttachError, match="not a job attachment"):
        read_attachment(tmp_path, "bad")


def test_the_wait_per_record_reaches_the_job_through_the_attachment(tmp_path: Path) -> None:
    # A redeploy by a decide task builds the job from the attachment: the wait must survive it, or a rescaled
    # job would suddenly carry several times as much.
    a = Attachment("bench-small", str(tmp_path / "c"), "/x.jar", "/r.txt", 2000, 500, (1, 2), wait_us=100)
    write_attachment(tmp_path, a)
    args = read_attachment(tmp_path, "bench-small").job_spec().program_args()
    assert args[args.index("--wait-us") + 1] == "100" and args[args.index("--work") + 1] == "2000"
    assert "--wait-us" not in Attachment("j", "c", "/x.jar", "/r.txt", 2000, 500, (1,)).job_spec().program_args()


def test_operator_gauges_override_the_kafka_and_config_names_and_refuse_a_bad_job() -> None:
    q = operator_gauge_queries("bench-small")
    assert set(q) < set(metric_queries("bench-small"))
    assert 'flink_taskmanager_job_task_operator_offeredRate{job_name=~"bench[-_]small"}' in q["workloadRate"]
    assert "latencyP95Ms" in q["latencyP95Ms"] and "count by" in q["configParallelism"]
    assert QUERY_PRESETS["flink-operator-gauges"] is operator_gauge_queries and QUERY_PRESETS["default"] is None
    with pytest.raises(ExtractError):
        operator_gauge_queries('x"} or vector(1) or {a="')


def test_the_prometheus_window_is_the_last_period_then_catches_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from flinktune.orchestration.dag_tasks import tasks

    calls = []

    def fake_run(**kw):
        calls.append(kw)
        return {"rows": 1}

    import flinktune.runs.extraction

    monkeypatch.setattr(flinktune.runs.extraction, "extract_range", fake_run)
    monkeypatch.setenv("FLINKTUNE_VAR_DIR", str(tmp_path))
    first = tasks.extract_prometheus_window("j", None, None, every_s=30, now_ms=1_000_045_123)
    assert (first["start_ms"], first["end_ms"]) == (999_990_000, 1_000_020_000)  # the last whole period
    assert calls[0]["source"] == "prometheus" and calls[0]["start_ms"] == first["start_ms"]
    late = tasks.extract_prometheus_window("j", None, None, every_s=30, now_ms=1_000_125_000)
    assert (late["start_ms"], late["end_ms"]) == (1_000_020_000, 1_000_110_000), "a late run leaves no gap"
    explicit = tasks.extract_prometheus_window("j", 5, 10, every_s=30)
    assert (explicit["start_ms"], explicit["end_ms"]) == (5, 10)
    again = tasks.extract_prometheus_window("j", None, None, every_s=30, now_ms=1_000_145_000)
    assert again["start_ms"] == 1_000_110_000, "an explicit window does not move the watermark"
    long_after = tasks.extract_prometheus_window("j", None, None, every_s=30, now_ms=1_000_145_000 + 2 * 3600 * 1000)
    assert long_after["end_ms"] - long_after["start_ms"] == 30_000, "no catch-up beyond MAX_CATCH_UP_S"


def test_schedules_default_to_production_and_a_bad_cron_is_refused() -> None:
    s = read_group(ScheduleSettings, {})
    assert (s.ingest_every_s, s.decide_cron, s.retrain_cron) == (300, "*/5 * * * *", "0 */6 * * *")
    assert read_group(ScheduleSettings, {"FLINKTUNE_SCHEDULE_DECIDE_CRON": "* * * * *"}).decide_cron == "* * * * *"
    with pytest.raises(SettingsError, match="FLINKTUNE_SCHEDULE_DECIDE_CRON"):
        read_group(ScheduleSettings, {"FLINKTUNE_SCHEDULE_DECIDE_CRON": "every minute"})
    with pytest.raises(SettingsError, match="FLINKTUNE_SCHEDULE_INGEST_EVERY_S"):
        read_group(ScheduleSettings, {"FLINKTUNE_SCHEDULE_INGEST_EVERY_S": "1"})


def test_the_decide_worker_runs_every_job_at_once_with_the_decide_modules_loaded_before_it_forks() -> None:
    workers = plan_celery_workers("q", 2, 3)
    assert [(w.name, w.queue, w.concurrency) for w in workers] == [
        ("airflow-celery-worker-1", "q", 1),
        ("airflow-celery-worker-2", "q", 1),
        ("airflow-celery-worker-3", "q-decide", 3),  # one task per job at once: no job waits for another's decision
    ]
    assert all(w.env == {} for w in workers[:2])
    # Celery imports the module at the worker's start, before its pool forks the task processes (without importing it here).
    assert json.loads(workers[2].env["AIRFLOW__CELERY__EXTRA_CELERY_CONFIG"]) == {"imports": [DECIDE_WORKER_PRELOAD]}
    assert importlib.util.find_spec(DECIDE_WORKER_PRELOAD) is not None
    with pytest.raises(ValueError, match="at least one worker and one decider, got 2 and 0"):
        plan_celery_workers("q", 2, 0)


def test_verdict_words() -> None:
    assert change_verdict(True, True, False) == "correct"
    assert change_verdict(False, True, True) == "needless"
    assert change_verdict(False, False, False) == "late"
    assert change_verdict(None, None, None) == "not judged"


def test_capacities_come_from_the_run_and_a_missing_size_is_scaled_and_said() -> None:
    rows = []
    for t in range(10):
        ts = 1_000 * t
        rows += [("j", "configParallelism", "", -1, ts, 1.0), ("j", "busyTimeMsPerSecond", "win", 0, ts, 500.0),
                 ("j", "numRecordsInPerSecond", "win", 0, ts, 4000.0)]  # fmt: skip
    raw = pd.DataFrame(rows, columns=["job", "metric", "vertex", "subtask", "ts_ms", "value"])
    cap, how = measured_capacities(raw, (1, 2))
    assert cap == {1: 8000.0, 2: 16000.0} and "p=2 scaled linearly" in how


def test_a_scale_up_says_how_long_the_load_had_outgrown_the_old_size_and_when_the_new_one_ran() -> None:
    # Offered 1,000 -> 5,000 rec/s over 40 s (one sample a second), p=1 carries 3,000: over it from t=21 s on.
    ts = range(0, 100)
    rate = [min(5000.0, 1000.0 + 100.0 * t) for t in ts]
    rows = [("j", "workloadRate", "", -1, 1000 * t, r) for t, r in zip(ts, rate, strict=True)]
    rows += [("j", "configParallelism", "", -1, 1000 * t, 1.0 if t < 52 else 2.0) for t in ts]
    raw = pd.DataFrame(rows, columns=["job", "metric", "vertex", "subtask", "ts_ms", "value"])
    up, ahead = Change(35.0, 1, 2), Change(15.0, 1, 2)
    # Decided at t=35 s, 15 s after the last sample p=1 carried (t=20 s); p=2 in the samples from t=52 s.
    assert change_timing(raw, up, {1: 3000.0, 2: 6000.0}) == {"due_for_s": 15.0, "in_force_after_s": 17.0}
    assert change_timing(raw, ahead, {1: 3000.0, 2: 6000.0})["due_for_s"] == 0.0  # before the load outgrew p=1
    # A scale-down has no "due"; no capacity of the old size, no sample at the new one: None, not a guess.
    assert change_timing(raw, Change(60.0, 2, 1), {1: 3000.0})["due_for_s"] is None
    assert change_timing(raw, up, {2: 6000.0})["due_for_s"] is None
    # Samples that end while the old size still carried the load cannot say whether the change came ahead of it.
    assert change_timing(raw[raw["ts_ms"] <= 19_000], up, {1: 3000.0})["due_for_s"] is None
    assert change_timing(raw, Change(35.0, 1, 3), {1: 3000.0})["in_force_after_s"] is None


def test_the_stack_stops_a_server_that_never_gets_ready(tmp_path: Path) -> None:
    lines: list[str] = []
    with pytest.raises(StackError, match="sleeper was not ready"), Stack(tmp_path, log=lines.append) as stack:
        stack.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], ready=lambda: False, timeout_s=1)
    stopped = [line for line in lines if line.startswith("sleeper stopped (PID ")]
    assert stopped, lines
    pid = int(stopped[0].split("PID ")[1].rstrip(")"))
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole group is gone, not only its leader


def test_the_stop_reaches_a_child_that_left_the_process_group(tmp_path: Path) -> None:
    # Airflow's task runner puts itself in a process group of its own: a group kill of the Celery worker misses it.
    code = ("import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import os, time; os.setpgid(0, 0); time.sleep(120)'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(120)\n")  # fmt: skip
    with Stack(tmp_path, log=lambda _: None) as stack:
        server = stack.start("parent", [sys.executable, "-c", code])
        deadline = time.monotonic() + 30
        while not server.log.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.2)
        child = int(server.log.read_text().split()[0])
        time.sleep(1)  # let the child leave the group
        assert os.getpgid(child) != server.pid and child in session_members(server.pid)
    assert session_members(server.pid) == []


def test_a_fleet_job_with_nothing_to_learn_from_skips_its_training_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The rehearsal's scheduled retrain failed for jobs that flinktune_profile had not profiled yet.
    from airflow.sdk.exceptions import AirflowSkipException

    from flinktune.orchestration.dag_tasks import tasks

    monkeypatch.setenv("FLINKTUNE_VAR_DIR", str(tmp_path))
    with pytest.raises(AirflowSkipException, match=r"surrogate of job 'bench-small': no profiling_observations"):
        tasks.train("surrogate", "bench-small")
    with pytest.raises(AirflowSkipException, match=r"forecaster of job 'bench-small': no features_1m"):
        tasks.train("forecaster", "bench-small")


def _ti(task_id: str, state: str | None) -> dict:
    return {"task_id": task_id, "state": state}


def test_the_drain_state_finds_runs_caught_between_collect_and_etl() -> None:
    from flinktune.rehearsal.drain import drain_state

    s = drain_state({
        "collected": [_ti("fleet", "success"), _ti("collect", "success"), _ti("etl_features", None)],  # not expanded
        "curating": [_ti("fleet", "success"), _ti("collect", "success"), _ti("etl_features", "running")],
        "done": [_ti("fleet", "success"), _ti("collect", "success"), _ti("etl_features", "success")],
        "before-collect": [_ti("fleet", "success"), _ti("collect", "scheduled"), _ti("etl_features", None)],
        "queued-run": [],
    })  # fmt: skip
    assert s.half_done == ("collected", "curating") and s.in_motion == 1 and not s.drained
    # A collect that failed wrote nothing; a failed ETL has ended: neither waits. A running collect is in motion.
    s = drain_state({"a": [_ti("collect", "failed"), _ti("etl_features", None)], "b": [_ti("collect", "running")],
                     "c": [_ti("collect", "success"), _ti("etl_features", "failed")]})  # fmt: skip
    assert s.half_done == () and s.in_motion == 1
    assert drain_state({"x": [_ti("fleet", "success"), _ti("collect", "scheduled")]}).drained


class _IngestApi:
    """The Airflow API as the drain sees it: one scripted look (run id -> task instances) per ``dagRuns`` poll,
    the last one repeated, and the pauses it was sent."""

    def __init__(self, looks: list[dict[str, list[dict]]], dag_id: str = "flinktune_ingest") -> None:
        self.looks, self.at, self.pauses, self.dag_id = looks, -1, [], dag_id

    def patch(self, url: str, json: dict, timeout: float) -> SimpleNamespace:
        assert url == f"http://af/api/v2/dags/{self.dag_id}"
        self.pauses.append(json["is_paused"])
        return SimpleNamespace(ok=True)

    def get(self, url: str, params: list, timeout: float) -> SimpleNamespace:
        if url.endswith("/dagRuns"):
            assert {("state", "queued"), ("state", "running")} <= set(params)
            self.at = min(self.at + 1, len(self.looks) - 1)
            runs = [{"dag_run_id": r} for r in self.looks[self.at]]
            return SimpleNamespace(ok=True, json=lambda: {"dag_runs": runs})
        run_id = url.split("/dagRuns/")[1].split("/")[0].replace("%3A", ":").replace("%2B", "+")
        return SimpleNamespace(ok=True, json=lambda: {"task_instances": self.looks[self.at][run_id]})


def test_the_drain_unpauses_only_while_a_collect_waits_for_its_etl(monkeypatch: pytest.MonkeyPatch) -> None:
    from flinktune.rehearsal import drain

    monkeypatch.setattr(drain.time, "sleep", lambda _s: None)
    run = "scheduled__2026-11-28T10:01:42+00:00"  # quoted into the URL
    looks = [
        {run: [_ti("collect", "success"), _ti("etl_features", "scheduled")]},  # caught half-way: unpause
        {run: [_ti("collect", "success"), _ti("etl_features", "running")]},
        {run: [_ti("collect", "success"), _ti("etl_features", "success")], "next": []},  # ETL ended: pause
        {run: [_ti("collect", "success"), _ti("etl_features", "success")], "next": []},  # paused and still: drained
    ]
    api = _IngestApi(looks)
    topo = SimpleNamespace(api="http://af", session=lambda: api)
    assert drain.drain_ingest(topo, timeout_s=60, check=lambda: None)  # type: ignore[arg-type]
    assert api.pauses == [False, True] and api.at == 3
    # Nothing half-way: paused at once, drained on the look after the pause.
    api = _IngestApi([{"queued": []}])
    assert drain.drain_ingest(SimpleNamespace(api="http://af", session=lambda: api), timeout_s=60, check=lambda: None)  # type: ignore[arg-type]
    assert api.pauses == [True]
    # A run whose ETL never ends: False once the time is up, not a wait for ever, and the DAG is left paused.
    stuck = _IngestApi([{run: [_ti("collect", "success"), _ti("etl_features", "running")]}])
    assert not drain.drain_ingest(SimpleNamespace(api="http://af", session=lambda: stuck), timeout_s=0, check=lambda: None)  # type: ignore[arg-type]
    assert stuck.pauses == [False, True]


def test_the_decide_drain_pauses_at_once_and_waits_for_the_change_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    from flinktune.rehearsal import drain

    monkeypatch.setattr(drain.time, "sleep", lambda _s: None)
    run = "scheduled__2026-11-28T10:02:00+00:00"
    looks = [
        {run: [_ti("fleet", "success"), _ti("decide", "running"), _ti("decide", "success")]},  # a change being applied
        {run: [_ti("fleet", "success"), _ti("decide", "running"), _ti("decide", "success")]},
        {run: [_ti("fleet", "success"), _ti("decide", "success"), _ti("decide", "success")]},  # settled
    ]
    api = _IngestApi(looks, dag_id="flinktune_decide")
    assert drain.drain_decide(SimpleNamespace(api="http://af", session=lambda: api), timeout_s=60, check=lambda: None)  # type: ignore[arg-type]
    assert api.pauses == [True] and api.at == 2
    stuck = _IngestApi([{run: [_ti("decide", "running")]}], dag_id="flinktune_decide")
    assert not drain.drain_decide(SimpleNamespace(api="http://af", session=lambda: stuck), timeout_s=0, check=lambda: None)  # type: ignore[arg-type]
    assert stuck.pauses == [True]


def test_each_decision_is_listed_with_the_gate_that_held_it_and_its_data_age(tmp_path: Path) -> None:
    from flinktune.config_space import Configuration, default_space
    from flinktune.decision import Action, Decision
    from flinktune.decision.evaluation import evaluate
    from flinktune.decision.guard import SafetyGuard
    from flinktune.decision.reconfig import ReconfigMode
    from flinktune.decision.stages import RealizeResult
    from flinktune.decision.store import SqliteStateStore
    from flinktune.decision.testing import raw_samples
    from flinktune.kubernetes.controllers import other_controller

    one, two = Configuration(4, 1, 1.0, 2048, 10), Configuration(8, 1, 1.0, 2048, 10)
    space, store = default_space(), SqliteStateStore(tmp_path / "s.db")
    guard = SafetyGuard(space, 1000.0)
    frame = raw_samples("j", 0, 300, rate=1000.0)
    up = Decision(Action.RECONFIGURE, "load grew", "ds2", target=two)
    fresh, stale = evaluate("j", frame, one, 310.0, window_s=300), evaluate("j", frame, one, 900.0, window_s=300)
    # The guard's own words for each gate, recorded as the loop records them.
    store.record_decision(
        DecisionRecord("j", 310.0, fresh, guard.review(up, fresh, 310.0), RealizeResult(True, ReconfigMode.IN_PLACE, 2.0))
    )
    guard.record(310.0, fresh, two)
    later = evaluate("j", raw_samples("j", 100, 300, rate=1000.0), two, 410.0, window_s=300)
    store.record_decision(
        DecisionRecord(
            "j",
            410.0,
            later,
            guard.review(Decision(Action.RECONFIGURE, "more", "ds2", target=Configuration(12, 1, 1.0, 2048, 10)), later, 410.0),
            None,
        )
    )
    store.record_decision(DecisionRecord("j", 900.0, stale, guard.review(up, stale, 900.0), None))
    held = other_controller(
        {"metadata": {"namespace": "f", "name": "j"}, "spec": {"flinkConfiguration": {"job.autoscaler.enabled": "true"}}}
    )
    store.record_decision(DecisionRecord("j", 950.0, stale, Decision.keep("guard", f"hold: {held}"), None))
    store.record_decision(DecisionRecord("j", 960.0, fresh, up, None, dry_run=True))
    store.record_decision(
        DecisionRecord("j", 970.0, fresh, Decision.keep("ds2", "sizes match the running parallelism", planned_rate=1000.0), None)
    )
    report = job_report("j", store.decisions("j"), frame.iloc[0:0], latency_target_ms=1000.0, end_ts=1000.0)
    gates = [(d["ts"], d["gate"]) for d in report["per_decision"]]
    assert gates == [(310.0, "changed"), (410.0, "stabilization window"), (900.0, "stale metrics"), (950.0, "another controller"),
                     (960.0, "advice only"), (970.0, "policy: no change needed")]  # fmt: skip
    assert [d["data_age_s"] for d in report["per_decision"]][:3] == [11.0, 11.0, 601.0]
    assert report["data_age_s_median"] == 11.0 and report["gates"]["changed"] == 1
    # The parallelism each decision ran at and the rate its policy planned for (none without a plan).
    assert [(d["parallelism"], d["planned_rate"]) for d in report["per_decision"]][-2:] == [(4.0, None), (4.0, 1000.0)]
    # How often the job was decided (310, 410, 900, 950, 960, 970): the cadence a decide worker gave it.
    assert (report["decision_gap_s_median"], report["decision_gap_s_max"]) == (50.0, 490.0)
    text = render_markdown({"jobs": {"j": {**report, "rate_plan": {}}}})
    assert "| stale metrics | 601 | 4 | n/a | hold: stale data" in text and "data age at decision: median 11 s" in text
    assert "decided every 50 s (median; longest gap 490 s)" in text
    assert "| policy: no change needed | 11 | 4 | 1,000 | sizes match" in text
