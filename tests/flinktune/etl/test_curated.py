"""Stage-then-commit of curated partitions: merge by range, byte-identical reruns, crash safety."""

from __future__ import annotations

import pandas as pd
import pytest

from flinktune.etl import curated
from flinktune.etl.curated import PART_FILE, read_features, recover, write_features
from flinktune.etl.features import FEATURE_COLUMNS, INT_COLUMNS

DAY = pd.Timestamp("2024-05-01", tz="UTC")
MIN = 60_000


def minutes(start: pd.Timestamp, n: int, rate: float = 1.0) -> pd.DataFrame:
    ws = pd.date_range(start, periods=n, freq="min")
    data = {c: [1] * n if c in INT_COLUMNS else [rate] * n for c in FEATURE_COLUMNS[2:]}
    return pd.DataFrame({"job": "demo", "window_start": ws, **data})


def ms(ts: pd.Timestamp) -> int:
    return int(ts.timestamp() * 1000)


def snapshot(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_rewrite_of_a_range_keeps_the_rest_of_the_day_and_spans_days(tmp_path):
    start = DAY + pd.Timedelta(hours=23, minutes=58)
    write_features(tmp_path, "demo", minutes(start, 4), ms(start), ms(start) + 4 * MIN)  # crosses midnight
    assert sorted(p.parent.name for p in tmp_path.glob("job=demo/date=*/" + PART_FILE)) == ["date=2024-05-01", "date=2024-05-02"]
    mid = start + pd.Timedelta(minutes=1)
    write_features(tmp_path, "demo", minutes(mid, 2, rate=7.0), ms(mid), ms(mid) + 2 * MIN)
    back = read_features(tmp_path, "demo")
    assert list(back["input_rate"]) == [1.0, 7.0, 7.0, 1.0]
    assert back["window_start"].is_monotonic_increasing and str(back["parallelism"].dtype) == "Int64"


def test_rerun_is_byte_identical(tmp_path):
    rows = minutes(DAY, 5)
    write_features(tmp_path, "demo", rows, ms(DAY), ms(DAY) + 5 * MIN)
    first = snapshot(tmp_path)
    write_features(tmp_path, "demo", rows.sample(frac=1, random_state=3), ms(DAY), ms(DAY) + 5 * MIN)
    assert snapshot(tmp_path) == first and list(first) == [f"job=demo/date=2024-05-01/{PART_FILE}"]


def test_crash_before_commit_leaves_previous_state(tmp_path, monkeypatch):
    write_features(tmp_path, "demo", minutes(DAY, 3), ms(DAY), ms(DAY) + 3 * MIN)
    before = snapshot(tmp_path)

    def crash(root, staged):
        raise RuntimeError("killed between stage and commit")

    monkeypatch.setattr(curated, "commit", crash)
    with pytest.raises(RuntimeError, match="killed"):
        write_features(tmp_path, "demo", minutes(DAY, 3, rate=9.0), ms(DAY), ms(DAY) + 3 * MIN)
    assert snapshot(tmp_path) == before


def test_crash_between_the_two_moves_is_recovered(tmp_path, monkeypatch):
    write_features(tmp_path, "demo", minutes(DAY, 3), ms(DAY), ms(DAY) + 3 * MIN)
    before = snapshot(tmp_path)
    real_replace = curated.os.replace
    calls = []

    def replace_then_die(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # the old partition is in the trash, the new one not yet in place
            raise OSError("power cut")
        real_replace(src, dst)

    monkeypatch.setattr(curated.os, "replace", replace_then_die)
    with pytest.raises(OSError):
        write_features(tmp_path, "demo", minutes(DAY, 3, rate=9.0), ms(DAY), ms(DAY) + 3 * MIN)
    monkeypatch.setattr(curated.os, "replace", real_replace)
    assert not (tmp_path / "job=demo" / "date=2024-05-01").exists()
    recover(tmp_path)
    assert snapshot(tmp_path) == before


def test_rows_outside_the_range_or_of_another_job_are_refused(tmp_path):
    with pytest.raises(ValueError, match="outside"):
        write_features(tmp_path, "demo", minutes(DAY, 3), ms(DAY), ms(DAY) + 2 * MIN)
    with pytest.raises(ValueError, match="other job"):
        write_features(tmp_path, "x", minutes(DAY, 1), ms(DAY), ms(DAY) + MIN)
    assert not any(tmp_path.iterdir())
