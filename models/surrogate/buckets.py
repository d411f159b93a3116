"""Rate buckets: which profiling observations describe a configuration's behaviour at a planned rate.

Use :class:`RateBuckets` to split the input-rate axis into fixed-width buckets (Demeter's chunk is
10,000 rec/s; ``width`` is configurable) and :meth:`RateBuckets.rows_for` to pick the rows of
one bucket's training set. Shapes: ``rates`` (n,) rec/s; ``latency_ok`` (n,) booleans, or
``None`` when no latency goal is known; returns row indices into those arrays.

Assignment rules (Demeter's, docs/baselines.md, demeter), for bucket ``[lo, hi)``:

1. a row whose rate lies in ``[lo, hi)`` belongs to it ("direct");
2. a row at a rate ``>= hi`` whose latency met the goal belongs to it too: a configuration that
   coped with more load copes with less;
3. a row at a rate ``< lo`` whose latency missed the goal belongs to it too: a configuration that
   failed at a lower load fails at a higher one;
4. when the direct rows alone number at least ``min_direct`` (3) and include both a met and a
   missed latency goal, only the direct rows are used (they already show where the edge lies);
5. per configuration (``keys``: one hashable row key, e.g. the rounded knob vector), only the rows
   at the smallest distance from the bucket are kept (distance 0 inside), so a direct
   measurement beats an implied one and a nearer implied one beats a farther one; repeated rows at
   equal distance all stay (the caller averages them).

Rules 2 and 3 need ``latency_ok``; rows where it is unknown (``None`` array, or the caller marks
NaN latencies as not usable via ``latency_known``) are assigned directly only.

Deviation from Demeter, on purpose: bucket edges are fixed multiples of ``width`` from ``origin``
(default 0) rather than counted from the smallest observed rate, so a bucket keeps its identity
(and its cached model) as observations arrive; and the bucket of a planned rate is the one that
contains it (Demeter takes the first chunk at or above it), so profiling at the planned rate feeds
the target model directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_BUCKET_WIDTH", "RateBuckets"]

#: Demeter's chunk width, rec/s.
DEFAULT_BUCKET_WIDTH = 10_000.0


@dataclass(frozen=True)
class RateBuckets:
    """Fixed-width rate buckets ``[origin + k * width, origin + (k + 1) * width)``, k an integer."""

    width: float = DEFAULT_BUCKET_WIDTH
    origin: float = 0.0
    min_direct: int = 3

    def __post_init__(self) -> None:
        if not (math.isfinite(self.width) and self.width > 0):
            raise ValueError(f"RateBuckets.width must be a finite rec/s > 0, got {self.width!r}")
        if not math.isfinite(self.origin):
            raise ValueError(f"RateBuckets.origin must be finite, got {self.origin!r}")
        if self.min_direct < 1:
            raise ValueError(f"RateBuckets.min_direct must be >= 1, got {self.min_direct!r}")

    def index(self, rate: float) -> int:
        """The bucket that contains ``rate`` (rec/s)."""
        if not math.isfinite(rate):
            raise ValueError(f"rate must be finite to find its bucket, got {rate!r}")
        return int(math.floor((float(rate) - self.origin) / self.width))

    def indices(self, rates: np.ndarray) -> np.ndarray:
        """Bucket index of every rate, shape (n,) int64 (rates must be finite)."""
        rates = np.asarray(rates, dtype="float64")
        if not np.isfinite(rates).all():
            raise ValueError("rates must be finite to find their buckets")
        return np.floor((rates - self.origin) / self.width).astype("int64")

    def bounds(self, bucket: int) -> tuple[float, float]:
        """``(lo, hi)`` in rec/s of one bucket."""
        lo = self.origin + int(bucket) * self.width
        return lo, lo + self.width

    def distance(self, rates: np.ndarray, bucket: int) -> np.ndarray:
        """How far each rate lies outside the bucket, rec/s (0 inside)."""
        lo, hi = self.bounds(bucket)
        rates = np.asarray(rates, dtype="float64")
        return np.where(rates < lo, lo - rates, np.where(rates >= hi, rates - hi, 0.0))

    def rows_for(
        self,
        bucket: int,
        rates: np.ndarray,
        keys: list,
        latency_ok: np.ndarray | None = None,
        latency_known: np.ndarray | None = None,
    ) -> np.ndarray:
        """Row indices of the bucket's training set by the module rules, ascending.

        ``keys[i]`` identifies row i's configuration (rule 5). ``latency_known`` (n,) bool marks
        rows whose ``latency_ok`` may be used for rules 2-3 (default: all when ``latency_ok`` is
        given).
        """
        rates = np.asarray(rates, dtype="float64")
        n = len(rates)
        if len(keys) != n:
            raise ValueError(f"keys has {len(keys)} entries for {n} rates")
        lo, hi = self.bounds(bucket)
        direct = (rates >= lo) & (rates < hi)
        member = direct.copy()
        if latency_ok is not None:
            ok = np.asarray(latency_ok, dtype=bool)
            known = np.ones(n, bool) if latency_known is None else np.asarray(latency_known, dtype=bool)
            if ok.shape != (n,) or known.shape != (n,):
                raise ValueError(f"latency_ok/latency_known must have shape ({n},)")
            d_known = direct & known
            shows_edge = d_known.sum() >= self.min_direct and ok[d_known].any() and (~ok[d_known]).any()
            if not shows_edge:
                member |= known & (((rates >= hi) & ok) | ((rates < lo) & ~ok))
        rows = np.flatnonzero(member)
        if rows.size == 0:
            return rows
        dist = self.distance(rates[rows], bucket)
        best: dict = {}
        for r, dd in zip(rows, dist):
            k = keys[r]
            best[k] = min(best.get(k, math.inf), dd)
        keep = [r for r, dd in zip(rows, dist) if dd <= best[keys[r]]]
        return np.asarray(keep, dtype="int64")
