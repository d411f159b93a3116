"""sharing_acquisitions: jobs asking the same profiling question at nearby rates share one acquisition."""

import numpy as np
import pytest

from models.surrogate.acquisition import suggest_profiling
from models.surrogate.shared_acquisition import AcquisitionShare, active_share, sharing_acquisitions
from models.surrogate.types import SurrogatePrediction

LAT, REC = np.log(100.0), np.log(180.0)


class RateTable:
    """Marginals that move with the rate (latency grows with it); counts predict calls."""

    outcomes = ("latency_ms", "recovery_s")

    def __init__(self, m=8):
        self.X = np.column_stack([np.linspace(0, 1, m), np.zeros(m)])
        self.calls = 0

    def predict(self, X, rate):
        self.calls += 1
        base = np.log(np.array([400, 300, 250, 80, 70, 60, 50, 40.0]))[: len(X)] + np.log(rate / 30_000)
        mean = np.column_stack([base, np.full(len(X), np.log(60.0))])
        std = np.column_stack([np.full(len(X), 0.3), np.full(len(X), 0.01)])
        return SurrogatePrediction(self.outcomes, mean, std)


def ask(sur, rate, **kw):
    reserved = np.column_stack([1.0 + np.arange(8), 1000.0 * (1 + np.arange(8))])
    args = dict(latency_limit_log=LAT, recovery_limit_log=REC, budget_mask=np.ones(8, bool), reserved=reserved, q=2, seed=0)
    return suggest_profiling(sur, sur.X, rate, **{**args, **kw})


def test_one_acquisition_per_surrogate_cell_and_question_and_the_same_picks_as_at_the_cell_rate():
    sur, other = RateTable(), RateTable()
    with sharing_acquisitions() as share:
        assert active_share() is share
        first = ask(sur, 30_000.0)
        assert ask(sur, 30_100.0).tolist() == first.tolist()  # same 2.5 % cell: shared
        assert (share.computed, share.shared, sur.calls) == (1, 1, 1)
        ask(sur, 45_000.0)  # another cell
        ask(other, 30_000.0)  # another surrogate object
        ask(sur, 30_000.0, q=3)  # another question
        assert (share.computed, share.shared) == (4, 1)
    assert active_share() is None
    # What the cell shares is the unshared answer at the cell's centre rate.
    assert first.tolist() == ask(RateTable(), share.cell_rate(30_000.0)).tolist()


def test_the_cell_rate_does_not_depend_on_which_job_asked_first():
    share = AcquisitionShare(rate_step=0.025)
    centre = share.cell_rate(30_000.0)
    assert 1 / 1.025 < centre / 30_000.0 < 1.025
    # The centre of a cell is in the middle (in log rate): 0.5 % either side is the same cell.
    assert share.cell_rate(centre * 1.005) == share.cell_rate(centre / 1.005) == share.cell_rate(centre) == centre
    assert share.cell_rate(centre * 1.03) != centre
    assert share.cell_rate(0.0) == 0.0
    asked = []
    for r in (centre * 1.005, centre / 1.005):
        share.picks(object(), r, ("q",), lambda at: asked.append(at) or np.array([0]))
    assert asked == [centre, centre], "two objects: two acquisitions, both at the cell's centre"


@pytest.mark.parametrize("step", [0.0, -0.1, 1.5, float("nan")])
def test_a_bad_rate_step_is_refused(step):
    with pytest.raises(ValueError, match="rate_step must be in"):
        AcquisitionShare(rate_step=step)
