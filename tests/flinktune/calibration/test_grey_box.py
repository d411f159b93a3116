"""The grey-box twin on real profiling runs: bad input gets a clear error or is used correctly, one test each,
and slot-sharing contention is a mechanism the fit finds on real data."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flinktune.calibration.grey_box import GreyBoxTwin, check_profiling_runs, fit_grey_box, fit_mechanism
from flinktune.calibration.grey_box_scores import cross_validate
from flinktune.calibration.mechanism import CalibrationError
from flinktune.config_space import Configuration
from flinktune.twin.mechanics import steady_state
from flinktune.twin.profile import ClusterProfile

# The real data lives beside the repository (../shared/data, never fetched); FLINKTUNE_DEMETER_ADS overrides.
DATA = (
    Path(os.environ.get("FLINKTUNE_DEMETER_ADS", Path(__file__).resolve().parents[3].parent / "shared" / "data" / "demeter-ads"))
    / "profiling_runs.csv"
)


def _runs() -> pd.DataFrame:
    if DATA.exists():
        return pd.read_csv(DATA)
    pytest.skip(f"real profiling runs not found at {DATA}")


def _small(n_per_run: int = 8) -> pd.DataFrame:
    return _runs().groupby("run", group_keys=False).head(n_per_run).reset_index(drop=True)


def test_missing_column_is_named() -> None:
    with pytest.raises(CalibrationError, match=r"missing column\(s\) \['recovery_s'\]"):
        check_profiling_runs(_small().drop(columns=["recovery_s"]))


def test_negative_rate_names_row_and_column() -> None:
    obs = _small()
    obs.loc[5, "input_rate"] = -100.0
    with pytest.raises(CalibrationError, match=r"column 'input_rate' row 5 must be a positive number, got -100"):
        check_profiling_runs(obs)


def test_duplicate_rows_are_dropped_and_said() -> None:
    obs = _small()
    doubled = pd.concat([obs, obs.iloc[[2, 3]]], ignore_index=True)
    clean, notes = check_profiling_runs(doubled, group_by="run")
    assert len(clean) == len(obs)
    assert any("dropped 2 exact duplicate row(s)" in n for n in notes)


def test_capped_and_empty_recovery_are_censored_and_not_measured() -> None:
    obs = _small(10)
    obs.loc[0, "recovery_s"] = np.nan
    capped = obs["recovery_s"] >= 360
    assert capped.any() and obs["recovery_s"].isna().any()
    twin = fit_grey_box(obs.drop(columns=["run"]), ClusterProfile.default(), max_nfev=8)
    # The time regression never saw a capped value: it predicts below the cap, and the class model
    # says "does not recover in time" for most capped runs (the cap is data, not a missing value).
    pred = twin.predict(obs)
    assert (pred["recovery_s"] < 360).all()
    assert (~pred.loc[capped, "recovers"]).mean() >= 0.7
    # Text in the recovery column is not silently dropped.
    obs["recovery_s"] = obs["recovery_s"].astype(object)
    obs.loc[3, "recovery_s"] = "n/a"
    with pytest.raises(CalibrationError, match=r"column 'recovery_s' row 3 must be empty or a non-negative number"):
        check_profiling_runs(obs)


def test_run_of_one_row_is_fitted_on_but_not_scored() -> None:
    obs = _small(6)
    lone = obs.iloc[[0]].assign(run="lonely")
    folds = cross_validate(pd.concat([obs, lone], ignore_index=True), ClusterProfile.default(), group_by="run", max_nfev=5)
    assert "lonely" not in set(folds["run"]) and len(folds) == 3
    assert {"throughput_mape", "keeps_up_accuracy", "latency_class_accuracy", "recovery_class_accuracy", "recovery_mape"} <= set(
        folds.columns
    )
    with pytest.raises(CalibrationError, match=r"needs at least two groups"):
        cross_validate(obs.assign(run="one"), ClusterProfile.default(), group_by="run")


def test_slot_sharing_contention_is_fitted_from_real_runs() -> None:
    # Demeter's run 2: parallelism 4 with four slots on one core did about 4.9k rec/s at 23.7k
    # offered; the fitted mechanism must price that, and one slot per core far higher per core.
    obs = _runs()
    profile, fitted = fit_mechanism(obs.drop(columns=["run"]), ClusterProfile.default(), max_nfev=15)
    assert fitted["shared_core_knee"] > 0.05
    cfg = Configuration(4, 4, 1.0, 2048, 10)
    after = steady_state(profile, cfg, 23723.55)["throughput"][0]
    assert abs(after - 4865.6) / 4865.6 < 0.35
    # Run 3: four TaskManagers of one core and one slot did about 31.7k rec/s.
    alone = steady_state(profile, Configuration(4, 1, 1.0, 1024, 10), 64614.3)["throughput"][0]
    assert alone > 4 * after


def test_save_load_and_a_clear_error_for_another_file(tmp_path) -> None:
    obs = _small(6)
    twin = fit_grey_box(obs.drop(columns=["run"]), ClusterProfile.default(), max_nfev=5)
    path = twin.save(tmp_path / "t.joblib")
    again = GreyBoxTwin.load(path).predict(obs.head(3))
    assert np.allclose(again["throughput"], twin.predict(obs.head(3))["throughput"])
    (tmp_path / "x.joblib").write_text("not a model")
    with pytest.raises(CalibrationError, match=r"x\.joblib: not a grey-box twin file"):
        GreyBoxTwin.load(tmp_path / "x.joblib")


class _Planted:
    """A pickle whose loading would create a file: what a crafted model file does."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_crafted_or_resigned_pickle_runs_no_code(tmp_path) -> None:
    import joblib

    from flinktune.signing import MAGIC

    marker = tmp_path / "pwned"
    crafted = tmp_path / "crafted.joblib"
    joblib.dump(_Planted(str(marker)), crafted)
    with pytest.raises(CalibrationError, match=r"crafted\.joblib: not a grey-box twin file signed") as err:
        GreyBoxTwin.load(crafted)
    assert "\n" not in str(err.value)
    # The same payload behind a signature made with another key.
    forged = tmp_path / "forged.joblib"
    forged.write_bytes(MAGIC + b"0" * 64 + b"\n" + crafted.read_bytes())
    with pytest.raises(CalibrationError, match="not a grey-box twin file signed"):
        GreyBoxTwin.load(forged)
    assert not marker.exists()


def test_keeps_up_class_and_throughput_come_from_one_capacity() -> None:
    obs = _small(10)
    twin = fit_grey_box(obs.drop(columns=["run"]), ClusterProfile.default(), max_nfev=5)
    pred = twin.predict(obs)
    rate = pred["input_rate"]
    assert (pred["throughput"] <= pred["capacity"] * (1 + 1e-9)).all()
    assert (pred["keeps_up"] == (pred["throughput"] >= 0.95 * rate)).all()
    # A configuration at a rate far above its capacity falls behind at that capacity.
    flooded = twin.predict(obs.head(3).assign(input_rate=lambda t: t["input_rate"] * 100))
    assert (~flooded["keeps_up"]).all() and np.allclose(flooded["throughput"], flooded["capacity"])
