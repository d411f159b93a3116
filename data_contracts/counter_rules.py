"""Counter rules: a cumulative counter must not decrease within its series, except by a reset.

A counter (Flink's ``numRestarts``; any "total" or "count since start") only grows while its
process lives; when the job is redeployed it starts again from zero. So between two consecutive
samples of one series (the rows sharing ``series``, in ``order``) the value either grows, stays,
or falls to a small value: a **reset**, the new value at most ``reset_max_fraction`` of the
previous one (default 0.5: 3 -> 1 and 1 -> 0 are resets). Any other fall (3 -> 2, 1000 -> 990) no
restart explains: out-of-order or skewed samples, two sources interleaved, a wrong label. The ETL
counts an increase after a reset as the new value (Prometheus ``increase``), so such a fall would
be counted as a burst of events; the rule stops the batch instead. YAML (parsed by
:func:`parse_counter_rules`, called from ``contract.py``)::

    counters:
      - name: counters_never_decrease              # rule id: counter.<name>
        when: {column: metric, in: [numRestarts]}  # rows that are counter samples
        series: [job, metric, vertex, subtask]     # one counter = one value of these columns
        order: ts_ms                               # sample time
        value: value
        reset_max_fraction: 0.5                    # a fall to <= 0.5 x previous is a reset
        severity: error

Samples with a null, NaN or infinite value are skipped (the column rules' business), and so are
ties in ``order`` (uniqueness's business: tied samples are taken in ascending value, never a
fall). Only consecutive samples inside one batch are compared. Use :func:`counter_failures_pandas`
on pandas. On Spark the rules ride on :mod:`data_contracts.spark_onepass`'s single aggregation (no
scan of their own): :func:`spark_counter_keys` adds grouping columns that are null except on
counter rows, so each counter's samples form one group per (window, series, value), a **run**,
with its first and last time; :func:`counter_failures_from_runs` judges the runs on the driver
(a few rows per window and series: a counter mostly stays put). When each series' runs are
disjoint in time, they are its samples in time order, so falls and their sample rows are exact;
otherwise (one value at two separate times within a window, or tied times with different values)
it falls back to :func:`counter_failures_spark`, a filtered scan with a window over the counter
rows, which gives the same answer on any batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from data_contracts.outcome import Failure

__all__ = [
    "CounterRule",
    "counter_failure",
    "counter_failures_from_runs",
    "counter_failures_pandas",
    "counter_failures_spark",
    "parse_counter_rules",
    "spark_counter_keys",
]

_KEYS = {"name", "when", "series", "order", "value", "reset_max_fraction", "severity", "description"}
_WHEN_KEYS = {"column", "in"}
_SAMPLE = 5

Err = Callable[[str, str], Exception]


@dataclass(frozen=True)
class CounterRule:
    """Rows with ``when_column`` in ``when_in`` are counter samples; see the module docstring."""

    name: str
    when_column: str
    when_in: tuple[Any, ...]
    series: tuple[str, ...]
    order: str
    value: str
    reset_max_fraction: float = 0.5
    severity: str = "error"

    @property
    def id(self) -> str:
        return f"counter.{self.name}"


def parse_counter_rules(err: Err, raw: Any, columns: list[str], severity: Callable[[Any, str], str]) -> tuple[CounterRule, ...]:
    """``counters`` of a contract; ``err(key, msg)`` builds the contract's error."""
    if not isinstance(raw, list):
        raise err("counters", "must be a list")
    out = []
    for i, r in enumerate(raw):
        where = f"counters[{i}]"
        if not isinstance(r, dict):
            raise err(where, f"must be a mapping, got {type(r).__name__}")
        unknown = sorted(set(r) - _KEYS)
        if unknown:
            raise err(where, f"unknown key(s) {unknown}; allowed: {sorted(_KEYS)}")
        name = r.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise err(f"{where}.name", f"must be an identifier-like name, got {name!r}")
        when = r.get("when")
        if not isinstance(when, dict) or set(when) != _WHEN_KEYS:
            raise err(f"{where}.when", f"must be a mapping with exactly the keys {sorted(_WHEN_KEYS)}, got {when!r}")
        if not isinstance(when["in"], list) or not when["in"]:
            raise err(f"{where}.when.in", "must be a non-empty list")
        series = r.get("series")
        if not isinstance(series, list) or not series:
            raise err(f"{where}.series", "must be a non-empty list of column names")
        named = {f"{where}.when.column": when["column"], f"{where}.order": r.get("order"), f"{where}.value": r.get("value")}
        named.update({f"{where}.series[{j}]": c for j, c in enumerate(series)})
        for key, col in named.items():
            if col not in columns:
                raise err(key, f"column {col!r} is not declared in columns {columns}")
        frac = r.get("reset_max_fraction", 0.5)
        if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not math.isfinite(frac) or not 0 <= frac < 1:
            raise err(f"{where}.reset_max_fraction", f"must be a number in [0, 1), got {frac!r}")
        sev = severity(r.get("severity", "error"), f"{where}.severity")
        out.append(CounterRule(name, when["column"], tuple(when["in"]), tuple(series), r["order"], r["value"], float(frac), sev))
    return tuple(out)


def counter_failure(rule: CounterRule, count: int, rows: int | None, sample: list[dict[str, Any]]) -> Failure:
    """The failure of ``rule``: ``count`` falls, ``sample`` rows with the series, time, previous and value."""
    counters = list(rule.when_in)[:4]
    detail = (
        f"a counter ({rule.when_column} in {counters}{'...' if len(rule.when_in) > 4 else ''}) fell within its series "
        f"({', '.join(rule.series)}) without a reset: need {rule.value} >= previous, or <= "
        f"{rule.reset_max_fraction:g} x previous (a reset)"
    )
    pct = f"; {100.0 * count / rows:.3g}% of rows" if rows else ""
    return Failure(rule.id, rule.value, rule.severity, tuple(sample), count, detail + pct)


def _falls(prev: pd.Series, cur: pd.Series, frac: float) -> pd.Series:
    return prev.notna() & (cur < prev) & (cur > frac * prev)


def counter_failures_pandas(df: pd.DataFrame, rules: tuple[CounterRule, ...]) -> list[Failure]:
    """Failures of ``rules`` on a pandas batch."""
    out = []
    for rule in rules:
        cols = list(dict.fromkeys([*rule.series, rule.order, rule.value]))
        part = df.loc[df[rule.when_column].isin(list(rule.when_in)).fillna(False).astype(bool), cols]
        v = pd.to_numeric(part[rule.value], errors="coerce").astype("float64")
        part = part.assign(**{rule.value: v})[v.notna() & ~v.isin([math.inf, -math.inf])]
        if part.empty:
            continue
        part = part.sort_values([*rule.series, rule.order, rule.value], kind="stable")
        prev = part.groupby(list(rule.series), dropna=False, sort=False)[rule.value].shift(1)
        bad = _falls(prev, part[rule.value], rule.reset_max_fraction)
        n = int(bad.sum())
        if n:
            hits = part.loc[bad].assign(previous=prev[bad])[[*cols, "previous"]]
            sample = [{k: _py(x) for k, x in rec.items()} for rec in hits.head(_SAMPLE).to_dict("records")]
            out.append(counter_failure(rule, n, len(df), [_ordered(s, rule) for s in sample]))
    return out


def counter_failures_spark(df: Any, rules: tuple[CounterRule, ...], rows: int | None) -> list[Failure]:
    """Failures of ``rules`` on a Spark batch (``rows``: the batch's row count, for the percentage)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    out = []
    for rule in rules:
        v = F.col(rule.value).cast("double")
        cols = list(dict.fromkeys([*rule.series, rule.order]))
        part = df.filter(
            F.col(rule.when_column).isin(list(rule.when_in)) & v.isNotNull() & ~F.isnan(v) & ~v.isin(float("inf"), float("-inf"))
        )
        part = part.select(*cols, v.alias("_v"))
        w = Window.partitionBy(*rule.series).orderBy(rule.order, "_v")
        falls = part.withColumn("previous", F.lag("_v").over(w)).filter(
            F.col("previous").isNotNull()
            & (F.col("_v") < F.col("previous"))
            & (F.col("_v") > rule.reset_max_fraction * F.col("previous"))
        )
        first = falls.orderBy(*cols).limit(_SAMPLE).collect()
        if first:  # the failure path only: count them all
            sample = [
                _ordered({**{c: _py(r[c]) for c in cols}, "previous": r["previous"], rule.value: r["_v"]}, rule) for r in first
            ]
            out.append(counter_failure(rule, falls.count(), rows, sample))
    return out


_INTEGRAL = ("ByteType", "ShortType", "IntegerType", "LongType")


def _runs_apply(rule: CounterRule, keys: list[str], types: dict[str, str]) -> bool:
    """Runs stand for the samples when times and non-key series columns are integers (the raw
    contract's ``ts_ms`` and ``subtask``): they come back through pandas without loss."""
    return types.get(rule.order) in _INTEGRAL and all(c in keys or types.get(c) in _INTEGRAL for c in rule.series)


def _run_names(i: int, rule: CounterRule, keys: list[str]) -> dict[str, str]:
    """series column -> its column in the grouped table (string keys are grouped already)."""
    return {c: c if c in keys else f"_k{i}_s{j}" for j, c in enumerate(rule.series)}


def spark_counter_keys(rules: tuple[CounterRule, ...], keys: list[str], types: dict[str, str]) -> tuple[list[Any], list[Any]]:
    """``(group_columns, aggregates)`` to add to a one-pass ``groupBy`` over ``keys`` (the string
    columns; ``types``: column -> Spark type name) so :func:`counter_failures_from_runs` can judge
    ``rules``. Per rule ``i``: ``_k{i}_v`` (the real value of a counter row, else null), ``_k{i}_s{j}``
    (non-key series columns, null off counter rows), ``_k{i}_t0`` / ``_k{i}_t1`` (first and last time
    of the group's counter rows). Non-counter rows keep their groups, so other rules' sums are
    unchanged; counter rows (~1/500 of raw rows) add about one group per window and series."""
    from pyspark.sql import functions as F

    group, aggs = [], []
    for i, rule in enumerate(rules):
        if not _runs_apply(rule, keys, types):
            continue
        v = F.col(rule.value).cast("double")
        on = F.col(rule.when_column).isin(list(rule.when_in))
        real = on & v.isNotNull() & ~F.isnan(v) & ~v.isin(float("inf"), float("-inf"))
        group.append(F.when(real, v).alias(f"_k{i}_v"))
        group += [F.when(on, F.col(c)).alias(n) for c, n in _run_names(i, rule, keys).items() if c != n]
        aggs += [
            F.min(F.when(real, F.col(rule.order))).alias(f"_k{i}_t0"),
            F.max(F.when(real, F.col(rule.order))).alias(f"_k{i}_t1"),
        ]
    return group, aggs


def counter_failures_from_runs(
    g: pd.DataFrame, df: Any, rules: tuple[CounterRule, ...], keys: list[str], types: dict[str, str], rows: int | None
) -> list[Failure]:
    """Failures of ``rules`` from the grouped table ``g`` of a one pass with
    :func:`spark_counter_keys`'s columns (window index ``_w``); ``df`` (the batch) is scanned only
    for a rule whose runs overlap in time (see the module docstring), or whose types are not covered."""
    out = []
    for i, rule in enumerate(rules):
        if not _runs_apply(rule, keys, types):
            out += counter_failures_spark(df, (rule,), rows)
            continue
        names = _run_names(i, rule, keys)
        series, v, t0, t1 = list(dict.fromkeys(names.values())), f"_k{i}_v", f"_k{i}_t0", f"_k{i}_t1"
        part = g.loc[g[v].notna(), [*series, "_w", v, t0, t1]]
        if part.empty:
            continue
        # Groups split by keys outside the series (or by another rule's keys) merge back into runs.
        runs = part.groupby([*series, "_w", v], dropna=False, sort=False).agg(t0=(t0, "min"), t1=(t1, "max")).reset_index()
        runs = runs.sort_values([*series, "t0", v], kind="stable", na_position="first").reset_index(drop=True)
        by = runs.groupby(series, dropna=False, sort=False)
        prev, prev_end = by[v].shift(1), by["t1"].shift(1)
        if bool((prev_end.notna() & (prev_end >= runs["t0"])).any()):
            out += counter_failures_spark(df, (rule,), rows)  # runs interleave: their order is unknown
            continue
        bad = _falls(prev, runs[v], rule.reset_max_fraction)
        n = int(bad.sum())
        if n:
            hits = runs.loc[bad].assign(previous=prev[bad]).head(_SAMPLE)
            sample = []
            for _, r in hits.iterrows():
                rec = {c: _typed(r[name], types.get(c)) for c, name in names.items()}
                rec.update({rule.order: int(r["t0"]), "previous": float(r["previous"]), rule.value: float(r[v])})
                sample.append(_ordered(rec, rule))
            out.append(counter_failure(rule, n, rows, sample))
    return out


def _typed(value: Any, spark_type: str | None) -> Any:
    """A grouped value as Spark's ``collect`` gives it (pandas turns nullable ints into floats)."""
    value = _py(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value) if spark_type in _INTEGRAL else value


def _ordered(rec: dict[str, Any], rule: CounterRule) -> dict[str, Any]:
    """Series columns, time, previous value, value: the order a reader wants them in."""
    keys = [*rule.series, rule.order, "previous", rule.value]
    return {k: rec[k] for k in dict.fromkeys(keys) if k in rec}


def _py(v: Any) -> Any:
    if v is pd.NA or v is None:
        return None
    return v.item() if hasattr(v, "item") else v
