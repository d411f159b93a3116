"""benchmarks/policy/scenario_matrix.py: the shipped matrix, each transform and perturbation, and bad lines refused with file:line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.policy.scenario_matrix import (
    COLUMNS,
    RESTART_FIELDS,
    MatrixError,
    apply_perturbation,
    apply_transforms,
    load_matrix,
    parse_transform,
    scenario_profile,
    scenario_trace,
)
from flinktune.config_space import default_space
from flinktune.replay.runner import resolve_profile
from flinktune.twin.mechanics import steady_state
from flinktune.twin.workload import generate_trace
from tests.benchmarks.ads_folder import ADS_DATA

SHIPPED = Path(__file__).resolve().parents[3] / "benchmarks" / "robustness_matrix.csv"
HEADER = ",".join(COLUMNS)


def _matrix(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "m.csv"
    path.write_text("# a comment\n" + HEADER + "\n" + "\n".join(rows) + "\n")
    return path


def test_shipped_matrix_covers_the_traces_profiles_and_perturbations() -> None:
    rows = load_matrix(SHIPPED)
    assert len(rows) >= 24
    assert {r.trace for r in rows} >= {"ads", "ysb", "tsw"}
    assert {r.profile for r in rows} >= {"ads", "ysb", "tsw"}
    transforms = {r.trace_transform for r in rows if r.trace == "ads"}
    assert {"compress:2", "scale:0.5", "scale:1.5"} <= transforms
    assert any(t.startswith("flash:") for t in transforms)
    perturbations = {p for r in rows if r.profile == "ads" and r.trace == "ads" for p in r.perturbation.split("+")}
    assert perturbations >= {
        "capacity:0.7",
        "capacity:1.3",
        "base_latency:1.5",
        "redeploy_warmup:10",
        "redeploy_warmup:120",
        "redeploy_warmup:600",
        "restart_cost:2",
    }
    assert all(r.latency_target_ms == 2369 for r in rows if r.profile == "ads")


def test_every_shipped_row_builds_its_profile_and_trace() -> None:
    if not (ADS_DATA / "trace_x3.csv").exists():
        pytest.skip(f"real data not found at {ADS_DATA}")
    for sc in load_matrix(SHIPPED):
        scenario_profile(sc, ADS_DATA)
        history, series, _ = scenario_trace(sc, ADS_DATA, 1)
        assert len(series) == int(sc.hours * 3600), sc.name
        if sc.history_hours:
            assert history is not None and len(history) == int(sc.history_hours * 3600), sc.name
            assert history.index[-1] < series.index[0]


def test_compress_plays_the_curve_faster_and_halves_the_duration() -> None:
    s = generate_trace("tsw", 2.0, 1)
    out = apply_transforms(s, parse_transform("compress:2"), kinds=("compress",))
    assert len(out) == len(s) // 2
    assert out.index[0] == s.index[0] and (out.index[1] - out.index[0]).total_seconds() == 1
    np.testing.assert_allclose(out.to_numpy(), s.to_numpy()[::2])


def test_scale_and_flash() -> None:
    s = generate_trace("ysb", 2.0, 1)
    np.testing.assert_allclose(apply_transforms(s, parse_transform("scale:0.5"), kinds=("scale",)), s.to_numpy() * 0.5)
    out = apply_transforms(s, parse_transform("flash:2:0.5:10"), kinds=("flash",)).to_numpy()
    inside = slice(1800, 1800 + 600)
    np.testing.assert_allclose(out[inside], 2 * s.to_numpy()[inside])
    np.testing.assert_allclose(out[:1800], s.to_numpy()[:1800])
    np.testing.assert_allclose(out[2400:], s.to_numpy()[2400:])
    # Only the kinds asked for act: compress and scale on the whole trace, flash on the replayed span.
    np.testing.assert_allclose(apply_transforms(s, parse_transform("scale:3+flash:2:0.5:10"), kinds=("flash",)), out)


def _carry(profile) -> float:  # type: ignore[no-untyped-def]
    grid = np.arange(1000.0, 300_000.0, 500.0)
    ss = steady_state(profile, default_space().maximum, grid)
    return float(grid[ss["throughput"] >= grid * 0.9999].max())


def test_capacity_scales_every_vertex_cost_and_the_capacity() -> None:
    base = resolve_profile("ads", "ysb")
    slow, fast = apply_perturbation(base, "capacity:0.7"), apply_perturbation(base, "capacity:1.3")
    for b, s, f in zip(base.dataflow.vertices, slow.dataflow.vertices, fast.dataflow.vertices):
        assert s.cost_us == pytest.approx(b.cost_us / 0.7) and f.cost_us == pytest.approx(b.cost_us / 1.3)
    assert _carry(slow) < _carry(base) < _carry(fast)


def test_latency_warmup_and_restart_perturbations() -> None:
    base = resolve_profile("ysb", "ysb")
    lat = apply_perturbation(base, "base_latency:1.5")
    assert lat.base_latency_ms == pytest.approx(1.5 * base.base_latency_ms)
    cfg = default_space().maximum
    assert (
        steady_state(lat, cfg, np.array([30_000.0]))["latency_ms"][0]
        > steady_state(base, cfg, np.array([30_000.0]))["latency_ms"][0]
    )
    assert apply_perturbation(base, "redeploy_warmup:600").redeploy_warmup_s == 600
    slow = apply_perturbation(base, "restart_cost:2")
    for f in RESTART_FIELDS:
        assert getattr(slow, f) == pytest.approx(2 * getattr(base, f))
    assert slow.restore_mb_s == pytest.approx(base.restore_mb_s / 2)
    # A reconfiguration's warm-up stays what it was: only a failure's restart costs more.
    assert slow.redeploy_warmup_s == base.warmup_s and slow.rescale_warmup_s == base.warmup_s
    rate = np.array([60_000.0])
    assert steady_state(slow, cfg, rate)["recovery_s"][0] > steady_state(base, cfg, rate)["recovery_s"][0]
    both = apply_perturbation(base, "redeploy_warmup:600+restart_cost:2")
    assert both.redeploy_warmup_s == 600 and both.restart_base_s == pytest.approx(2 * base.restart_base_s)


def test_generator_with_a_transform_gets_a_transformed_history(tmp_path: Path) -> None:
    path = _matrix(tmp_path, "g,ysb,compress:2+scale:0.5,ysb,none,500,1,0,")
    (sc,) = load_matrix(path)
    history, series, workload = scenario_trace(sc, tmp_path, 3)
    assert workload == "ysb" and len(series) == 3600
    np.testing.assert_allclose(series.to_numpy(), 0.5 * generate_trace("ysb", 2.0, 3).to_numpy()[::2][:3600])
    assert history is not None and len(history) == 24 * 3600
    assert history.index[-1] == series.index[0] - pd.Timedelta(seconds=1)
    assert history.max() <= 0.5 * 88_000 * 1.1  # scaled like the replayed span


def test_a_trace_file_relative_to_the_data_folder(tmp_path: Path) -> None:
    s = generate_trace("tsw", 3.0, 1)
    pd.DataFrame({"timestamp": s.index.astype("int64") // 10**9, "value": s.to_numpy()}).to_csv(tmp_path / "t.csv", index=False)
    path = _matrix(tmp_path, "f,t.csv,compress:2,tsw,none,500,1,0.5,")
    (sc,) = load_matrix(path)
    history, series, _ = scenario_trace(sc, tmp_path, 1)
    assert history is not None and len(history) == 1800 and len(series) == 3600
    np.testing.assert_allclose(series.to_numpy(), s.to_numpy()[::2][1800:5400])


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("x,ads,none,ads,none,2369,12", "expected 9 columns"),
        ("x,kafka,none,ads,none,2369,12,6,", "trace 'kafka'"),
        ("x,ads,warp:2,ads,none,2369,12,6,", "unknown transform 'warp'"),
        ("x,ads,compress,ads,none,2369,12,6,", "expected compress:<factor>"),
        ("x,ads,flash:2:3,ads,none,2369,12,6,", "expected flash:<multiplier>:<start_h>:<minutes>"),
        ("x,ads,flash:2:11.9:20,ads,none,2369,12,6,", "runs past the 12 h replayed"),
        ("x,ads,scale:-1,ads,none,2369,12,6,", "must be a finite number > 0"),
        ("x,ads,none,flink,none,2369,12,6,", "profile 'flink'"),
        ("x,ads,none,ads,capacity:0.7+warp:2,2369,12,6,", "unknown perturbation 'warp'"),
        ("x,ads,none,ads,capacity,2369,12,6,", "expected capacity:<number>"),
        ("x,ads,none,ads,none,fast,12,6,", "latency_target_ms 'fast' is not a number"),
        ("x,ads,none,ads,none,2369,0,6,", "hours must be"),
        ("x,ysb,none,ysb,none,500,12,6,", "write 0"),
        ("x y,ads,none,ads,none,2369,12,6,", "scenario name"),
        ("x,ads,none,ads,none,2369,12,6,reactive.bogus=1", "refused"),
        ("x,ads,none,ads,none,2369,12,6,reactive=1", "POLICY.ARGUMENT=NUMBER"),
    ],
)
def test_a_bad_line_is_refused_with_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    path = _matrix(tmp_path, "ok,ysb,none,ysb,none,500,12,0,", row)
    with pytest.raises(MatrixError, match=rf"^{path}:4: .*{message}"):
        load_matrix(path)


def test_header_duplicates_and_missing_files(tmp_path: Path) -> None:
    bad_header = tmp_path / "h.csv"
    bad_header.write_text("scenario,trace\n")
    with pytest.raises(MatrixError, match=rf"^{bad_header}:1: expected the header"):
        load_matrix(bad_header)
    dup = _matrix(tmp_path, "a,ysb,none,ysb,none,500,12,0,", "a,tsw,none,tsw,none,500,12,0,")
    with pytest.raises(MatrixError, match=rf"^{dup}:4: scenario 'a' is already defined at {dup}:3"):
        load_matrix(dup)
    missing = _matrix(tmp_path, "a,nope.csv,none,none.yaml,none,500,1,0,")
    (sc,) = load_matrix(missing)
    with pytest.raises(MatrixError, match=rf"^{missing}:3: profile 'none.yaml': .* does not exist"):
        scenario_profile(sc, tmp_path)
    with pytest.raises(MatrixError, match=rf"^{missing}:3: trace 'nope.csv': .* does not exist"):
        scenario_trace(sc, tmp_path, 1)


def test_a_trace_too_short_for_the_row(tmp_path: Path) -> None:
    s = generate_trace("tsw", 2.0, 1)
    pd.DataFrame({"timestamp": s.index.astype("int64") // 10**9, "value": s.to_numpy()}).to_csv(tmp_path / "t.csv", index=False)
    path = _matrix(tmp_path, "f,t.csv,compress:2,tsw,none,500,1,0.5,")
    (sc,) = load_matrix(path)
    with pytest.raises(
        MatrixError, match=rf"^{path}:3: .*1.00 h after the transforms, the row needs history_hours \+ hours = 1.5 h"
    ):
        scenario_trace(sc, tmp_path, 1)


def test_profile_ads_replaces_the_shipped_calibration(tmp_path: Path) -> None:
    calibrated = resolve_profile("ads", "ysb").with_(base_latency_ms=777.0).to_yaml(tmp_path / "calibrated.yaml")
    (sc,) = load_matrix(_matrix(tmp_path, "a,ads,none,ads,base_latency:2,2369,12,6,"))
    assert scenario_profile(sc, tmp_path, calibrated).base_latency_ms == pytest.approx(2 * 777.0)
    assert scenario_profile(sc, tmp_path).base_latency_ms == pytest.approx(2 * resolve_profile("ads", "ysb").base_latency_ms)
