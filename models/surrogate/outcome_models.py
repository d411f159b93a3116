"""Small BoTorch ``Model`` adapters that give every outcome of a surrogate the same face.

Use these when an acquisition function needs one-output models over the knob columns alone
(:class:`OneOutputModel` is their base and that of :class:`~models.surrogate.rgpe.RGPEModel`):

- :class:`FixedRateModel`: a GP over ``[knobs, rate]`` seen at one fixed (scaled) rate;
- :class:`ConstantModel`: an outcome that never varied (constant mean, fixed spread);
- :class:`TabulatedModel`: per-candidate Gaussian marginals from any surrogate's ``predict``
  (independent across candidates), for surrogates that expose no BoTorch model;
- :class:`StackedModel`: independent one-output models as one multi-output model whose posterior
  is a single ``GPyTorchPosterior`` (block-diagonal over outputs), as qLogNEHVI's samplers expect.

Inputs ``X`` have shape ``(..., q, d)``; posteriors are over ``(..., q, m)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from botorch.models.model import Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from linear_operator.operators import DiagLinearOperator
from torch import Tensor

__all__ = ["ConstantModel", "FixedRateModel", "OneOutputModel", "StackedModel", "TabulatedModel"]


class OneOutputModel(Model):
    """The base of a one-output model with no batch dimensions: its posterior wraps one ``MultivariateNormal``."""

    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def batch_shape(self) -> torch.Size:
        return torch.Size([])

    def _wrap(self, mvn: MultivariateNormal, posterior_transform) -> GPyTorchPosterior:
        post = GPyTorchPosterior(mvn)
        return posterior_transform(post) if posterior_transform is not None else post


class FixedRateModel(OneOutputModel):
    """``inner`` (inputs ``[knobs, rate / rate_scale]``) evaluated at ``scaled_rate`` for every X."""

    def __init__(self, inner: Model, scaled_rate: float) -> None:
        super().__init__()
        self.inner = inner
        self.scaled_rate = float(scaled_rate)

    def posterior(self, X: Tensor, output_indices=None, observation_noise=False, posterior_transform=None):
        rate = torch.full((*X.shape[:-1], 1), self.scaled_rate, dtype=X.dtype, device=X.device)
        return self.inner.posterior(
            torch.cat([X, rate], dim=-1), observation_noise=observation_noise, posterior_transform=posterior_transform
        )


class ConstantModel(OneOutputModel):
    """Mean ``value`` and independent spread ``std`` at every input."""

    def __init__(self, value: float, std: float) -> None:
        super().__init__()
        self.value, self.std = float(value), float(std)

    def posterior(self, X: Tensor, output_indices=None, observation_noise=False, posterior_transform=None):
        shape = X.shape[:-1]
        mean = torch.full(shape, self.value, dtype=X.dtype, device=X.device)
        var = torch.full(shape, self.std**2, dtype=X.dtype, device=X.device)
        return self._wrap(MultivariateNormal(mean, DiagLinearOperator(var)), posterior_transform)


class TabulatedModel(OneOutputModel):
    """Gaussian marginals ``mean``/``std`` (m,) of the rows of ``table`` (m, d); X rows must be table rows.

    A row of X is matched to the nearest table row; one farther than ``tol`` raises ``ValueError``.
    """

    # buffers, registered in __init__
    table: Tensor
    mean_: Tensor
    var_: Tensor

    def __init__(self, table: Tensor, mean: Tensor, std: Tensor, *, tol: float = 1e-6) -> None:
        super().__init__()
        self.register_buffer("table", table)
        self.register_buffer("mean_", mean.reshape(-1))
        self.register_buffer("var_", std.reshape(-1).clamp_min(1e-9) ** 2)
        self.tol = tol

    def posterior(self, X: Tensor, output_indices=None, observation_noise=False, posterior_transform=None):
        dist = torch.cdist(X.reshape(-1, X.shape[-1]), self.table.to(X))
        nearest, idx = dist.min(dim=-1)
        if (nearest > self.tol).any():
            raise ValueError("TabulatedModel: an input row is not one of the tabulated candidates")
        mean = self.mean_.to(X)[idx].reshape(X.shape[:-1])
        var = self.var_.to(X)[idx].reshape(X.shape[:-1])
        return self._wrap(MultivariateNormal(mean, DiagLinearOperator(var)), posterior_transform)


class StackedModel(Model):
    """Independent one-output ``models`` as outputs ``0..m-1`` (one joint, block-diagonal posterior).

    With ``columns`` set, the models see only ``X[..., :columns]`` (trailing columns may carry
    known values an objective reads).
    """

    def __init__(self, models: Sequence[Model], *, columns: int | None = None) -> None:
        super().__init__()
        self.models = torch.nn.ModuleList(models)
        self.columns = columns

    @property
    def num_outputs(self) -> int:
        return len(self.models)

    @property
    def batch_shape(self) -> torch.Size:
        return torch.Size([])

    def posterior(self, X: Tensor, output_indices=None, observation_noise=False, posterior_transform=None):
        idx = range(len(self.models)) if output_indices is None else output_indices
        if self.columns is not None:
            X = X[..., : self.columns]
        # ModuleList items are typed Module and Model.posterior returns the base Posterior: these are
        # one-output Models whose posteriors are GPyTorchPosteriors (the class doc)
        mvns = [
            cast(GPyTorchPosterior, cast(Model, self.models[i]).posterior(X, observation_noise=observation_noise)).distribution
            for i in idx
        ]
        mvn = mvns[0] if len(mvns) == 1 else MultitaskMultivariateNormal.from_independent_mvns(mvns)
        post = GPyTorchPosterior(mvn)
        return posterior_transform(post) if posterior_transform is not None else post
