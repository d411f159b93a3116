"""models.registry against a real MLflow on SQLite in a tmp dir: register, promote, load, pyfunc predict."""

import mlflow
import numpy as np
import pandas as pd
import pytest

from models import registry
from models.surrogate.gp import GPSurrogate
from models.surrogate.pyfunc import SurrogatePyfunc
from models.surrogate.types import OUTCOMES, SurrogateInputError


@pytest.fixture(scope="module")
def mlflow_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("mlflow")
    registry.configure(f"sqlite:///{home / 'mlflow.db'}", home / "artifacts")
    return home


@pytest.fixture(scope="module")
def surrogate_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.random((12, 2))
    rates = rng.uniform(100, 1000, 12)
    Y = np.column_stack([10 + 50 * X[:, 0] + rates / 100, 1 + X[:, 1], 512 + 100 * X[:, 0], 30 + 10 * X[:, 1]])
    model = GPSurrogate().fit(X, rates, Y)
    return model, model.save(tmp_path_factory.mktemp("s") / "s.pt")


def _register(name, surrogate_file, metrics, **kw):
    _, path = surrogate_file
    wrapper = SurrogatePyfunc(["a", "b"], [(0.0, 1.0), (10.0, 20.0)])
    return registry.log_and_register(
        name, wrapper, params={"n": 12}, metrics=metrics, artifacts={"model": str(path)}, experiment=name, **kw
    )


def test_register_promote_and_load_champion(mlflow_home, surrogate_file):
    name = "unit-surrogate"
    assert registry.champion_version(name) is None
    v1 = _register(name, surrogate_file, {"loss": 1.0})
    assert v1 == "1"
    assert registry.promote(name, v1, "loss", margin=0.1).promoted is True  # first becomes champion
    assert registry.champion_version(name) == "1"
    v2 = _register(name, surrogate_file, {"loss": 0.95})
    assert registry.promote(name, v2, "loss", margin=0.1).promoted is False  # better, not by the margin
    assert registry.champion_version(name) == "1"
    client = mlflow.MlflowClient()
    assert str(client.get_model_version_by_alias(name, registry.CHALLENGER).version) == "2"
    v3 = _register(name, surrogate_file, {"loss": 0.5})
    assert registry.promote(name, v3, "loss", margin=0.1).promoted is True
    assert registry.champion_version(name) == "3"
    # the new champion supersedes the older loser: no stale @challenger is left
    assert registry.CHALLENGER not in client.get_registered_model(name).aliases
    assert registry.promote(name, v3, "loss").promoted is False  # already champion
    assert client.get_model_version(name, "2").tags["promotion"].startswith("kept champion: loss 0.95 vs champion v1 1")
    # higher-is-better metrics compare the other way round
    v4 = _register(name, surrogate_file, {"loss": 0.1, "observations": 30.0})
    assert registry.promote(name, v4, "loss", margin=0.0, lower_is_better=False).promoted is False
    assert str(client.get_model_version_by_alias(name, registry.CHALLENGER).version) == "4"
    assert client.get_model_version(name, "4").tags["promotion_metric"] == "loss"
    # the artifacts went under <root>/<experiment>, not the working directory
    exp = client.get_experiment_by_name(name)
    assert exp.artifact_location == (mlflow_home / "artifacts" / name).resolve().as_uri()
    assert any((mlflow_home / "artifacts" / name).iterdir())

    model, _ = surrogate_file
    champion = registry.load_champion(name)
    assert isinstance(champion, GPSurrogate)
    X = np.array([[0.2, 0.7], [0.9, 0.1]])
    np.testing.assert_allclose(champion.predict(X, 500).mean, model.predict(X, 500).mean)


def test_pyfunc_predict_scales_raw_knobs(mlflow_home, surrogate_file):
    name = "unit-surrogate-pyfunc"
    v = _register(name, surrogate_file, {"loss": 1.0})
    registry.promote(name, v, "loss")
    pf = mlflow.pyfunc.load_model(f"models:/{name}@champion")
    frame = pd.DataFrame({"a": [0.2, 0.9, 0.2], "b": [17.0, 11.0, 17.0], "rate": [500.0, 500.0, 800.0]})
    out = pf.predict(frame)
    assert list(out.columns) == [f"{o}_{k}" for o in OUTCOMES for k in ("mean", "std", "median")]
    model, _ = surrogate_file
    direct = model.predict(np.array([[0.2, 0.7], [0.9, 0.1]]), 500.0)
    np.testing.assert_allclose(
        out[["latency_ms_mean", "cpu_used_mean", "memory_used_mb_mean", "recovery_s_mean"]].to_numpy()[:2], direct.mean
    )
    np.testing.assert_allclose(out["latency_ms_median"].to_numpy()[:2], direct.median("latency_ms"))
    assert out["latency_ms_mean"].iloc[2] != pytest.approx(out["latency_ms_mean"].iloc[0])
    with pytest.raises(SurrogateInputError, match=r"missing column\(s\) \['rate'\]"):
        pf.predict(frame.drop(columns=["rate"]))


def test_errors_name_the_model_version_and_metric(mlflow_home, surrogate_file):
    name = "unit-surrogate-errors"
    with pytest.raises(registry.RegistryError, match="'unit-surrogate-errors' has no @champion"):
        registry.load_champion(name)
    with pytest.raises(registry.RegistryError, match=r"non-finite metric\(s\) \['loss'\]"):
        _register(name, surrogate_file, {"loss": float("nan")})
    v = _register(name, surrogate_file, {"loss": 1.0})
    with pytest.raises(registry.RegistryError, match=f"version {v}: its run has no metric 'rmse'"):
        registry.promote(name, v, "rmse")
    with pytest.raises(registry.RegistryError, match="has no version '99'"):
        registry.promote(name, "99", "loss")
    with pytest.raises(registry.RegistryError, match="does not exist"):
        _register(name, surrogate_file, {"loss": 1.0}, files={"plot": mlflow_home / "missing.png"})


def test_promote_relative_margin_requirement_and_given_scores(mlflow_home, surrogate_file):
    """The one promotion path: scores measured elsewhere (a re-backtest), a relative margin, an extra requirement."""
    name = "unit-promote-paths"
    client = mlflow.MlflowClient()
    v1 = _register(name, surrogate_file, {"mae": 10.0})
    unsafe = registry.promote(name, v1, "mae", requirement=(False, "under_rate 0.2 vs 0.05"))
    assert not unsafe.promoted and registry.champion_version(name) is None  # unmet even without a champion
    assert unsafe.reason == "kept champion: no champion yet; under_rate 0.2 vs 0.05 (not met)"
    assert registry.promote(name, v1, "mae").promoted
    v2 = _register(name, surrogate_file, {"mae": 9.5})
    # The champion scores 10 on the challenger's window; 5 % better is needed (limit 9.5, strictly below).
    kept = registry.promote(name, v2, "mae", incumbent=10.0, margin=0.05, relative=True, context="same window from t0")
    assert not kept.promoted and registry.champion_version(name) == "1"
    assert kept.reason == "kept champion: same window from t0: mae 9.5 vs champion v1 10 (needs < 9.5, margin 0.05 relative)"
    words = client.get_model_version(name, v2).description
    assert words == (
        "Not promoted (challenger): version 1 stays champion (same window from t0): mae 9.5 against 10 "
        "(lower is better; it had to reach 9.5)."
    )
    assert client.get_model_version(name, v2).tags["promotion"] == kept.reason
    # Its own value given (e.g. on the shared window) overrides the run's metric.
    won = registry.promote(
        name, v2, "mae", challenger=9.0, incumbent=10.0, margin=0.05, relative=True, requirement=(True, "under_rate 0.01 vs 0.02")
    )
    assert won.promoted and registry.champion_version(name) == "2"
    assert won.reason.startswith("promoted: mae 9 vs champion v1 10") and won.reason.endswith("under_rate 0.01 vs 0.02")
    assert client.get_model_version(name, v2).description == (
        "Champion: it beat version 1: mae 9 against 10 (lower is better; it had to reach 9.5). "
        "Also required: under_rate 0.01 vs 0.02, met."
    )
    assert client.get_model_version(name, v1).description.startswith("Champion: it is the first version")
    with pytest.raises(ValueError, match="margin must be >= 0"):
        registry.promote(name, v2, "mae", margin=-0.1)


def test_a_corrupt_local_store_is_unavailable_not_no_champion(tmp_path) -> None:
    from models.registry import ModelStoreUnavailable, champion_version, configure

    db = tmp_path / "mlflow.db"
    db.write_bytes(b"\x00garbage" * 500)
    configure(f"sqlite:///{db}", tmp_path / "artifacts", request_timeout_s=2, max_retries=0)
    with pytest.raises(ModelStoreUnavailable, match=r"cannot be read .*not a database"):
        champion_version("flinktune-surrogate-demo")
