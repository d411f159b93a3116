"""`flinktune replay --profile`: shipped names (ysb, tsw, the calibrated ads), a YAML path, a clear error otherwise."""

import pytest

from flinktune.replay.runner import SHIPPED_PROFILES, resolve_profile
from flinktune.twin.profile import ClusterProfile


def test_shipped_ads_profile_is_the_calibrated_one() -> None:
    ads = resolve_profile("ads", "ysb")
    assert SHIPPED_PROFILES["ads"].exists()
    # Calibrated on real runs: slots sharing a core contend (off in the built-in profiles).
    assert ads.shared_core_knee > 0 and ClusterProfile.default().shared_core_knee == 0
    assert resolve_profile(None, "tsw") == ClusterProfile.default("tsw")


def test_profile_path_and_a_missing_one(tmp_path) -> None:
    path = ClusterProfile.default().with_(queue_ms=12.0).to_yaml(tmp_path / "p.yaml")
    assert resolve_profile(str(path), "ysb").queue_ms == 12.0
    with pytest.raises(
        FileNotFoundError, match=r"--profile 'nope.yaml': neither a shipped profile \(ysb, tsw, ads\) nor an existing file"
    ):
        resolve_profile("nope.yaml", "ysb")
