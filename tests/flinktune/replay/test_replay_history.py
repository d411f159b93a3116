"""A trace file's own history for the replay's forecasters: the split, the fit and the first forecasts."""

import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.replay import harness
from flinktune.replay.harness import ReplaySettings, prepare_replay
from flinktune.replay.models import ReplayModels, TraceForecast, make_forecaster
from flinktune.replay.runner import load_with_history, split_history
from flinktune.twin import ClusterProfile, generate_trace


def _series(hours: float) -> pd.Series:
    return generate_trace("ysb", hours, 5)


def test_split_history_cuts_at_the_hour_and_leaves_something_to_replay():
    s = _series(3.0)
    history, replayed = split_history(s, 1.0)
    assert history is not None and len(history) == 3600 and len(replayed) == 2 * 3600
    assert replayed.index[0] - history.index[-1] == pd.Timedelta(seconds=1)
    assert split_history(s, 0.0) == (None, s)
    with pytest.raises(ValueError, match="nothing is left to replay"):
        split_history(s, 3.0)
    with pytest.raises(ValueError, match=">= 0"):
        split_history(s, -1.0)


def test_history_hours_is_for_trace_files_and_loads_history_plus_hours(tmp_path):
    with pytest.raises(ValueError, match="applies to trace files"):
        load_with_history("ysb", 2.0, 1, 1.0)
    s = _series(3.0)
    path = tmp_path / "t.csv"
    pd.DataFrame({"timestamp": s.index.astype("int64") // 10**9, "value": s.to_numpy()}).to_csv(path, index=False)
    history, replayed, workload = load_with_history(str(path), 1.5, 1, 1.0)
    assert workload == "ysb" and history is not None
    assert len(history) == 3600 and len(replayed) == 5400  # the replayed span is --hours long, after the history


def test_the_forecast_at_the_first_replayed_second_sees_the_history():
    s = _series(1.5)
    history, replayed = split_history(s, 1.0)
    naive = make_forecaster("naive", horizon_s=600, seed=1).fit(history)
    models = ReplayModels(ClusterProfile.default("ysb"), default_space(), naive, seed=1)
    start = replayed.index[0].timestamp()
    assert TraceForecast(models, replayed, 600).forecast("job", start) is None  # nothing to forecast from
    assert TraceForecast(models, replayed, 600, before=history).forecast("job", start) is not None
    with pytest.raises(ValueError, match="one second before"):
        TraceForecast(models, replayed, 600, before=history.iloc[:-5])


def test_prepare_replay_fits_the_forecaster_on_the_history_not_a_synthetic_day(monkeypatch):
    fitted: list[pd.Series] = []

    class Spy:
        def fit(self, series):
            fitted.append(series)
            return self

    monkeypatch.setattr(harness, "make_forecaster", lambda *a, **k: Spy())
    monkeypatch.setattr(harness.ReplayModels, "bootstrap", lambda *a, **k: None)  # no profiling in this test
    history, replayed = split_history(_series(1.5), 1.0)
    prof, space = ClusterProfile.default("ysb"), default_space()
    prepare_replay("demeter", replayed, prof, space, ReplaySettings(seed=1, history=history))
    assert fitted and all(f is history for f in fitted)
    fitted.clear()
    prepare_replay("demeter", replayed, prof, space, ReplaySettings(seed=1))
    assert fitted and all(len(f) == 24 * 3600 and f.index[-1] < replayed.index[0] for f in fitted)
