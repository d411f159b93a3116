"""Figures over several seeds of the same load: each policy's mean and range, and money per month.

One replay is one draw of the twin's noise and random failures and of the policies' model seeds;
a difference between two policies smaller than the spread over seeds is luck. Use :class:`Spread`
(built by :func:`flinktune.report.counterfactual.compare_on_same_load` with ``seeds`` > 1) for
:meth:`Spread.range` of a measure and :meth:`Spread.per_month`, the only way a report states money
per month: each seed's saving over the same hours, scaled to a month, as a mean and its range.
:class:`ReportSettings` holds how many seeds (``FLINKTUNE_REPORT_SEEDS``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["HOURS_PER_MONTH", "SPREAD_MEASURES", "ReportSettings", "Spread", "span"]

#: Hours in an average month (365 x 24 / 12), the month money per month is stated over.
HOURS_PER_MONTH = 730.0
#: The measures a report states over seeds, beside the one seed's full table.
SPREAD_MEASURES: tuple[str, ...] = ("cpu_core_hours", "priced_cost", "latency_p95_ms", "minutes_over_target")


class ReportSettings(BaseSettings):
    """How a report on the twin states its figures."""

    model_config = SettingsConfigDict(
        env_prefix="FLINKTUNE_REPORT_", extra="forbid", validate_default=True, env_ignore_empty=True, allow_inf_nan=False
    )

    seeds: int = Field(
        3,
        ge=1,
        le=10,
        description="Seeds a report on the twin replays the same load over (the run's own first): figures are stated as "
        "mean (min-max) and money per month only over 2 or more.",
    )


@dataclass(frozen=True)
class Spread:
    """Each policy's measures on every seed of the same load, the run's own seed first.

    ``measures``: policy -> one measures dict per seed, in ``seeds`` order; ``hours``: the period's
    length; ``replayed``: the run's policy when its later seeds are replays of that policy (its
    first is the run as it happened), else empty."""

    seeds: tuple[int, ...]
    measures: dict[str, tuple[dict[str, float], ...]]
    hours: float
    replayed: str = ""

    def range(self, policy: str, key: str) -> tuple[float, float, float]:
        """(mean, min, max) of ``key`` over the seeds for ``policy``."""
        return _stats([m[key] for m in self.measures[policy]])

    def per_month(self, policy: str, against: str) -> tuple[float, float, float]:
        """(mean, min, max) over seeds of what ``policy`` saves against ``against`` per month (negative: costs more)."""
        scale = HOURS_PER_MONTH / self.hours
        pairs = zip(self.measures[policy], self.measures[against], strict=True)
        return _stats([(other["priced_cost"] - own["priced_cost"]) * scale for own, other in pairs])


def _stats(values: list[float]) -> tuple[float, float, float]:
    return sum(values) / len(values), min(values), max(values)


def span(lo: str, hi: str) -> str:
    """``lo-hi``, or ``lo to hi`` when a minus sign would make the dash unreadable."""
    return f"{lo} to {hi}" if lo.startswith("-") or hi.startswith("-") else f"{lo}-{hi}"
