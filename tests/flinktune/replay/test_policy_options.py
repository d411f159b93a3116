from __future__ import annotations

import pytest

from flinktune.replay.policy_options import check_policy_options, describe_policy_options, parse_policy_options


def test_parse_groups_options_by_policy_and_reads_numbers():
    got = parse_policy_options(
        ["reactive.target_utilization=0.35", "autoscaler.target_utilization=0.5", "reactive.tolerance=0.2"]
    )
    assert got == {"reactive": {"target_utilization": 0.35, "tolerance": 0.2}, "autoscaler": {"target_utilization": 0.5}}
    assert describe_policy_options(got) == (
        " --policy-option reactive.target_utilization=0.35 --policy-option reactive.tolerance=0.2"
        " --policy-option autoscaler.target_utilization=0.5"
    )
    assert parse_policy_options([]) == {} and describe_policy_options({}) == ""


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("reactive=0.35", "expected POLICY.ARGUMENT=NUMBER"),
        ("reactive.target utilization=0.35", "expected POLICY.ARGUMENT=NUMBER"),
        (".target_utilization=0.35", "expected POLICY.ARGUMENT=NUMBER"),
        ("reactive.target_utilization=high", "'high' is not a number"),
    ],
)
def test_parse_names_the_bad_item(item, message):
    with pytest.raises(ValueError, match=message) as err:
        parse_policy_options(["reactive.tolerance=0.1", item])
    assert repr(item) in str(err.value)


def test_check_refuses_options_for_policies_not_replayed_or_arguments_they_lack():
    check_policy_options({"reactive": {"target_utilization": 0.35}}, ["static", "reactive"])
    with pytest.raises(ValueError, match="'reactive' is not replayed"):
        check_policy_options({"reactive": {"target_utilization": 0.35}}, ["static"])
    with pytest.raises(ValueError, match="the reactive policy refused"):
        check_policy_options({"reactive": {"colour": 1.0}}, ["reactive"])
