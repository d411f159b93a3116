"""The latency at rest of the shipped twin profiles, and the warning for a target below it."""

from flinktune.config_space import default_space
from flinktune.replay.runner import resolve_profile
from flinktune.twin.rest_latency import rest_p95_ms, target_warning


def test_the_ads_profile_rests_above_one_second_so_the_replays_default_target_is_warned_about():
    rest = rest_p95_ms(resolve_profile("ads", "ysb"), default_space().maximum)
    assert 1000 < rest < 2369, "Demeter's boundary on ADS (2,369 ms) is above it; the replay's default 1,000 ms is not"
    warning = target_warning(1000.0, rest, "the ads twin on the largest configuration")
    assert warning is not None and "\n" not in warning and f"{rest:,.0f} ms" in warning
    assert target_warning(2369.0, rest, "the ads twin") is None


def test_the_demo_target_is_above_the_ysb_jobs_rest():
    rest = rest_p95_ms(resolve_profile(None, "ysb"), default_space().maximum)
    assert rest < 600 and target_warning(600.0, rest, "the ysb twin") is None
    assert target_warning(600.0, None, "no minute yet") is None
