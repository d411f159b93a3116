"""The shape of a quantile forecast, shared by every forecaster and its consumers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["DEFAULT_QUANTILES", "ForecastInputError", "QuantileForecast"]

DEFAULT_QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class QuantileForecast:
    """A forecast of the next ``len(mean)`` bins of ``bin_s`` seconds each.

    ``start`` is the start of the first bin (UTC). ``quantiles[q]`` and ``mean`` hold one value per
    bin: the forecast mean rate over that bin (records/s). Quantile arrays are non-decreasing in q.

    ``peak_quantiles`` (optional, same levels as ``quantiles``, 0.5 among them) is the forecast
    distribution of the window's highest bin, set by forecasters that model the peak directly.
    The max over bins of a per-bin quantile understates the quantile of the max, so when it is
    set, :meth:`peak` reads it.
    """

    start: pd.Timestamp
    bin_s: int
    mean: np.ndarray
    quantiles: dict[float, np.ndarray] = field(default_factory=dict)
    model: str = ""
    peak_quantiles: dict[float, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.mean)
        for q, arr in self.quantiles.items():
            if len(arr) != n:
                raise ValueError(f"quantile {q} has {len(arr)} bins, mean has {n}")
        if self.peak_quantiles and (set(self.peak_quantiles) != set(self.quantiles) or 0.5 not in self.peak_quantiles):
            raise ValueError(
                f"peak_quantiles levels {sorted(self.peak_quantiles)} must equal the bin quantile "
                f"levels {sorted(self.quantiles)} and include 0.5"
            )

    @property
    def horizon_s(self) -> int:
        return self.bin_s * len(self.mean)

    def peak(self, q: float | None = None) -> float:
        """Highest bin value of the mean (``q=None``) or of quantile ``q``.

        With ``peak_quantiles`` set: its median (``q=None``) or its quantile ``q``.
        """
        if self.peak_quantiles:
            return float(self.peak_quantiles[0.5 if q is None else q])
        arr = self.mean if q is None else self.quantiles[q]
        return float(np.max(arr))

    def to_frame(self) -> pd.DataFrame:
        """One row per bin: ``bin_start``, ``mean`` and ``q<level>`` columns."""
        idx = pd.date_range(self.start, periods=len(self.mean), freq=f"{self.bin_s}s")
        data = {"bin_start": idx, "mean": self.mean}
        for q, arr in sorted(self.quantiles.items()):
            data[f"q{q:g}"] = arr
        return pd.DataFrame(data)


class ForecastInputError(ValueError):
    """A rate series cannot be used to fit or to forecast; the message says what and where.

    Raised for: a non-series or non-numeric input, a missing or non-UTC-convertible DatetimeIndex,
    negative or infinite rates, gaps longer than the repair limit, and too-short histories.
    """
