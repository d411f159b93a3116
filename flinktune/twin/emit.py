"""Turns the twin's per-second arrays into raw-schema samples (flinktune.metrics.schema).

Use :func:`raw_frame` with one array per series; it builds the long frame with numpy in one go
(no per-sample pandas), ordered by time, then metric order as given. A series is keyed by
(metric, vertex, subtask); job-level series use vertex "" and subtask -1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from flinktune.metrics.schema import RAW_COLUMNS, empty_frame

__all__ = ["Series", "raw_frame"]

#: One emitted series: (metric, vertex, subtask, values with one entry per second).
Series = tuple[str, str, int, np.ndarray]


def _strings(labels: Sequence[str], codes: np.ndarray) -> pd.api.extensions.ExtensionArray:
    # Build the string column through a categorical: only len(labels) distinct Python strings.
    cat = pd.Categorical.from_codes(codes, categories=pd.Index(list(labels)))
    return cat.astype("string")


def raw_frame(job: str, ts_s: np.ndarray, series: Sequence[Series]) -> pd.DataFrame:
    """Raw samples for ``len(ts_s)`` seconds of every series (rows = seconds x series)."""
    n, m = len(ts_s), len(series)
    if n == 0 or m == 0:
        return empty_frame()
    values = np.empty((n, m), dtype=np.float64)
    for j, (_, _, _, arr) in enumerate(series):
        values[:, j] = arr
    metric_labels = list(dict.fromkeys(s[0] for s in series))
    vertex_labels = list(dict.fromkeys(s[1] for s in series))
    metric_codes = np.array([metric_labels.index(s[0]) for s in series], dtype=np.int32)
    vertex_codes = np.array([vertex_labels.index(s[1]) for s in series], dtype=np.int32)
    subtasks = np.array([s[2] for s in series], dtype=np.int32)
    df = pd.DataFrame(
        {
            "job": _strings([job], np.zeros(n * m, dtype=np.int32)),
            "metric": _strings(metric_labels, np.tile(metric_codes, n)),
            "vertex": _strings(vertex_labels, np.tile(vertex_codes, n)),
            "subtask": np.tile(subtasks, n),
            "ts_ms": np.repeat(np.asarray(ts_s, dtype=np.int64) * 1000, m),
            "value": values.ravel(),
        },
        columns=list(RAW_COLUMNS),
    )
    return df
