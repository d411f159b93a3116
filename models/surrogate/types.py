"""The shape of surrogate predictions: per-outcome mean and standard deviation in model space."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LOG_OUTCOMES", "OUTCOMES", "SurrogateDataWarning", "SurrogateInputError", "SurrogatePrediction"]

#: Outcomes a surrogate models, in column order of ``Y`` and of predictions.
OUTCOMES: tuple[str, ...] = ("latency_ms", "cpu_used", "memory_used_mb", "recovery_s")
#: Outcomes modelled on a log scale (positive, heavy-tailed).
LOG_OUTCOMES: frozenset[str] = frozenset({"latency_ms", "recovery_s"})


@dataclass(frozen=True)
class SurrogatePrediction:
    """Gaussian marginals per candidate and outcome.

    ``mean`` and ``std`` have shape (n_candidates, len(outcomes)) and live in model space: the log
    of the outcome for :data:`LOG_OUTCOMES`, the outcome itself otherwise.
    """

    outcomes: tuple[str, ...]
    mean: np.ndarray
    std: np.ndarray

    def _col(self, outcome: str) -> int:
        try:
            return self.outcomes.index(outcome)
        except ValueError:
            raise KeyError(f"unknown outcome {outcome!r}; known: {self.outcomes}") from None

    def prob_le(self, outcome: str, threshold: float) -> np.ndarray:
        """P(outcome <= threshold) per candidate (threshold in the outcome's own unit)."""
        j = self._col(outcome)
        t = np.log(max(threshold, 1e-12)) if outcome in LOG_OUTCOMES else threshold
        std = np.maximum(self.std[:, j], 1e-9)
        from scipy.stats import norm  # here, not at import: scipy.stats alone takes a second to load

        return norm.cdf((t - self.mean[:, j]) / std)

    def median(self, outcome: str) -> np.ndarray:
        """The predictive median in the outcome's own unit."""
        j = self._col(outcome)
        m = self.mean[:, j]
        return np.exp(m) if outcome in LOG_OUTCOMES else m

    def std_of(self, outcome: str) -> np.ndarray:
        """Predictive standard deviation in model space."""
        return self.std[:, self._col(outcome)]


class SurrogateInputError(ValueError):
    """Training or query data a surrogate cannot use; the message names the array, row, column or outcome.

    Raised for: wrong shapes, knobs outside [0, 1], negative or non-finite rates, and fewer than
    3 distinct usable points for an outcome.
    """


class SurrogateDataWarning(UserWarning):
    """Training rows were dropped or repaired (NaN, non-finite, negative); the message counts them."""
