"""Counterfactuals on the same load: the replayed policies see the run's own trace, state, noise and failures."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from flinktune.config_space import Configuration, default_space
from flinktune.policies import POLICY_NAMES
from flinktune.pricing import PriceList
from flinktune.report.counterfactual import POLICY_LABELS, compare_on_same_load, profiling_spend, same_load_from_twin
from flinktune.report.spread import Spread, span
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.simulator import TwinJob
from flinktune.twin.workload import generate_trace

SPACE = default_space()
PRICES = PriceList()


def _twin_run(change_at_s: int | None = None) -> tuple[TwinJob, pd.Series, int]:
    """40 min of history then 30 min "tuned" (no change: what static does), failures every 20 min."""
    trace = generate_trace("ysb", 1.5, 5)
    twin = TwinJob(
        ClusterProfile.default("ysb"),
        SPACE.maximum,
        job="j",
        seed=5,
        start_ts=int(trace.index[0].timestamp()),
        failures="every:20m",
    )
    rates = trace.to_numpy()
    if change_at_s is not None:  # a change before tuning starts: the rebuilt state must carry it
        twin.run(rates[:change_at_s])
        twin.apply(Configuration(16, 1, 1.0, 4096, 10))
        twin.run(rates[change_at_s:2400])
    else:
        twin.run(rates[:2400])
    start = twin.now
    twin.run(rates[2400:4200])
    return twin, trace, start


def test_static_replayed_on_the_same_load_reproduces_a_run_that_changed_nothing():
    twin, trace, start = _twin_run()
    same = same_load_from_twin(twin, trace, start)
    assert same.hours == pytest.approx(0.5) and len(same.history) == 1800
    cmp = compare_on_same_load(same, SPACE, latency_target_ms=1000, recovery_limit_s=180, prices=PRICES, policies=("static",))
    run, static = cmp.run.measures, cmp.outcomes["static"].measures
    # same trace, starting state, noise and failure schedule: the very same seconds
    for key in (
        "cpu_core_hours",
        "memory_gib_hours",
        "latency_p95_ms",
        "mean_lag",
        "failures",
        "recovery_max_s",
        "minutes_over_target",
    ):
        assert run[key] == pytest.approx(static[key], rel=1e-9), key
    assert run["failures"] >= 1 and len(cmp.failures) == run["failures"]
    assert run["priced_cost"] == pytest.approx(PRICES.cost(24 * 0.5, 96 * 0.5))


def test_replays_in_processes_give_the_figures_of_replays_in_this_process():
    twin, trace, start = _twin_run()
    same = same_load_from_twin(twin, trace, start)
    kw = dict(latency_target_ms=1000, recovery_limit_s=180, prices=PRICES, policies=("static", "reactive"))
    one, two = (compare_on_same_load(same, SPACE, workers=w, **kw) for w in (1, 2))
    for name in ("static", "reactive"):
        assert one.outcomes[name].measures == two.outcomes[name].measures, name
    assert one.outcomes["reactive"].measures != one.outcomes["static"].measures  # the test can fail


def test_a_change_before_tuning_is_part_of_the_rebuilt_state_and_a_twin_that_cannot_rebuild_is_refused():
    twin, trace, start = _twin_run(change_at_s=1200)
    same = same_load_from_twin(twin, trace, start)
    assert same.start_state["config"]["parallelism"] == 16 and same.reconfigurations == []
    twin.seed += 1  # another noise stream: the history is no longer what re-running gives
    with pytest.raises(ValueError, match="does not reproduce its recorded history"):
        same_load_from_twin(twin, trace, start)
    with pytest.raises(ValueError, match="not inside the twin's history"):
        same_load_from_twin(twin, trace, start, twin.now + 600)


def test_profiling_is_charged_for_the_runs_in_the_period_only():
    obs = pd.DataFrame({"ts_ms": [0, 1_000_000, 2_000_000], "parallelism": 24, "task_slots": 1, "cpu": 1.0, "memory_mb": 4096,
                        "checkpoint_interval_s": 10, "recovery_s": [10.0, 20.0, 30.0]})  # fmt: skip
    spend = profiling_spend(obs, 1000, 2000, run_s=100)
    assert spend.runs == 1 and spend.cpu_core_s == pytest.approx(24 * (100 + 20 + 30))  # run + recovery + 30 s stable
    assert profiling_spend(None, 0, 1).runs == 0


def test_over_seeds_the_run_is_its_own_first_seed_and_its_policy_is_replayed_on_the_others(tmp_path, monkeypatch):
    twin, trace, start = _twin_run()
    same = same_load_from_twin(twin, trace, start, policy="static")  # a run that changed nothing: static's own
    kw = dict(latency_target_ms=1000, recovery_limit_s=180, prices=PRICES, policies=("static", "reactive"), workers=1)
    cmp = compare_on_same_load(same, SPACE, seeds=3, cache_dir=tmp_path, **kw)
    spread = cmp.spread
    assert spread is not None and spread.seeds == (5, 6, 7) and spread.replayed == "static"
    assert set(spread.measures) == {"static", "reactive"} and all(len(v) == 3 for v in spread.measures.values())
    assert (
        spread.measures["static"][0] == cmp.run.measures and spread.measures["reactive"][0] == cmp.outcomes["reactive"].measures
    )
    # another seed is another draw of the noise: the latency moves, static's reservation does not
    p95 = [m["latency_p95_ms"] for m in spread.measures["static"]]
    assert len(set(p95)) == 3 and [m["cpu_core_hours"] for m in spread.measures["static"]] == pytest.approx([12.0] * 3)
    mean, lo, hi = spread.range("reactive", "latency_p95_ms")
    assert lo <= mean <= hi and lo < hi
    month = spread.per_month("reactive", "static")
    saved = [
        (s["priced_cost"] - r["priced_cost"]) * 730 / 0.5 for r, s in zip(spread.measures["reactive"], spread.measures["static"])
    ]
    assert month == pytest.approx((sum(saved) / 3, min(saved), max(saved)))
    # written again on the same state: every replay is read back, none run
    assert len(list(tmp_path.glob("*.json"))) == 5  # reactive on 3 seeds, static on the 2 after the run's

    def no_replay(*args, **kwargs):
        raise AssertionError("replayed again")

    monkeypatch.setattr("flinktune.report.replays._replay", no_replay)
    again = compare_on_same_load(same, SPACE, seeds=3, cache_dir=tmp_path, **kw)
    assert again.spread == spread and again.outcomes["reactive"].changes == cmp.outcomes["reactive"].changes
    pd.testing.assert_frame_equal(again.outcomes["reactive"].minutes, cmp.outcomes["reactive"].minutes, check_freq=False)
    # another target is another replay: nothing cached for it
    with pytest.raises(AssertionError, match="replayed again"):
        compare_on_same_load(same, SPACE, seeds=3, cache_dir=tmp_path, **{**kw, "latency_target_ms": 900})


def test_a_damaged_cached_replay_is_replayed_again(tmp_path):
    twin, trace, start = _twin_run()
    same = same_load_from_twin(twin, trace, start)
    kw = dict(latency_target_ms=1000, recovery_limit_s=180, prices=PRICES, policies=("static",), workers=1, cache_dir=tmp_path)
    first = compare_on_same_load(same, SPACE, **kw)
    (cached,) = tmp_path.glob("*.json")
    cached.write_text('{"summary": ')
    assert compare_on_same_load(same, SPACE, **kw).outcomes["static"].measures == first.outcomes["static"].measures
    assert json.loads(cached.read_text())["summary"]["cpu_core_hours"] == pytest.approx(12.0)


def test_the_report_knows_every_policy_the_replay_can_run():
    # the report's labels decide which run can be replayed over seeds without importing every policy
    assert set(POLICY_LABELS) == set(POLICY_NAMES)


def test_money_per_month_is_each_seeds_saving_scaled_to_a_month():
    measures = {
        "run": tuple({"priced_cost": c} for c in (1.0, 2.0, 3.0)),
        "static": tuple({"priced_cost": 2.5} for _ in range(3)),
    }
    spread = Spread((1, 2, 3), measures, hours=2.0)
    mean, lo, hi = spread.per_month("run", "static")  # savings 1.5, 0.5, -0.5 over 2 h; 365 months of 2 h
    assert (mean, lo, hi) == pytest.approx((182.5, -182.5, 547.5))
    assert span("1.00", "2.00") == "1.00-2.00" and span("-1.00", "2.00") == "-1.00 to 2.00"
