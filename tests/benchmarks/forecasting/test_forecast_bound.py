"""benchmarks/forecasting/forecast_bound.py: the re-drawn ysb generator is generate_trace's, and the oracle uses its state."""

import numpy as np
import pytest

from benchmarks.forecasting.forecast_bound import compose_ysb, draw_ysb, main, oracle_peaks
from flinktune.twin.workload import generate_trace


@pytest.mark.parametrize("seed,hours", [(7, 18.0), (8, 2.0)])
def test_redrawn_generator_reproduces_generate_trace_exactly(seed, hours):
    draws = draw_ysb(seed, hours)
    np.testing.assert_array_equal(compose_ysb(draws), generate_trace("ysb", hours, seed).to_numpy())
    # The state the oracle reads is the generator's: regimes tile the day, 27 spikes, one innovation per second.
    assert draws.segments[0].start == 0 and draws.segments[-1].end == draws.full == 18 * 3600
    assert all(a.end == b.start and a.target == b.prev for a, b in zip(draws.segments, draws.segments[1:]))
    assert draws.spikes.shape == (27, 3) and draws.ar_innovations.shape == (draws.full,)


def test_oracle_is_exact_when_nothing_random_is_left():
    # Mid-regime, far from any spike: future noise is all that is unknown, so the oracle's peak sits within
    # the few hundred rec/s that noise moves a minute mean, far below a regime step (~20k rec/s).
    draws = draw_ysb(7, 18.0)
    trace = compose_ysb(draws)
    seg = max(draws.segments[:-1], key=lambda s: s.end - s.start)
    at = draws.spikes[:, 0]
    origin = next(o for o in range(seg.start + seg.ramp + 60, seg.end - 1200, 60) if not ((at > o - 100) & (at < o + 700)).any())
    forecast = oracle_peaks(draws, np.array([origin]), sims=300)[0]
    truth = trace[origin : origin + 600].reshape(10, 60).mean(axis=1).max()
    assert abs(forecast - truth) < 1_000
    with pytest.raises(ValueError, match="needs 1 s of past and 600 s of trace after it"):
        oracle_peaks(draws, np.array([draws.n - 599]))


def test_bound_run_reports_both_spans_and_refuses_bad_arguments(capsys):
    rows = main(["--seeds", "3", "--hours", "1", "--train-hours", "0.5", "--sims", "50"])
    assert rows[0]["origins"] == 21 and rows[0]["oracle_mae_all"] > 0  # origins every minute from 30 to 50 min
    with pytest.raises(SystemExit):
        main(["--seeds", "x"])
    assert "--seeds: expected comma-separated integers" in capsys.readouterr().err
