"""A fleet's models: one registered surrogate per job in one MLflow, each with its own @champion.

Real jobs.train_surrogate runs for two jobs on their own profiling observations in one tmp lake and
one SQLite MLflow; the decide run's model provider of each job loads that job's champion.
"""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flinktune.config_space import ConfigSpace
from flinktune.decision.providers import ChampionModels
from flinktune.lake import Lake
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.settings import Settings
from jobs import train_surrogate
from models import registry


def _observations(job: str, n: int, seed: int, slow: float, start_ms: int = 1_700_000_000_000, rates=(10_000, 60_000)):
    import pandas as pd

    rng = np.random.default_rng(seed)
    cands = ConfigSpace().candidates()
    picks = [cands[i] for i in rng.choice(len(cands), n, replace=False)]
    rate = rng.uniform(*rates, n)
    p = np.array([c.parallelism for c in picks], dtype=float)
    frame = pd.DataFrame([c.to_dict() for c in picks])
    frame["job"], frame["run_id"], frame["ts_ms"] = job, [f"{job}-{i}" for i in range(n)], start_ms + np.arange(n)
    frame["input_rate"], frame["throughput"] = rate, rate
    frame["latency_ms"] = slow * 30 * np.exp(rate / (4_000 * p))  # job b's operators are `slow` times slower
    frame["recovery_s"] = 20 + frame["checkpoint_interval_s"] * rate / 30_000
    frame["cpu_used"] = np.minimum(np.array([c.total_cpu for c in picks]), rate / 20_000)
    frame["memory_used_mb"] = 0.6 * frame["memory_mb"] * np.ceil(p / frame["task_slots"])
    return frame[list(PROFILING_COLUMNS)]


def _land(settings: Settings, job: str, part: int, frame) -> None:
    path = Lake(settings.lake_dir).curated_dir("profiling_observations") / f"job={job}" / f"part-{part}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


@pytest.mark.slow
def test_each_job_has_its_own_registered_surrogate_and_champion(tmp_path) -> None:
    settings = Settings(var_dir=tmp_path / "var", device="cpu")
    _land(settings, "ads", 0, _observations("ads", 24, seed=1, slow=1.0))
    _land(settings, "clicks", 0, _observations("clicks", 24, seed=2, slow=4.0))
    a = train_surrogate.run(job="ads", settings=settings)
    b = train_surrogate.run(job="clicks", settings=settings)
    assert (a["model_name"], a["champion"]) == ("flinktune-surrogate-ads", "1")
    assert (b["model_name"], b["champion"]) == ("flinktune-surrogate-clicks", "1"), "versions count per job"
    # clicks then ran at higher rates: the new version predicts those runs better, its champion moves; the other job's stays.
    _land(
        settings, "clicks", 1, _observations("clicks", 16, seed=3, slow=4.0, start_ms=1_700_003_600_000, rates=(60_000, 90_000))
    )
    again = train_surrogate.run(job="clicks", settings=settings)
    assert (again["version"], again["promoted"]) == ("2", True)
    assert registry.champion_version("flinktune-surrogate-clicks") == "2"
    assert registry.champion_version("flinktune-surrogate-ads") == "1"
    # Each job's decide loads its own champion: the slow job's latency model predicts it slower.
    space = ConfigSpace()
    X = np.array([space.normalise(c) for c in space.candidates()])
    ads, clicks = ChampionModels(Lake(settings.lake_dir), "ads"), ChampionModels(Lake(settings.lake_dir), "clicks")
    assert ads.surrogate is not None and clicks.surrogate is not None
    assert clicks.surrogate.fit_info["latency_ms.points"] == 40 and ads.surrogate.fit_info["latency_ms.points"] == 24
    ratio = np.median(
        clicks.surrogate.predict(X, 30_000).median("latency_ms") / ads.surrogate.predict(X, 30_000).median("latency_ms")
    )
    assert 2.0 < ratio < 8.0, ratio
