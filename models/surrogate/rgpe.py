"""RGPE: a rank-weighted ensemble of GPs that transfers what other rate buckets taught to the target.

Use :func:`compute_rank_weights` to weigh fitted base-task GPs against a fitted target-task GP on
the target's training data, and :class:`RGPEModel` to predict with the weighted ensemble as a
BoTorch ``Model`` (so acquisition functions accept it). One ensemble per outcome: the weights of
latency and memory differ. Method (Feurer, Letham and Bakshy, 2018; docs/baselines.md, RGPE):

- Ranking loss of a model on the target points ``(x_j, y_j)``: the number of ordered pairs
  ``(j, k)`` with ``(f(x_j) < f(x_k)) xor (y_j < y_k)`` (:func:`ranking_loss`). Base models are
  scored on joint posterior samples at the target points; the target model on leave-one-out
  samples: the model without point j predicts x_j and, in the same draw, every other target
  point (:func:`loo_ranking_loss`, :func:`loo_samples`).
- Weight of model i = the fraction of ``num_samples`` draws in which i has the smallest loss;
  ties split evenly among the tied models.
- Weight dilution: base model i is kept with probability
  ``P(loss_i < loss_target) * max(0, 1 - n_target / dilution_points)`` (ties count half) and a
  dropped model cannot win a draw. With ``dilution_points`` (20) or more target points every
  base model is dropped, so sampling is skipped.
- Ensemble posterior: each model's latent posterior in its *own* standardised space (so a base
  task whose outcome is shifted or scaled still transfers its shape), mean ``sum w_i mu_i``,
  covariance ``sum w_i^2 Sigma_i`` (independent models), mapped back with the target model's
  outcome mean and standard deviation. Zero-weight models are left out.

Models must be fitted BoTorch ``SingleTaskGP`` s with a ``Standardize`` outcome transform and no
input transform (as built by :func:`models.surrogate.gp.fit_gp` or
:func:`models.surrogate.batched_fit.fit_gps`), in eval mode.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from botorch.models.model import Model
from botorch.models.transforms.outcome import Standardize
from gpytorch.distributions import MultivariateNormal
from linear_operator.operators import DiagLinearOperator, PsdSumLinearOperator
from linear_operator.utils.cholesky import psd_safe_cholesky
from linear_operator.utils.warnings import NumericalWarning
from torch import Tensor

from models.surrogate.outcome_models import OneOutputModel

if TYPE_CHECKING:
    from botorch.models import SingleTaskGP

__all__ = [
    "RGPEModel",
    "RankWeights",
    "compute_rank_weights",
    "loo_ranking_loss",
    "loo_samples",
    "posterior_samples",
    "rank_weights",
    "ranking_loss",
]


def ranking_loss(f_samples: Tensor, y: Tensor) -> Tensor:
    """Mis-ordered pairs per draw: ``f_samples`` (S, n) at the target points, ``y`` (n,) -> (S,) int."""
    f_less = f_samples.unsqueeze(-1) < f_samples.unsqueeze(-2)
    y_less = y.unsqueeze(-1) < y.unsqueeze(-2)
    return (f_less ^ y_less).sum(dim=(-2, -1))


def loo_ranking_loss(f_loo: Tensor, y: Tensor) -> Tensor:
    """Leave-one-out ranking loss: ``f_loo[s, j, k]`` = draw s of the model without point j at x_k.

    The out-of-sample prediction ``f_loo[s, j, j]`` is compared with the same model's predictions
    at the other points. Shapes (S, n, n) and (n,) -> (S,) int.
    """
    own = f_loo.diagonal(dim1=-2, dim2=-1).unsqueeze(-1)
    y_less = y.unsqueeze(-1) < y.unsqueeze(-2)
    return ((own < f_loo) ^ y_less).sum(dim=(-2, -1))


def _draw(mean: Tensor, cov: Tensor, num_samples: int, seed: int) -> Tensor:
    """``num_samples`` draws of N(mean, cov) over the last dim, batch dims kept: (S, *mean.shape)."""
    with warnings.catch_warnings():
        # Draws at points a model conditions on have near-singular covariance; the added jitter
        # is the intended remedy, not news.
        warnings.simplefilter("ignore", NumericalWarning)
        chol = psd_safe_cholesky(cov)
    gen = torch.Generator(device=mean.device).manual_seed(int(seed))
    z = torch.randn((num_samples, *mean.shape), generator=gen, dtype=mean.dtype, device=mean.device)
    return mean + (chol @ z.unsqueeze(-1)).squeeze(-1)


def posterior_samples(model: Model, x: Tensor, num_samples: int, *, seed: int) -> Tensor:
    """Joint latent draws of ``model`` at ``x`` (n, d), standardised space: (S, n)."""
    with torch.no_grad():
        mvn = model(x)
        return _draw(mvn.mean, mvn.covariance_matrix, num_samples, seed)


def loo_samples(model: SingleTaskGP, num_samples: int, *, seed: int, rows: Tensor | None = None) -> Tensor:
    """Leave-one-out joint draws at the training points (or the subset ``rows``): (S, n, n).

    Entry ``[s, j, k]``: draw s of the latent GP conditioned on every point but j, at x_k, with the
    model's fitted hyperparameters (no refit, like the batch-mode LOO GP of the BoTorch tutorial,
    but in closed form).
    """
    with torch.no_grad():
        x = model.train_inputs[0]
        y = model.train_targets
        if rows is not None:
            x, y = x[rows], y[rows]
        n = y.shape[-1]
        if n < 2:
            raise ValueError(f"leave-one-out needs at least 2 points, got {n}")
        K = model.covar_module(x).to_dense()
        noise = model.likelihood.noise.reshape(-1).expand(n)
        mu = model.mean_module(x)
        others = torch.stack([torch.cat([torch.arange(j), torch.arange(j + 1, n)]) for j in range(n)]).to(x.device)
        A = K[others.unsqueeze(-1), others.unsqueeze(-2)] + torch.diag_embed(noise[others])  # (n, n-1, n-1)
        B = K[:, others].permute(1, 0, 2)  # (n models, n points, n-1)
        L = psd_safe_cholesky(A)
        alpha = torch.cholesky_solve((y - mu)[others].unsqueeze(-1), L)
        mean = mu.unsqueeze(0) + (B @ alpha).squeeze(-1)  # (n, n)
        cov = K.unsqueeze(0) - B @ torch.cholesky_solve(B.transpose(-1, -2), L)
        return _draw(mean, cov, num_samples, seed)


def rank_weights(
    losses: Tensor,
    *,
    n_target: int,
    dilution_points: int | None = 20,
    seed: int = 0,
) -> tuple[Tensor, Tensor]:
    """Weights from per-draw losses ``(M, S)`` (target model last): ``(weights (M,), keep_prob (M-1,))``.

    Ties for the smallest loss split the draw evenly. With ``dilution_points`` set, base model i
    is kept with probability ``P(loss_i < loss_t) * max(0, 1 - n_target / dilution_points)`` (a
    tie counts half; one seeded uniform draw per model); a dropped model never wins.
    """
    losses = losses.to(torch.float64).clone()
    M, _ = losses.shape
    keep_prob = torch.ones(M - 1, dtype=torch.float64, device=losses.device)
    if dilution_points is not None and M > 1:
        tgt = losses[-1]
        better = (losses[:-1] < tgt).double().mean(-1) + 0.5 * (losses[:-1] == tgt).double().mean(-1)
        keep_prob = better * max(0.0, 1.0 - n_target / float(dilution_points))
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        u = torch.rand(M - 1, generator=gen, dtype=torch.float64).to(losses.device)
        dropped = u >= keep_prob
        losses[:-1][dropped] = 2 * losses.max() + 1
    winners = losses == losses.min(dim=0, keepdim=True).values
    weights = (winners.double() / winners.sum(dim=0, keepdim=True)).mean(dim=-1)
    return weights, keep_prob


@dataclass(frozen=True)
class RankWeights:
    """Result of :func:`compute_rank_weights`; ``weights`` (M,) align with ``base_models + [target]``."""

    weights: Tensor
    keep_prob: Tensor
    mean_loss: Tensor
    n_target: int
    num_samples: int


def compute_rank_weights(
    base_models: Sequence[Model],
    target_model: SingleTaskGP,
    *,
    num_samples: int = 1024,
    dilution_points: int | None = 20,
    max_points: int = 64,
    seed: int = 0,
) -> RankWeights:
    """Rank weights of ``base_models + [target_model]`` on the target model's training data.

    Needs at least 3 target points (fewer: ``ValueError``; use another rule, e.g. a pooled GP).
    More than ``max_points`` target points are subsampled (seeded) for the loss: the LOO draws
    cost O(S n^2 + n^4). See the module doc for the rules.
    """
    x = target_model.train_inputs[0]
    y = target_model.train_targets
    n = int(y.shape[-1])
    M = len(base_models) + 1
    if n < 3:
        raise ValueError(f"rank weights need at least 3 target points, got {n}")
    if dilution_points is not None and n >= dilution_points:
        # Every base model would be kept with probability 0: skip the sampling.
        w = torch.zeros(M, dtype=torch.float64, device=x.device)
        w[-1] = 1.0
        nan = torch.full((M,), float("nan"), dtype=torch.float64)
        return RankWeights(w, torch.zeros(M - 1, dtype=torch.float64), nan, n, 0)
    rows = None
    if n > max_points:
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        rows = torch.randperm(n, generator=gen)[:max_points].sort().values.to(x.device)
        x, y = x[rows], y[rows]
    losses = [ranking_loss(posterior_samples(m, x, num_samples, seed=seed + 1 + i), y) for i, m in enumerate(base_models)]
    losses.append(loo_ranking_loss(loo_samples(target_model, num_samples, seed=seed, rows=rows), y))
    stacked = torch.stack(losses)
    weights, keep = rank_weights(stacked, n_target=n, dilution_points=dilution_points, seed=seed)
    return RankWeights(weights.cpu(), keep.cpu(), stacked.double().mean(-1).cpu(), n, num_samples)


class RGPEModel(OneOutputModel):
    """Weighted ensemble of fitted GPs with one output, for one outcome (see the module doc).

    ``models`` are the base models followed by the target model (``target`` index, default last);
    ``weights`` (M,) are non-negative and renormalised. ``posterior(X)`` takes ``X`` of shape
    ``(..., q, d)`` and returns a ``GPyTorchPosterior`` in the target's outcome units.
    ``observation_noise=True`` adds the target model's fitted noise: what a new profiling run
    of the target bucket would measure.
    """

    _num_outputs = 1
    member_weights: Tensor  # a buffer, registered in __init__

    def __init__(self, models: Sequence[SingleTaskGP], weights: Tensor, *, target: int = -1) -> None:
        super().__init__()
        weights = torch.as_tensor(weights, dtype=torch.float64).reshape(-1)
        if len(models) != weights.numel():
            raise ValueError(f"{len(models)} models but {weights.numel()} weights")
        if (weights < 0).any() or not torch.isfinite(weights).all() or weights.sum() <= 0:
            raise ValueError(f"RGPE weights must be finite, >= 0 and not all 0, got {weights.tolist()}")
        self.target_model = models[target]
        keep = [i for i in range(len(models)) if weights[i] > 0]
        self.members = torch.nn.ModuleList([models[i] for i in keep])
        self.register_buffer("member_weights", weights[keep] / weights[keep].sum())

    def posterior(self, X: Tensor, output_indices=None, observation_noise=False, posterior_transform=None):
        if output_indices not in (None, [0]):
            raise ValueError(f"RGPEModel has one output; output_indices={output_indices!r}")
        self.eval()
        mean, covs = None, []
        for w, model in zip(self.member_weights.to(X), self.members):
            mvn = model(X)  # latent posterior, standardised space of that model
            mean = w * mvn.mean if mean is None else mean + w * mvn.mean
            covs.append(mvn.lazy_covariance_matrix * (w * w))
        assert mean is not None  # __init__ keeps at least one member (the weights are not all 0)
        cov = covs[0] if len(covs) == 1 else PsdSumLinearOperator(*covs)
        if observation_noise is True:
            noise = self.target_model.likelihood.noise.reshape(-1)[:1].to(X)
            cov = cov + DiagLinearOperator(noise.expand(mean.shape))
        tf = self.target_model.outcome_transform
        assert isinstance(tf, Standardize)  # the models' contract (module doc)
        m0, s0 = tf.means.reshape(-1)[0].to(X), tf.stdvs.reshape(-1)[0].to(X)
        return self._wrap(MultivariateNormal(mean * s0 + m0, cov * (s0 * s0)), posterior_transform)
