from flinktune.backends import Backend
from flinktune.clock import ManualClock
from flinktune.config_space import Configuration
from flinktune.decision.reconfig import ReconfigMode
from flinktune.decision.testing import FrameMetricsSource, RecordingRealizer, raw_samples

C = Configuration(12, 2, 2.0, 2048, 10)


def _backend(**kw) -> Backend:
    return Backend("test", FrameMetricsSource(raw_samples("j", 0, 10, rate=1.0)), RecordingRealizer(C), ManualClock(0), **kw)


def test_mode_for_is_the_one_in_place_rule_where_the_cluster_rescales_in_place():
    b = _backend()
    assert b.mode_for(C, C) is ReconfigMode.NOOP
    assert b.mode_for(C, C.with_(parallelism=16)) is ReconfigMode.IN_PLACE
    assert b.mode_for(C, C.with_(parallelism=16, vertex_parallelism={"sink": 4})) is ReconfigMode.IN_PLACE
    for other in (C.with_(task_slots=1), C.with_(cpu=1.0), C.with_(memory_mb=4096), C.with_(checkpoint_interval_s=30)):
        assert b.mode_for(C, other) is ReconfigMode.REDEPLOY
    assert _backend(rescales_in_place=False).mode_for(C, C.with_(parallelism=16)) is ReconfigMode.REDEPLOY
