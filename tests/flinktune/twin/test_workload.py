"""Traces: seeded generators, bursts and CSV loading with errors naming file and line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flinktune.twin.workload import TraceError, generate_trace, inject_bursts, load_trace_csv


@pytest.mark.parametrize("kind,lo,hi", [("ysb", 17_000, 88_000), ("tsw", 30_000, 113_000)])
def test_generated_trace_shape_and_range(kind: str, lo: float, hi: float) -> None:
    s = generate_trace(kind, 18, seed=3)
    assert s.name == "rate" and len(s) == 18 * 3600
    assert str(s.index.tz) == "UTC" and (np.diff(s.index.asi8) == 10**9).all()
    assert lo * 0.85 <= s.min() <= lo * 1.1 and hi * 0.95 <= s.max() <= hi * 1.05
    # Not a flat line: the load moves over the day.
    hourly = s.resample("1h").mean()
    assert hourly.max() / hourly.min() > 1.5


def test_tsw_has_a_six_hour_period() -> None:
    s = generate_trace("tsw", 18, seed=1).resample("10min").mean().to_numpy()
    lag6h = 36
    same_phase = np.corrcoef(s[:-lag6h], s[lag6h:])[0, 1]
    opposite = np.corrcoef(s[: -lag6h // 2], s[lag6h // 2 :])[0, 1]
    assert same_phase > 0.9 and opposite < 0


def test_same_seed_same_trace_other_seed_differs() -> None:
    a, b, c = generate_trace("ysb", 2, 5), generate_trace("ysb", 2, 5), generate_trace("ysb", 2, 6)
    pd.testing.assert_series_equal(a, b)
    assert not np.allclose(a.to_numpy(), c.to_numpy())


def test_step_and_start() -> None:
    s = generate_trace("ysb", 1, 0, start="2024-03-01T12:00:00", step_s=10)
    assert len(s) == 360 and s.index[0] == pd.Timestamp("2024-03-01T12:00:00Z")
    assert (s.index[1] - s.index[0]).total_seconds() == 10


def test_unknown_kind_is_named() -> None:
    with pytest.raises(TraceError, match="'nexmark'"):
        generate_trace("nexmark", 1, 0)


def test_bursts_are_sudden_steps_within_bounds() -> None:
    base = pd.Series(1000.0, index=pd.date_range("2024-01-01", periods=7200, freq="1s", tz="UTC"), name="rate")
    out = inject_bursts(base, seed=4, n=3, low=0.2, high=1.0, duration_s=300)
    ratio = out.to_numpy() / base.to_numpy()
    raised = ratio > 1.0
    assert 300 <= raised.sum() <= 900
    assert ratio.min() >= 1.0 and ratio[raised].min() >= 1.2 - 1e-9 and ratio.max() <= 2.0 * 2.0
    assert np.abs(np.diff(ratio)).max() >= 0.2  # a step, not a ramp
    pd.testing.assert_series_equal(out, inject_bursts(base, seed=4, n=3, low=0.2, high=1.0, duration_s=300))


def test_csv_pipe_epoch_ms_is_resampled_to_one_second(tmp_path) -> None:
    f = tmp_path / "trace.csv"
    f.write_text("timestamp|value\n1704067200000|100\n1704067210000|200\n1704067220000|100\n")
    s = load_trace_csv(f, scale=2.0, min_span_s=0)
    assert len(s) == 21 and s.index[0] == pd.Timestamp("2024-01-01T00:00:00Z")
    assert s.iloc[0] == 200.0 and s.iloc[5] == pytest.approx(300.0) and s.iloc[10] == 400.0


def test_csv_iso_comma_no_header(tmp_path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("2024-01-01T00:00:00Z,5\n2024-01-01T00:00:01Z,6\n2024-01-01T00:00:02Z,7\n")
    assert load_trace_csv(f, min_span_s=0).tolist() == [5.0, 6.0, 7.0]


@pytest.mark.parametrize(
    "body,line,what",
    [
        ("ts,value\n0,1\n1,2,3\n", 3, "expected 'timestamp,value'"),
        ("0,1\n1,2\n1,3\n", 3, "does not increase"),
        ("0,1\n1,-2\n", 2, "finite number >= 0"),
        ("0,1\n1,nan\n", 2, "finite number >= 0"),
        ("0,1\n1,2\n3,3\n", 3, "irregular step"),
        ("0,1\n1,abc\n", 2, "not a number"),
        ("0,1\nyesterday,2\n", 2, "neither epoch"),
    ],
)
def test_csv_errors_name_file_and_line(tmp_path, body: str, line: int, what: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(body)
    with pytest.raises(TraceError) as err:
        load_trace_csv(f)
    assert f"{f}:{line}:" in str(err.value) and what in str(err.value)


def test_csv_empty_file_is_named(tmp_path) -> None:
    f = tmp_path / "empty.csv"
    f.write_text("timestamp,value\n\n")
    with pytest.raises(TraceError, match=r"empty\.csv: empty trace"):
        load_trace_csv(f)
