"""Evaluation reads label columns as codes: the same state from string, object and categorical labels,
and per-vertex figures equal to a plain pandas group-by on per-subtask samples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.config_space import ConfigSpace
from flinktune.decision.evaluation import evaluate, vertex_metrics
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob
from flinktune.twin.workload import generate_trace


def _window(detail: str, seconds: int = 180) -> tuple[pd.DataFrame, TwinJob]:
    space = ConfigSpace()
    twin = TwinJob(ClusterProfile.default("ysb"), space.candidates()[0], seed=5, detail=detail, failures="none")
    rates = generate_trace("ysb", 1.0, 5).to_numpy()[:seconds]
    return twin.run(rates), twin


def _relabelled(df: pd.DataFrame, dtype: str) -> pd.DataFrame:
    return df.assign(**{c: df[c].astype(dtype) for c in ("job", "metric", "vertex")})


@pytest.mark.parametrize("detail", ["vertex", "subtask"])
def test_the_state_does_not_depend_on_how_labels_are_stored(detail: str) -> None:
    df, twin = _window(detail)
    states = [
        evaluate("demo", frame, twin.config, twin.now, window_s=180)
        for frame in (df, _relabelled(df, "object"), _relabelled(df, "category"))
    ]
    assert states[0].vertices and states[0].analysis is not None
    assert states[0] == states[1] == states[2]


def _reference(samples: pd.DataFrame) -> dict[str, tuple[float, float, float, float]]:
    """Per vertex (records in, out, busy, backpressure) by pandas group-bys on the string labels."""
    df = samples[samples["metric"].isin(["numRecordsInPerSecond", "numRecordsOutPerSecond", "busyTimeMsPerSecond",
                                         "backPressuredTimeMsPerSecond"]) & (samples["vertex"] != "")]  # fmt: skip
    out = {}
    for name, v in df.groupby("vertex", sort=False):
        per_s = v.groupby(["metric", "ts_ms"])["value"]
        sums, maxes = per_s.sum(), per_s.max()
        busy = maxes["busyTimeMsPerSecond"]
        working = busy.index[busy.to_numpy() > 0]
        out[str(name)] = (
            float(sums["numRecordsInPerSecond"].reindex(working).mean()),
            float(sums["numRecordsOutPerSecond"].reindex(working).mean()),
            float(busy.reindex(working).mean()) / 1000.0,
            float(maxes["backPressuredTimeMsPerSecond"].reindex(working).mean()) / 1000.0,
        )
    return out


def test_per_subtask_samples_sum_records_and_take_the_busiest_subtask() -> None:
    df, twin = _window("subtask")
    assert (df["subtask"] > 0).any()  # several subtasks per vertex: the group-by path
    got = {
        v.name: (v.records_in_per_s, v.records_out_per_s, v.busy_ratio, v.backpressure_ratio)
        for v in vertex_metrics(df, twin.config)
    }
    want = _reference(df)
    assert list(got) == list(want)
    for name, figures in want.items():
        np.testing.assert_allclose(got[name], figures, rtol=1e-12, atol=1e-12, err_msg=name)
