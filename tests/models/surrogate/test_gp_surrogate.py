"""GPSurrogate: recovers a known function's ordering, sensible probabilities, state round trip."""

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from models.surrogate.gp import GPSurrogate, fit_gp
from models.surrogate.types import OUTCOMES, SurrogateInputError


def truth(X: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Latency explodes as the rate nears a capacity set by knobs 0 and 2; others are simple."""
    capacity = 20_000 * (1 + 3 * X[:, 0]) * (1 + 0.5 * X[:, 2])
    latency = 40 * np.exp(1.5 * rate / capacity)
    cpu = 0.5 + 4 * X[:, 0] * (rate / 50_000)
    memory = 1000 + 3000 * X[:, 3]
    recovery = 20 + 150 * X[:, 4] * (rate / 50_000)
    return np.column_stack([latency, cpu, memory, recovery])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.random((80, 5))
    rates = rng.uniform(10_000, 50_000, 80)
    Y = truth(X, rates) * np.exp(rng.normal(0, 0.03, (80, 4)))
    return X, rates, Y


@pytest.fixture(scope="module")
def model(data):
    return GPSurrogate(seed=0).fit(*data)


def test_recovers_ordering_at_a_new_rate(model):
    rng = np.random.default_rng(1)
    C = rng.random((300, 5))
    pred = model.predict(C, 35_000)
    true = truth(C, np.full(300, 35_000.0))
    assert pred.mean.shape == (300, 4) and pred.std.shape == (300, 4)
    for j, name in enumerate(OUTCOMES):
        rho = spearmanr(pred.median(name), true[:, j])[0]
        assert rho > 0.9, (name, rho)


def test_probabilities_are_sensible(model):
    fast = np.array([[1.0, 0.5, 1.0, 0.5, 0.5]])  # capacity 120k rec/s
    slow = np.array([[0.0, 0.5, 0.0, 0.5, 0.5]])  # capacity 20k rec/s
    X = np.vstack([fast, slow])
    pred = model.predict(X, 30_000)
    p = pred.prob_le("latency_ms", 100.0)  # fast: ~58 ms, slow: ~380 ms
    assert p[0] > 0.9 and p[1] < 0.1
    # probability grows with the threshold and with more capacity
    assert (pred.prob_le("latency_ms", 1e6) > 0.99).all() and (pred.prob_le("latency_ms", 1.0) < 0.01).all()
    lo, hi = model.predict(X, 15_000).prob_le("latency_ms", 100.0), p
    assert lo[1] > hi[1]


def test_uncertainty_grows_away_from_data_and_noise_option(model, data):
    X, rates, _ = data
    near = model.predict(X[:5], float(rates[0]), observation_noise=False).std_of("latency_ms")[0]
    far = model.predict(X[:1], 500_000.0, observation_noise=False).std_of("latency_ms")[0]
    assert far > 3 * near
    with_noise = model.predict(X[:5], float(rates[0])).std_of("latency_ms")
    without = model.predict(X[:5], float(rates[0]), observation_noise=False).std_of("latency_ms")
    assert (with_noise > without).all()


def test_scores_the_840_candidate_grid_in_one_call(model):
    # Speed is measured by benchmarks/scale/surrogate.py, not asserted here; this checks the shapes.
    C = np.random.default_rng(2).random((840, 5))
    pred = model.predict(C, 30_000)
    assert pred.mean.shape == pred.std.shape == (840, len(pred.outcomes))
    assert np.isfinite(pred.mean).all() and (pred.std > 0).all()


def test_constant_outcome_gets_fixed_std(data):
    X, rates, Y = data
    Y = Y.copy()
    Y[:, 2] = 2048.0
    m = GPSurrogate(constant_std=0.05).fit(X, rates, Y)
    pred = m.predict(X[:3], 20_000)
    np.testing.assert_allclose(pred.mean[:, 2], 2048.0)
    np.testing.assert_allclose(pred.std[:, 2], 0.05)
    restored = GPSurrogate.from_state(m.state())
    np.testing.assert_allclose(restored.predict(X[:3], 20_000).mean, pred.mean)


def test_state_round_trip_without_refit(model, data, tmp_path):
    X, _, _ = data
    path = model.save(tmp_path / "s.pt")
    assert [p.name for p in tmp_path.iterdir()] == ["s.pt"]
    restored = GPSurrogate.load(path)
    a, b = model.predict(X, 25_000), restored.predict(X, 25_000)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a.std, b.std, rtol=1e-9, atol=1e-9)
    assert restored.rate_scale == model.rate_scale
    with pytest.raises(ValueError, match="not a GPSurrogate state"):
        GPSurrogate.from_state({"kind": "rgpe", "version": 1})


@pytest.mark.filterwarnings("ignore::botorch.exceptions.warnings.InputDataWarning")
def test_closed_form_loo_matches_refitting_without_each_point(model):
    loo = model.loo()
    gp = model._models["cpu_used"]
    x, y_std = gp.train_inputs[0], gp.train_targets
    _y, mean, std = loo["cpu_used"]
    tf = gp.outcome_transform
    for i in (0, 17, 42):
        keep = torch.arange(len(y_std)) != i
        # Same hyperparameters and the same standardisation, one point left out: an exact GP conditioned on the rest.
        sub = type(gp)(x[keep], y_std[keep].unsqueeze(-1), outcome_transform=None)
        sub.load_state_dict({k: v for k, v in gp.state_dict().items() if not k.startswith("outcome_transform")}, strict=False)
        sub.eval()
        post = sub.posterior(x[i : i + 1], observation_noise=True)
        m = post.mean.item() * tf.stdvs.item() + tf.means.item()
        s = post.variance.sqrt().item() * tf.stdvs.item()
        assert mean[i] == pytest.approx(m, rel=1e-6)
        assert std[i] == pytest.approx(s, rel=1e-6)


def test_bad_queries(model):
    with pytest.raises(SurrogateInputError, match="3 knob columns, the surrogate was fitted on 5"):
        model.predict(np.zeros((2, 3)), 1000)
    with pytest.raises(SurrogateInputError, match=r"X\[1, 0\] = 1.5 is outside"):
        model.predict(np.array([[0.0] * 5, [1.5] + [0.0] * 4]), 1000)
    with pytest.raises(SurrogateInputError, match="rate must be a finite"):
        model.predict(np.zeros((1, 5)), float("nan"))
    with pytest.raises(SurrogateInputError, match="NaN or inf"):
        model.predict(np.full((1, 5), np.nan), 1000)
    with pytest.raises(RuntimeError, match="before fit"):
        GPSurrogate().predict(np.zeros((1, 5)), 1.0)


def test_fit_is_seeded(data):
    X, rates, Y = data
    a = fit_gp(torch.as_tensor(np.column_stack([X, rates / 1e5])), torch.as_tensor(Y[:, 1:2]), seed=3)
    b = fit_gp(torch.as_tensor(np.column_stack([X, rates / 1e5])), torch.as_tensor(Y[:, 1:2]), seed=3)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
