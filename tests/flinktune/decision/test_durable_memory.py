"""The decide job, one process per tick, decides as the replay's single process.

The replay keeps one policy object for the whole trace; in production every decide run is a new
process. Here each tick is one ``python -m jobs.decide --ticks 1`` run against a var dir on disk:
the twin and its trace (``jobs.simulate``'s layout), the raw lake the twin writes each interval to,
the SQLite state store (decisions, the guard's history and the flinktune policy's memory) and the
models (``--models``: the replay's, saved with ``ReplayModels.save``, as the champions would come
from MLflow). Same trace, seed and failures as the in-process :func:`run_replay`: the decisions
must be the same, reasons included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.decision.store import MemoryStateStore, SqliteStateStore
from flinktune.replay.harness import ReplaySettings, prepare_replay, run_replay
from flinktune.settings import load_settings
from flinktune.twin.job_store import save_job
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.workload import generate_trace

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
TICKS = 4  # 20 min at flinktune's 300 s cadence: the first shape choice, a failure and what follows them
SETTINGS = ReplaySettings(workload="ysb", seed=7, failures="every:15m", forecaster="naive")


def _decisions(rows: pd.DataFrame) -> list[tuple]:
    return [(float(r.ts), r.action, r.target, r.reason) for r in rows.itertuples(index=False)]


def test_decide_job_one_process_per_tick_decides_as_the_single_process_replay(tmp_path: Path) -> None:
    space = default_space()
    trace = generate_trace("ysb", 1.0, SETTINGS.seed, start="2026-01-05 08:00")
    trace = trace.iloc[: TICKS * 300]
    rig = prepare_replay("flinktune", trace, ClusterProfile.default("ysb"), space, SETTINGS)
    assert rig.interval == 300 and rig.models is not None
    # Both runs start from the same bootstrapped models and the twin at static max, saved before the replay moves them.
    var = tmp_path / "var"
    settings = load_settings(var_dir=var)
    save_job(settings.twin_dir, rig.twin, trace)
    models_file = rig.models.save(tmp_path / "models.pkl")

    reference = MemoryStateStore()
    run_replay(rig, trace, store=reference)
    expected = _decisions(reference.decisions("replay"))
    assert len(expected) == TICKS

    # The replay's goals and cadence as the decide job's settings; everything else is the job's default.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "FLINKTUNE_VAR_DIR": str(var),
        "FLINKTUNE_CLUSTER": "twin",
        "FLINKTUNE_DECISION_INTERVAL_S": str(rig.interval),
        "FLINKTUNE_LATENCY_TARGET_MS": str(SETTINGS.latency_target_ms),
        "FLINKTUNE_RECOVERY_LIMIT_S": str(SETTINGS.recovery_limit_s),
        "FLINKTUNE_CONFIDENCE": str(SETTINGS.confidence),
        "FLINKTUNE_FORECAST_HORIZON_S": str(SETTINGS.forecast_horizon_s),
    }
    # The twin is a simulation: the job is switched to act, as the replay acts, and each run applies.
    SqliteStateStore(settings.state_db).set_mode("replay", "act", by="the durable-memory test")
    argv = [sys.executable, "-m", "jobs.decide", "--job", "replay", "--ticks", "1", "--apply", "--models", str(models_file)]
    for tick in range(TICKS):
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"tick {tick + 1}: {proc.stderr[-2000:]}"
        assert len(json.loads(proc.stdout.splitlines()[-1])["decisions"]) == 1
    store = SqliteStateStore(settings.state_db)
    assert _decisions(store.decisions("replay")) == expected
    # What made that possible: the policy's memory, saved with each decision (a shape and measured capacities).
    memory = store.policy_memory("replay", "flinktune")
    assert memory is not None and memory["shape"] is not None and memory["capacities"]["models"]
