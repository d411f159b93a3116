"""A job's state folder for a report: curated features in the lake and decisions in the state store.

Use :func:`state_folder` in the tests of ``flinktune report`` and of the bad-input corpus: 1.2 h of a
twin job's minutes as ``features_1m`` and three decisions, no twin file (so the report has no
counterfactual, replays nothing and says so).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from flinktune.config_space import default_space
from flinktune.decision import Decision
from flinktune.decision.evaluation import evaluate
from flinktune.decision.stages import DecisionRecord
from flinktune.decision.store import SqliteStateStore
from flinktune.decision.testing import raw_samples
from flinktune.lake import Lake
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob
from flinktune.twin.workload import generate_trace

__all__ = ["state_folder"]


def state_folder(var: Path, job: str = "j") -> Path:
    """1.2 h of a twin job's minutes as curated features_1m and three decisions in the state store (no twin file:
    the report has no counterfactual and says so)."""
    trace = generate_trace("ysb", 1.5, 5)
    twin = TwinJob(ClusterProfile.default("ysb"), default_space().maximum, job=job, seed=5,
                   start_ts=int(trace.index[0].timestamp()), failures="none")  # fmt: skip
    twin.run(trace.to_numpy()[:4200])
    h = twin.history().set_index("ts")
    f = h.resample("1min").agg({"rate": "mean", "throughput": "mean", "lag": "mean", "latency_p50_ms": "max", "latency_p95_ms": "max",
                                "cpu_used": "mean", "memory_used_mb": "mean", "taskmanagers": "last", "cpu": "last",
                                "memory_mb": "last", "parallelism": "last", "task_slots": "last", "checkpoint_interval_s": "last",
                                "restarts": lambda s: float(s.iloc[-1] - s.iloc[0])})  # fmt: skip
    f = f.rename(columns={"rate": "input_rate"}).reset_index().rename(columns={"ts": "window_start"})
    path = Lake(var / "lake").curated_job_dir("features_1m", job) / "date=2024-01-01" / "part-0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(f, preserve_index=False), path)
    store = SqliteStateStore(var / "state" / "flinktune.db")
    st = evaluate(job, raw_samples(job, 0, 600, rate=30000), default_space().maximum, 600, window_s=600)
    start = int(trace.index[2400].timestamp())
    for k in (1, 2, 3):
        store.record_decision(
            DecisionRecord(job, float(start + 600 * k), st, Decision.keep("flinktune", "p24 fits 30,000 rec/s; keep"), None)
        )
    return var
