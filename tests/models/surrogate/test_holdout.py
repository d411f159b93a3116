"""Surrogate promotion on held-out observations, through the training job, against a real MLflow on SQLite.

The job gathers observations over time: a champion trained on its first few must give way to a
version that predicts the newest ones better, a refit on the same observations must not replace
it, and a champion trained for other knobs must give way whatever its scores.
"""

import mlflow
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flinktune.config_space import KNOBS, ConfigSpace, Configuration
from flinktune.lake import Lake
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.settings import Settings
from jobs import train_surrogate
from models import registry
from models.surrogate.gp import GPSurrogate
from models.surrogate.holdout import METRIC, MIN_HOLDOUT, MIN_TRAIN, hold_out
from models.surrogate.pyfunc import SurrogatePyfunc
from models.surrogate.types import OUTCOMES

NAME = "flinktune-surrogate-demo"


@pytest.fixture
def settings(tmp_path):
    return Settings(var_dir=tmp_path / "var", device="cpu")


def _observations(n, seed, rates, start_ms):
    """``n`` profiling runs of distinct configurations at ``rates`` (low, high) rec/s, from ``start_ms`` on."""
    rng = np.random.default_rng(seed)
    cands = ConfigSpace().candidates()
    picks = [cands[i] for i in rng.choice(len(cands), n, replace=False)]
    rate = rng.uniform(*rates, n)
    p = np.array([c.parallelism for c in picks], dtype=float)
    frame = pd.DataFrame([c.to_dict() for c in picks])
    frame["job"], frame["run_id"], frame["ts_ms"] = "demo", [f"r{seed}-{i}" for i in range(n)], start_ms + 60_000 * np.arange(n)
    frame["input_rate"], frame["throughput"] = rate, rate
    # Latency climbs steeply once the rate nears what the parallelism can take: far from the first runs' rates.
    frame["latency_ms"] = 30 * np.exp(rate / (4_000 * p))
    frame["recovery_s"] = 20 + frame["checkpoint_interval_s"] * rate / 30_000
    frame["cpu_used"] = np.minimum(np.array([c.total_cpu for c in picks]), rate / 20_000)
    frame["memory_used_mb"] = 0.6 * frame["memory_mb"] * np.ceil(p / frame["task_slots"])
    return frame[list(PROFILING_COLUMNS)]


def _write(settings, part, frame):
    path = Lake(settings.lake_dir).curated_dir("profiling_observations") / "job=demo" / f"part-{part}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


def _knobs(obs):
    space = ConfigSpace()
    return np.array([space.normalise(Configuration.from_dict(r)) for r in obs[list(KNOBS)].to_dict("records")])


def _version(number):
    return mlflow.MlflowClient().get_model_version(NAME, str(number))


def test_a_champion_from_the_first_observations_gives_way_to_one_that_predicts_the_newest(settings):
    _write(settings, 0, _observations(10, seed=1, rates=(8_000, 20_000), start_ms=1_700_000_000_000))
    first = train_surrogate.run(job="demo", settings=settings)
    assert (first["version"], first["promoted"]) == ("1", True)
    assert first["promotion"].startswith("promoted: no champion yet")
    # The job then ran at higher rates: 40 more runs, the newest 10 of 50 held out.
    _write(settings, 1, _observations(40, seed=2, rates=(30_000, 60_000), start_ms=1_700_100_000_000))
    second = train_surrogate.run(job="demo", settings=settings)
    mine, theirs = second["metrics"][METRIC], float(second["promotion"].split(" vs champion v1 ")[1].split()[0])
    assert (second["promoted"], second["champion"]) == (True, "2"), second["promotion"]
    assert mine < theirs and second["metrics"]["holdout_rows"] == 10
    assert second["promotion"] == (
        f"promoted: held-out RMSE of log p95 latency {mine:.3g} vs champion v1 {theirs:.3g} "
        "on the 10 newest of 50 profiling observations of job demo; finite metrics"
    )
    words = _version(2).description
    assert words.startswith("Champion: held-out RMSE of log p95 latency") and "re-scored on the same 10 observations" in words
    assert "a fit on the 40 older ones, then refitted on all 50" in words
    assert _version(2).tags["promotion_metric"] == METRIC
    # The registered version was refitted on every observation, not only the older ones.
    assert registry.load_champion(NAME).fit_info["latency_ms.points"] == 50


def test_a_refit_on_the_same_observations_keeps_the_champion(settings):
    _write(settings, 0, _observations(30, seed=3, rates=(10_000, 60_000), start_ms=1_700_000_000_000))
    first = train_surrogate.run(job="demo", settings=settings)
    again = train_surrogate.run(job="demo", settings=settings)
    # The champion saw the held-out runs, the scored fit did not: the champion keeps its place.
    assert (again["version"], again["promoted"], again["champion"]) == ("2", False, first["version"])
    assert again["promotion"].startswith("kept champion: held-out RMSE of log p95 latency")
    assert "on the 6 newest of 30 profiling observations of job demo" in again["promotion"]
    assert _version(2).aliases == ["challenger"]
    assert _version(2).description.startswith("Not promoted (challenger; version 1 stays champion): held-out RMSE")


def _register_champion_on(settings, tmp_path, knobs, columns):
    """Version 1, the champion: a surrogate whose wrapper reads ``knobs``, fitted on ``columns`` of the knob vector."""
    registry.configure(settings.mlflow_tracking_uri, settings.mlflow_artifact_root)
    obs = _observations(12, seed=5, rates=(10_000, 60_000), start_ms=1_600_000_000_000)
    space = ConfigSpace()
    X = _knobs(obs)
    model = GPSurrogate().fit(X[:, columns], obs["input_rate"].to_numpy(), obs[list(OUTCOMES)].to_numpy())
    bounds = [space.bounds()[KNOBS.index(k)] if k in KNOBS else (0.0, 1.0) for k in knobs]
    wrapper = SurrogatePyfunc(knobs, bounds)
    version = registry.log_and_register(
        NAME,
        wrapper,
        params={"job": "demo"},
        metrics={},
        experiment=NAME,
        artifacts={"model": str(model.save(tmp_path / "old.pt"))},
    )
    mlflow.MlflowClient().set_registered_model_alias(NAME, registry.CHAMPION, version)


@pytest.mark.parametrize(
    ("knobs", "columns", "why"),
    [
        # trained before checkpoint_interval_s was a knob: its wrapper reads four knobs
        (list(KNOBS[:4]), [0, 1, 2, 3], "was trained for another configuration space (parallelism [8, 24]"),
        # reads the same knobs but its model was fitted on four of them: it cannot predict five
        (list(KNOBS), [0, 1, 2, 3], "cannot score the 6 newest of 30 profiling observations of job demo (SurrogateInputError"),
    ],
)
def test_a_champion_that_cannot_score_the_held_out_observations_is_replaced(settings, tmp_path, knobs, columns, why):
    _register_champion_on(settings, tmp_path, knobs, columns)
    _write(settings, 0, _observations(30, seed=6, rates=(10_000, 60_000), start_ms=1_700_000_000_000))
    new = train_surrogate.run(job="demo", settings=settings)
    assert (new["version"], new["promoted"], new["champion"]) == ("2", True, "2"), new["promotion"]
    assert new["promotion"].startswith(f"promoted: champion v1 {why}"), new["promotion"]
    assert _version(2).description.startswith(f"Champion: champion v1 {why}")


def test_too_few_observations_to_hold_out_leave_no_score_and_say_why():
    n = MIN_HOLDOUT + MIN_TRAIN - 1
    obs = _observations(n, seed=7, rates=(10_000, 60_000), start_ms=0)
    held = hold_out(
        obs,
        _knobs(obs),
        obs["input_rate"].to_numpy(),
        obs[list(OUTCOMES)].to_numpy(),
        job="demo",
        knobs=list(KNOBS),
        bounds=ConfigSpace().bounds(),
        fit=lambda *a: pytest.fail("nothing to fit"),
    )
    assert held.scores == {} and held.metrics() == {"holdout_rows": 0.0}
    assert held.problem == f"{n} observations are too few to hold out {MIN_HOLDOUT} and fit on {MIN_TRAIN} or more"
