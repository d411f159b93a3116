"""The ingest DAG's trigger parameters: defaults that resolve, and bad values refused by name."""

from __future__ import annotations

from datetime import timedelta

import pytest
from airflow.sdk import ParamsDict

from flinktune.orchestration.dag_tasks.ingest_params import ingest_params


def test_defaults_resolve_and_hours_is_one_schedule_period():
    params = ParamsDict(ingest_params(timedelta(minutes=5)))
    values = params.validate()
    assert values["hours"] == pytest.approx(5 / 60) and values["metrics_source"] == "" and values["seed"] == 7


@pytest.mark.parametrize(("name", "bad"), [("metrics_source", "kafka"), ("hours", 0), ("workload", "Bad Name"), ("seed", -1)])
def test_a_bad_value_is_refused_naming_the_parameter(name, bad):
    params = ParamsDict(ingest_params(timedelta(minutes=5)))
    with pytest.raises(Exception, match=name):
        params[name] = bad
