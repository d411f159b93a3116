"""Training-data rules shared by surrogates (models.surrogate.dataset)."""

import numpy as np
import pytest

from models.surrogate.dataset import prepare_training_data
from models.surrogate.types import SurrogateDataWarning, SurrogateInputError

OUT = ("latency_ms", "cpu_used")


def _data(n=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    rates = rng.uniform(100, 200, n)
    Y = np.column_stack([rng.uniform(10, 100, n), rng.uniform(1, 4, n)])
    return X, rates, Y


def test_log_transform_and_rate_scale():
    X, rates, Y = _data()
    data = prepare_training_data(X, rates, Y, OUT)
    assert data.rate_scale == pytest.approx(rates.max() * 1.5)
    lat = data.per_outcome["latency_ms"]
    order = np.lexsort(np.column_stack([X, rates / data.rate_scale]).T[::-1])
    np.testing.assert_allclose(np.sort(lat.y), np.sort(np.log(Y[:, 0])))
    np.testing.assert_allclose(np.sort(data.per_outcome["cpu_used"].y), np.sort(Y[:, 1]))
    assert lat.x.shape == (6, 3) and lat.x[:, 2].max() == pytest.approx(1 / 1.5)
    assert len(order) == 6


def test_nan_rows_are_dropped_per_outcome_with_a_counted_warning():
    X, rates, Y = _data(8)
    Y[0, 0] = np.nan  # latency only
    Y[1, 1] = -1.0  # cpu only
    X[2, 0] = np.nan  # whole row
    with pytest.warns(SurrogateDataWarning, match=r"latency_ms: 2, cpu_used: 2 of 8"):
        data = prepare_training_data(X, rates, Y, OUT)
    assert data.per_outcome["latency_ms"].dropped == 2 and len(data.per_outcome["latency_ms"].y) == 6
    assert data.per_outcome["cpu_used"].dropped == 2


def test_duplicates_are_averaged_in_model_space():
    X, rates, Y = _data(4)
    X = np.vstack([X, X[:1]])
    rates = np.append(rates, rates[0])
    Y = np.vstack([Y, [Y[0, 0] * 4, Y[0, 1] + 2]])
    data = prepare_training_data(X, rates, Y, OUT)
    lat, cpu = data.per_outcome["latency_ms"], data.per_outcome["cpu_used"]
    assert lat.merged == 1 and len(lat.y) == 4
    assert np.log(Y[0, 0]) + np.log(2) == pytest.approx(lat.y[np.isclose(lat.x[:, 0], X[0, 0])][0])
    assert Y[0, 1] + 1 == pytest.approx(cpu.y[np.isclose(cpu.x[:, 0], X[0, 0])][0])


def test_zero_latency_is_floored_not_dropped():
    X, rates, Y = _data()
    Y[0, 0] = 0.0
    data = prepare_training_data(X, rates, Y, OUT, log_floor=1e-3)
    assert data.per_outcome["latency_ms"].y.min() == pytest.approx(np.log(1e-3))


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda X, r, Y: (X[:, :1].ravel(), r, Y), "X must be 2-D"),
        (lambda X, r, Y: (X * 2, r, Y), r"X\[\d+, \d\] = .* outside \[0, 1\]"),
        (lambda X, r, Y: (X, r[:-1], Y), "row counts differ"),
        (lambda X, r, Y: (X, r, Y[:, :1]), "Y has 1 columns, expected 2"),
        (lambda X, r, Y: (X[:2], r[:2], Y[:2]), r"outcome 'latency_ms': 2 distinct usable point\(s\)"),
        (lambda X, r, Y: (np.vstack([X[:1]] * 5), np.full(5, r[0]), np.vstack([Y[:1]] * 5)), "1 distinct usable point"),
        (lambda X, r, Y: (X, np.full(len(r), np.nan), Y), "no usable rows"),
    ],
)
def test_bad_input_raises(mutate, match):
    with pytest.raises(SurrogateInputError, match=match):
        prepare_training_data(*mutate(*_data()), OUT)
