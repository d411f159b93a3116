"""Curated features: merge by range, byte-identical reruns, and one snapshot commit for both datasets
that readers see whole whichever step a kill interrupts."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from flinktune.etl import curated
from flinktune.etl.curated import read_features, write_features
from flinktune.etl.features import FEATURE_COLUMNS, INT_COLUMNS
from flinktune.lake import atomic, snapshot
from flinktune.lake.snapshot import SnapshotError, snapshot_path

DAY = pd.Timestamp("2024-05-01", tz="UTC")
MIN = 60_000
BOTH = ("features_1m", "features_10s")


def minutes(start: pd.Timestamp, n: int, rate: float = 1.0, freq: str = "min") -> pd.DataFrame:
    ws = pd.date_range(start, periods=n, freq=freq)
    data = {c: [1] * n if c in INT_COLUMNS else [rate] * n for c in FEATURE_COLUMNS[2:]}
    return pd.DataFrame({"job": "demo", "window_start": ws, **data})


def ms(ts: pd.Timestamp) -> int:
    return int(ts.timestamp() * 1000)


def snapshot_bytes(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def both(rate: float, n: int = 3) -> dict[str, pd.DataFrame]:
    return {"features_1m": minutes(DAY, n, rate), "features_10s": minutes(DAY, 6 * n, rate, freq="10s")}


def rates(root) -> dict[str, set[float]]:
    return {ds: set(read_features(root, ds, "demo")["input_rate"]) for ds in BOTH}


def test_rewrite_of_a_range_keeps_the_rest_of_the_day_and_spans_days(tmp_path):
    start = DAY + pd.Timedelta(hours=23, minutes=58)
    write_features(tmp_path, "demo", {"features_1m": minutes(start, 4)}, ms(start), ms(start) + 4 * MIN)  # crosses midnight
    assert sorted(p.parent.name for p in tmp_path.glob("features_1m/job=demo/date=*/part-*.parquet")) == [
        "date=2024-05-01",
        "date=2024-05-02",
    ]
    mid = start + pd.Timedelta(minutes=1)
    write_features(tmp_path, "demo", {"features_1m": minutes(mid, 2, rate=7.0)}, ms(mid), ms(mid) + 2 * MIN)
    back = read_features(tmp_path, "features_1m", "demo")
    assert list(back["input_rate"]) == [1.0, 7.0, 7.0, 1.0]
    assert back["window_start"].is_monotonic_increasing and str(back["parallelism"].dtype) == "Int64"
    assert len(list(tmp_path.glob("features_1m/job=demo/date=*/*.parquet"))) == 2  # replaced files are gone


def test_rerun_is_byte_identical(tmp_path):
    write_features(tmp_path, "demo", both(1.0, 5), ms(DAY), ms(DAY) + 5 * MIN)
    first = snapshot_bytes(tmp_path)
    shuffled = {ds: f.sample(frac=1, random_state=3) for ds, f in both(1.0, 5).items()}
    write_features(tmp_path, "demo", shuffled, ms(DAY), ms(DAY) + 5 * MIN)
    assert snapshot_bytes(tmp_path) == first
    data = [k for k in first if not k.startswith("_snapshots/")]
    assert [k.rsplit("/", 1)[0] for k in data] == [f"{ds}/job=demo/date=2024-05-01" for ds in sorted(BOTH)]
    assert all(k.endswith(curated.part_name(first[k])) for k in data)  # named by content


def _kill_at(monkeypatch, module, name, n):
    """Make the n-th call of ``module.name`` raise, as a kill at that point would stop the commit."""
    real, calls = getattr(module, name), []

    def dying(*args, **kwargs):
        calls.append(args)
        if len(calls) == n:
            raise KeyboardInterrupt(f"killed at {name} #{n}")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, dying)
    return calls


@pytest.mark.parametrize("step", range(1, 5))
def test_a_kill_at_any_step_of_the_commit_leaves_readers_both_datasets_old_or_both_new(tmp_path, monkeypatch, step):
    """Four renames per commit (three partition files, then the pointer): a kill before each one."""
    write_features(tmp_path, "demo", both(1.0), ms(DAY), ms(DAY) + 3 * MIN)
    write_features(
        tmp_path,
        "demo",
        {"features_1m": minutes(DAY + pd.Timedelta(days=1), 1)},
        ms(DAY + pd.Timedelta(days=1)),
        ms(DAY + pd.Timedelta(days=1)) + MIN,
    )  # a second day: the commit touches two partitions of 1m
    before = rates(tmp_path)
    new = both(9.0)
    new["features_1m"] = pd.concat([new["features_1m"], minutes(DAY + pd.Timedelta(days=1), 1, 9.0)])
    calls = _kill_at(monkeypatch, atomic.os, "replace", step)
    with pytest.raises(KeyboardInterrupt):
        write_features(tmp_path, "demo", new, ms(DAY), ms(DAY + pd.Timedelta(days=1)) + MIN)
    assert len(calls) == step
    monkeypatch.undo()
    assert rates(tmp_path) == before  # the pointer was not replaced: the whole old snapshot
    write_features(tmp_path, "demo", new, ms(DAY), ms(DAY + pd.Timedelta(days=1)) + MIN)  # the rerun completes it
    assert rates(tmp_path) == {"features_1m": {9.0}, "features_10s": {9.0}}
    assert len(list(tmp_path.rglob("*.parquet"))) == 3  # the killed commit's files were collected


@pytest.mark.parametrize("step", range(2, 5))
def test_a_jobs_first_commit_killed_at_any_step_leaves_readers_nothing_then_everything(tmp_path, monkeypatch, step):
    """The first commit writes the (empty) pointer first, then three files, then the pointer: a kill
    before any of the later renames leaves neither dataset visible, never one without the other."""
    calls = _kill_at(monkeypatch, atomic.os, "replace", step)
    with pytest.raises(KeyboardInterrupt):
        write_features(tmp_path, "demo", both(9.0), ms(DAY), ms(DAY) + 3 * MIN)
    assert len(calls) == step
    monkeypatch.undo()
    assert rates(tmp_path) == {"features_1m": set(), "features_10s": set()}
    write_features(tmp_path, "demo", both(9.0), ms(DAY), ms(DAY) + 3 * MIN)
    assert rates(tmp_path) == {"features_1m": {9.0}, "features_10s": {9.0}}
    assert len(list(tmp_path.rglob("*.parquet"))) == 2


def test_a_kill_after_the_pointer_leaves_the_new_snapshot_and_garbage_that_readers_skip(tmp_path, monkeypatch):
    write_features(tmp_path, "demo", both(1.0), ms(DAY), ms(DAY) + 3 * MIN)
    monkeypatch.setattr(
        curated,
        "commit_snapshot",
        lambda root, job, staged: (
            snapshot.atomic_write(
                snapshot_path(root, job),
                json.dumps(
                    {
                        "job": job,
                        "datasets": {ds: [str(f.relative_to(root / ds / "job=demo")) for f in fs] for ds, fs in staged.items()},
                    }
                ).encode(),
            ),
            (_ for _ in ()).throw(KeyboardInterrupt("killed before the old files were removed")),
        ),
    )
    with pytest.raises(KeyboardInterrupt):
        write_features(tmp_path, "demo", both(9.0), ms(DAY), ms(DAY) + 3 * MIN)
    assert len(list(tmp_path.rglob("*.parquet"))) == 4  # old and new files side by side...
    assert rates(tmp_path) == {"features_1m": {9.0}, "features_10s": {9.0}}  # ...readers see only the new


def test_a_corrupt_pointer_is_one_error_naming_it(tmp_path):
    write_features(tmp_path, "demo", both(1.0), ms(DAY), ms(DAY) + 3 * MIN)
    snapshot_path(tmp_path, "demo").write_text("{not json")
    with pytest.raises(SnapshotError, match=r"_snapshots/job=demo\.json: unreadable"):
        read_features(tmp_path, "features_1m", "demo")


def test_rows_outside_the_range_or_of_another_job_or_a_bad_job_name_are_refused(tmp_path):
    with pytest.raises(ValueError, match="outside"):
        write_features(tmp_path, "demo", {"features_1m": minutes(DAY, 3)}, ms(DAY), ms(DAY) + 2 * MIN)
    with pytest.raises(ValueError, match="other job"):
        write_features(tmp_path, "x", {"features_1m": minutes(DAY, 1)}, ms(DAY), ms(DAY) + MIN)
    with pytest.raises(ValueError, match="not a valid job name"):
        write_features(tmp_path, "../x", {"features_1m": minutes(DAY, 1)}, ms(DAY), ms(DAY) + MIN)
    assert not any(tmp_path.iterdir())
