"""RGPE core: ranking losses and weights by known answers, LOO draws by a closed form, the ensemble posterior."""

import numpy as np
import pytest
import torch

from models.surrogate.gp import fit_gp
from models.surrogate.rgpe import (
    RGPEModel,
    compute_rank_weights,
    loo_ranking_loss,
    loo_samples,
    posterior_samples,
    rank_weights,
    ranking_loss,
)


def t(a):
    return torch.tensor(a, dtype=torch.float64)


def test_ranking_loss_counts_misordered_ordered_pairs():
    y = t([1.0, 2.0, 3.0])
    f = t([[10.0, 20.0, 30.0], [3.0, 2.0, 1.0], [1.0, 3.0, 2.0]])
    # same order: 0; reversed: all 3 pairs, each counted as (j, k) and (k, j): 6; one swap: 2
    assert ranking_loss(f, y).tolist() == [0, 6, 2]


def test_loo_ranking_loss_compares_out_of_sample_with_in_sample():
    y = t([1.0, 2.0, 3.0])
    good = torch.diag(t([1.0, 2.0, 3.0])) + t([[0, 1.5, 2.5], [1.0, 0, 2.5], [1.0, 2.0, 0]])
    # row j = model without point j; diagonal = its out-of-sample prediction
    bad = good.clone()
    bad[0, 0] = 5.0  # the model without x_0 predicts it above both others: 2 pairs of row 0 wrong
    assert loo_ranking_loss(torch.stack([good, bad]), y).tolist() == [0, 2]


def test_rank_weights_split_ties_evenly():
    losses = t(
        [
            [0, 2, 1, 3],  # base 0
            [0, 1, 3, 3],  # base 1
            [1, 1, 0, 3],
        ]
    )  # target
    w, keep = rank_weights(losses, n_target=5, dilution_points=None)
    # draws: {0,1} tie -> 1/2 each; {1,2} tie; target alone; all three tie -> 1/3 each
    expected = np.array([0.5 + 0 + 0 + 1 / 3, 0.5 + 0.5 + 0 + 1 / 3, 0 + 0.5 + 1 + 1 / 3]) / 4
    np.testing.assert_allclose(w.numpy(), expected)
    assert keep.tolist() == [1.0, 1.0] and abs(float(w.sum()) - 1) < 1e-12


def test_weight_dilution_keep_probability_and_its_draw():
    S = 100
    losses = torch.stack([torch.zeros(S), torch.cat([torch.zeros(50), torch.full((50,), 9.0)]), torch.full((S,), 4.0)]).double()
    _, keep = rank_weights(losses, n_target=5, dilution_points=20, seed=0)
    # base 0 beats the target always, base 1 half the time; factor 1 - 5/20
    np.testing.assert_allclose(keep.numpy(), [0.75, 0.375])
    kept0 = [float(rank_weights(losses, n_target=5, dilution_points=20, seed=s)[0][0]) > 0 for s in range(400)]
    assert 0.68 < np.mean(kept0) < 0.82
    w, keep = rank_weights(losses, n_target=20, dilution_points=20, seed=0)
    assert w.tolist() == [0.0, 0.0, 1.0] and keep.tolist() == [0.0, 0.0]


def _target_gp(n=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=g, dtype=torch.float64)
    y = torch.sin(5 * x[:, :1]) + x[:, 1:] + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return fit_gp(x, y, seed=seed)


def test_loo_draws_match_the_closed_form_leave_one_out_predictive():
    model = _target_gp()
    draws = loo_samples(model, 20_000, seed=3)
    assert draws.shape == (20_000, 7, 7)
    with torch.no_grad():
        x, y = model.train_inputs[0], model.train_targets
        noise = model.likelihood.noise.reshape(-1)[0]
        K = model.covar_module(x).to_dense() + noise * torch.eye(7, dtype=x.dtype)
        Kinv = torch.linalg.inv(K)
        r = y - model.mean_module(x)
        loo_mean = y - (Kinv @ r) / Kinv.diagonal()  # Rasmussen & Williams eq. 5.12
        loo_var = 1 / Kinv.diagonal() - noise  # latent: without the observation noise
    own = draws.diagonal(dim1=-2, dim2=-1)
    np.testing.assert_allclose(own.mean(0).numpy(), loo_mean.numpy(), atol=0.03)
    np.testing.assert_allclose(own.var(0).numpy(), loo_var.numpy(), rtol=0.08, atol=1e-4)
    # a model without point j still fits the others: in-sample draws sit near their targets
    off = draws.mean(0)[~torch.eye(7, dtype=bool)].reshape(7, 6)
    others = torch.stack([torch.cat([y[:j], y[j + 1 :]]) for j in range(7)])
    assert (off - others).abs().max() < 0.5


def test_rgpe_posterior_is_the_weighted_sum_in_standardised_space():
    a, b = _target_gp(seed=1), _target_gp(seed=2)
    X = torch.rand(5, 2, dtype=torch.float64)
    model = RGPEModel([a, b], t([1.0, 3.0]))  # renormalised to 0.25, 0.75; b is the target
    with torch.no_grad():
        post = model.posterior(X)
        ma, mb = a(X), b(X)
        mean = 0.25 * ma.mean + 0.75 * mb.mean
        cov = 0.0625 * ma.covariance_matrix + 0.5625 * mb.covariance_matrix
        m0, s0 = b.outcome_transform.means.reshape(-1)[0], b.outcome_transform.stdvs.reshape(-1)[0]
        np.testing.assert_allclose(post.mean.squeeze(-1).numpy(), (mean * s0 + m0).numpy(), rtol=1e-9)
        np.testing.assert_allclose(post.distribution.covariance_matrix.numpy(), (cov * s0**2).numpy(), rtol=1e-7, atol=1e-12)
        noisy = model.posterior(X, observation_noise=True)
        extra = (noisy.variance - post.variance).squeeze(-1)
        np.testing.assert_allclose(extra.numpy(), float(b.likelihood.noise) * float(s0) ** 2, rtol=1e-6)
        # batched q: (b, q, d) -> (b, q, 1)
        assert model.posterior(X.reshape(5, 1, 2)).mean.shape == (5, 1, 1)
    only_target = RGPEModel([a, b], t([0.0, 1.0]))
    assert len(only_target.members) == 1
    with pytest.raises(ValueError, match="weights"):
        RGPEModel([a, b], t([0.0, 0.0]))
    with pytest.raises(ValueError, match="2 models but 3 weights"):
        RGPEModel([a, b], t([1.0, 1.0, 1.0]))


def related(x, shift):
    """One function whose optimum moves with the task's rate (``shift``)."""
    c = 0.3 + 0.12 * shift
    return -((x[:, :1] - c) ** 2) * 8 - (x[:, 1:] - 0.5) ** 2 * 2 + 0.3 * shift


def test_weights_favour_the_closest_base_task():
    g = torch.Generator().manual_seed(5)
    xb = torch.rand(30, 2, generator=g, dtype=torch.float64)
    bases = [fit_gp(xb, related(xb, s), seed=i) for i, s in enumerate([0.5, 2.5, 5.0])]
    xt = torch.rand(8, 2, generator=g, dtype=torch.float64)
    target = fit_gp(xt, related(xt, 0.0), seed=9)
    rw = compute_rank_weights(bases, target, num_samples=512, dilution_points=None, seed=0)
    w = rw.weights.numpy()
    assert abs(w.sum() - 1) < 1e-9
    assert w[0] == max(w[:3]) and w[0] > w[1] >= w[2], w
    assert rw.mean_loss[0] < rw.mean_loss[1] < rw.mean_loss[2]  # loss grows with the rate distance
    # base draws are seeded: same call, same weights
    again = compute_rank_weights(bases, target, num_samples=512, dilution_points=None, seed=0)
    assert torch.equal(again.weights, rw.weights)
    assert posterior_samples(bases[0], xt, 4, seed=1).shape == (4, 8)


def test_rank_weights_refuse_too_few_target_points():
    x = torch.rand(2, 2, dtype=torch.float64)
    tiny = fit_gp(x, x[:, :1] + x[:, 1:])
    with pytest.raises(ValueError, match="at least 3 target points, got 2"):
        compute_rank_weights([tiny], tiny)
