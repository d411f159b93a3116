"""Contracts parse strictly and compile into GX suites whose expectations map back to rules; their columns are
the ones the ETL writes."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from data_contracts.compiler import RULE_META_KEY, compile_suite
from data_contracts.contract import CONTRACTS_DIR, ContractError, load_contract
from flinktune.etl.features import FEATURE_COLUMNS
from flinktune.metrics.schema import METRICS, PROFILING_COLUMNS

DATASETS = ("raw_metrics", "features_10s", "features_1m", "profiling_observations")


@pytest.mark.parametrize("name", DATASETS)
def test_each_contract_compiles_to_a_suite_covering_its_rules(name):
    contract = load_contract(name)
    now = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    suite = compile_suite(contract, now=now)
    compiled = {e.meta[RULE_META_KEY]["rule"] for e in suite.expectations}
    gx_kinds = {"exists", "not_null", "range", "allowed", "regex", "uniqueness", "min_rows", "freshness"}
    expected = {r.id for r in contract.rules() if r.kind in gx_kinds}
    assert compiled == expected
    types = {type(e).__name__ for e in suite.expectations}
    assert {
        "ExpectColumnToExist",
        "ExpectColumnValuesToNotBeNull",
        "ExpectColumnValuesToBeBetween",
        "ExpectTableRowCountToBeBetween",
    } <= types
    for e in suite.expectations:
        meta = e.meta[RULE_META_KEY]
        assert e.severity.value == {"error": "critical", "warning": "warning"}[meta["severity"]]


def test_spark_suite_leaves_uniqueness_to_the_precheck_and_no_now_drops_freshness():
    contract = load_contract("raw_metrics")
    rules = {e.meta[RULE_META_KEY]["rule"] for e in compile_suite(contract, engine="spark").expectations}
    assert "uniqueness" not in rules and "freshness" not in rules
    assert "value.range" in rules and "metric.allowed" in rules


def test_contracts_match_the_shared_schemas():
    raw = load_contract("raw_metrics")
    assert set(raw.column("metric").allowed) == set(METRICS)
    assert [c.name for c in load_contract("profiling_observations").columns] == list(PROFILING_COLUMNS)
    for grain in ("features_10s", "features_1m"):
        assert [c.name for c in load_contract(grain).columns] == list(FEATURE_COLUMNS), grain


def _write(tmp_path, doc) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _base() -> dict:
    return yaml.safe_load((CONTRACTS_DIR / "profiling_observations.yaml").read_text())


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda d: d.update(owner="me"), "owner"),
        (lambda d: d["columns"][2].update(rnage={"min": 0}), "rnage"),
        (lambda d: d["columns"][2]["range"].update(mn=1), "mn"),
        (lambda d: d["uniqueness"].update(cols=["job"]), "cols"),
        (lambda d: d["freshness"].update(max_age=3), "max_age"),
    ],
)
def test_unknown_keys_are_named_with_the_file(tmp_path, mutate, key):
    doc = _base()
    mutate(doc)
    path = _write(tmp_path, doc)
    with pytest.raises(ContractError) as err:
        load_contract(path)
    assert path in str(err.value) and key in str(err.value)


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda d: d["columns"][3].update(type="bigint"), "columns[3] (parallelism).type"),
        (lambda d: d["columns"][3].update(range={"min": 5, "max": 1}), "min 5 > max 1"),
        (lambda d: d["uniqueness"].update(columns=["job", "nope"]), "uniqueness.columns: column 'nope'"),
        (lambda d: d["columns"][0].update(severity="fatal"), "severity must be one of"),
        (lambda d: d["columns"][1].update(regex="(unclosed"), "invalid pattern"),
    ],
)
def test_impossible_contracts_are_rejected_naming_the_key(tmp_path, mutate, fragment):
    doc = _base()
    mutate(doc)
    with pytest.raises(ContractError, match=__import__("re").escape(fragment)):
        load_contract(_write(tmp_path, doc))


def test_unknown_contract_name_lists_the_known_ones():
    with pytest.raises(ContractError, match="raw_metrics"):
        load_contract("no_such_dataset")
