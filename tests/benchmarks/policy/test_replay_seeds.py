"""benchmarks/policy/replay_seeds.py on a 1 h trace, 2 seeds, 2 policies: the file, the bound, the seeds and the bad inputs."""

from __future__ import annotations

import json

import pytest

from benchmarks.policy.replay_bound import bound, bound_for_rates, bound_with_changes
from benchmarks.policy.replay_seeds import main, parse_seeds, targets
from flinktune.config_space import ConfigSpace
from flinktune.entry import KNOWN_EXIT, run_main
from flinktune.replay.runner import resolve_profile
from flinktune.twin.workload import generate_trace


def test_parse_seeds() -> None:
    assert parse_seeds("1-5") == [1, 2, 3, 4, 5]
    assert parse_seeds("7") == [7]
    assert parse_seeds("1-2,9,2") == [1, 2, 9]
    for bad in ("5-1", "a", "", "1-x"):
        with pytest.raises(ValueError, match="--seeds"):
            parse_seeds(bad)


def test_bound_for_rates_is_bound_on_builtin_traces() -> None:
    # The refactor keeps the published figure: the generator's trace on its own profile gives the same bound.
    rates = generate_trace("tsw", 1.0, 3).to_numpy()
    assert bound_for_rates(rates, resolve_profile("tsw", "tsw"), 180.0) == bound("tsw", 3, 1.0, 180.0)


def test_the_bound_with_a_change_cap_lies_between_the_per_second_bound_and_one_configuration() -> None:
    rates = generate_trace("tsw", 1.0, 3).to_numpy()
    prof = resolve_profile("tsw", "tsw")
    space = ConfigSpace(
        parallelism=(8, 16, 24), task_slots=(1, 2), cpu=(1.0, 2.0), memory_mb=(2048,), checkpoint_interval_s=(10,)
    )
    free = bound_for_rates(rates, prof, 180.0, space=space)["per_second"]
    by_k = bound_with_changes(rates, prof, 180.0, (0, 2, 4, 11), space=space)
    capped = [by_k[k] for k in (0, 2, 4, 11)]
    assert all(a >= b for a, b in zip(capped, capped[1:]))  # more changes allowed: never dearer
    assert capped[0] > capped[-1] >= free  # a change cap costs CPU; even one per decision is above the per-second bound
    with pytest.raises(ValueError, match="changes"):
        bound_with_changes(rates, prof, 180.0, (-1,), space=space)


def test_two_seeds_two_policies(tmp_path) -> None:
    out = tmp_path / "seeds.md"
    r = main(["--trace", "ysb", "--hours", "1", "--seeds", "1-2", "--policies", "reactive", "--workers", "1", "--out", str(out)])
    assert r["policies"] == ["static", "reactive"] and list(r["per_seed"]) == [1, 2]
    s1, s2 = r["per_seed"][1], r["per_seed"][2]
    # Static is the reference of each seed; the generator's trace, noise and failures move with the seed.
    assert s1["static"]["cpu"] == pytest.approx(1.0) and s2["static"]["priced_cost"] == pytest.approx(1.0)
    assert s1["reactive"] != s2["reactive"]
    assert r["bounds"][1]["per_second"] != r["bounds"][2]["per_second"]
    for seed, rows in r["per_seed"].items():
        assert rows["reactive"]["cpu_x_bound"] == pytest.approx(rows["reactive"]["cpu"] / r["bounds"][seed]["per_second"])
    text = out.read_text()
    assert "Command: `python -m benchmarks.policy.replay_seeds --trace ysb" in text
    mean_cpu = (s1["reactive"]["cpu"] + s2["reactive"]["cpu"]) / 2
    worst_cpu = max(s1["reactive"]["cpu"], s2["reactive"]["cpu"])
    mean_block = text.split("## Mean over seeds")[1].split("## Worst seed")[0]
    worst_block = text.split("## Worst seed")[1].split("## Per seed")[0]
    assert f"| reactive | {mean_cpu:.3f} |" in mean_block and f"| reactive | {worst_cpu:.3f} |" in worst_block
    doc = json.loads(out.with_suffix(".json").read_text())
    assert set(doc["per_seed"]) == {"1", "2"}


def test_targets_met_and_missed() -> None:
    row = {
        "cpu": 0.5,
        "cpu_x_bound": 1.1,
        "memory": 0.3,
        "priced_cost": 0.4,
        "p95": 1.2,
        "recoveries_over_limit": 0.0,
        "recovery_max_s": 100.0,
        "reconfigurations": 10.0,
    }
    cheap = dict(row, priced_cost=0.3)
    per_seed = {1: {"flinktune": row, "static": dict(row, priced_cost=1.0)}, 2: {"flinktune": row, "reactive": cheap}}
    checks = {t: ok for t, _, ok in targets(per_seed, real_workload=True, hours=18.0, demeter_priced=0.8)}
    assert checks["CPU <= 1.20x the bound (mean)"] and checks["memory <= 0.40 of static (mean)"]
    # Seed 2: reactive is cheaper and keeps latency and recovery: flinktune is not the lowest there.
    assert not checks["lowest priced cost among policies with p95 <= 1.5x and no slow recovery (every seed)"]
    slow = dict(cheap, recoveries_over_limit=1.0)
    per_seed[2]["reactive"] = slow
    checks = {t: ok for t, _, ok in targets(per_seed, real_workload=True, hours=18.0, demeter_priced=0.8)}
    assert checks["lowest priced cost among policies with p95 <= 1.5x and no slow recovery (every seed)"]
    assert not any("real Demeter" in t and not ok for t, ok in checks.items())  # 0.4 <= 0.75 x 0.8
    synthetic = {t for t, _, _ in targets(per_seed, real_workload=False, hours=18.0, demeter_priced=None)}
    assert "CPU <= 1.30x the bound (mean)" in synthetic and not any("Demeter" in t for t in synthetic)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--trace", "ysb", "--profile", "nope"], "--profile 'nope'"),
        (["--trace", "ysb", "--seeds", "5-1"], "--seeds '5-1'"),
        (["--trace", "/no/such/trace.csv"], "--trace '/no/such/trace.csv'"),
        (["--trace", "ysb", "--policy-option", "reactive.target=x"], "--policy-option 'reactive.target=x'"),
        (["--trace", "ysb", "--policy-option", "reactive=0.35"], "expected POLICY.ARGUMENT=NUMBER"),
        (
            ["--trace", "ysb", "--policies", "ds2", "--policy-option", "reactive.target_utilization=0.35"],
            "'reactive' is not replayed",
        ),
        (["--trace", "ysb", "--policies", "reactive", "--policy-option", "reactive.no_such=1"], "the reactive policy refused"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path, capsys) -> None:
    code = run_main("benchmarks.policy.replay_seeds", main, [*args, "--out", str(tmp_path / "x.md")])
    err = capsys.readouterr().err
    assert code == KNOWN_EXIT and needle in err and err.count("\n") == 1
    assert not (tmp_path / "x.md").exists()


def test_a_policy_option_reaches_the_replayed_policy(tmp_path) -> None:
    args = ["--trace", "ysb", "--hours", "1", "--seeds", "1", "--policies", "reactive", "--workers", "1"]
    plain = main([*args, "--out", str(tmp_path / "a.md")])
    low = main([*args, "--policy-option", "reactive.target_utilization=0.35", "--out", str(tmp_path / "b.md")])
    assert low["policy_options"] == {"reactive": {"target_utilization": 0.35}}
    # A lower CPU target holds more TaskManagers: the option must change what the HPA does.
    assert low["per_seed"][1]["reactive"]["cpu"] > plain["per_seed"][1]["reactive"]["cpu"]
    assert "reactive with target_utilization=0.35" in (tmp_path / "b.md").read_text()
