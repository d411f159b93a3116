"""Planning rules: turn a quantile forecast into the single rate a configuration must sustain.

Use :func:`planned_rate` in policies. Rules (strings, so they fit in settings and decision logs):

- ``"max_mean_x1.10"``: the highest bin mean times 1.10 (Demeter's published planning rule).
- ``"max_mean_x<f>"``: the same with another factor ``f`` > 0.
- ``"quantile:<q>"``: the peak over bins of quantile ``q`` (must be one of the forecast's levels);
  for a forecast that carries ``peak_quantiles``, the ``q``-quantile of the window's peak.

Both read :meth:`QuantileForecast.peak`, so ``max_mean_x<f>`` scales the median peak of such a forecast.
"""

from __future__ import annotations

import re

from models.forecasting.types import QuantileForecast

__all__ = ["PLANNING_RULES", "planned_rate"]

#: Rule forms accepted by :func:`planned_rate` (for help texts and validation messages).
PLANNING_RULES: tuple[str, ...] = ("max_mean_x1.10", "max_mean_x<factor>", "quantile:<q>")

_MAX_MEAN = re.compile(r"^max_mean_x(\d+(?:\.\d+)?)$")
_QUANTILE = re.compile(r"^quantile:(0?\.\d+|0|1(?:\.0+)?)$")


def planned_rate(forecast: QuantileForecast, rule: str = "max_mean_x1.10") -> float:
    """The rate (rec/s) to plan for under ``rule``; ValueError names an unknown rule or level."""
    m = _MAX_MEAN.match(rule)
    if m:
        factor = float(m.group(1))
        if factor <= 0:
            raise ValueError(f"planning rule {rule!r}: factor must be > 0")
        return forecast.peak(None) * factor
    m = _QUANTILE.match(rule)
    if m:
        q = float(m.group(1))
        for level in forecast.quantiles:
            if abs(level - q) < 1e-9:
                return forecast.peak(level)
        raise ValueError(
            f"planning rule {rule!r}: forecast from {forecast.model or 'model'} has no quantile {q:g}; "
            f"available: {sorted(forecast.quantiles)}"
        )
    raise ValueError(f"unknown planning rule {rule!r}; expected one of {list(PLANNING_RULES)}")
