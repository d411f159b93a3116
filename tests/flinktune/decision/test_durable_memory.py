"""Done-when of issue 17: one process per tick decides as the replay's single long-lived process.

The replay keeps one policy object for the whole trace; in production every decide run is a new
process. Here each tick runs in its own Python process that rebuilds everything from disk: the twin
(``TwinJob.save``/``load``), the SQLite state store (decisions, the guard's history and the flinktune
policy's memory) and the models (pickled, as the champion models come from MLflow), builds the loop
with :func:`build_decision_loop` and makes one decision with a *fresh* policy object. Same trace,
seed and failures as the in-process :func:`run_replay`: the decisions must be the same.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from flinktune.config_space import default_space
from flinktune.decision.store import MemoryStateStore, SqliteStateStore
from flinktune.replay.harness import ReplaySettings, prepare_replay, run_replay
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.workload import generate_trace

pytestmark = pytest.mark.slow

TICKS = 4  # 20 min at flinktune's 300 s cadence: the first shape choice, a failure and what follows them
SETTINGS = ReplaySettings(workload="ysb", seed=7, failures="every:15m", forecaster="naive")

# One decide run: everything from disk, a fresh policy, one decision, everything back to disk.
TICK = textwrap.dedent("""
    import pickle, sys
    from pathlib import Path
    import pandas as pd
    from flinktune.clock import ManualClock
    from flinktune.decision.store import SqliteStateStore
    from flinktune.policies import make_policy
    from flinktune.replay.harness import ReplayRig, replay_loop
    from flinktune.twin.simulator import TwinJob

    d = Path(sys.argv[1])
    twin = TwinJob.load(d / "twin.json")
    meta = pickle.loads((d / "rig.pkl").read_bytes())
    models = pickle.loads((d / "models.pkl").read_bytes())
    trace = pd.read_parquet(d / "trace.parquet")["rate"]
    policy = make_policy("flinktune", meta["space"], confidence=meta["settings"].confidence)
    rig = ReplayRig("flinktune", twin, policy, models, meta["space"], meta["settings"], meta["interval"])
    clock = ManualClock(twin.now)
    loop = replay_loop(rig, trace, SqliteStateStore(d / "state.db"), clock)
    lo = int(twin.now - trace.index[0].timestamp())
    twin.run(trace.to_numpy(dtype=float)[lo : lo + rig.interval])
    clock.set(twin.now)
    loop.step()
    twin.save(d / "twin.json")
    (d / "models.pkl").write_bytes(pickle.dumps(models))
""")


def _decisions(rows: pd.DataFrame) -> list[tuple]:
    return [(float(r.ts), r.action, r.target, r.reason) for r in rows.itertuples(index=False)]


def test_decide_runs_one_process_per_tick_decide_as_the_single_process_replay(tmp_path: Path) -> None:
    space = default_space()
    trace = generate_trace("ysb", 1.0, SETTINGS.seed, start="2026-01-05 08:00")
    trace = trace.iloc[: TICKS * 300]
    rig = prepare_replay("flinktune", trace, ClusterProfile.default("ysb"), space, SETTINGS)
    assert rig.interval == 300
    # Both runs start from the same bootstrapped models and the twin at static max.
    models_pkl = pickle.dumps(rig.models)
    rig.twin.save(tmp_path / "twin.json")
    (tmp_path / "models.pkl").write_bytes(models_pkl)
    (tmp_path / "rig.pkl").write_bytes(pickle.dumps({"space": space, "settings": SETTINGS, "interval": rig.interval}))
    trace.to_frame("rate").to_parquet(tmp_path / "trace.parquet")

    reference = MemoryStateStore()
    run_replay(rig, trace, store=reference)
    expected = _decisions(reference.decisions("replay"))
    assert len(expected) == TICKS

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")]))
    for _ in range(TICKS):
        subprocess.run([sys.executable, "-c", TICK, str(tmp_path)], check=True, env=env, timeout=120)
    store = SqliteStateStore(tmp_path / "state.db")
    assert _decisions(store.decisions("replay")) == expected
    # What made that possible: the policy's memory, saved with each decision (a shape and measured capacities).
    memory = store.policy_memory("replay", "flinktune")
    assert memory is not None and memory["shape"] is not None and memory["capacities"]["models"]
