"""Conditional row rules and required values: the contract rules a long-format table needs.

In a long table (one row per metric sample) a column's valid values depend on another column:
``value`` of ``busyTimeMsPerSecond`` is at most ~1000, ``subtask`` of a per-subtask metric is >= 0.
YAML (parsed by :func:`parse_row_rules` / :func:`parse_required`, called from ``contract.py``)::

    row_rules:
      - name: time_per_second_at_most_a_second     # rule id: row.<name>
        when: {column: metric, in: [busyTimeMsPerSecond]}
        check: {column: value, range: {max: 1100}}  # or allowed: [...], or regex: "..."
        severity: error
      - name: cpu_within_cores_reserved            # no "when": every row
        check: {column: cpu_used, at_most_product: {columns: [taskmanagers, cpu], factor: 1.5}}
    required_values:
      - name: metrics                                # rule id: required.<name>
        column: metric
        values: [numRecordsInPerSecond, jobRunning]
        per_window: false        # true: every window of completeness.per_window must hold each value
        severity: error

Checks skip nulls, NaN and infinities (the column rules' business). Use :func:`row_rule_mask` /
:func:`required_failures_pandas` on pandas; :mod:`data_contracts.spark_onepass` builds the same
conditions as Spark columns. GX has no expression for either (GX 1.x row conditions are a string
parser per engine), so both engines run them here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from data_contracts.outcome import Failure

__all__ = [
    "Required",
    "RowRule",
    "parse_required",
    "parse_row_rules",
    "required_failure",
    "required_failures_pandas",
    "row_rule_failure",
    "row_rule_failures_pandas",
    "row_rule_mask",
]

_ROW_KEYS = {"name", "when", "check", "severity", "description"}
_WHEN_KEYS = {"column", "in"}
_CHECK_KEYS = {"column", "range", "allowed", "regex", "at_most_product"}
_REQ_KEYS = {"name", "column", "values", "per_window", "severity", "description"}
_SAMPLE = 5


@dataclass(frozen=True)
class RowRule:
    """Rows whose ``when_column`` is in ``when_in`` (every row when it is None) must have ``column``
    within range / allowed / regex, or at most ``factor`` times the product of the ``at_most`` columns
    (a bound that depends on the row's own configuration: CPU used within the cores reserved)."""

    name: str
    when_column: str | None
    when_in: tuple[Any, ...]
    column: str
    min: float | None = None
    max: float | None = None
    allowed: tuple[Any, ...] | None = None
    regex: str | None = None
    severity: str = "error"
    at_most: tuple[str, ...] | None = None
    factor: float = 1.0

    @property
    def columns(self) -> list[str]:
        """The columns a sample of a failing row shows."""
        return list(dict.fromkeys([c for c in (self.when_column, self.column, *(self.at_most or ())) if c is not None]))

    @property
    def id(self) -> str:
        return f"row.{self.name}"

    def expected(self) -> str:
        if self.allowed is not None:
            return f"{self.column} in {list(self.allowed)}"
        if self.regex is not None:
            return f"{self.column} matching {self.regex!r}"
        if self.at_most is not None:
            return f"{self.column} at most {self.factor:g} x {' x '.join(self.at_most)}"
        lo = "-inf" if self.min is None else f"{self.min:g}"
        hi = "+inf" if self.max is None else f"{self.max:g}"
        return f"{self.column} between {lo} and {hi}"


@dataclass(frozen=True)
class Required:
    """Each of ``values`` must occur in ``column`` (in the batch, or in every window when ``per_window``)."""

    name: str
    column: str
    values: tuple[Any, ...]
    per_window: bool = False
    severity: str = "error"

    @property
    def id(self) -> str:
        return f"required.{self.name}"


Err = Callable[[str, str], Exception]


def _mapping(err: Err, value: Any, key: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise err(key, f"must be a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise err(key, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    return value


def _name(err: Err, value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise err(key, f"must be an identifier-like name, got {value!r}")
    return value


def _number(err: Err, value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise err(key, f"must be a finite number, got {value!r}")
    return float(value)


def parse_row_rules(err: Err, raw: Any, columns: list[str], severity: Callable[[Any, str], str]) -> tuple[RowRule, ...]:
    """``row_rules`` of a contract; ``err(key, msg)`` builds the contract's error."""
    if not isinstance(raw, list):
        raise err("row_rules", "must be a list")
    out = []
    for i, r in enumerate(raw):
        where = f"row_rules[{i}]"
        r = _mapping(err, r, where, _ROW_KEYS)
        name = _name(err, r.get("name"), f"{where}.name")
        when = _mapping(err, r["when"], f"{where}.when", _WHEN_KEYS) if "when" in r else None
        check = _mapping(err, r.get("check"), f"{where}.check", _CHECK_KEYS)
        named = [(f"{where}.check.column", check.get("column"))] + (
            [(f"{where}.when.column", when.get("column"))] if when else []
        )
        for key, col in named:
            if col not in columns:
                raise err(key, f"column {col!r} is not declared in columns {columns}")
        if when is not None and (not isinstance(when.get("in"), list) or not when["in"]):
            raise err(f"{where}.when.in", "must be a non-empty list")
        kinds = [k for k in ("range", "allowed", "regex", "at_most_product") if k in check]
        if len(kinds) != 1:
            raise err(f"{where}.check", f"needs exactly one of range, allowed, regex, at_most_product; got {kinds}")
        kw: dict[str, Any] = {}
        if "at_most_product" in check:
            prod = _mapping(err, check["at_most_product"], f"{where}.check.at_most_product", {"columns", "factor"})
            cols = prod.get("columns")
            if not isinstance(cols, list) or not cols or any(c not in columns for c in cols):
                raise err(f"{where}.check.at_most_product.columns", f"must list declared columns, got {cols!r}")
            kw = {
                "at_most": tuple(cols),
                "factor": _number(err, prod.get("factor", 1.0), f"{where}.check.at_most_product.factor"),
            }
        elif "range" in check:
            rng = _mapping(err, check["range"], f"{where}.check.range", {"min", "max"})
            if not rng:
                raise err(f"{where}.check.range", "needs min and/or max")
            kw = {k: _number(err, v, f"{where}.check.range.{k}") for k, v in rng.items()}
        elif "allowed" in check:
            if not isinstance(check["allowed"], list) or not check["allowed"]:
                raise err(f"{where}.check.allowed", "must be a non-empty list")
            kw["allowed"] = tuple(check["allowed"])
        else:
            if not isinstance(check["regex"], str):
                raise err(f"{where}.check.regex", "must be a string pattern")
            kw["regex"] = check["regex"]
        sev = severity(r.get("severity", "error"), f"{where}.severity")
        when_column, when_in = (when["column"], tuple(when["in"])) if when else (None, ())
        out.append(RowRule(name, when_column, when_in, check["column"], severity=sev, **kw))
    return tuple(out)


def parse_required(err: Err, raw: Any, columns: list[str], severity: Callable[[Any, str], str]) -> tuple[Required, ...]:
    """``required_values`` of a contract."""
    if not isinstance(raw, list):
        raise err("required_values", "must be a list")
    out = []
    for i, r in enumerate(raw):
        where = f"required_values[{i}]"
        r = _mapping(err, r, where, _REQ_KEYS)
        if r.get("column") not in columns:
            raise err(f"{where}.column", f"column {r.get('column')!r} is not declared in columns {columns}")
        if not isinstance(r.get("values"), list) or not r["values"]:
            raise err(f"{where}.values", "must be a non-empty list")
        per_window = r.get("per_window", False)
        if not isinstance(per_window, bool):
            raise err(f"{where}.per_window", "must be true or false")
        sev = severity(r.get("severity", "error"), f"{where}.severity")
        out.append(Required(_name(err, r.get("name"), f"{where}.name"), r["column"], tuple(r["values"]), per_window, sev))
    return tuple(out)


def row_rule_mask(df: pd.DataFrame, rule: RowRule) -> pd.Series:
    """True on the rows of ``df`` (pandas) that break ``rule``."""
    if rule.when_column is None:
        applies = pd.Series(True, index=df.index)
    else:
        applies = df[rule.when_column].isin(list(rule.when_in)).fillna(False).astype(bool)
    col = df[rule.column]
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        x = pd.to_numeric(col, errors="coerce").astype("float64")
        real = x.notna() & ~x.isin([math.inf, -math.inf])
    else:
        x, real = col, col.notna()
    if rule.allowed is not None:
        bad = ~col.isin(list(rule.allowed))
    elif rule.regex is not None:
        bad = ~col.astype("string").str.fullmatch(rule.regex).fillna(False).astype(bool)
    elif rule.at_most is not None:
        bound = rule.factor * np.prod([pd.to_numeric(df[c], errors="coerce").astype("float64") for c in rule.at_most], axis=0)
        bad = pd.Series(x.to_numpy(dtype="float64", na_value=np.nan) > bound, index=df.index)  # a missing bound skips the row
    else:
        bad = pd.Series(False, index=df.index)
        if rule.min is not None:
            bad |= x < rule.min
        if rule.max is not None:
            bad |= x > rule.max
    return applies & real & bad.fillna(False).astype(bool)


def row_rule_failure(rule: RowRule, count: int, rows: int, sample: list[dict[str, Any]]) -> Failure:
    if rule.when_column is None:
        detail = f"every row needs {rule.expected()}"
    else:
        detail = f"rows with {rule.when_column} in {list(rule.when_in)[:4]}{'...' if len(rule.when_in) > 4 else ''} need {rule.expected()}"
    pct = f"; {100.0 * count / rows:.3g}% of rows" if rows else ""
    return Failure(rule.id, rule.column, rule.severity, tuple(sample), count, detail + pct)


def row_rule_failures_pandas(df: pd.DataFrame, rules: tuple[RowRule, ...]) -> list[Failure]:
    out = []
    for rule in rules:
        bad = row_rule_mask(df, rule)
        n = int(bad.sum())
        if n:
            sample = [{k: _py(v) for k, v in r.items()} for r in df.loc[bad, rule.columns].head(_SAMPLE).to_dict("records")]
            out.append(row_rule_failure(rule, n, len(df), sample))
    return out


def required_failure(req: Required, missing: list[tuple[Any, Any]], windows_checked: int | None) -> Failure:
    """``missing``: (window label or None, value) pairs."""
    if req.per_window:
        sample = tuple(f"{w}: {v}" for w, v in missing[:_SAMPLE])
        detail = (
            f"{req.column} values absent from {len({w for w, _ in missing})} of {windows_checked} window(s) (a partial scrape)"
        )
    else:
        sample = tuple(v for _, v in missing[:_SAMPLE])
        detail = f"{req.column} values absent from the whole batch: {[v for _, v in missing]}"
    return Failure(req.id, req.column, req.severity, sample, len(missing), detail)


def required_failures_pandas(
    df: pd.DataFrame, reqs: tuple[Required, ...], window: Callable[[pd.DataFrame], pd.Series] | None
) -> list[Failure]:
    """Failures of ``reqs``; ``window`` maps rows to window labels (needed by per-window entries)."""
    out = []
    for req in reqs:
        if req.per_window:
            if window is None or df.empty:
                continue
            labels = window(df)
            present = df.groupby(labels)[req.column].agg(lambda s: set(s.dropna()))
            missing = [(w, v) for w, have in present.items() for v in req.values if v not in have]
            if missing:
                out.append(required_failure(req, missing, len(present)))
        elif len(df):
            have = set(df[req.column].dropna())
            missing = [(None, v) for v in req.values if v not in have]
            if missing:
                out.append(required_failure(req, missing, None))
    return out


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v
