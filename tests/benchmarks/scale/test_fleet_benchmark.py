"""benchmarks/scale/fleet.py on a tiny fleet: every job decided through the real loop, figures reported."""

from benchmarks.scale.fleet import main


def test_one_cycle_decides_every_job_and_reports_its_figures(tmp_path, capsys):
    out = tmp_path / "fleet.md"
    r = main(["--jobs", "3", "--forecaster", "naive", "--out", str(out)])
    assert r["failed"] == 0 and sum(r["actions"].values()) == 3
    assert r["cycle_s"] > 0 and r["decisions_per_s"] > 0 and r["peak_rss_mib"] >= r["peak_rss_mib_after_setup"] > 0
    assert r["cycle_cpu_s"] > 0 and r["shared_acquisitions"] is True
    assert r["acquisitions_run"] + r["acquisitions_shared"] == r["actions"].get("profile", 0)
    table = out.read_text()
    assert "| 3 |" in table and "python -m benchmarks.scale.fleet --jobs 3" in table


def test_agreement_counts_jobs_decided_alike():
    from benchmarks.scale.fleet import agreement

    cfg = {"parallelism": 8}
    a = {"x": ["profile", None, [cfg, {"parallelism": 4}]], "y": ["keep", None, []], "z": ["keep", None, []]}
    b = {"x": ["profile", None, [{"parallelism": 4}, cfg]], "y": ["reconfigure", cfg, []]}
    assert agreement(a, b) == {"jobs": 2, "identical": 0, "profile_both": 1, "profile_same_set": 1}


def test_bad_options_are_refused(capsys):
    import pytest

    for argv in (["--jobs", "0"], ["--kinds", "ysb,cars"]):
        with pytest.raises(SystemExit) as err:
            main(argv)
        assert err.value.code == 2
    assert "--kinds takes ysb and/or tsw" in capsys.readouterr().err
