"""Was each reconfiguration correct? A check on recorded metrics, against measured capacities.

Use :func:`judge_changes` after a decision-loop run (benchmarks/localflink/loop.py writes its
verdicts to summary.json). A change is **correct** when, over the time it was in force (from
``settle_s`` after it until the next change or the end of the run):

- **latency held**: the job's p95 latency samples exceeded the target in at most
  ``allowed_over`` of the samples (a rescale's own hiccup is inside ``settle_s``), and
- **no needless capacity**: no smaller parallelism would have carried the peak offered rate of
  that period at ``safe_utilization`` of its measured capacity.

So a scale-up is correct when the load that followed needed the new size and the new size met
the target; a scale-down when the smaller size met the target. A period shorter than
``min_window_s`` is not judged (``correct`` is None, and ``why`` says so).

Inputs: ``samples`` in the raw schema (``workloadRate`` and ``latencyP95Ms`` job-level rows);
``changes`` as :class:`Change` (epoch seconds, parallelism before and after, how, downtime);
``capacity`` rec/s by parallelism.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Change", "ChangeVerdict", "judge_changes", "smallest_sufficient"]


@dataclass(frozen=True)
class Change:
    """One carried-out reconfiguration: when (epoch s), parallelism before/after, mode, downtime (s)."""

    ts: float
    from_p: int
    to_p: int
    mode: str = ""
    downtime_s: float = float("nan")
    reason: str = ""

    @property
    def kind(self) -> str:
        return "scale-up" if self.to_p > self.from_p else "scale-down" if self.to_p < self.from_p else "reshape"


@dataclass(frozen=True)
class ChangeVerdict:
    """The verdict on one :class:`Change` and the figures behind it (rates rec/s, latency ms, times epoch s)."""

    change: Change
    window_start: float
    window_end: float
    peak_rate: float
    latency_p95_ms: float
    over_target_fraction: float
    smallest_sufficient_p: int | None
    latency_ok: bool | None
    needless: bool | None
    correct: bool | None
    why: str

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["change"] = dict(asdict(self.change), kind=self.change.kind)
        return d


def smallest_sufficient(rate: float, capacity: dict[int, float], safe_utilization: float) -> int | None:
    """The smallest parallelism whose capacity carries ``rate`` at ``safe_utilization``, or None."""
    ok = [p for p, c in capacity.items() if rate <= safe_utilization * c]
    return min(ok) if ok else None


def _job_series(samples: pd.DataFrame, metric: str, start: float, end: float) -> pd.Series:
    sel = samples[(samples["metric"] == metric) & (samples["ts_ms"] >= start * 1000) & (samples["ts_ms"] < end * 1000)]
    return sel.groupby("ts_ms")["value"].max().sort_index()


def judge_changes(
    samples: pd.DataFrame,
    changes: Sequence[Change],
    capacity: dict[int, float],
    latency_target_ms: float,
    end_ts: float,
    *,
    settle_s: float = 30.0,
    min_window_s: float = 60.0,
    allowed_over: float = 0.05,
    safe_utilization: float = 0.85,
) -> list[ChangeVerdict]:
    """One :class:`ChangeVerdict` per change, in time order (see the module doc)."""
    if not latency_target_ms > 0:
        raise ValueError(f"judge_changes: latency target must be positive, got {latency_target_ms!r}")
    missing = [m for m in ("workloadRate", "latencyP95Ms") if m not in set(samples["metric"])] if len(samples) else ["all"]
    if changes and missing:
        raise ValueError(f"judge_changes: the samples lack {missing}: cannot judge changes without offered rate and latency")
    ordered = sorted(changes, key=lambda c: c.ts)
    unknown = sorted({p for c in ordered for p in (c.from_p, c.to_p)} - set(capacity))
    if unknown:
        raise ValueError(f"judge_changes: no measured capacity for parallelism {unknown} (measured: {sorted(capacity)})")
    out: list[ChangeVerdict] = []
    for i, ch in enumerate(ordered):
        start = ch.ts + settle_s
        end = ordered[i + 1].ts if i + 1 < len(ordered) else end_ts
        rate = _job_series(samples, "workloadRate", start, end)
        lat = _job_series(samples, "latencyP95Ms", start, end)
        if end - start < min_window_s or len(rate) < 3 or len(lat) < 3:
            out.append(
                ChangeVerdict(
                    ch,
                    start,
                    end,
                    float("nan"),
                    float("nan"),
                    float("nan"),
                    None,
                    None,
                    None,
                    None,
                    f"not judged: {max(end - start, 0):.0f} s in force after settling "
                    f"(need {min_window_s:.0f} s) with {len(lat)} latency samples",
                )
            )
            continue
        peak = float(rate.max())
        over = float((lat > latency_target_ms).mean())
        p95 = float(np.quantile(lat.to_numpy(), 0.95))
        need = smallest_sufficient(peak, capacity, safe_utilization)
        latency_ok = over <= allowed_over
        needless = need is not None and need < ch.to_p
        parts = [f"p95 latency over {latency_target_ms:.0f} ms in {over:.0%} of samples (allowed {allowed_over:.0%})"]
        if need is None:
            parts.append(f"peak {peak:,.0f} rec/s is beyond {safe_utilization:.0%} of every measured capacity")
        else:
            parts.append(f"peak {peak:,.0f} rec/s needs p={need} ({capacity[need]:,.0f} rec/s at {safe_utilization:.0%})")
        if needless:
            parts.append(f"p={ch.to_p} was more than needed")
        out.append(
            ChangeVerdict(
                ch, start, end, peak, p95, over, need, latency_ok, needless, latency_ok and not needless, "; ".join(parts)
            )
        )
    return out
