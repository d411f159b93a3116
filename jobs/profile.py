"""Profiling runs on the twin -> ``curated/profiling_observations/job=<job>/part-<runhash>.parquet``.

``python -m jobs.profile --job demo`` profiles a space-filling initial design (or the given
configurations) at a few rates (by default quartiles and the 95th percentile of the job's
simulated input so far) and writes one row per run (``PROFILING_COLUMNS``). When the job has a
persisted twin, its cluster profile and clock are used, so observations match the simulated job.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from flinktune.cli.entry import OneLineParser, run_main
from flinktune.job_name import job_name
from flinktune.config_space import ConfigError, Configuration, default_space
from flinktune.lake import PROFILING_OBSERVATIONS, Lake
from flinktune.limits import check_rate
from flinktune.settings import Settings, load_settings
from flinktune.twin.job_store import TWIN_FILE, job_dir
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import initial_design, profile_configs
from flinktune.twin.simulator import DEFAULT_START_TS, TwinJob

__all__ = ["run", "main", "DATASET", "DEFAULT_RATES", "DESIGN_SIZE"]

DATASET = PROFILING_OBSERVATIONS
#: Rates profiled when the job has no simulated history, rec/s.
DEFAULT_RATES: tuple[float, ...] = (20_000.0, 50_000.0, 80_000.0)
#: Size of the default initial design.
DESIGN_SIZE = 6


def _configs(configs: Iterable[Configuration | Mapping[str, Any]] | None, seed: int) -> list[Configuration]:
    if configs is None:
        return initial_design(default_space(), DESIGN_SIZE, seed)
    out = []
    for i, c in enumerate(configs):
        if isinstance(c, Configuration):
            out.append(c)
        elif isinstance(c, Mapping):
            out.append(Configuration.from_dict(c, where=f"configs[{i}]"))
        else:
            raise ConfigError(f"configs[{i}]: expected a configuration mapping, got {type(c).__name__}")
    if not out:
        raise ConfigError("configs: empty list; pass None for the default initial design")
    return out


def _write_observations(df: pd.DataFrame, settings: Settings) -> Path:
    """The single write of profiling observations, after their data contract passed.

    Writes ``df`` (one job) to ``<lake>/curated/profiling_observations/job=<job>/part-<runhash>.parquet``
    through a temporary name and a rename. The ``job`` column becomes the partition directory, as
    in the raw lake; ``runhash`` is derived from the run ids, so re-profiling the same runs rewrites
    the same file.
    """
    jobs = df["job"].unique().tolist()
    if len(jobs) != 1:
        raise ValueError(f"{DATASET}: expected observations of exactly one job, got {jobs}")
    runhash = hashlib.sha1("|".join(sorted(df["run_id"].astype(str))).encode()).hexdigest()[:16]
    # Nothing unvalidated reaches the lake: a failing batch is quarantined and this raises.
    from flinktune.etl.observations import validate_observations

    validate_observations(df, settings, batch_id=f"{jobs[0]}-{runhash}")
    return Lake(settings.lake_dir).write_observations(df.drop(columns=["job"]), str(jobs[0]), f"part-{runhash}")


def run(
    *,
    job: str,
    configs: Iterable[Configuration | Mapping[str, Any]] | None = None,
    rates: Iterable[float] | None = None,
    duration_s: int = 300,
    seed: int = 0,
    settings: Settings | None = None,
) -> dict:
    """Profile ``configs`` x ``rates`` for ``job`` on the twin; returns ``{rows, path}``.

    Refuses under ``FLINKTUNE_CLUSTER=kubernetes``: twin rows must never land in a real job's
    profiling observations (the real profiler is the ``flinktune_profile`` DAG).
    """
    job = job_name(job)  # before it reaches any path, model name or API call
    from flinktune.backends.choice import load_backends

    if load_backends().cluster != "twin":
        raise ValueError(
            f"jobs.profile profiles on the twin only, but FLINKTUNE_CLUSTER={load_backends().cluster}: profile job {job!r} "
            "on the cluster with the flinktune_profile DAG (flinktune.kubernetes.profiling), which writes real observations"
        )
    settings = settings or load_settings()
    cfgs = _configs(configs, seed)
    twin_path = job_dir(settings.twin_dir, job) / TWIN_FILE
    profile, start_ts, history_rates = ClusterProfile.default(), DEFAULT_START_TS, None
    if twin_path.exists():
        twin = TwinJob.load(twin_path)
        profile, start_ts = twin.profile, twin.now
        hist = twin.history()
        history_rates = hist["rate"].to_numpy() if len(hist) else None
    if rates is None:
        if history_rates is not None:
            rate_list = [float(q) for q in np.quantile(history_rates, [0.25, 0.5, 0.75, 0.95])]
        else:
            rate_list = list(DEFAULT_RATES)
    else:
        rate_list = [check_rate(r, f"rates[{i}]") for i, r in enumerate(rates)]
        if not rate_list:
            raise ValueError("rates: empty list; pass None for rates from the job's simulated input")
    if not duration_s > 0:
        raise ValueError(f"duration_s (--duration-s) must be > 0 seconds, got {duration_s!r}")
    df = profile_configs(profile, cfgs, rate_list, duration_s=duration_s, seed=seed, job=job, start_ts=start_ts)
    path = _write_observations(df, settings)
    return {"rows": int(len(df)), "path": str(path)}


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.profile``: one line and exit code 2 on a known error (see :mod:`flinktune.cli.entry`)."""
    return run_main("python -m jobs.profile", _main, argv)


def _main(argv: list[str]) -> None:
    p = OneLineParser(prog="python -m jobs.profile", description=__doc__.splitlines()[0])
    p.add_argument("--job", required=True, help="job (FlinkDeployment) name")
    p.add_argument("--configs", default=None, help="JSON list of configurations (knob mappings); default: initial design")
    p.add_argument("--rates", default=None, help="comma-separated rates, rec/s; default: from the job's simulated input")
    p.add_argument("--duration-s", type=int, default=300, help="seconds per profiling run before the failure")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        configs = json.loads(a.configs) if a.configs else None
    except ValueError as exc:
        raise ValueError(f"--configs is not JSON ({exc}); give a JSON list of knob mappings") from None
    if configs is not None and not isinstance(configs, list):
        raise ValueError(f"--configs must be a JSON list of knob mappings, got {type(configs).__name__}")
    try:
        rates = [float(x) for x in a.rates.split(",")] if a.rates else None
    except ValueError:
        raise ValueError(f"--rates {a.rates!r}: give comma-separated numbers (rec/s)") from None
    print(json.dumps(run(job=a.job, configs=configs, rates=rates, duration_s=a.duration_s, seed=a.seed)))


if __name__ == "__main__":
    raise SystemExit(main())
