"""An RGPESurrogate through MLflow: jobs.train_surrogate(kind="rgpe") registers it, the pyfunc serves it."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flinktune.config_space import KNOBS, ConfigSpace
from flinktune.lake import Lake
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.settings import Settings
from jobs import train_surrogate
from models import registry
from models.surrogate.pyfunc import load_surrogate
from models.surrogate.rgpe_surrogate import RGPESurrogate


def _observations(n, seed):
    rng = np.random.default_rng(seed)
    cands = ConfigSpace().candidates()
    picks = [cands[i] for i in rng.choice(len(cands), n, replace=False)]
    rate = rng.choice([25_000.0, 35_000.0], n) + rng.uniform(-3_000, 3_000, n)
    p = np.array([c.parallelism for c in picks], dtype=float)
    frame = pd.DataFrame([c.to_dict() for c in picks])
    frame["job"], frame["run_id"], frame["ts_ms"] = "demo", [f"r{i}" for i in range(n)], 1_700_000_000_000 + np.arange(n)
    frame["input_rate"], frame["throughput"] = rate, rate
    frame["latency_ms"] = 30 * np.exp(rate / (4_000 * p))
    frame["recovery_s"] = 20 + frame["checkpoint_interval_s"] * rate / 30_000
    frame["cpu_used"] = np.array([c.total_cpu for c in picks]) * rate / 60_000
    frame["memory_used_mb"] = 0.6 * frame["memory_mb"] * np.ceil(p / frame["task_slots"])
    return frame[list(PROFILING_COLUMNS)]


def test_train_register_and_serve_an_rgpe_surrogate(tmp_path):
    settings = Settings(var_dir=tmp_path / "var", device="cpu")
    path = Lake(settings.lake_dir).curated_dir("profiling_observations") / "job=demo" / "part-0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(_observations(16, seed=1), preserve_index=False), path)
    out = train_surrogate.run(job="demo", settings=settings, kind="rgpe")
    assert (out["version"], out["promoted"]) == ("1", True)
    assert out["metrics"]["buckets"] == 2.0
    assert 0 <= out["metrics"]["rgpe_target_weight.latency_ms.b2"] <= 1
    champion = registry.load_champion("flinktune-surrogate-demo")
    assert isinstance(champion, RGPESurrogate)
    # the pyfunc face: raw knob values plus a rate per row
    import mlflow.pyfunc

    served = mlflow.pyfunc.load_model("models:/flinktune-surrogate-demo@champion")
    space = ConfigSpace()
    rows = pd.DataFrame([{**c.to_dict(), "rate": r} for c in space.candidates()[:2] for r in (25_000.0, 34_000.0)])
    table = served.predict(rows[[*KNOBS, "rate"]])
    assert len(table) == 4 and np.isfinite(table.to_numpy()).all()
    direct = champion.predict(np.array([space.normalise(c) for c in space.candidates()[:2]]), 34_000.0)
    np.testing.assert_allclose(table["latency_ms_mean"].to_numpy()[1::2], direct.mean[:, 0], rtol=1e-6)
    with pytest.raises(ValueError, match="unknown surrogate kind 'forest'"):
        train_surrogate.run(job="demo", settings=settings, kind="forest")


def test_load_surrogate_refuses_a_foreign_file(tmp_path):
    import torch

    bad = tmp_path / "x.pt"
    torch.save({"kind": "forest"}, bad)
    with pytest.raises(ValueError, match=r"x.pt: unknown kind 'forest'"):
        load_surrogate(bad)
