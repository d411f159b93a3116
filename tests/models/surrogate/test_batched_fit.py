"""Batched GP fitting: the objective and optimum of fit_gpytorch_mll, a closed-form gradient, inert padding, bad input."""

import numpy as np
import pytest
import torch
from gpytorch.mlls import ExactMarginalLogLikelihood

from models.surrogate.batched_fit import fit_gps, loss_and_grad
from models.surrogate.gp import build_gp, fit_gp


def make_sets(sizes, seed=0, d=5):
    g = torch.Generator().manual_seed(seed)
    sets = []
    for n in sizes:
        x = torch.rand(n, d, generator=g, dtype=torch.float64)
        y = torch.sin(4 * x[:, :1]) + x[:, 1:2] ** 2 + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
        sets.append((x, y))
    return sets


def gpytorch_loss(model) -> float:
    model.train()
    try:
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        with torch.no_grad():
            return float(-mll(model(*model.train_inputs), model.train_targets))
    finally:
        model.eval()


def test_padded_loss_equals_gpytorchs_marginal_likelihood():
    ((x, y),) = make_sets([9])
    model = build_gp(x, y)
    model.covar_module.lengthscale = torch.tensor([[0.3, 0.5, 1.0, 2.0, 0.7]], dtype=torch.float64)
    model.likelihood.noise = torch.tensor([0.05], dtype=torch.float64)
    model.mean_module.constant = torch.tensor(0.2, dtype=torch.float64)
    theta = torch.tensor([[0.3, 0.5, 1.0, 2.0, 0.7, 0.05, 0.2]], dtype=torch.float64)
    for pad in (0, 4):  # padded rows must change nothing
        X = torch.cat([x, torch.rand(pad, 5, dtype=torch.float64)]).unsqueeze(0)
        Y = torch.cat([model.train_targets, torch.randn(pad, dtype=torch.float64)]).unsqueeze(0)
        mask = torch.cat([torch.ones(9), torch.zeros(pad)]).double().unsqueeze(0)
        priors = model.covar_module.lengthscale_prior, model.likelihood.noise_covar.noise_prior
        ours, grad = loss_and_grad(theta, X, Y, mask, *priors)
        # rel 1e-7: gpytorch squares its float32 prior scales in float32, we in float64
        assert float(ours[0]) == pytest.approx(gpytorch_loss(model), rel=1e-7)
        # the closed-form gradient against central differences
        h = 1e-6
        numeric = [
            (loss_and_grad(theta + h * e, X, Y, mask, *priors)[0] - loss_and_grad(theta - h * e, X, Y, mask, *priors)[0])
            / (2 * h)
            for e in torch.eye(7, dtype=torch.float64)
        ]
        np.testing.assert_allclose(grad[0].numpy(), torch.cat(numeric).numpy(), rtol=1e-5, atol=1e-7)


def test_reaches_the_optimum_fit_gpytorch_mll_reaches():
    sets = make_sets([10, 40, 41, 7])
    fits = fit_gps(sets)
    X = torch.rand(200, 5, dtype=torch.float64)
    for (x, y), f in zip(sets, fits):
        old = fit_gp(x, y)
        # the same MAP objective, at least as good, and the same posterior
        assert f.loss <= gpytorch_loss(old) + 1e-6
        assert f.loss == pytest.approx(gpytorch_loss(f.model), rel=1e-7, abs=1e-7)
        with torch.no_grad():
            a, b = f.model.posterior(X), old.posterior(X)
        # where the likelihood is flat (irrelevant lengthscales) the two optimisers stop at
        # slightly different points: the means agree to a small fraction of the posterior spread
        sd = b.variance.sqrt()
        assert ((a.mean - b.mean).abs() / sd).max() < 0.1
        np.testing.assert_allclose(a.variance.sqrt().numpy(), sd.numpy(), rtol=0.05)
        assert f.iterations > 0 and not f.model.training


def test_a_warm_start_begins_at_the_given_hyperparameters():
    sets = make_sets([30, 30])
    cold = fit_gps(sets)
    # started at its own optimum, set 0 stops at once; set 1 (no start) runs as before (up to
    # rounding: a batch of one and a batch of two may round differently on a flat optimum)
    again = fit_gps(sets, starts=[cold[0].model, None])
    assert again[0].iterations <= 2 < cold[0].iterations
    assert again[0].loss == pytest.approx(cold[0].loss, abs=1e-8)
    assert again[1].loss == pytest.approx(cold[1].loss, abs=1e-4)
    with pytest.raises(ValueError, match="1 starts for 2 training sets"):
        fit_gps(sets, starts=[None])


@pytest.mark.parametrize(
    "sets, match",
    [
        ([], "at least one"),
        ([(torch.rand(3, 2, dtype=torch.float64), torch.rand(3, dtype=torch.float64))], "set 0 must be x"),
        (
            [
                (torch.rand(3, 2, dtype=torch.float64), torch.rand(3, 1, dtype=torch.float64)),
                (torch.rand(3, 3, dtype=torch.float64), torch.rand(3, 1, dtype=torch.float64)),
            ],
            "set 1 has 3 columns",
        ),
        (
            [(torch.rand(3, 2, dtype=torch.float64), torch.tensor([[1.0], [float("nan")], [2.0]], dtype=torch.float64))],
            "set 0 contains NaN",
        ),
    ],
)
def test_bad_sets_are_refused(sets, match):
    with pytest.raises(ValueError, match=match):
        fit_gps(sets)


@pytest.mark.gpu
def test_cuda_fit_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    sets = make_sets([12, 30])
    cpu = fit_gps(sets)
    gpu = fit_gps([(x.cuda(), y.cuda()) for x, y in sets])
    for a, b in zip(cpu, gpu):
        assert b.model.train_inputs[0].is_cuda
        assert b.loss == pytest.approx(a.loss, abs=1e-5)


def test_sets_are_padded_only_to_similar_sizes():
    from models.surrogate.batched_fit import _groups

    assert _groups([10, 64, 63]) == [[1, 2, 0]]  # small: one batch, overhead-bound anyway
    assert _groups([190, 10, 190, 10]) == [[0, 2], [1, 3]]  # padding 10 to 190 would cost more than a second batch
    assert _groups([700, 740, 300]) == [[1, 0], [2]]  # (740 / 700)^3 = 1.18 <= 1.5
