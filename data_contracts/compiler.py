"""Compile a :class:`~data_contracts.contract.Contract` into a Great Expectations 1.x ExpectationSuite.

Use :func:`compile_suite` when you need the GX suite itself (to validate, or to store it in a GX
project); :func:`data_contracts.validate.validate` calls it for you. Each expectation carries the
contract rule id, column and severity in ``meta`` and a GX ``severity`` (error -> critical,
warning -> warning), so results map back to rules.

What GX checks here: column existence, nulls (``mostly`` for a minimum non-null fraction),
ranges, allowed sets, regexes, compound uniqueness, row count and freshness (max of the time
column against ``now - max_age``). What it does not (see :mod:`data_contracts.precheck`): column
types (GX 1.24's pandas type matching does not recognise tz-aware or extension dtypes), NaN and
infinities (GX "between" skips NaN on pandas), rows per time window (no GX expectation), and
on Spark, uniqueness: GX 1.24 computes compound uniqueness on Spark with a window over the key (a
full sort; 35 s for 4 M rows on 2 cores, more than all other rules together), while a hash
aggregate does the same check in a few seconds.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

from data_contracts.contract import Contract

__all__ = ["RULE_META_KEY", "compile_suite", "gx_context", "gx_severity"]

#: Key in ``expectation.meta`` holding ``{"rule", "column", "severity"}``.
RULE_META_KEY = "contract_rule"


_lock = threading.Lock()
_context: list[Any] = []


def gx_context() -> Any:
    """The process's ephemeral GX context (in memory, no files), created on first use, progress bars off."""
    with _lock:
        if not _context:
            import great_expectations as gx
            from great_expectations.data_context.types.base import ProgressBarsConfig

            ctx = gx.get_context(mode="ephemeral")
            ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
            _context.append(ctx)
        return _context[0]


def gx_severity(severity: str) -> str:
    """GX's severity name for a contract severity."""
    return {"error": "critical", "warning": "warning"}[severity]


def compile_suite(
    contract: Contract, *, now: dt.datetime | None = None, engine: str = "pandas", suite_name: str | None = None
) -> Any:
    """The contract's rules GX can express, as an unsaved ``gx.ExpectationSuite``.

    ``engine`` (``"pandas"`` or ``"spark"``) is the engine the suite will run on: on Spark the
    uniqueness rule is left to the pre-check (see the module docstring).
    ``now`` (tz-aware UTC) enables the freshness rule; without it freshness is left out. Columns
    of type ``timestamp`` get a datetime freshness bound, epoch-ms integer columns an integer one.
    """
    import great_expectations as gx
    import great_expectations.expectations as gxe

    gx_context()  # GX 1.x suites need an active context even before they are saved
    expectations: list[Any] = []

    def add(exp_cls: type, rule: str, about: str | None, severity: str, **kwargs: Any) -> None:
        meta = {RULE_META_KEY: {"rule": rule, "column": about, "severity": severity}}
        expectations.append(exp_cls(meta=meta, severity=gx_severity(severity), **kwargs))

    for c in contract.columns:
        add(gxe.ExpectColumnToExist, f"{c.name}.exists", c.name, c.severity_of("exists"), column=c.name)
        if not c.nullable or c.min_non_null_fraction is not None:
            mostly = 1.0 if c.min_non_null_fraction is None else c.min_non_null_fraction
            add(
                gxe.ExpectColumnValuesToNotBeNull,
                f"{c.name}.not_null",
                c.name,
                c.severity_of("not_null"),
                column=c.name,
                mostly=mostly,
            )
        if c.min is not None or c.max is not None:
            add(
                gxe.ExpectColumnValuesToBeBetween,
                f"{c.name}.range",
                c.name,
                c.severity_of("range"),
                column=c.name,
                min_value=c.min,
                max_value=c.max,
            )
        if c.allowed is not None:
            add(
                gxe.ExpectColumnValuesToBeInSet,
                f"{c.name}.allowed",
                c.name,
                c.severity_of("allowed"),
                column=c.name,
                value_set=list(c.allowed),
            )
        if c.regex is not None:
            add(
                gxe.ExpectColumnValuesToMatchRegex,
                f"{c.name}.regex",
                c.name,
                c.severity_of("regex"),
                column=c.name,
                regex=c.regex,
            )
    if contract.unique_columns and engine != "spark":
        cols = list(contract.unique_columns)
        if len(cols) == 1:
            add(gxe.ExpectColumnValuesToBeUnique, "uniqueness", cols[0], contract.unique_severity, column=cols[0])
        else:
            add(gxe.ExpectCompoundColumnsToBeUnique, "uniqueness", ",".join(cols), contract.unique_severity, column_list=cols)
    if contract.min_rows:
        add(
            gxe.ExpectTableRowCountToBeBetween,
            "completeness.min_rows",
            None,
            contract.min_rows_severity,
            min_value=contract.min_rows,
        )
    if contract.freshness_column and now is not None:
        if now.tzinfo is None:
            raise ValueError("compile_suite: now must be timezone-aware (UTC)")
        col = contract.column(contract.freshness_column)
        oldest = now - dt.timedelta(seconds=float(contract.freshness_max_age_s or 0))
        bound: Any = oldest.astimezone(dt.UTC) if col.type == "timestamp" else int(oldest.timestamp() * 1000)
        add(gxe.ExpectColumnMaxToBeBetween, "freshness", col.name, contract.freshness_severity, column=col.name, min_value=bound)
    # All at once: suite.add_expectation would write the whole suite to the active context's store
    # on every call once a suite of this name has been saved there (a GX project; see gx_project).
    return gx.ExpectationSuite(name=suite_name or f"{contract.dataset}_contract", expectations=expectations)
