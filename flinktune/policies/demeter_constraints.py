"""Demeter's constraint models in the target rate chunk, as published.

Use :func:`fit_constraint_models` for the latency and recovery feasibility of every candidate in
Demeter's target chunk (:class:`DemeterPolicy` does when ``constraint_models="published"``): latency
modelled as ``log1p(norm)`` and recovery as log seconds, each observation given N(0, 0.1) noise with a
fixed standard error of 0.1 (a fixed-noise GP, the noise seeded by the chunk's bounds), supported by
RGPE models of up to ``max_support`` higher chunks (:mod:`models.surrogate.rgpe`, weights per
outcome), and checked as Demeter does: mean + std in linear space scaled by 1.25 within the boundary.
Not reproduced: the gradient-boosted latency normalisation (the lowest latency is taken as the target
/ 4^atanh(0.5)). The published method is in ``docs/baselines.md`` (demeter: objectives and constraints,
per-rate models).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration
from models.torch_threads import single_thread  # torch itself is imported where a model is fitted or used

__all__ = [
    "BAD_LATENCY",
    "CONSTRAINT_SEM",
    "ConstraintModels",
    "fit_constraint_models",
    "fit_fixed_noise_gp",
    "latency_constraint",
    "noisy_constraints",
]

#: Demeter's bad-latency boundary over the lowest profiled latency: 4^atanh(0.5) (docs/baselines.md, demeter).
BAD_LATENCY = 4.0 ** math.atanh(0.5)
#: The published observations' noise and fixed SEM (docs/baselines.md, demeter, ``EvaluatorBO.finalize_scores``).
CONSTRAINT_SEM = 0.1


def latency_constraint(latency_ms: np.ndarray, latency_target_ms: float) -> np.ndarray:
    """Demeter's latency constraint outcome ``log1p(max(0, tanh(log_4(latency / lowest))))`` with the
    lowest latency ``latency_target_ms / 4^atanh(0.5)`` (docs/baselines.md, demeter); bounded in [0, log 2)."""
    lowest = latency_target_ms / BAD_LATENCY
    lat = np.maximum(np.asarray(latency_ms, dtype=float), 1e-9)
    return np.log1p(np.maximum(0.0, np.tanh(np.log(lat / lowest) / math.log(4.0))))


def noisy_constraints(
    y_lat: np.ndarray, y_rec: np.ndarray, lo: float, hi: float, sem: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """The constraint observations as the published evaluator feeds them (docs/baselines.md, demeter): each
    ``+ N(0, sem)`` from ``np.random.RandomState(int(lo + hi))``, four draws per profile (CPU,
    memory, latency, recovery) in the rows' order. ``sem=None``: unchanged."""
    if sem is None:
        return np.asarray(y_lat, dtype=float), np.asarray(y_rec, dtype=float)
    draws = np.random.RandomState(int(lo + hi) % (2**32)).normal(0.0, sem, size=(len(y_lat), 4))
    return np.asarray(y_lat, dtype=float) + draws[:, 2], np.asarray(y_rec, dtype=float) + draws[:, 3]


def fit_fixed_noise_gp(x: np.ndarray, y: np.ndarray, *, sem: float | None = CONSTRAINT_SEM, seed: int = 0) -> Any:
    """A BoTorch GP on ``x`` (n, d) and ``y`` (n,), standardised, fitted by exact marginal likelihood,
    in eval mode. With ``sem`` it has the fixed observation variance ``sem**2`` (the published
    ``FixedNoiseGP``, docs/baselines.md, demeter); with None its noise is fitted (``SingleTaskGP``)."""
    import torch

    from models.surrogate.gp import fit_gp

    tx = torch.as_tensor(np.asarray(x, dtype=float), dtype=torch.float64)
    ty = torch.as_tensor(np.asarray(y, dtype=float).reshape(-1, 1), dtype=torch.float64)
    yvar = None if sem is None else torch.full_like(ty, float(sem) ** 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optimiser and jitter warnings are not actionable here
        return fit_gp(tx, ty, seed=seed, train_yvar=yvar)


def _inputs(rows: pd.DataFrame, space: ConfigSpace) -> np.ndarray:
    return np.array(
        [
            space.normalise(
                Configuration(int(r.parallelism), int(r.task_slots), float(r.cpu), int(r.memory_mb), int(r.checkpoint_interval_s))
            )
            for r in rows.itertuples(index=False)
        ],
        dtype=float,
    )


def _targets(
    rows: pd.DataFrame, lo: float, hi: float, latency_target_ms: float, sem: float | None
) -> tuple[np.ndarray, np.ndarray]:
    y_lat = latency_constraint(rows["latency_ms"].to_numpy(dtype=float), latency_target_ms)
    y_rec = np.log(np.maximum(rows["recovery_s"].to_numpy(dtype=float), 1e-3))
    return noisy_constraints(y_lat, y_rec, lo, hi, sem)


@dataclass
class ConstraintModels:
    """The fitted constraint models of one target chunk: one BoTorch model per outcome (``latency``
    in Demeter's ``log1p(norm)`` space, ``recovery`` in log s), each the target GP or an RGPE
    ensemble with support; ``weights`` per outcome (support models first, the target last)."""

    latency: Any
    recovery: Any
    n_support: int
    weights: dict[str, list[float]] = field(default_factory=dict)

    def predict(self, X: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Latent posterior ``(mean, std)`` per outcome at the normalised candidates ``X`` (m, d)."""
        import torch

        x = torch.as_tensor(np.asarray(X, dtype=float), dtype=torch.float64)
        out = {}
        with torch.no_grad(), single_thread():
            for name, model in (("latency", self.latency), ("recovery", self.recovery)):
                post = model.posterior(x)
                out[name] = (
                    post.mean.reshape(-1).numpy(),
                    post.variance.clamp_min(0).sqrt().reshape(-1).numpy(),
                )
        return out

    def feasible(self, X: np.ndarray, recovery_limit_s: float, scaler: float = 1.25) -> np.ndarray:
        """Demeter's check (docs/baselines.md, demeter: rescale decision step 3): mean + std in linear space,
        scaled by ``scaler``, within the boundaries ``norm latency <= 0.5`` and ``recovery <= recovery_limit_s``."""
        p = self.predict(X)
        lat_m, lat_s = p["latency"]
        rec_m, rec_s = p["recovery"]
        return (scaler * np.expm1(lat_m + lat_s) <= 0.5) & (scaler * np.exp(rec_m + rec_s) <= recovery_limit_s)


def fit_constraint_models(
    target: tuple[float, float, pd.DataFrame],
    support: Sequence[tuple[float, float, pd.DataFrame]],
    space: ConfigSpace,
    latency_target_ms: float,
    *,
    sem: float | None = CONSTRAINT_SEM,
    num_samples: int = 1024,
    seed: int = 0,
) -> ConstraintModels:
    """Fit the target chunk's constraint models ``(lower, upper, rows)`` with the ``support`` chunks'
    (docs/baselines.md, demeter; see the module doc). The target needs at least 2 rows, or 1 with support
    (the published target optimiser models from one profile when it has support models); with
    support and fewer than 3 the weights are uniform (the published rule), with 3 or more they are
    rank weights per outcome."""
    import torch

    from models.surrogate.rgpe import RGPEModel, compute_rank_weights

    rows = target[2]
    need = 1 if support else 2
    if len(rows) < need:
        raise ValueError(f"the target chunk holds {len(rows)} profiles; its constraint models need at least {need}")
    fitted: dict[str, list[Any]] = {"latency": [], "recovery": []}
    for k, (s_lo, s_hi, s_rows) in enumerate([*support, target]):
        x = _inputs(s_rows, space)
        y_lat, y_rec = _targets(s_rows, s_lo, s_hi, latency_target_ms, sem)
        fitted["latency"].append(fit_fixed_noise_gp(x, y_lat, sem=sem, seed=seed + 2 * k))
        fitted["recovery"].append(fit_fixed_noise_gp(x, y_rec, sem=sem, seed=seed + 2 * k + 1))
    out: dict[str, Any] = {}
    weights: dict[str, list[float]] = {}
    for j, (name, models) in enumerate(fitted.items()):
        if len(models) == 1:
            out[name], weights[name] = models[0], [1.0]
            continue
        if len(rows) >= 3:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                w = compute_rank_weights(models[:-1], models[-1], num_samples=num_samples, seed=seed + 101 * (j + 1)).weights
        else:
            w = torch.full((len(models),), 1.0 / len(models), dtype=torch.float64)
        out[name], weights[name] = RGPEModel(models, w), [float(v) for v in w]
    return ConstraintModels(out["latency"], out["recovery"], len(support), weights)
