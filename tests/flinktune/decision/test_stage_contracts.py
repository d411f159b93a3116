"""The shared stage contracts (tests/stage_contracts.py) on the state stores and the testing realizer.

The twin's, Kubernetes' and local Flink's realizers run the same realizer contract in their own tests.
"""

from stage_contracts import check_realizer, check_state_store

from flinktune.config_space import Configuration
from flinktune.decision.store import MemoryStateStore, SqliteStateStore
from flinktune.decision.testing import RecordingRealizer

START = Configuration(12, 1, 1.0, 2048, 10)


def test_sqlite_state_store_keeps_the_contract(tmp_path):
    check_state_store(SqliteStateStore(tmp_path / "state.db"))


def test_memory_state_store_keeps_the_contract():
    check_state_store(MemoryStateStore())


def test_sqlite_policy_memory_survives_a_new_store_object(tmp_path):
    SqliteStateStore(tmp_path / "s.db")  # another process opening the same file sees what was written
    check_state_store(SqliteStateStore(tmp_path / "s.db"))
    assert SqliteStateStore(tmp_path / "s.db").policy_memory("c", "p") == {"n": 3}  # the write-ahead settle saved it last


def test_recording_realizer_keeps_the_contract():
    check_realizer(RecordingRealizer(START), "j", START.with_(parallelism=16), START.with_(task_slots=2, parallelism=16))
