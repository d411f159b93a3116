"""Spark ETL: one job's raw metric samples -> validated curated ``features_10s`` and ``features_1m``.

Use :func:`etl_features` (``python -m jobs.etl_features``, the ingest DAG's in-process ETL). It returns
a JSON-ready summary ``{"dataset": "features_1m", "job", "rows", "path", "files", "start_ms", "end_ms",
"warnings", "timings_s", "datasets"}``: the top-level ``rows``/``path``/``files`` are
``features_1m``'s (what its consumers read), ``datasets`` has ``{rows, path, files}`` per dataset.

Order of work: check the raw files' footers (:mod:`flinktune.etl.raw_files`: readable, typed, in
their hour; :class:`~flinktune.etl.raw_files.RawFileError` names the file) -> read raw (Spark,
partition-pruned) -> validate it against ``raw_metrics`` (a
failing batch goes to ``<lake>/quarantine/raw_metrics/<batch_id>/`` and ContractViolation is
raised: nothing is transformed) -> transform (one scan of raw into 10-s partial aggregates, kept
in memory, from which both grains are built) -> validate the per-minute and the 10-s rows against
their contracts (each failing one is quarantined; nothing is written unless both pass; the first
violation is raised) -> stage-then-commit the affected ``job/date`` partitions of ``features_1m``,
and of ``features_10s`` in one snapshot commit (:mod:`flinktune.etl.curated`): a crash anywhere in
it leaves readers both grains old or both new. The range is widened to whole minutes, so partial
windows never overwrite complete ones; rerunning a range rewrites byte-identical files.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from data_contracts import ContractViolation, ValidationOutcome, validate
from flinktune.clock import Clock
from flinktune.etl.curated import to_features_frame, write_features
from flinktune.etl.features import GRAINS, NoRawDataError, features_from_parts, read_raw, ten_second_parts
from flinktune.etl.observations import quality_root, quarantine_root
from flinktune.etl.raw_files import check_raw_files
from flinktune.etl.spark import spark_session
from flinktune.job_name import job_name
from flinktune.lake import Lake
from flinktune.settings import Settings, load_settings

__all__ = ["DATASET", "DATASETS", "FUTURE_SLACK_MS", "etl_features"]

#: The dataset the summary's top-level keys describe (the one the models and reports read).
DATASET = "features_1m"
#: Every curated dataset the job writes, in validation and commit order.
DATASETS: tuple[str, ...] = ("features_1m", "features_10s")
_MINUTE_MS = 60_000
log = logging.getLogger(__name__)


def _floor_minute(ms: int | None) -> int | None:
    return None if ms is None else (ms // _MINUTE_MS) * _MINUTE_MS


def _ceil_minute(ms: int | None) -> int | None:
    return None if ms is None else -((-ms) // _MINUTE_MS) * _MINUTE_MS


#: A sample later than now plus this is a clock or unit error upstream, not a measurement.
FUTURE_SLACK_MS = 86_400_000


def _minute_range(raw: Any, start_ms: int | None, end_ms: int | None, where: str, now_s: float | None = None) -> tuple[int, int]:
    """``[start, end)`` widened to whole minutes; open ends come from the data. A sample in the future
    (beyond ``now_s``, default the wall clock, plus a day) is refused here, naming it, before any
    rule downstream fails on its consequences (a batch spanning decades)."""
    from pyspark.sql import functions as F

    lo, hi = raw.agg(F.min("ts_ms"), F.max("ts_ms")).collect()[0]
    if lo is None:
        raise NoRawDataError(f"no raw samples in [{start_ms}, {end_ms}) under {where}")
    now_ms = int((time.time() if now_s is None else now_s) * 1000)
    if hi > now_ms + FUTURE_SLACK_MS:
        import datetime as dt

        when = dt.datetime.fromtimestamp(hi / 1000, tz=dt.UTC)
        raise ValueError(
            f"{where}: a raw sample at ts_ms {hi} ({when:%Y-%m-%d %H:%M} UTC) is in the future; "
            "a clock or unit error upstream: fix or remove that sample, or give --end-ms"
        )
    start = lo if start_ms is None else start_ms
    end = hi + 1 if end_ms is None else end_ms
    return _floor_minute(start), _ceil_minute(end)  # type: ignore[return-value]


def etl_features(
    *,
    job: str,
    start_ms: int | None = None,
    end_ms: int | None = None,
    settings: Settings | None = None,
    clock: Clock | None = None,
) -> dict:
    """Raw -> curated ``features_10s`` and ``features_1m`` for ``job`` in ``[start_ms, end_ms)``
    (whole minutes; None = all).

    ``clock`` enables the contracts' freshness rules (left out for simulated time). Raises
    :class:`data_contracts.ContractViolation` (batch quarantined),
    :class:`~flinktune.etl.raw_files.RawFileError` or :class:`~flinktune.etl.features.NoRawDataError`.
    """
    job = job_name(job)  # before it reaches any path, model name or API call
    settings = settings or load_settings()
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise ValueError(f"end_ms {end_ms} must be after start_ms {start_ms}")
    lake = Lake(settings.lake_dir)  # type: ignore[arg-type]
    spark = spark_session(settings, "flinktune-etl-features")
    now = clock.now() if clock is not None else None

    # Whole minutes only: a partial minute must never overwrite a complete one.
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t0
        timings[name] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()

    # Not cached on purpose: every rule reads one or two columns, and a parquet scan of those is
    # cheaper than building an in-memory cache of all columns (measured: ~8x).
    if lake.raw_job_dir(job).is_dir():  # a missing folder is read_raw's NoRawDataError
        check_raw_files(lake.raw_job_dir(job), _floor_minute(start_ms), _ceil_minute(end_ms))
    raw = read_raw(spark, lake.raw_metrics_dir, job, _floor_minute(start_ms), _ceil_minute(end_ms))
    start, end = _minute_range(raw, start_ms, end_ms, str(lake.raw_job_dir(job)), now)
    lap("read")
    batch_id = f"{job}-{start}-{end}"

    # Each batch runs as a GX Checkpoint of the lake's project: Data Docs and the batch log the report reads.
    def check(df: Any, dataset: str) -> ValidationOutcome:
        return validate(
            df,
            dataset,
            batch_id=batch_id,
            quarantine_root=quarantine_root(settings),
            now=now,
            gx_project=quality_root(settings) if settings.data_docs else None,
            labels={"job": job},
        )

    raw_outcome = check(raw, "raw_metrics")
    lap("validate_raw")
    # Both grains from one scan: the small 10-s partials are computed once and kept in memory.
    parts = ten_second_parts(raw).persist()
    try:
        frames = {ds: to_features_frame(features_from_parts(parts, GRAINS[ds]).toPandas()) for ds in DATASETS}
    finally:
        parts.unpersist()
    lap("transform")
    # Every dataset is validated before any is written: a failing grain leaves both as they were,
    # and each failing grain is quarantined with its own report.
    outcomes, violations = [], []
    for ds in DATASETS:
        try:
            outcomes.append(check(frames[ds], ds))
        except ContractViolation as exc:
            violations.append(exc)
    for more in violations[1:]:
        log.error("%s", more)
    if violations:
        raise violations[0]
    lap("validate_curated")
    # One commit switches both grains: readers never see a new features_1m beside an old features_10s.
    files = write_features(lake.curated_root, job, {ds: frames[ds] for ds in DATASETS}, start, end)
    written = {
        ds: {"rows": int(len(frames[ds])), "path": str(lake.curated_job_dir(ds, job)), "files": [str(f) for f in files[ds]]}
        for ds in DATASETS
    }
    lap("commit")
    return {
        "dataset": DATASET,
        "job": job,
        **written[DATASET],
        "start_ms": int(start),
        "end_ms": int(end),
        "warnings": [f.describe() for f in _warnings(raw_outcome, *outcomes)],
        "timings_s": timings,
        "datasets": written,
    }


def _warnings(*outcomes: ValidationOutcome) -> list[Any]:
    return [f for o in outcomes for f in o.warnings]
