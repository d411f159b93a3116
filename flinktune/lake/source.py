"""A :class:`~flinktune.decision.stages.MetricsSource` over the lake's raw samples.

Use it when the raw lake is fed close to real time (the twin writes each interval as it runs;
the Prometheus extractor every few minutes). The stale-data guard rule catches a lake that lags.
"""

from __future__ import annotations

import pandas as pd

from flinktune.lake.root import Lake

__all__ = ["LakeMetricsSource"]


class LakeMetricsSource:
    """Reads ``[start_ms, end_ms)`` of one job from ``lake``'s raw metrics."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake

    def fetch(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame:
        return self.lake.read_raw(job, start_ms, end_ms)
