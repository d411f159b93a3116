"""The champion rule: which candidate forecaster a job should plan with, chosen on the selection span.

Use :func:`choose_champion` wherever candidates are compared: the forecasting benchmark crowns
its ``champion`` row with it and the retraining job (``jobs.train_forecaster``) registers what it
returns, so both pick the same model from the same backtests. It reads only the selection span
(:func:`~models.forecasting.backtest.backtest_select_then_report`), never the report span, so
the champion's report metrics stay out of sample.

Rule: among the candidates whose planning rule keeps the under-forecast rate on the selection span
at most ``max_under_rate`` (judged as the planning rule itself was: with ``planning_z`` > 0 by its upper
confidence bound on the span's independent origins,
:func:`~models.forecasting.backtest.under_rate_upper_bound`; default
:data:`~models.forecasting.backtest.PLANNING_Z`, the point estimate), the one with the lowest selection
peak MAE (each with its own peak rule); if none is that safe, the one with the lowest under-forecast rate (ties: lower peak MAE).
Only candidates that can be registered (``registrable``) may win.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from models.forecasting.backtest import (
    PLANNING_Z,
    SelectedBacktest,
    effective_origins,
    horizon_block,
    summarize,
    under_rate_upper_bound,
)

__all__ = ["ChampionChoice", "choose_champion", "selection_metrics"]


@dataclass(frozen=True)
class ChampionChoice:
    """The chosen candidate, why (one sentence a person can read), and every candidate's selection metrics."""

    name: str
    reason: str
    selection: dict[str, dict]


def selection_metrics(backtest: SelectedBacktest) -> dict:
    """Metrics of the selection span's forecasts under the rules chosen there (same keys as the report's)."""
    return summarize(backtest.selection, rule=backtest.metrics["rule"], peak_rule=backtest.metrics["peak_rule"])


def choose_champion(
    backtests: Mapping[str, SelectedBacktest],
    *,
    max_under_rate: float = 0.05,
    registrable: Iterable[str] | None = None,
    planning_z: float | None = None,
) -> ChampionChoice:
    """Apply the module's rule to ``backtests`` (candidate name -> its select-then-report backtest).

    ``planning_z``: as given to the backtests' rule choice (``0``: the point estimate).
    """
    z = PLANNING_Z if planning_z is None else planning_z
    allowed = list(backtests) if registrable is None else [c for c in backtests if c in set(registrable)]
    if not allowed:
        raise ValueError(f"choose_champion: no registrable candidate among {sorted(backtests)}")
    sel = {c: selection_metrics(backtests[c]) for c in backtests}

    def bound(c: str) -> float:
        window = backtests[c].selection.window
        n_eff = effective_origins(len(backtests[c].selection.forecasts), horizon_block(window))
        return under_rate_upper_bound(sel[c]["under_rate"], n_eff, z)

    safe = [c for c in allowed if bound(c) <= max_under_rate]
    if safe:
        best = min(safe, key=lambda c: sel[c]["peak_mae"])
        others = ", ".join(f"{c} {sel[c]['peak_mae']:.4g}" for c in safe if c != best) or "none"
        reason = (
            f"lowest selection-span peak MAE among candidates with under-forecast <= {max_under_rate:g}: "
            f"{best} {sel[best]['peak_mae']:.4g} (others: {others}); rules {sel[best]['rule']} / "
            f"{sel[best]['peak_rule']}"
        )
    else:
        best = min(allowed, key=lambda c: (sel[c]["under_rate"], sel[c]["peak_mae"]))
        reason = (
            f"no candidate kept under-forecast <= {max_under_rate:g} on the selection span; {best} had the "
            f"lowest ({sel[best]['under_rate']:.3g}); rules {sel[best]['rule']} / {sel[best]['peak_rule']}"
        )
    return ChampionChoice(best, reason, sel)
