"""Profiling runs on the twin -> ``curated/profiling_observations/job=<job>/part-<runhash>.parquet``.

Use :func:`profile_on_twin` (``python -m jobs.profile``, the train DAG's twin profiling, the decide
run's :class:`~flinktune.runs.decide.TwinProfiler`). Without configurations it profiles the flinktune
policy's start-up design (the :data:`STARTUP_RUNS` shapes it chooses among,
:func:`flinktune.tuner.shapes.startup_design`) at half and 1.1 x the job's latest peak (the load at
its first decision), as the replay benchmark's flinktune does before its first choice; given
configurations are profiled at the given rates, by default the quartiles and the 95th percentile of
the job's simulated input so far. Each run measures :data:`~flinktune.twin.profiling.PROFILE_RUN_S`
seconds, and its recovery is recorded up to ``recovery_wait_s`` (twice the recovery limit: beyond
that only "too slow" matters, and a profiler stops waiting). One row per run (``PROFILING_COLUMNS``).
When the job has a persisted twin, its cluster profile and clock are used, so observations match the
simulated job. Not a space-filling design over the whole space at four rates: the policy ranks its
shapes by measured capacity and uses the surrogate only as a check, and the earlier default (6
configurations x 4 rates x 300 s) cost the demo USD 2.94 before its first decision
(docs/results/report-demo.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from flinktune.config_space import ConfigError, Configuration, default_space
from flinktune.etl.observations import write_observations
from flinktune.job_name import job_name
from flinktune.lake import PROFILING_OBSERVATIONS
from flinktune.limits import check_rate
from flinktune.settings import Settings, load_settings
from flinktune.tuner.shapes import startup_design
from flinktune.twin.job_store import TWIN_FILE, job_dir
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import PROFILE_RUN_S, initial_design, profile_configs
from flinktune.twin.simulator import DEFAULT_START_TS, TwinJob

__all__ = ["DATASET", "DEFAULT_RATES", "DESIGN_SIZE", "STARTUP_RUNS", "profile_on_twin", "startup_rates"]

DATASET = PROFILING_OBSERVATIONS
#: Rates profiled when the job has no simulated history, rec/s.
DEFAULT_RATES: tuple[float, ...] = (20_000.0, 50_000.0, 80_000.0)
#: Size of the space-filling design over the whole space (Demeter's; ``design="space"``).
DESIGN_SIZE = 6
#: Configurations of the default start-up design (the replay benchmark's ``FLINKTUNE_STARTUP_RUNS``).
STARTUP_RUNS = 3


def startup_rates(history_rates: np.ndarray | None, recent_s: int) -> list[float]:
    """Half and 1.1 x the peak of the last ``recent_s`` seconds of the job's input (the load its first
    decision sees; the replay's flinktune profiles the same two); the defaults without history."""
    if history_rates is None or not len(history_rates):
        return list(DEFAULT_RATES)
    peak = float(np.nanmax(history_rates[-max(1, int(recent_s)) :]))
    return [0.5 * peak, 1.1 * peak]


def _configs(configs: Iterable[Configuration | Mapping[str, Any]] | None, seed: int, design: str) -> list[Configuration]:
    if configs is None:
        if design == "space":
            return initial_design(default_space(), DESIGN_SIZE, seed)
        return startup_design(default_space(), STARTUP_RUNS, seed)
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


def profile_on_twin(
    *,
    job: str,
    configs: Iterable[Configuration | Mapping[str, Any]] | None = None,
    rates: Iterable[float] | None = None,
    duration_s: int = PROFILE_RUN_S,
    seed: int = 0,
    settings: Settings | None = None,
    design: str = "startup",
    recovery_wait_s: float | None = None,
) -> dict:
    """Profile ``configs`` x ``rates`` for ``job`` on the twin; returns ``{rows, path}``.

    Without ``configs``: ``design="startup"`` (default) profiles the policy's start-up design at
    :func:`startup_rates`; ``design="space"`` Demeter's space-filling design at the history's
    quartiles and p95. ``recovery_wait_s`` (default twice ``settings.recovery_limit_s``) caps the
    recorded recovery: the profiler stops waiting there.

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
    if design not in ("startup", "space"):
        raise ValueError(f"design must be 'startup' or 'space', got {design!r}")
    cfgs = _configs(configs, seed, design)
    twin_path = job_dir(settings.twin_dir, job) / TWIN_FILE  # type: ignore[arg-type]  # filled by the settings' validator
    profile, start_ts, history_rates = ClusterProfile.default(), DEFAULT_START_TS, None
    if twin_path.exists():
        twin = TwinJob.load(twin_path)
        profile, start_ts = twin.profile, twin.now
        hist = twin.history()
        history_rates = hist["rate"].to_numpy() if len(hist) else None
    if rates is None and configs is None and design == "startup":
        rate_list = startup_rates(history_rates, settings.forecast_horizon_s)
    elif rates is None:
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
    wait = 2.0 * settings.recovery_limit_s if recovery_wait_s is None else float(recovery_wait_s)
    if not wait > 0:
        raise ValueError(f"recovery_wait_s must be > 0 seconds, got {recovery_wait_s!r}")
    # Censored where the profiler stops waiting (what the report charges, and what the surrogate learns).
    df["recovery_s"] = df["recovery_s"].clip(upper=wait)
    path = write_observations(df, settings)
    return {"rows": int(len(df)), "path": str(path)}
