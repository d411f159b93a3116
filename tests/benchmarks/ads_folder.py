"""The real ADS folder and a small slice of it, shared by the fidelity benchmarks' tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

#: The real measurements (../shared/data/demeter-ads beside the repository, or FLINKTUNE_DEMETER_ADS).
ADS_DATA = Path(
    os.environ.get("FLINKTUNE_DEMETER_ADS", Path(__file__).resolve().parents[2].parent / "shared" / "data" / "demeter-ads")
)


def ads_slice(out: Path, hours: float) -> Path:
    """A folder in the demeter-ads format under ``out``: 10 profiling runs per run, the trace's first
    ``hours`` and the summaries, no ``measured_60s``. Skips the test when the real data is absent."""
    if not (ADS_DATA / "profiling_runs.csv").exists():
        pytest.skip(f"real data not found at {ADS_DATA}")
    runs = pd.read_csv(ADS_DATA / "profiling_runs.csv")
    runs.groupby("run", group_keys=False).head(10).to_csv(out / "profiling_runs.csv", index=False)
    trace = pd.read_csv(ADS_DATA / "trace_x3.csv")
    trace[trace["timestamp"] < trace["timestamp"].iloc[0] + hours * 3600].to_csv(out / "trace_x3.csv", index=False)
    for name in ("summary_by_method.csv", "summary_per_run.csv", "results_recovery_per_injection.csv", "profiling_overhead.csv"):
        shutil.copy(ADS_DATA / name, out / name)
    return out
