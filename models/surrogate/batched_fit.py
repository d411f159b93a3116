"""Fit many small exact GPs at once: one batched marginal-likelihood evaluation, independent L-BFGS-B runs.

Use :func:`fit_gps` when several GPs must be fitted at the same time, e.g. every outcome of every
rate bucket of :class:`~models.surrogate.rgpe_surrogate.RGPESurrogate`. Each training set
``(x (n_i, d), y (n_i, 1))`` becomes the model :func:`models.surrogate.gp.build_gp` builds (a
BoTorch ``SingleTaskGP``: RBF kernel with one lengthscale per input, constant mean, Gaussian
noise, ``Standardize`` outcome transform, BoTorch's default priors and bounds), and its
hyperparameters are the maximum a posteriori estimate that ``fit_gpytorch_mll`` finds: the same
objective (exact log marginal likelihood plus log priors, divided by ``n_i``), the same starting
point (the model's initial values, or a previous fit's hyperparameters), the same optimiser
(L-BFGS-B on the constrained values with the constraints as bounds, default tolerances), run per
GP with BoTorch's batched L-BFGS-B port.

Why: ``fit_gpytorch_mll`` pays about 3 ms of Python per objective evaluation whatever the size
(gpytorch's lazy tensors and closures), and a fit takes about 100 evaluations, so 16 GPs of 10-64
points took about 5 s, almost all overhead. Here the sets are zero-padded to one ``(B, N, N)``
batch (a padded row is a unit row with a zero residual, so it adds nothing to the likelihood or
its gradient), the gradient is in closed form, and every evaluation computes all unconverged GPs
in a few dozen tensor operations (about 0.5 s for those 16 GPs, measured).

Differences from ``fit_gpytorch_mll``, on purpose: the log-likelihood is always computed by
Cholesky (gpytorch switches to conjugate gradients above 800 points), which costs O(n^3) per
evaluation: fine for rate-bucket sets, which hold at most one point per candidate configuration;
at most ``maxiter`` (200) iterations per GP instead of scipy's 15000; and a run that ends without
meeting the tolerances (iteration limit, or a line search that cannot improve further) keeps its
last iterate and says so in :attr:`GPFit.converged` instead of restarting from random prior
draws, so a fit is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from threadpoolctl import threadpool_limits  # a BoTorch dependency
from torch import Tensor

from models.surrogate.gp import build_gp
from models.torch_threads import single_thread

__all__ = ["DEFAULT_MAXITER", "GPFit", "fit_gps", "loss_and_grad"]

#: L-BFGS-B iteration limit per GP. Fits of 10-64 points converge in 30-150 iterations
#: (measured); the limit only stops a run that wanders on a flat likelihood.
DEFAULT_MAXITER = 200
# Sets are padded to the largest of their group (see _groups). With 200 observations and one
# base bucket (4 sets of 190 points, 4 of 10), padding the small sets to 190 made the fit 1.6x
# slower than fitting them as a second group (measured).
_SMALL = 128
_PAD_SLACK = 1.5
_EXPECTED_PRIORS = {"likelihood.noise_covar.noise_prior", "covar_module.lengthscale_prior"}


@dataclass(frozen=True)
class GPFit:
    """One fitted GP (eval mode) and how its optimisation ended.

    ``loss`` is the negative log marginal likelihood plus log priors divided by the number of
    points, at the returned hyperparameters (the quantity ``fit_gpytorch_mll`` minimises).
    """

    model: object
    loss: float
    iterations: int
    converged: bool


def _check_model(model, index: int) -> None:
    from gpytorch.kernels import RBFKernel
    from gpytorch.likelihoods import GaussianLikelihood
    from gpytorch.means import ConstantMean
    from gpytorch.priors import LogNormalPrior

    priors = {name: prior for name, _, prior, *_ in model.named_priors()}
    if (
        not isinstance(model.covar_module, RBFKernel)
        or not isinstance(model.likelihood, GaussianLikelihood)
        or not isinstance(model.mean_module, ConstantMean)
        or set(priors) != _EXPECTED_PRIORS
        or not all(isinstance(p, LogNormalPrior) for p in priors.values())
    ):
        raise TypeError(
            f"fit_gps: training set {index} built a {type(model.covar_module).__name__} kernel with priors "
            f"{sorted(priors)}; the batched fit supports build_gp's RBF/constant-mean/Gaussian-noise model with "
            "log-normal priors only"
        )


def _check_sets(train_sets: Sequence[tuple[Tensor, Tensor]]) -> None:
    if len(train_sets) == 0:
        raise ValueError("fit_gps needs at least one training set")
    d = dtype = device = None
    for i, (x, y) in enumerate(train_sets):
        if x.ndim != 2 or y.ndim != 2 or y.shape[-1] != 1 or x.shape[0] != y.shape[0]:
            raise ValueError(
                f"fit_gps: training set {i} must be x (n, d) and y (n, 1), got {tuple(x.shape)} and {tuple(y.shape)}"
            )
        if x.shape[0] < 1:
            raise ValueError(f"fit_gps: training set {i} is empty")
        if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
            raise ValueError(f"fit_gps: training set {i} contains NaN or inf")
        if d is None:
            d, dtype, device = x.shape[1], x.dtype, x.device
        elif (x.shape[1], x.dtype, x.device) != (d, dtype, device) or (y.dtype, y.device) != (dtype, device):
            raise ValueError(
                f"fit_gps: training set {i} has {x.shape[1]} columns, {x.dtype} on {x.device}; "
                f"set 0 has {d}, {dtype} on {device} (all sets must agree)"
            )


def _groups(sizes: Sequence[int]) -> list[list[int]]:
    """Indices grouped for padding, largest first.

    Cholesky work grows as N^3, so a set of n points padded to N costs (N / n)^3 times its own
    work: a set joins the current group when that factor is at most ``_PAD_SLACK`` or when
    N <= ``_SMALL`` (there a step is bound by per-call overhead, not by flops).
    """
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    groups: list[list[int]] = []
    for i in order:
        if groups:
            N = sizes[groups[-1][0]]
            if N <= _SMALL or _PAD_SLACK * sizes[i] ** 3 >= N**3:
                groups[-1].append(i)
                continue
        groups.append([i])
    return groups


def _log_normal(v: Tensor, prior) -> tuple[Tensor, Tensor]:
    """Log-density of a ``LogNormalPrior`` at ``v`` and its derivative, elementwise (closed form:
    torch.distributions' checks and transforms cost more than the likelihood at these sizes)."""
    mu, s = prior.loc.to(v), prior.scale.to(v)
    lv = v.log()
    u = (lv - mu) / s
    return -lv - s.log() - 0.5 * math.log(2 * math.pi) - 0.5 * u * u, -(1 + u / s) / v


def loss_and_grad(theta: Tensor, x: Tensor, y: Tensor, mask: Tensor, ls_prior, noise_prior) -> tuple[Tensor, Tensor]:
    """Per-GP loss of padded sets and its gradient: ``theta`` (B, d + 2) = [lengthscales, noise, mean].

    ``x`` (B, N, d), ``y`` (B, N) standardised targets, ``mask`` (B, N) 1 for real rows, 0 for
    padding; the priors are ``LogNormalPrior`` s. The loss (B,) equals
    ``-ExactMarginalLogLikelihood(model)`` of each unpadded model (priors included, divided by its
    number of points); the gradient (B, d + 2) is in closed form, ``0.5 tr((A^-1 - a a^T) dA)``
    with ``a = A^-1 r``: autograd through the Cholesky factor cost more than the rest (measured).
    Not differentiable itself (in-place operations).
    """
    d = x.shape[-1]
    ls, noise, const = theta[:, :d], theta[:, d], theta[:, d + 1]
    z = x / ls.unsqueeze(-2)
    z = z - z.mean(dim=-2, keepdim=True)  # centring keeps the expanded squared distance accurate
    zz = z.pow(2).sum(-1)
    # A = k + noise I on real rows; a padded row and column are those of the identity.
    A = torch.baddbmm(zz.unsqueeze(-1) + zz.unsqueeze(-2), z, z.transpose(-1, -2), alpha=-2.0)
    A.clamp_min_(0).mul_(-0.5).exp_().mul_(mask.unsqueeze(-1) * mask.unsqueeze(-2))
    A.diagonal(dim1=-2, dim2=-1).copy_(mask * (1 + noise.unsqueeze(-1)) + (1 - mask))
    L = torch.linalg.cholesky(A)
    r = ((y - const.unsqueeze(-1)) * mask).unsqueeze(-1)
    alpha = torch.cholesky_solve(r, L)
    n = mask.sum(-1)
    nll = 0.5 * (r * alpha).sum((-2, -1)) + L.diagonal(dim1=-2, dim2=-1).log().sum(-1) + 0.5 * n * math.log(2 * math.pi)
    lp_ls, dlp_ls = _log_normal(ls, ls_prior)
    lp_nz, dlp_nz = _log_normal(noise, noise_prior)
    loss = (nll - lp_ls.sum(-1) - lp_nz) / n
    W = torch.baddbmm(torch.cholesky_inverse(L), alpha, alpha.transpose(-1, -2), alpha=-1.0)  # A^-1 - a a^T
    g_noise = 0.5 * (W.diagonal(dim1=-2, dim2=-1) * mask).sum(-1)
    # dA/dl_j = k (x_j - x_j')^2 / l_j^3. With M = W * A (symmetric; its diagonal drops out):
    # sum_ab M_ab (x_aj - x_bj)^2 = 2 (sum_a x_aj^2 sum_b M_ab - sum_a x_aj (M x)_aj)
    M = W.mul_(A)
    g_ls = (x.pow(2) * M.sum(-1, keepdim=True) - x * (M @ x)).sum(-2) / ls.pow(3)
    g_const = -alpha.squeeze(-1).sum(-1)
    grad = torch.cat([g_ls - dlp_ls, (g_noise - dlp_nz).unsqueeze(-1), g_const.unsqueeze(-1)], dim=-1)
    return loss, grad / n.unsqueeze(-1)


def _fit_group(models: list, maxiter: int) -> list[tuple[float, int, bool]]:
    from botorch.optim.batched_lbfgs_b import fmin_l_bfgs_b_batched

    ref = models[0]
    x0 = ref.train_inputs[0]
    B, d = len(models), x0.shape[-1]
    N = max(m.train_targets.shape[-1] for m in models)
    X = x0.new_zeros(B, N, d)
    Y = x0.new_zeros(B, N)
    mask = x0.new_zeros(B, N)
    start = np.empty((B, d + 2))
    for b, m in enumerate(models):
        n = m.train_targets.shape[-1]
        X[b, :n], Y[b, :n], mask[b, :n] = m.train_inputs[0], m.train_targets, 1.0
        start[b, :d] = m.covar_module.lengthscale.detach().reshape(-1).cpu().numpy()
        start[b, d] = float(m.likelihood.noise.detach().reshape(-1)[0])
        start[b, d + 1] = float(m.mean_module.constant.detach().reshape(-1)[0])
    ls_c = ref.covar_module.raw_lengthscale_constraint
    nz_c = ref.likelihood.noise_covar.raw_noise_constraint

    def bound(c) -> tuple[float | None, float | None]:
        lo, hi = float(c.lower_bound), float(c.upper_bound)
        return (lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None)

    bounds = [bound(ls_c)] * d + [bound(nz_c), (None, None)]
    ls_prior, noise_prior = ref.covar_module.lengthscale_prior, ref.likelihood.noise_covar.noise_prior

    def func(theta: np.ndarray, batch_indices: list[int]):
        idx = torch.as_tensor(batch_indices, device=X.device)
        t = torch.as_tensor(theta, dtype=X.dtype, device=X.device)
        with torch.no_grad():
            loss, grad = loss_and_grad(t, X[idx], Y[idx], mask[idx], ls_prior, noise_prior)
        return loss.cpu().numpy().astype(np.float64), grad.cpu().numpy().astype(np.float64)

    # L-BFGS-B's own linear algebra is tiny: threaded BLAS only spin-waits there (4 ms per step
    # instead of 0.1 ms on 2 busy cores, measured).
    with threadpool_limits(limits=1, user_api="blas"):
        xs, fs, results = fmin_l_bfgs_b_batched(func, start, bounds=bounds, maxiter=maxiter, pass_batch_indices=True)
    with torch.no_grad():
        for b, m in enumerate(models):
            t = torch.as_tensor(xs[b], dtype=X.dtype, device=X.device)
            m.covar_module.lengthscale = t[:d].reshape(1, d)
            m.likelihood.noise = t[d : d + 1]
            m.mean_module.constant = t[d + 1]
    return [(float(fs[b]), int(r["nit"]), bool(r["success"])) for b, r in enumerate(results)]


def fit_gps(
    train_sets: Sequence[tuple[Tensor, Tensor]],
    *,
    starts: Sequence[torch.nn.Module | None] | None = None,
    maxiter: int = DEFAULT_MAXITER,
) -> list[GPFit]:
    """Fit one :func:`build_gp` model per ``(x (n_i, d), y (n_i, 1))`` set; returns them in order.

    All sets need the same d, dtype and device (the GPU when they live there). ``starts[i]``, a
    fitted model of the same kind or ``None``, gives set i its starting hyperparameters (a bucket
    refitted after one more run lands near its old optimum). Raises ``ValueError`` naming the set
    on bad shapes or NaN. Deterministic: no random restarts.
    """
    _check_sets(train_sets)
    if starts is not None and len(starts) != len(train_sets):
        raise ValueError(f"fit_gps: {len(starts)} starts for {len(train_sets)} training sets")
    from botorch import settings

    out: dict[int, GPFit] = {}
    # One torch thread on a CPU: these matrices are too small for more (models.torch_threads).
    # BoTorch's input-scaling check only warns and cost 3 ms per model (measured); callers check
    # their inputs (models.surrogate.dataset).
    with single_thread(train_sets[0][0].device.type == "cpu"), settings.validate_input_scaling(False):
        models = []
        for i, (x, y) in enumerate(train_sets):
            m = build_gp(x, y)
            _check_model(m, i)
            prev = None if starts is None else starts[i]
            if prev is not None:
                old = dict(prev.named_parameters())
                with torch.no_grad():
                    for name, p in m.named_parameters():
                        if name in old and old[name].shape == p.shape:
                            p.copy_(old[name])
            models.append(m)
        for g in _groups([m.train_targets.shape[-1] for m in models]):
            for i, (loss, nit, ok) in zip(g, _fit_group([models[i] for i in g], maxiter)):
                out[i] = GPFit(models[i].eval(), loss, nit, ok)
    return [out[i] for i in range(len(train_sets))]  # the groups cover every set
