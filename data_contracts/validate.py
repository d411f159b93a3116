"""Validate one batch (pandas or Spark DataFrame) against its dataset contract; quarantine on errors.

Use :func:`validate` at every boundary where a batch enters or leaves the lake::

    outcome = validate(df, "features_1m", batch_id="demo-2024-05-01", quarantine_root=lake / "quarantine")

It runs the fast pre-checks (:mod:`data_contracts.precheck`: schema, NaN/inf, rows per window),
then the compiled GX suite (:mod:`data_contracts.compiler`). Warnings are logged and returned. On
any error-severity failure the batch and a report (``report.md``, ``report.json``) are written to
``quarantine_root/<dataset>/<batch_id>/`` and :class:`ContractViolation` is raised, naming the
dataset, rules, offending values and the quarantine path. Spark batches are read several times
(one pass per rule): cache them first if they are expensive to recompute.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from pathlib import Path
from typing import Any

from data_contracts.compiler import RULE_META_KEY, compile_suite, gx_context
from data_contracts.contract import Contract, load_contract
from data_contracts.outcome import ContractViolation, Failure, ValidationOutcome
from data_contracts.precheck import SAMPLE_SIZE, engine_of, precheck
from data_contracts.quarantine import check_batch_id, write_quarantine

__all__ = ["validate", "run_checks", "ValidationOutcome", "Failure", "ContractViolation"]

log = logging.getLogger(__name__)

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
        return dt.datetime.fromtimestamp(float(now), tz=dt.timezone.utc)
    if now.tzinfo is None:
        raise ValueError(f"now={now!r} must be timezone-aware (or epoch seconds)")
    return now.astimezone(dt.timezone.utc)


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


def _gx_failures(df: Any, engine: str, contract: Contract, now: dt.datetime | None) -> tuple[list[Failure], int | None]:
    suite = compile_suite(contract, now=now, engine=engine)
    batch = _batch_definition(engine).get_batch(batch_parameters={"dataframe": df})
    result = batch.validate(suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_SIZE})
    failures: list[Failure] = []
    rows: int | None = None
    for r in result.results:
        meta = r.expectation_config.meta[RULE_META_KEY]
        res = r.result or {}
        if meta["rule"] == "completeness.min_rows":
            rows = res.get("observed_value")
        exc = r.exception_info or {}
        if exc.get("raised_exception"):
            failures.append(Failure(meta["rule"], meta["column"], meta["severity"], (), None, f"GX could not evaluate: {exc.get('exception_message')}"))
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
        failures.append(Failure(meta["rule"], meta["column"], meta["severity"], sample, None if count is None else int(count), detail))
    return failures, rows


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


def run_checks(df: Any, contract: Contract, *, batch_id: str, now: dt.datetime | float | None = None) -> ValidationOutcome:
    """Pre-checks then GX, without quarantining or raising (for dry runs and reports)."""
    engine = engine_of(df)
    now_utc = _as_utc(now)
    failures, schema_ok = precheck(df, contract)
    rows: int | None = len(df) if engine == "pandas" else None
    skipped: list[str] = []
    if schema_ok:
        gx_failures, gx_rows = _gx_failures(df, engine, contract, now_utc)
        failures += gx_failures
        rows = rows if rows is not None else gx_rows
    else:
        skipped.append("all value rules (schema failed)")
    if contract.freshness_column and now_utc is None:
        skipped.append("freshness (no now given)")
    order = {r.id: i for i, r in enumerate(contract.rules())}
    failures.sort(key=lambda f: (f.severity != "error", order.get(f.rule, len(order))))
    return ValidationOutcome(dataset=contract.dataset, batch_id=batch_id, rows=rows, failures=failures, skipped=skipped)


def validate(
    df: Any,
    contract_name_or_path: str | Path | Contract,
    *,
    batch_id: str,
    quarantine_root: str | Path,
    now: dt.datetime | float | None = None,
) -> ValidationOutcome:
    """Validate ``df``; return the outcome if no error rule failed, else quarantine and raise.

    ``contract_name_or_path``: a dataset name (``raw_metrics``, ``features_1m``,
    ``profiling_observations``), a YAML path, or a loaded :class:`Contract`. ``now`` (tz-aware
    datetime or epoch seconds, from the caller's injected clock) enables the freshness rule.
    """
    contract = contract_name_or_path if isinstance(contract_name_or_path, Contract) else load_contract(contract_name_or_path)
    check_batch_id(batch_id)
    outcome = run_checks(df, contract, batch_id=batch_id, now=now)
    for f in outcome.warnings:
        log.warning("dataset %s batch %s: %s", contract.dataset, batch_id, f.describe())
    if outcome.passed:
        return outcome
    write_quarantine(df, outcome, quarantine_root, contract.source)
    raise ContractViolation(outcome)
