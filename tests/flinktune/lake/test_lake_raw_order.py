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
