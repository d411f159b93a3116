"""The data-contract model: one YAML file per dataset, parsed strictly into a :class:`Contract`.

Use :func:`load_contract` with a dataset name (``"raw_metrics"``, looked up in
``data_contracts/contracts/``) or a path to a YAML file. Unknown keys, wrong types and impossible
bounds raise :class:`ContractError` naming the file and the key. The YAML shape::

    dataset: features_1m            # name used in reports and quarantine paths
    description: ...
    columns:                        # in order; every column listed must exist
      - name: busy_ratio
        type: double                # string|integer|int32|int64|double|number|timestamp|boolean
        nullable: false             # false -> no nulls at all
        min_non_null_fraction: 0.9  # optional, instead of nullable: false (implies nulls allowed)
        finite: true                # doubles only: no NaN/inf (pre-check; default true for doubles)
        range: {min: 0, max: 1}     # optional, either bound optional
        allowed: [a, b]             # optional set of allowed values
        regex: "^[a-z]+$"           # optional, strings only
        severity: error             # default for this column's rules (error|warning)
        severities: {range: warning}  # optional per-rule override (exists,type,not_null,finite,range,allowed,regex)
    uniqueness: {columns: [job, window_start], severity: error}
    completeness:
      min_rows: 1                   # rows in the batch
      severity: error
      per_window: {column: ts_ms, window_s: 60, min_rows: 1, severity: warning}
    freshness: {column: ts_ms, max_age_s: 900, severity: warning}   # needs an injected "now"
    row_rules: [...]                # conditional checks, see data_contracts/row_rules.py
    required_values: [...]          # values that must occur, see data_contracts/row_rules.py
    counters: [...]                 # counters must not fall but by a reset, see data_contracts/counter_rules.py

Every rule has an id used in reports: ``<column>.<kind>`` for column rules, ``uniqueness``,
``completeness.min_rows``, ``completeness.per_window``, ``freshness``, ``row.<name>``,
``required.<name>`` and ``counter.<name>``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from data_contracts.counter_rules import CounterRule, parse_counter_rules
from data_contracts.row_rules import Required, RowRule, parse_required, parse_row_rules

__all__ = [
    "COLUMN_TYPES",
    "CONTRACTS_DIR",
    "SEVERITIES",
    "ColumnSpec",
    "Contract",
    "ContractError",
    "Rule",
    "contract_path",
    "load_contract",
]

#: Where the packaged contracts live.
CONTRACTS_DIR = Path(__file__).resolve().parent / "contracts"
#: Logical column types a contract may name (mapped to engine types by the checks).
COLUMN_TYPES = ("string", "integer", "int32", "int64", "double", "number", "timestamp", "boolean")
SEVERITIES = ("error", "warning")
_COLUMN_RULE_KINDS = ("exists", "type", "not_null", "finite", "range", "allowed", "regex")

_TOP_KEYS = {
    "dataset",
    "description",
    "columns",
    "uniqueness",
    "completeness",
    "freshness",
    "row_rules",
    "required_values",
    "counters",
}
_COLUMN_KEYS = {
    "name",
    "type",
    "nullable",
    "min_non_null_fraction",
    "finite",
    "range",
    "allowed",
    "regex",
    "severity",
    "severities",
    "description",
}
_RANGE_KEYS = {"min", "max"}
_UNIQ_KEYS = {"columns", "severity"}
_COMPL_KEYS = {"min_rows", "severity", "per_window"}
_WINDOW_KEYS = {"column", "window_s", "min_rows", "severity"}
_FRESH_KEYS = {"column", "max_age_s", "severity"}


class ContractError(ValueError):
    """A contract file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class Rule:
    """One checkable rule: ``id`` (e.g. ``value.range``), the column it is about (None for table rules)."""

    id: str
    kind: str
    column: str | None
    severity: str


@dataclass(frozen=True)
class ColumnSpec:
    """What one column must look like (see the module docstring for the YAML keys)."""

    name: str
    type: str
    nullable: bool = True
    min_non_null_fraction: float | None = None
    finite: bool = False
    min: float | None = None
    max: float | None = None
    allowed: tuple[Any, ...] | None = None
    regex: str | None = None
    severity: str = "error"
    severities: dict[str, str] = field(default_factory=dict)

    def severity_of(self, kind: str) -> str:
        """Severity of this column's ``kind`` rule (per-rule override, else the column's)."""
        return self.severities.get(kind, self.severity)


@dataclass(frozen=True)
class Contract:
    """A parsed contract. ``source`` is the file it came from (for error messages)."""

    dataset: str
    description: str
    columns: tuple[ColumnSpec, ...]
    unique_columns: tuple[str, ...] = ()
    unique_severity: str = "error"
    min_rows: int = 0
    min_rows_severity: str = "error"
    window_column: str | None = None
    window_s: float = 60.0
    window_min_rows: int = 1
    window_severity: str = "warning"
    freshness_column: str | None = None
    freshness_max_age_s: float | None = None
    freshness_severity: str = "warning"
    row_rules: tuple[RowRule, ...] = ()
    required: tuple[Required, ...] = ()
    counters: tuple[CounterRule, ...] = ()
    source: str = "<memory>"

    def column(self, name: str) -> ColumnSpec:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"contract {self.dataset!r} has no column {name!r}")

    def rules(self) -> list[Rule]:
        """Every rule of the contract, in report order."""
        out: list[Rule] = []
        for c in self.columns:
            kinds = ["exists", "type"]
            if not c.nullable or c.min_non_null_fraction is not None:
                kinds.append("not_null")
            if c.finite:
                kinds.append("finite")
            if c.min is not None or c.max is not None:
                kinds.append("range")
            if c.allowed is not None:
                kinds.append("allowed")
            if c.regex is not None:
                kinds.append("regex")
            out += [Rule(f"{c.name}.{k}", k, c.name, c.severity_of(k)) for k in kinds]
        if self.unique_columns:
            out.append(Rule("uniqueness", "uniqueness", ",".join(self.unique_columns), self.unique_severity))
        if self.min_rows:
            out.append(Rule("completeness.min_rows", "min_rows", None, self.min_rows_severity))
        if self.window_column:
            out.append(Rule("completeness.per_window", "per_window", self.window_column, self.window_severity))
        if self.freshness_column:
            out.append(Rule("freshness", "freshness", self.freshness_column, self.freshness_severity))
        out += [Rule(r.id, "row", r.column, r.severity) for r in self.row_rules]
        out += [Rule(r.id, "required", r.column, r.severity) for r in self.required]
        out += [Rule(r.id, "counter", r.value, r.severity) for r in self.counters]
        return out


def contract_path(name_or_path: str | Path) -> Path:
    """The YAML file for a dataset name or a path; raises :class:`ContractError` if absent."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.parent != Path("."):
        if not p.is_file():
            raise ContractError(f"contract file {p} does not exist")
        return p
    candidate = CONTRACTS_DIR / f"{name_or_path}.yaml"
    if not candidate.is_file():
        known = sorted(f.stem for f in CONTRACTS_DIR.glob("*.yaml"))
        raise ContractError(f"no contract named {name_or_path!r} in {CONTRACTS_DIR}; known: {known}")
    return candidate


def load_contract(name_or_path: str | Path) -> Contract:
    """Parse a contract by dataset name or path (strict: unknown keys are errors)."""
    path = contract_path(name_or_path)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ContractError(f"{path}: not valid YAML: {exc}") from None
    return _parse(doc, str(path))


class _Where:
    """Formats 'file: key' prefixes for errors."""

    def __init__(self, source: str) -> None:
        self.source = source

    def err(self, key: str, msg: str) -> ContractError:
        return ContractError(f"{self.source}: {key}: {msg}")

    def mapping(self, value: Any, key: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.err(key, f"must be a mapping, got {type(value).__name__}")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise self.err(key, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        return value

    def severity(self, value: Any, key: str) -> str:
        if value not in SEVERITIES:
            raise self.err(key, f"severity must be one of {list(SEVERITIES)}, got {value!r}")
        return value

    def number(self, value: Any, key: str, *, minimum: float | None = None) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.err(key, f"must be a finite number, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.err(key, f"must be >= {minimum}, got {value!r}")
        return value


def _parse(doc: Any, source: str) -> Contract:
    w = _Where(source)
    doc = w.mapping(doc, "<top level>", _TOP_KEYS)
    for required in ("dataset", "columns"):
        if required not in doc:
            raise w.err(required, "is required")
    dataset = doc["dataset"]
    if not isinstance(dataset, str) or not dataset.isidentifier():
        raise w.err("dataset", f"must be an identifier-like name, got {dataset!r}")
    if not isinstance(doc["columns"], list) or not doc["columns"]:
        raise w.err("columns", "must be a non-empty list")
    columns = tuple(_parse_column(w, i, c) for i, c in enumerate(doc["columns"]))
    names = [c.name for c in columns]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise w.err("columns", f"duplicate column name(s) {dupes}")

    def known(col: Any, key: str) -> str:
        if col not in names:
            raise w.err(key, f"column {col!r} is not declared in columns {names}")
        return col

    kw: dict[str, Any] = {}
    if "uniqueness" in doc:
        u = w.mapping(doc["uniqueness"], "uniqueness", _UNIQ_KEYS)
        cols = u.get("columns")
        if not isinstance(cols, list) or not cols:
            raise w.err("uniqueness.columns", "must be a non-empty list of column names")
        kw["unique_columns"] = tuple(known(c, "uniqueness.columns") for c in cols)
        kw["unique_severity"] = w.severity(u.get("severity", "error"), "uniqueness.severity")
    if "completeness" in doc:
        c = w.mapping(doc["completeness"], "completeness", _COMPL_KEYS)
        kw["min_rows"] = int(w.number(c.get("min_rows", 0), "completeness.min_rows", minimum=0))
        kw["min_rows_severity"] = w.severity(c.get("severity", "error"), "completeness.severity")
        if "per_window" in c:
            pw = w.mapping(c["per_window"], "completeness.per_window", _WINDOW_KEYS)
            kw["window_column"] = known(pw.get("column"), "completeness.per_window.column")
            kw["window_s"] = w.number(pw.get("window_s", 60), "completeness.per_window.window_s", minimum=1e-3)
            kw["window_min_rows"] = int(w.number(pw.get("min_rows", 1), "completeness.per_window.min_rows", minimum=1))
            kw["window_severity"] = w.severity(pw.get("severity", "warning"), "completeness.per_window.severity")
    if "freshness" in doc:
        f = w.mapping(doc["freshness"], "freshness", _FRESH_KEYS)
        kw["freshness_column"] = known(f.get("column"), "freshness.column")
        kw["freshness_max_age_s"] = w.number(f.get("max_age_s"), "freshness.max_age_s", minimum=0)
        kw["freshness_severity"] = w.severity(f.get("severity", "warning"), "freshness.severity")
    for key in ("window_column", "freshness_column"):
        col = kw.get(key)
        if col is not None and next(c for c in columns if c.name == col).type not in ("integer", "int64", "timestamp"):
            raise w.err(key.replace("_column", ""), f"column {col!r} must be an epoch-ms integer or a timestamp")
    if "row_rules" in doc:
        kw["row_rules"] = parse_row_rules(w.err, doc["row_rules"], names, w.severity)
    if "required_values" in doc:
        kw["required"] = parse_required(w.err, doc["required_values"], names, w.severity)
        if any(r.per_window for r in kw["required"]) and "window_column" not in kw:
            raise w.err("required_values", "per_window entries need completeness.per_window (the window)")
    if "counters" in doc:
        kw["counters"] = parse_counter_rules(w.err, doc["counters"], names, w.severity)
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise w.err("description", "must be a string")
    return Contract(dataset=dataset, description=description.strip(), columns=columns, source=source, **kw)


def _parse_column(w: _Where, i: int, raw: Any) -> ColumnSpec:
    where = f"columns[{i}]"
    if isinstance(raw, dict) and isinstance(raw.get("name"), str):
        where = f"columns[{i}] ({raw['name']})"
    c = w.mapping(raw, where, _COLUMN_KEYS)
    name = c.get("name")
    if not isinstance(name, str) or not name:
        raise w.err(f"{where}.name", "is required (a non-empty string)")
    ctype = c.get("type")
    if ctype not in COLUMN_TYPES:
        raise w.err(f"{where}.type", f"must be one of {list(COLUMN_TYPES)}, got {ctype!r}")
    kw: dict[str, Any] = {"name": name, "type": ctype}
    if "nullable" in c:
        if not isinstance(c["nullable"], bool):
            raise w.err(f"{where}.nullable", f"must be true or false, got {c['nullable']!r}")
        kw["nullable"] = c["nullable"]
    if "min_non_null_fraction" in c:
        frac = w.number(c["min_non_null_fraction"], f"{where}.min_non_null_fraction", minimum=0)
        if frac > 1:
            raise w.err(f"{where}.min_non_null_fraction", f"must be in [0, 1], got {frac}")
        if kw.get("nullable") is False:
            raise w.err(f"{where}.min_non_null_fraction", "conflicts with nullable: false (which means fraction 1)")
        kw["min_non_null_fraction"] = float(frac)
    kw["finite"] = c.get("finite", ctype == "double")
    if not isinstance(kw["finite"], bool):
        raise w.err(f"{where}.finite", "must be true or false")
    if kw["finite"] and ctype not in ("double", "number"):
        raise w.err(f"{where}.finite", f"applies to double/number columns only, column type is {ctype}")
    if "range" in c:
        r = w.mapping(c["range"], f"{where}.range", _RANGE_KEYS)
        if not r:
            raise w.err(f"{where}.range", "needs min and/or max")
        if ctype in ("string", "boolean"):
            raise w.err(f"{where}.range", f"does not apply to {ctype} columns")
        lo = w.number(r["min"], f"{where}.range.min") if "min" in r else None
        hi = w.number(r["max"], f"{where}.range.max") if "max" in r else None
        if lo is not None and hi is not None and lo > hi:
            raise w.err(f"{where}.range", f"min {lo} > max {hi}")
        kw["min"], kw["max"] = lo, hi
    if "allowed" in c:
        if not isinstance(c["allowed"], list) or not c["allowed"]:
            raise w.err(f"{where}.allowed", "must be a non-empty list")
        kw["allowed"] = tuple(c["allowed"])
    if "regex" in c:
        if ctype != "string" or not isinstance(c["regex"], str):
            raise w.err(f"{where}.regex", "must be a string pattern on a string column")
        import re

        try:
            re.compile(c["regex"])
        except re.error as exc:
            raise w.err(f"{where}.regex", f"invalid pattern: {exc}") from None
        kw["regex"] = c["regex"]
    kw["severity"] = w.severity(c.get("severity", "error"), f"{where}.severity")
    sev = w.mapping(c.get("severities", {}), f"{where}.severities", set(_COLUMN_RULE_KINDS))
    kw["severities"] = {k: w.severity(v, f"{where}.severities.{k}") for k, v in sev.items()}
    return ColumnSpec(**kw)
