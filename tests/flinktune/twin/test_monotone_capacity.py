"""The monotone projection of capacities: monotone output, left alone when already monotone, and
the least-squares fit (1-D against scikit-learn's isotonic regression, 2-D against nearby monotone grids)."""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import isotonic_regression

from flinktune.twin.capacity_correction import monotone_projection


def test_projection_is_monotone_and_leaves_monotone_grids_alone() -> None:
    rng = np.random.default_rng(0)
    grid = rng.normal(size=(20, 6, 3))
    proj = monotone_projection(grid)
    assert (np.diff(proj, axis=1) >= -1e-7).all() and (np.diff(proj, axis=2) >= -1e-7).all()
    already = np.cumsum(np.cumsum(rng.uniform(size=(5, 6, 3)), axis=1), axis=2)
    assert np.allclose(monotone_projection(already), already)


def test_projection_is_the_least_squares_fit() -> None:
    rng = np.random.default_rng(1)
    line = rng.normal(size=(30, 7))
    assert np.allclose(monotone_projection(line), [isotonic_regression(r) for r in line], atol=1e-9)
    grid = rng.normal(size=(10, 4, 3))
    proj = monotone_projection(grid)
    # No monotone grid nearby is closer: random monotone candidates mixed with the projection.
    for _ in range(200):
        other = np.cumsum(np.cumsum(rng.uniform(size=grid.shape), axis=1), axis=2) + rng.normal(size=(10, 1, 1))
        t = rng.uniform(0, 0.3)
        cand = (1 - t) * proj + t * other
        assert (((cand - grid) ** 2).sum(axis=(1, 2)) >= ((proj - grid) ** 2).sum(axis=(1, 2)) - 1e-9).all()
