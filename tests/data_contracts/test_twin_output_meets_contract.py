"""What the twin writes must pass the raw contract unchanged: the demo's lake starts there."""

import numpy as np

from data_contracts import load_contract, run_checks
from flinktune.config_space import default_space
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob


def test_twin_raw_metrics_pass_the_raw_contract_at_both_details():
    for detail in ("vertex", "subtask"):
        twin = TwinJob(ClusterProfile.default(), default_space().maximum, job="demo", seed=1, detail=detail)
        df = twin.run(np.full(120, 40_000.0))
        outcome = run_checks(df, load_contract("raw_metrics"), batch_id=f"twin-{detail}")
        assert not outcome.errors, (detail, outcome.errors)
