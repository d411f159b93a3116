"""The one p95 latency a report states, for every policy and period alike.

Use :func:`minutes_p95` wherever a report turns minutes into a period's p95, and quote
:data:`P95_DEFINITION` where it is shown. Per-minute features are all a real cluster's lake holds
(``features_1m``: a minute's p95 is its highest per-second p95), so the counterfactuals' per-second
history is cut into the same minutes before it is measured.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["P95_DEFINITION", "minutes_p95"]

P95_DEFINITION = (
    "p95 latency of a period: the 95th percentile of its minutes' p95, a minute's p95 being the highest "
    "per-second p95 in it; a minute is over the target when its p95 is"
)


def minutes_p95(minute_p95_ms: pd.Series) -> float:
    """The period's p95 from its per-minute p95 latencies (:data:`P95_DEFINITION`); NaN minutes are skipped."""
    return float(minute_p95_ms.quantile(0.95))
