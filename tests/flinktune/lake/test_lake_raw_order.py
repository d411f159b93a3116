"""The raw lake keeps the source's row order within a second, so a state evaluated from the lake
(the decide job) is the state evaluated from the source itself (the replay).

Evaluation lists vertices in the order the samples list them (topological for Flink and the twin),
and the flinktune policy measures capacity at the first one, the source. Sorting rows by vertex
name on write put ``lookup`` first and made the decide job's decisions differ from the replay's.
"""

from __future__ import annotations

from pathlib import Path

from flinktune.config_space import default_space
from flinktune.decision.evaluation import evaluate
from flinktune.lake import Lake
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob
from flinktune.twin.workload import generate_trace


def test_a_state_from_the_lake_is_the_state_from_the_twin(tmp_path: Path) -> None:
    trace = generate_trace("ysb", 0.1, 7, start="2026-01-05 08:00")
    twin = TwinJob(ClusterProfile.default("ysb"), default_space().maximum, job="j", seed=7,
                   start_ts=int(trace.index[0].timestamp()))  # fmt: skip
    lake = Lake(tmp_path / "lake")
    lake.write_raw(twin.run(trace.to_numpy(dtype=float)[:120]))
    lo, hi = int((twin.now - 120) * 1000), int(twin.now * 1000) + 1
    from_twin = evaluate("j", twin.samples(lo, hi), twin.config, twin.now, window_s=120)
    from_lake = evaluate("j", lake.read_raw("j", lo, hi), twin.config, twin.now, window_s=120)
    names = [v.name for v in from_twin.vertices]
    assert names[0] == "source" and names != sorted(names)  # topological, not alphabetical: the test can fail
    assert [v.name for v in from_lake.vertices] == names
    assert from_lake.vertices == from_twin.vertices
    assert from_lake.analysis == from_twin.analysis


def test_a_window_read_opens_only_the_files_it_needs_and_returns_what_a_full_read_holds(tmp_path: Path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    trace = generate_trace("ysb", 0.1, 7, start="2026-01-05 08:00")
    twin = TwinJob(ClusterProfile.default("ysb"), default_space().maximum, job="j", seed=7,
                   start_ts=int(trace.index[0].timestamp()))  # fmt: skip
    lake = Lake(tmp_path / "lake")
    rates = trace.to_numpy(dtype=float)
    for i in range(6):  # a file a minute, as the decision task writes on the twin
        lake.write_raw(twin.run(rates[i * 60 : (i + 1) * 60]))
    everything = lake.read_raw("j")
    # a file another writer named otherwise is still read (no span in its name: opened, filtered by rows)
    odd = next((tmp_path / "lake").rglob("part-*.parquet"))
    odd.rename(odd.with_name("legacy.parquet"))
    from flinktune.lake import root

    root._read_raw_file_cached.cache_clear()  # `everything` read them all; count what the window opens
    opened: list[str] = []
    real = pq.read_table
    monkeypatch.setattr(pq, "read_table", lambda f, **kw: opened.append(Path(f).name) or real(f, **kw))
    lo, hi = int((twin.now - 90) * 1000), int((twin.now - 30) * 1000)
    window = lake.read_raw("j", lo, hi)
    expected = everything[(everything.ts_ms >= lo) & (everything.ts_ms < hi)].reset_index(drop=True)
    assert window.equals(expected) and len(window) > 0
    assert "legacy.parquet" in opened and len(opened) == 3  # the two minutes the window spans, and the unnamed file


def test_repeated_reads_parse_a_file_once_and_a_rewritten_file_is_read_again(tmp_path: Path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    trace = generate_trace("ysb", 0.1, 7, start="2026-01-05 08:00")
    twin = TwinJob(ClusterProfile.default("ysb"), default_space().maximum, job="j", seed=7,
                   start_ts=int(trace.index[0].timestamp()))  # fmt: skip
    lake = Lake(tmp_path / "lake")
    [path] = lake.write_raw(twin.run(trace.to_numpy(dtype=float)[:60]))
    opened: list[str] = []
    real = pq.read_table
    monkeypatch.setattr(pq, "read_table", lambda f, **kw: opened.append(Path(f).name) or real(f, **kw))
    first = lake.read_raw("j")
    first.loc[:, "value"] = -1.0  # a caller changing its frame must not change the next caller's
    again = lake.read_raw("j")
    assert len(opened) == 1 and (again["value"] != -1.0).all()
    # Re-extracting a range rewrites the same file name (atomically: a new file): it is read anew.
    rows = pq.read_table(path).to_pandas()
    rows["value"] = 7.0
    lake.write_raw_file(rows, path)
    assert (lake.read_raw("j")["value"] == 7.0).all() and len(opened) == 3
