"""The demo's fleet: its jobs differ in kind and load, its fleet file loads as a fleet, its traces are the kinds' at their loads."""

import numpy as np
import pandas as pd
import pytest

from flinktune.fleet import load_fleet_file
from flinktune.fleet.demo_fleet import MAX_JOBS, demo_jobs, write_demo_fleet
from flinktune.twin.simulator import DEFAULT_START_TS
from flinktune.twin.workload import generate_trace, load_trace_csv


def test_the_jobs_are_of_different_kinds_and_loads_and_start_from_the_given_kind():
    jobs = demo_jobs(MAX_JOBS, prefix="demo", seed=7)
    assert len({(j.kind, j.load) for j in jobs}) == MAX_JOBS
    assert [j.name for j in jobs[:3]] == ["demo-1-ysb", "demo-2-tsw", "demo-3-ysb"]
    assert [j.seed for j in jobs] == list(range(7, 7 + MAX_JOBS))
    assert [j.kind for j in demo_jobs(2, prefix="x", seed=0, first_kind="tsw")] == ["tsw", "ysb"]
    with pytest.raises(ValueError, match="--jobs 0: the demo runs 1 to 6 jobs"):
        demo_jobs(0, prefix="demo", seed=7)


def test_the_fleet_file_loads_and_each_trace_is_its_kind_at_its_load(tmp_path):
    jobs = demo_jobs(3, prefix="demo", seed=3)
    path, traces = write_demo_fleet(tmp_path, jobs, latency_target_ms=600, policy="flinktune", hours=1.0)
    fleet = load_fleet_file(path)
    assert not fleet.held() and [e.name for e in fleet.entries] == [j.name for j in jobs]
    assert {(e.settings.kind, e.settings.mode, e.settings.latency_target_ms) for e in fleet.entries} == {
        ("ysb", "act", 600.0), ("tsw", "act", 600.0)
    }  # fmt: skip
    for job in jobs:
        got = load_trace_csv(traces[job.name])
        want = generate_trace(job.kind, 1.0, job.seed, start=pd.Timestamp(DEFAULT_START_TS, unit="s", tz="UTC")) * job.load
        assert got.index[0] == want.index[0] and len(got) == len(want)
        np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), atol=0.06)


def test_a_prefix_too_long_for_the_names_is_refused_naming_it():
    with pytest.raises(ValueError, match=rf"--job '{'d' * 60}' gives job 1 the name '{'d' * 60}-1-ysb' is not a valid job name"):
        demo_jobs(2, prefix="d" * 60, seed=0)
