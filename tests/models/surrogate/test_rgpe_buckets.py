"""Rate buckets: edges, and Demeter's assignment rules by known answers."""

import numpy as np
import pytest

from models.surrogate.buckets import RateBuckets


def test_edges_are_fixed_multiples_of_the_width():
    b = RateBuckets()
    assert b.index(0) == 0 and b.index(9_999.9) == 0 and b.index(10_000) == 1 and b.index(35_000) == 3
    assert b.bounds(3) == (30_000.0, 40_000.0)
    assert b.indices(np.array([5_000.0, 25_000.0])).tolist() == [0, 2]
    assert RateBuckets(width=5_000, origin=1_000).index(5_999) == 0
    np.testing.assert_allclose(b.distance(np.array([25_000, 35_000, 47_000]), 3), [5_000, 0, 7_000])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"width": 0}, "width"),
        ({"width": float("nan")}, "width"),
        ({"origin": float("inf")}, "origin"),
        ({"min_direct": 0}, "min_direct"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RateBuckets(**kwargs)


def test_bad_rates_and_shapes_are_refused():
    b = RateBuckets()
    with pytest.raises(ValueError, match="finite"):
        b.index(float("nan"))
    with pytest.raises(ValueError, match="keys has 1 entries for 2 rates"):
        b.rows_for(1, np.array([1.0, 2.0]), ["a"])
    with pytest.raises(ValueError, match="shape"):
        b.rows_for(1, np.array([1.0, 2.0]), ["a", "b"], np.array([True]))


def test_assignment_rules():
    b = RateBuckets()  # target bucket 2 = [20k, 30k)
    rates = np.array([25_000, 45_000, 45_000, 12_000, 12_000, 35_000, 55_000])
    ok = np.array([True, True, False, False, True, True, True])
    keys = ["a", "b", "c", "d", "e", "f", "f"]
    # a: direct; b: coped above -> in; c: failed above -> out; d: failed below -> in; e: coped below -> out;
    # f: coped above at 35k and 55k -> only the nearer (35k) row stays
    assert b.rows_for(2, rates, keys, ok).tolist() == [0, 1, 3, 5]
    assert b.rows_for(2, rates, keys).tolist() == [0]  # no latency goal: direct rows only
    known = np.array([True, False, True, True, True, True, True])
    assert b.rows_for(2, rates, keys, ok, known).tolist() == [0, 3, 5]  # b's latency unknown


def test_direct_rows_that_show_the_edge_are_used_alone():
    b = RateBuckets()
    rates = np.array([21_000, 22_000, 23_000, 45_000, 12_000])
    keys = ["a", "b", "c", "d", "e"]
    both = np.array([True, False, True, True, False])
    assert b.rows_for(2, rates, keys, both).tolist() == [0, 1, 2]
    one_side = np.array([True, True, True, True, False])  # direct rows all coped: the edge is unknown
    assert b.rows_for(2, rates, keys, one_side).tolist() == [0, 1, 2, 3, 4]


def test_a_direct_measurement_beats_an_implied_one_and_repeats_stay():
    b = RateBuckets()
    rates = np.array([25_000, 26_000, 31_000, 50_000])
    keys = ["a", "a", "a", "a"]
    assert b.rows_for(2, rates, keys, np.ones(4, bool)).tolist() == [0, 1]
