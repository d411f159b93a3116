"""The grey-box twin's learned throughput part: a censored correction of the mechanism's capacity.

Use :func:`fit_capacity_correction` on the fit runs (features from the grey-box twin, the
mechanism's capacity, the measured rate and throughput) and :meth:`CapacityCorrection.throughput`
to predict. Throughput is ``min(kept_ratio x rate, capacity)``, so the keeps-up class
(throughput >= 0.95 x rate) follows from the capacity: one model gives both.

Why capacity and not throughput: a run that fell behind measures its capacity, a run that kept up
only says capacity >= its throughput (censored). The correction ``log(capacity / mechanism
capacity)`` is fitted by iterative imputation (a kept-up run's target is raised to the current
prediction when that is above what it measured, then refitted; a fixed number of rounds, no
held-out tuning). It is bagged over a few seeds because one boosted model's seed moves the
leave-one-run-out keeps-up accuracy by about +-0.02 on Demeter's runs (measured).
``kept_ratio`` is the median throughput / rate of the fit runs that kept up: the recorded rate
is only an approximation of what a profiling job was offered (``throughput`` up to 2.6x it), so
a job with spare capacity delivers that ratio, not exactly the rate.

Shapes: ``x`` is (n rows, n features), the other arrays (n,).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BAG_SEEDS", "IMPUTATION_ROUNDS", "CapacityCorrection", "boosted_trees", "fit_capacity_correction"]

#: Rounds of censored imputation (kept-up runs' targets raised to the prediction), a fixed default.
IMPUTATION_ROUNDS = 5
#: Boosted models averaged (in log space) per fit, with seeds seed .. seed + BAG_SEEDS - 1.
BAG_SEEDS = 5


def boosted_trees(loss: str = "squared_error", alpha: float = 0.5, seed: int = 0) -> Any:
    """The gradient-boosted trees every learned part of the grey-box twin uses (unfitted), one setting for all."""
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(
        loss=loss,
        alpha=alpha,
        n_estimators=150,
        max_depth=3,
        learning_rate=0.05,
        subsample=0.8,
        min_samples_leaf=3,
        random_state=seed,
    )


@dataclass
class CapacityCorrection:
    """Fitted capacity correction: ``models`` (log-capacity ratio, bagged), ``lo``/``hi`` (10 %/90 %
    quantile models on the imputed target) and the kept-up ratio ``kept_ratio`` with its 10 %/90 %
    quantiles ``kept_lo``/``kept_hi`` from the fit runs."""

    models: list[Any] = field(repr=False)
    lo: Any = field(repr=False)
    hi: Any = field(repr=False)
    kept_ratio: float
    kept_lo: float
    kept_hi: float

    def capacity(self, x: np.ndarray, mech_capacity: np.ndarray) -> np.ndarray:
        """Corrected capacity (rec/s), shape (n,)."""
        base = np.log(np.maximum(mech_capacity, 1.0))
        return np.exp(base + np.mean([m.predict(x) for m in self.models], axis=0))

    def throughput(self, x: np.ndarray, mech_capacity: np.ndarray, rate: np.ndarray) -> dict[str, np.ndarray]:
        """``capacity``, ``throughput`` and its 10 %/90 % band ``throughput_lo``/``throughput_hi``."""
        base = np.log(np.maximum(mech_capacity, 1.0))
        cap = self.capacity(x, mech_capacity)
        return {
            "capacity": cap,
            "throughput": np.minimum(self.kept_ratio * rate, cap),
            "throughput_lo": np.minimum(self.kept_lo * rate, np.exp(base + self.lo.predict(x))),
            "throughput_hi": np.minimum(self.kept_hi * rate, np.exp(base + self.hi.predict(x))),
        }


def fit_capacity_correction(
    x: np.ndarray, mech_capacity: np.ndarray, rate: np.ndarray, throughput: np.ndarray, *, keeps_up_factor: float, seed: int = 0
) -> CapacityCorrection:
    """Fit on the fit runs; a run with throughput >= ``keeps_up_factor`` x rate is censored (capacity >= throughput).

    With no kept-up run the kept ratio is 1 (nothing says the rate is over- or under-recorded).
    """
    kept = throughput >= keeps_up_factor * rate
    y = np.log(throughput) - np.log(np.maximum(mech_capacity, 1.0))
    models, imputed = [], []
    for s in range(seed, seed + BAG_SEEDS):
        target = y.copy()
        for _ in range(IMPUTATION_ROUNDS):
            model = boosted_trees(seed=s).fit(x, target)
            target = np.where(kept, np.maximum(y, model.predict(x)), y)
        models.append(model)
        imputed.append(target)
    target = np.mean(imputed, axis=0)
    ratios = (throughput / rate)[kept]
    q = np.quantile(ratios, [0.1, 0.5, 0.9]) if ratios.size else np.ones(3)
    return CapacityCorrection(
        models=models,
        lo=boosted_trees("quantile", 0.1, seed).fit(x, target),
        hi=boosted_trees("quantile", 0.9, seed).fit(x, target),
        kept_ratio=float(q[1]),
        kept_lo=float(q[0]),
        kept_hi=float(q[2]),
    )
