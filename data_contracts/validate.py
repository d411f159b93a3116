"""Validate one batch (pandas or Spark DataFrame) against its dataset contract; quarantine on errors.

Use :func:`validate` at every boundary where a batch enters or leaves the lake::

    outcome = validate(df, "features_1m", batch_id="demo-2024-05-01", quarantine_root=lake / "quarantine")

On pandas it runs the fast pre-checks (:mod:`data_contracts.precheck`: schema, NaN/inf, rows per
window), then the compiled GX suite (:mod:`data_contracts.compiler`). Warnings are logged and returned. On
any error-severity failure the batch and a report (``report.md``, ``report.json``) are written to
``quarantine_root/<dataset>/<batch_id>/`` and :class:`ContractViolation` is raised, naming the
dataset, rules, offending values and the quarantine path. Spark batches are read twice (all rule
counters in one aggregated pass, then uniqueness; see :mod:`data_contracts.spark_onepass`) plus
a small GX run on their first rows.

Given ``gx_project=`` (a folder), the GX part runs as that project's Checkpoint for the dataset
(:mod:`data_contracts.gx_project`: saved suite, validation definition, Data Docs action), the
outcome carries its Data Docs page, and every batch, passed or quarantined, is appended to the
project's batch log (:mod:`data_contracts.batch_log`) with ``labels``.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from data_contracts.batch_log import record_batch
from data_contracts.compiler import RULE_META_KEY, compile_suite, gx_context
from data_contracts.contract import Contract, load_contract
from data_contracts.gx_project import GxProject
from data_contracts.outcome import ContractViolation, Failure, ValidationOutcome
from data_contracts.precheck import SAMPLE_SIZE, engine_of, precheck
from data_contracts.quarantine import check_batch_id, write_quarantine
from data_contracts.spark_onepass import spark_failures

__all__ = ["ContractViolation", "Failure", "ValidationOutcome", "run_checks", "validate"]

log = logging.getLogger(__name__)

#: Rows of a Spark batch the GX suite also runs on (as pandas); every rule is checked exactly anyway.
GX_SAMPLE_ROWS = 10_000

_gx_lock = threading.Lock()
_gx_state: dict[str, Any] = {}


def _batch_definition(engine: str) -> Any:
    """One whole-dataframe batch definition per engine in the process's GX context."""
    with _gx_lock:
        ctx = gx_context()
        if engine not in _gx_state:
            if engine == "pandas":
                source = ctx.data_sources.add_pandas("contracts_pandas")
            else:
                # persist=False: GX would cache the batch and never unpersist it, which costs a full
                # in-memory copy and makes a later read of the same path return the cached rows.
                source = ctx.data_sources.add_spark("contracts_spark", persist=False)
            _gx_state[engine] = source.add_dataframe_asset("batch").add_batch_definition_whole_dataframe("whole")
        return _gx_state[engine]


def _as_utc(now: dt.datetime | float | int | None) -> dt.datetime | None:
    if now is None:
        return None
    if isinstance(now, (int, float)):
        return dt.datetime.fromtimestamp(float(now), tz=dt.UTC)
    if now.tzinfo is None:
        raise ValueError(f"now={now!r} must be timezone-aware (or epoch seconds)")
    return now.astimezone(dt.UTC)


def _plain(value: Any) -> Any:
    """Offending values as plain Python (numpy scalars, Rows and timestamps become JSON-friendly)."""
    if hasattr(value, "asDict"):
        value = value.asDict()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    return value


def _gx_failures(
    df: Any, engine: str, contract: Contract, now: dt.datetime | None, run: _CheckpointTarget | None = None
) -> tuple[list[Failure], int | None]:
    suite = compile_suite(contract, now=now, engine=engine)
    result_format = {"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_SIZE}
    if run is not None:
        done = run.project.run_checkpoint(df, suite, dataset=contract.dataset, batch_id=run.batch_id, result_format=result_format)
        run.data_docs_page = done.data_docs_page
        result = done.result
    else:
        batch = _batch_definition(engine).get_batch(batch_parameters={"dataframe": df})
        result = batch.validate(suite, result_format=result_format)
    failures: list[Failure] = []
    rows: int | None = None
    for r in result.results:
        meta = r.expectation_config.meta[RULE_META_KEY]
        res = r.result or {}
        if meta["rule"] == "completeness.min_rows":
            rows = res.get("observed_value")
        exc = r.exception_info or {}
        if exc.get("raised_exception"):
            failures.append(
                Failure(
                    meta["rule"],
                    meta["column"],
                    meta["severity"],
                    (),
                    None,
                    f"GX could not evaluate: {exc.get('exception_message')}",
                )
            )
            continue
        if r.success:
            continue
        if "partial_unexpected_list" in res:
            sample = tuple(_plain(v) for v in res["partial_unexpected_list"][:SAMPLE_SIZE])
            count = res.get("unexpected_count")
            detail = _detail(meta["rule"], r.expectation_config.kwargs, res)
        else:
            sample = (_plain(res.get("observed_value")),)
            count = None
            detail = f"observed {_plain(res.get('observed_value'))!r}; expected {_bounds(r.expectation_config.kwargs)}"
        failures.append(
            Failure(meta["rule"], meta["column"], meta["severity"], sample, None if count is None else int(count), detail)
        )
    return failures, rows


class _CheckpointTarget:
    """Where a GX run goes when it runs as a Checkpoint, and the Data Docs page it left."""

    def __init__(self, project: GxProject, batch_id: str) -> None:
        self.project = project
        self.batch_id = batch_id
        self.data_docs_page: Path | None = None


def _bounds(kwargs: dict[str, Any]) -> str:
    lo, hi = kwargs.get("min_value"), kwargs.get("max_value")
    return f"between {_plain(lo) if lo is not None else '-inf'} and {_plain(hi) if hi is not None else '+inf'}"


def _detail(rule: str, kwargs: dict[str, Any], res: dict[str, Any]) -> str:
    """A short sentence of what was expected, from the rule kind (the id's suffix)."""
    kind = rule.rsplit(".", 1)[-1]
    what = {
        "range": f"expected {_bounds(kwargs)}",
        "allowed": f"expected one of the {len(kwargs.get('value_set') or [])} allowed values",
        "regex": f"expected to match {kwargs.get('regex')!r}",
        "not_null": f"expected at least {float(kwargs.get('mostly') or 1.0):.0%} non-null",
        "uniqueness": "duplicate keys",
    }.get(kind, "")
    pct = res.get("unexpected_percent")
    return what + (f"; {pct:.3g}% of rows" if isinstance(pct, (int, float)) else "")


def _gx_on_sample(
    df: Any, contract: Contract, now: dt.datetime | None, n: int, known: set[str], run: _CheckpointTarget | None = None
) -> list[Failure]:
    """The compiled GX suite on the first ``n`` rows (pandas): its findings the exact pass missed.

    Table rules (row count, freshness) are left to the exact pass: a sample says nothing of them.
    """
    sample = df.limit(n).toPandas()
    found = _gx_failures(sample, "pandas", contract, now, run)[0]
    table_rules = {"completeness.min_rows", "freshness", "uniqueness"}
    # Spark NaN becomes pandas' missing marker in toPandas: a NaN the finite rule reported is no null.
    nan_columns = {r.rsplit(".", 1)[0] for r in known if r.endswith(".finite")}
    return [
        Failure(f.rule, f.column, f.severity, f.sample, f.unexpected_count, f"{f.detail} (GX on the first {len(sample)} rows)")
        for f in found
        if f.rule not in known and f.rule not in table_rules and not (f.rule.endswith(".not_null") and f.column in nan_columns)
    ]


def run_checks(
    df: Any,
    contract: Contract,
    *,
    batch_id: str,
    now: dt.datetime | float | None = None,
    gx_sample_rows: int = GX_SAMPLE_ROWS,
    gx_project: str | Path | None = None,
) -> ValidationOutcome:
    """All rules without quarantining or raising (for dry runs and reports).

    pandas: pre-checks, then the compiled GX suite on the whole frame. Spark: every rule exactly in
    one aggregated pass (:mod:`data_contracts.spark_onepass`), then GX on the first
    ``gx_sample_rows`` rows (0 turns that off). With ``gx_project`` the GX run is that project's
    Checkpoint for the dataset and the outcome's ``data_docs_page`` its Data Docs page (a batch
    whose schema fails never reaches GX, so it has none).
    """
    engine = engine_of(df)
    run = _CheckpointTarget(GxProject(gx_project), batch_id) if gx_project is not None else None
    now_utc = _as_utc(now)
    skipped: list[str] = []
    if engine == "spark":
        failures, rows, schema_ok = spark_failures(df, contract, now_utc)
        if schema_ok and gx_sample_rows:
            failures += _gx_on_sample(df, contract, now_utc, gx_sample_rows, {f.rule for f in failures}, run)
    else:
        failures, schema_ok = precheck(df, contract)
        rows = len(df)
        if schema_ok:
            failures += _gx_failures(df, engine, contract, now_utc, run)[0]
    if not schema_ok:
        skipped.append("all value rules (schema failed)")
    if contract.freshness_column and now_utc is None:
        skipped.append("freshness (no now given)")
    order = {r.id: i for i, r in enumerate(contract.rules())}
    failures.sort(key=lambda f: (f.severity != "error", order.get(f.rule, len(order))))
    return ValidationOutcome(
        dataset=contract.dataset,
        batch_id=batch_id,
        rows=rows,
        failures=failures,
        skipped=skipped,
        data_docs_page=run.data_docs_page if run is not None else None,
    )


def validate(
    df: Any,
    contract_name_or_path: str | Path | Contract,
    *,
    batch_id: str,
    quarantine_root: str | Path,
    now: dt.datetime | float | None = None,
    gx_sample_rows: int = GX_SAMPLE_ROWS,
    gx_project: str | Path | None = None,
    labels: Mapping[str, str] | None = None,
) -> ValidationOutcome:
    """Validate ``df``; return the outcome if no error rule failed, else quarantine and raise.

    ``contract_name_or_path``: a dataset name (``raw_metrics``, ``features_1m``,
    ``profiling_observations``), a YAML path, or a loaded :class:`Contract`. ``now`` (tz-aware
    datetime or epoch seconds, from the caller's injected clock) enables the freshness rule.
    ``gx_project`` (a folder): run GX as the project's Checkpoint, publish Data Docs and append
    the batch (passed or quarantined, with ``labels``) to the project's batch log.
    """
    contract = contract_name_or_path if isinstance(contract_name_or_path, Contract) else load_contract(contract_name_or_path)
    check_batch_id(batch_id)
    outcome = run_checks(df, contract, batch_id=batch_id, now=now, gx_sample_rows=gx_sample_rows, gx_project=gx_project)
    for f in outcome.warnings:
        log.warning("dataset %s batch %s: %s", contract.dataset, batch_id, f.describe())
    if not outcome.passed:
        write_quarantine(df, outcome, quarantine_root, contract.source)
    if gx_project is not None:
        record_batch(gx_project, outcome, labels=labels)
    if outcome.passed:
        return outcome
    raise ContractViolation(outcome)
