"""benchmarks/scale/twin_speed.py: the twin's run and a static replay from a fresh process both report their figures."""

from __future__ import annotations

import pytest

from benchmarks.scale.twin_speed import main, time_replay


def test_the_twin_row_reports_what_it_ran() -> None:
    (row,) = main(["--hours", "0.5", "--seed", "3"])
    assert row["what"] == "twin" and row["hours"] == 0.5
    # Vertex-level samples of every emitted series for each of the 1800 seconds.
    assert row["rows"] > 0 and row["rows"] % 1800 == 0
    assert row["restarts"] == 0  # the first failure of every:45m is due after 45 min
    assert row["cpu_seconds"] > 0 and row["peak_rss_mib"] > 0


@pytest.mark.slow
def test_a_static_replay_is_timed_in_a_fresh_process() -> None:
    row = time_replay(0.5, "ysb", 1)
    assert row["command"] == "flinktune replay --trace ysb --policies static --hours 0.5"
    # The child's CPU time is counted: at least its imports, and no more than its wall time on 2 cores.
    assert 0 < row["cpu_seconds"] <= 2 * row["seconds"] + 1
    assert len(row["load_1m"]) == 1
