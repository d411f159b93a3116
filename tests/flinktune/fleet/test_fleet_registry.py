"""The fleet registry: a fleet file and FlinkDeployment discovery, bad entries held one by one."""

from __future__ import annotations

import pytest

from flinktune.fleet import FleetError, discover_flinkdeployments, for_each_job, load_fleet_file


def _write(tmp_path, text):
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


def test_fleet_file_applies_defaults_and_keeps_per_job_settings(tmp_path):
    fleet = load_fleet_file(
        _write(
            tmp_path,
            """
defaults: {latency_target_ms: 900, policy: demeter}
jobs:
  - {name: ads, latency_target_ms: 500, kind: ysb}
  - {name: clicks}
""",
        )
    )
    ads, clicks = fleet.get("ads").settings, fleet.get("clicks").settings
    assert (ads.latency_target_ms, ads.policy, ads.kind) == (500, "demeter", "ysb")
    assert (clicks.latency_target_ms, clicks.recovery_limit_s, clicks.mode) == (900, 180, None)  # no mode: advice
    assert fleet.held() == []


@pytest.mark.parametrize(
    "job, expected",
    [
        ("{name: bad, latency_target_ms: 0}", "latency_target_ms: 0 ms: a latency must be at least 1 ms"),
        ("{name: bad, policy: magic}", "unknown policy 'magic'"),
        ("{name: bad, policy: oracle}", "unknown policy 'oracle'"),
        ("{name: bad, latency_target: 5}", "latency_target: unknown setting (did you mean 'latency_target_ms'?)"),
        ("{name: bad, min_parallelism: 8, max_parallelism: 4}", "min_parallelism 8 is above max_parallelism 4"),
        ("{name: Bad_Name}", "is not a valid job name"),
        ("{name: ../../etc}", "is not a valid job name"),
    ],
)
def test_one_bad_job_is_held_with_its_reason_and_the_others_stay_managed(tmp_path, job, expected):
    fleet = load_fleet_file(_write(tmp_path, f"jobs:\n  - {{name: good}}\n  - {job}\n"))
    assert [s.name for s in fleet.managed()] == ["good"]
    (held,) = fleet.held()
    assert expected in held.held and "fleet.yaml: jobs[1]" in held.held
    assert "\n" not in held.held


def test_duplicate_names_hold_both_entries_naming_both_places(tmp_path):
    fleet = load_fleet_file(_write(tmp_path, "jobs:\n  - {name: ads}\n  - {name: other}\n  - {name: ads, policy: static}\n"))
    assert [s.name for s in fleet.managed()] == ["other"]
    reasons = [e.held for e in fleet.held()]
    assert len(reasons) == 2 and all("jobs[0], fleet.yaml: jobs[2]" in r for r in reasons)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("- {name: ads}\n", "expected a mapping with a 'jobs' list"),
        ("jobs: []\nextra: 1\n", "unknown top-level keys ['extra']"),
        ("defaults: {latency_target_ms: -1}\njobs: []\n", "defaults: latency_target_ms"),
        ("jobs: [\n", "not a readable YAML file"),
    ],
)
def test_a_file_that_is_not_a_fleet_is_refused_naming_the_file(tmp_path, text, expected):
    with pytest.raises(FleetError, match=r"fleet.yaml") as err:
        load_fleet_file(_write(tmp_path, text))
    assert expected in str(err.value)


def test_missing_fleet_file_is_a_clear_error(tmp_path):
    with pytest.raises(FleetError, match="fleet file not found"):
        load_fleet_file(tmp_path / "nope.yaml")


class _Api:
    """The two list calls of a CustomObjectsApi, over fixed objects, honouring the label selector."""

    def __init__(self, objects):
        self.objects, self.calls = objects, []

    def _match(self, selector):
        key, value = selector.split("=")
        return {"items": [o for o in self.objects if (o["metadata"].get("labels") or {}).get(key) == value]}

    def list_cluster_custom_object(self, group, version, plural, *, label_selector):
        self.calls.append(("cluster", plural, label_selector))
        return self._match(label_selector)

    def list_namespaced_custom_object(self, group, version, namespace, plural, *, label_selector):
        self.calls.append((namespace, plural, label_selector))
        return self._match(label_selector)


def _deployment(name, ns="flink", managed="true", **annotations):
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"flinktune.io/managed": managed},
            "annotations": {f"flinktune.io/{k.replace('_', '-')}": v for k, v in annotations.items()},
        }
    }


def test_discovery_reads_labelled_deployments_and_their_annotations():
    api = _Api(
        [
            _deployment("ads", latency_target_ms="800", mode="act", policy="ds2"),
            _deployment("ignored", managed="false"),
            _deployment("clicks", ns="other"),
        ]
    )
    fleet = discover_flinkdeployments(api)
    assert [(s.name, s.namespace) for s in fleet.managed()] == [("ads", "flink"), ("clicks", "other")]
    ads = fleet.get("ads").settings
    assert (ads.latency_target_ms, ads.mode, ads.policy) == (800.0, "act", "ds2")  # flinktune.io/mode: act
    assert fleet.get("clicks").settings.mode is None
    assert api.calls == [("cluster", "flinkdeployments", "flinktune.io/managed=true")]


def test_a_bad_annotation_holds_that_job_naming_the_annotation():
    api = _Api([_deployment("ads", latency_target_ms="fast"), _deployment("ok"), _deployment("typo", recovery_limit="60")])
    fleet = discover_flinkdeployments(api, "flink")
    assert [s.name for s in fleet.managed()] == ["ok"]
    held = {e.name: e.held for e in fleet.held()}
    assert "FlinkDeployment flink/ads: flinktune.io/latency-target-ms:" in held["ads"]
    assert "did you mean 'flinktune.io/recovery-limit-s'?" in held["typo"]
    assert api.calls[0][0] == "flink"


def test_same_name_in_two_namespaces_holds_both():
    fleet = discover_flinkdeployments(_Api([_deployment("ads", ns="a"), _deployment("ads", ns="b")]))
    assert fleet.managed() == [] and len(fleet.held()) == 2
    assert all("FlinkDeployment a/ads, FlinkDeployment b/ads" in e.held for e in fleet.held())


class _NotFound(Exception):
    status = 404


def test_one_jobs_failure_or_disappearance_never_blocks_the_others(tmp_path):
    fleet = load_fleet_file(_write(tmp_path, "jobs:\n  - {name: a}\n  - {name: b}\n  - {name: c}\n  - {name: d, policy: x}\n"))
    seen = []

    def step(job):
        seen.append(job.name)
        if job.name == "a":
            raise RuntimeError("surrogate exploded\nwith a second line")
        if job.name == "b":
            raise _NotFound('flinkdeployments.flink.apache.org "b" not found')
        return f"decided {job.name}"

    outcomes = {o.job: o for o in for_each_job(fleet, step)}
    assert seen == ["a", "b", "c"]
    assert (outcomes["a"].status, outcomes["a"].message) == ("failed", "RuntimeError: surrogate exploded")
    assert outcomes["b"].status == "held" and "vanished from the cluster" in outcomes["b"].message
    assert (outcomes["c"].status, outcomes["c"].result) == ("done", "decided c")
    assert outcomes["d"].status == "held" and "unknown policy 'x'" in outcomes["d"].message


def test_a_jobs_own_prices_override_the_price_list_and_bad_ones_hold_it(tmp_path):
    fleet = load_fleet_file(
        _write(tmp_path, "jobs:\n  - {name: a, price_cpu_core_hour: 0.05}\n  - {name: b, price_memory_gib_hour: -1}\n")
    )
    prices = fleet.get("a").settings.prices()
    assert (prices.cpu_core_hour, prices.memory_gib_hour) == (0.05, 0.004445)
    assert "price_memory_gib_hour: -1 per GiB-hour: a price must be at least 0" in fleet.get("b").held


def test_a_mode_annotation_that_is_neither_advise_nor_act_holds_the_job_naming_it():
    fleet = discover_flinkdeployments(_Api([_deployment("ads", mode="apply"), _deployment("ok", mode="advise")]), "flink")
    held = fleet.get("ads")
    assert not held.managed and "flinktune.io/mode" in held.held and "'apply'" in held.held
    assert fleet.get("ok").settings.mode == "advise"
