"""Write the run report of one job (Markdown + PNG) from the validated lake and the state store.

``python -m jobs.report --job demo`` prints ``{"report": "<path>"}``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from flinktune.entry import OneLineParser, run_main
from flinktune.job_name import job_name
from flinktune.config_space import default_space
from flinktune.lake import Lake
from flinktune.report import ReportInputs, write_report
from flinktune.settings import Settings, load_settings
from flinktune.decision.store import SqliteStateStore

__all__ = ["run", "main", "read_features"]


def read_features(settings: Settings, job: str) -> pd.DataFrame:
    """Curated, validated features_1m of one job (raises naming the path when there are none)."""
    lake = Lake(settings.lake_dir)
    frames = lake.read_dataset("features_1m", job)
    if not frames:
        raise FileNotFoundError(f"no curated features for job {job!r} under {lake.curated_job_dir('features_1m', job)}; run the ETL (jobs.etl_features) first")
    df = pd.concat(frames, ignore_index=True)
    df["window_start"] = pd.to_datetime(df["window_start"], utc=True)
    return df.sort_values("window_start").reset_index(drop=True)


def run(*, job: str, since_ms: int | None = None, settings: Settings | None = None) -> dict:
    job = job_name(job)  # before it reaches any path, model name or API call
    settings = settings or load_settings()
    features = read_features(settings, job)  # first: a job without features is refused before the store is opened (created)
    store = SqliteStateStore(settings.state_db)
    since = pd.Timestamp(since_ms, unit="ms", tz="UTC") if since_ms is not None else None
    inputs = ReportInputs(
        job=job,
        features=features,
        decisions=store.decisions(job),
        forecasts=store.forecasts(job),
        latency_target_ms=settings.latency_target_ms,
        space=default_space(),
        since=since,
    )
    path = write_report(inputs, Path(settings.reports_dir))
    return {"report": str(path.resolve())}


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.report``: one line and exit code 2 on a known error (see :mod:`flinktune.entry`)."""
    return run_main("python -m jobs.report", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.report", description=__doc__)
    p.add_argument("--job", required=True)
    p.add_argument("--since-ms", type=int, default=None)
    a = p.parse_args(argv)
    print(json.dumps(run(job=a.job, since_ms=a.since_ms)))


if __name__ == "__main__":
    raise SystemExit(main())
