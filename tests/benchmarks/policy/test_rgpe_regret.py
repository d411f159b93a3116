"""RGPE against a plain GP on synthetic related tasks (benchmarks/policy/rgpe_regret.py, 20 seeds): lower regret."""

import pytest


@pytest.mark.slow
def test_rgpe_reaches_lower_regret_than_the_target_gp_alone():
    from benchmarks.policy.rgpe_regret import main

    s = main(["--seeds", "20", "--iterations", "10", "--init", "3"])
    assert s["final_mean"]["rgpe"] < s["final_mean"]["gp"]
    assert s["final_median"]["rgpe"] < s["final_median"]["gp"]
    # one-sided paired Wilcoxon signed-rank tests over the 20 seeds
    assert s["wilcoxon_p_final"] < 0.05 and s["wilcoxon_p_summed_regret"] < 0.05, s
    wins, _, losses = s["rgpe_wins_ties_losses"]
    assert wins > losses


def test_transfer_run_uses_other_jobs_as_base_models_and_regret_never_rises():
    from benchmarks.policy.rgpe_regret import run_transfer_seed

    r = run_transfer_seed(3, 2, 3, "other-jobs", n_cands=60, base_points=8)
    assert sorted(r["weights"]) == ["base0", "base1", "base2", "target"]
    assert abs(sum(r["weights"].values()) - 1.0) < 1e-2
    assert len(r["regret"]) == 2 and all(x >= 0 for x in r["regret"]) and r["regret"][1] <= r["regret"][0]
