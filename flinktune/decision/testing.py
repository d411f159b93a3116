"""Testing implementations of the stage Protocols, for tests of *other* stages.

- :class:`StaticForecaster`: predicts a given constant or profile with fixed quantile spreads.
- :class:`FunctionSurrogate`: a closed-form surrogate (latency grows as utilisation nears 1).
- :class:`FrameMetricsSource`: serves a fixed raw-schema frame.
- :class:`FrameRecentMetrics`: the recent minutes of a fresh decision from a frame, or out of reach.
- :class:`RecordingRealizer`: remembers the configuration it was told to apply.

They are deterministic and cheap; never use them for the stage under test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision.fresh import RecentMetricsUnavailable
from flinktune.decision.reconfig import ReconfigMode, same_shape
from flinktune.decision.stages import RealizeResult
from models.forecasting.types import QuantileForecast
from models.surrogate.types import OUTCOMES, SurrogatePrediction

__all__ = [
    "FixedForecast",
    "FixedModels",
    "FrameMetricsSource",
    "FrameRecentMetrics",
    "FunctionSurrogate",
    "RecordingRealizer",
    "StaticForecaster",
    "raw_samples",
]


@dataclass
class StaticForecaster:
    """Forecasts ``level`` for every bin; quantile q adds ``spread * z(q)``-like fixed margins."""

    level: float
    spread: float = 0.05
    bin_s: int = 60

    def fit(self, series: pd.Series) -> StaticForecaster:
        return self

    def predict(self, history: pd.Series, horizon_s: int) -> QuantileForecast:
        n = max(1, horizon_s // self.bin_s)
        start = (history.index[-1] if len(history) else pd.Timestamp(0, tz="UTC")) + pd.Timedelta(seconds=1)
        mean = np.full(n, self.level)
        qs = {0.5: mean.copy(), 0.9: mean * (1 + self.spread), 0.99: mean * (1 + 2 * self.spread)}
        return QuantileForecast(start=start, bin_s=self.bin_s, mean=mean, quantiles=qs, model="static")


@dataclass
class FunctionSurrogate:
    """Closed-form outcomes: capacity = parallelism x per-slot rate x min(cpu/slots, 1).

    Latency (log) = log(base / (1 - min(util, 0.99))), recovery = downtime + ckpt x rate / spare.
    ``std`` is the same everywhere (log space for latency and recovery).
    """

    space: ConfigSpace
    per_slot_rate: float = 5000.0
    base_latency_ms: float = 100.0
    std: float = 0.1
    outcomes: tuple[str, ...] = OUTCOMES

    def fit(self, X: np.ndarray, rates: np.ndarray, Y: np.ndarray) -> FunctionSurrogate:
        return self

    def _denorm(self, X: np.ndarray) -> np.ndarray:
        b = np.array(self.space.bounds())
        return b[:, 0] + X * (b[:, 1] - b[:, 0])

    def predict(self, X: np.ndarray, rate: float) -> SurrogatePrediction:
        K = self._denorm(np.asarray(X, dtype="float64"))
        p, s, cpu, mem, ck = K.T
        cap = p * self.per_slot_rate * np.minimum(cpu / s, 1.0)
        util = rate / cap
        lat = self.base_latency_ms / (1 - np.minimum(util, 0.99))
        spare = np.maximum(cap - rate, 1.0)
        rec = 30.0 + ck * rate / spare
        tms = np.ceil(p / s)
        mean = np.column_stack([np.log(lat), tms * cpu * np.minimum(util, 1.0), tms * mem * 0.6, np.log(rec)])
        std = np.column_stack([np.full(len(K), self.std), np.full(len(K), 0.1), np.full(len(K), 10.0), np.full(len(K), self.std)])
        return SurrogatePrediction(self.outcomes, mean, std)


class FixedForecast:
    """A ``ForecastProvider`` answering ``level`` rec/s (a :class:`StaticForecaster`) at every decision."""

    def __init__(self, level: float, horizon_s: int = 600) -> None:
        self.level, self.horizon_s = float(level), int(horizon_s)

    def forecast(self, job: str, now: float):
        return StaticForecaster(self.level).predict(pd.Series(dtype=float), self.horizon_s)


class FixedModels:
    """A ``ModelProvider`` with a fixed surrogate and profiling reach; ``refresh`` counts its calls."""

    def __init__(self, surrogate, profiled_max_rate: float) -> None:
        self.surrogate, self.profiled_max_rate, self.refreshed = surrogate, float(profiled_max_rate), 0

    def refresh(self) -> None:
        self.refreshed += 1


@dataclass
class FrameMetricsSource:
    """Serves rows of ``frame`` (raw schema) within the asked range."""

    frame: pd.DataFrame

    def fetch(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame:
        f = self.frame
        return f[(f["job"] == job) & (f["ts_ms"] >= start_ms) & (f["ts_ms"] < end_ms)].reset_index(drop=True)


@dataclass
class FrameRecentMetrics:
    """A :class:`~flinktune.decision.fresh.RecentMetrics` serving rows of ``frame`` in the asked range; with
    ``down`` set it raises :class:`~flinktune.decision.fresh.RecentMetricsUnavailable` with that text.
    ``asked`` lists the ranges asked for."""

    frame: pd.DataFrame
    down: str | None = None
    name: str = "the recent source"
    asked: list[tuple[int, int]] = field(default_factory=list)

    def recent(self, job: str, start_ms: int, end_ms: int) -> pd.DataFrame:
        self.asked.append((start_ms, end_ms))
        if self.down:
            raise RecentMetricsUnavailable(self.down)
        f = self.frame
        return f[(f["job"] == job) & (f["ts_ms"] >= start_ms) & (f["ts_ms"] < end_ms)].reset_index(drop=True)


@dataclass
class RecordingRealizer:
    """Applies configurations to memory; downtime 30 s per change."""

    config: Configuration
    applied: list[Configuration] = field(default_factory=list)

    def current(self, job: str) -> Configuration:
        return self.config

    def apply(self, job: str, config: Configuration) -> RealizeResult:
        if config == self.config:
            return RealizeResult(False, ReconfigMode.NOOP)
        mode = ReconfigMode.IN_PLACE if same_shape(self.config, config) else ReconfigMode.REDEPLOY
        self.config = config
        self.applied.append(config)
        return RealizeResult(True, mode, 30.0)


def raw_samples(
    job: str,
    start_s: int,
    seconds: int,
    *,
    rate: float,
    lag: float = 0.0,
    p95: float = 200.0,
    running: float = 1.0,
    busy_ms: float = 500.0,
) -> pd.DataFrame:
    """A raw-schema frame of ``seconds`` per-second samples with constant values."""
    ts = (np.arange(seconds) + start_s) * 1000
    rows = []
    for metric, vertex, value in [
        ("workloadRate", "", rate),
        ("numRecordsOutPerSecond", "Source: events", rate),
        ("pendingRecords", "", lag),
        ("latencyP95Ms", "", p95),
        ("latencyP50Ms", "", p95 / 2),
        ("jobRunning", "", running),
        ("cpuLoad", "", 4.0),
        ("heapUsedMb", "", 2048.0),
        ("busyTimeMsPerSecond", "Window", busy_ms),
        ("backPressuredTimeMsPerSecond", "Source: events", 0.0),
    ]:
        rows.append(pd.DataFrame({"job": job, "metric": metric, "vertex": vertex, "subtask": -1, "ts_ms": ts, "value": value}))
    return pd.concat(rows, ignore_index=True)
