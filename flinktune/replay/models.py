"""In-process models for replay: a forecaster and a surrogate trained on what the twin produces.

Use :class:`ReplayModels` for the model-based policies (demeter, flinktune) in a replay: the
forecaster is fitted once on history that precedes the replayed span (the trace file's own first
hours, ``ReplaySettings.history``, or else a preceding day of the same trace generator with another
seed), so it never sees the replayed future; the surrogate on profiling runs of the twin. Every profiling
run is charged: its configuration's reserved CPU and memory for the seconds it ran (warm-up,
measurement, and the recovery after its injected failure, unless the run skips the failure or
stops waiting early: ``skip_failure_when_behind``, ``recovery_wait_s``), which the replay adds to
the policy's totals, as Demeter's parallel profiling jobs cost real cluster resources. A
``fallback`` forecaster (the seasonal naive one, which needs 10 minutes of history) answers
while the replayed job has run too briefly for the main one (the peak model needs 31 minutes):
a job in service has that history, a replay that starts from nothing does not.
"""

from __future__ import annotations

import logging
import pickle
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.config_space import ConfigSpace, Configuration
from flinktune.decision.stages import Forecaster, Surrogate
from flinktune.metrics.schema import PROFILING_COLUMNS
from flinktune.signing import read_signed, write_signed
from flinktune.twin.mechanics import RECOVERY_CAP_S
from flinktune.twin.profile import ClusterProfile
from flinktune.twin.profiling import STABLE_S, initial_design, profile_configs

__all__ = ["FORECASTERS", "PRIOR_COLUMNS", "ReplayModels", "TraceForecast", "make_forecaster"]

log = logging.getLogger(__name__)

#: A profiling run kept up when its throughput reached this share of the offered rate.
KEPT_UP = 0.97

#: Forecasters a replay can use: ``naive`` (seasonal naive, instant), ``darts`` (TiDE, small, CPU) or
#: ``peak`` (gradient-boosted quantiles of the next window's peak, the rate a policy plans for; seconds to fit).
FORECASTERS: tuple[str, ...] = ("naive", "darts", "peak")

#: The columns a carried profile table needs (:meth:`ReplayModels.carry`): the configuration, the rate
#: and the outcomes the surrogates and Demeter's rules read, i.e. ``PROFILING_COLUMNS`` less its
#: bookkeeping (job, run id and time, kept when present and not needed).
PRIOR_COLUMNS: tuple[str, ...] = tuple(c for c in PROFILING_COLUMNS if c not in ("job", "run_id", "ts_ms"))


def make_forecaster(kind: str, *, horizon_s: int, seed: int) -> Forecaster:
    """A fresh forecaster of ``kind``; ValueError names the known kinds."""
    if kind == "naive":
        from models.forecasting.seasonal_naive import SeasonalNaiveForecaster

        return SeasonalNaiveForecaster(default_horizon_s=horizon_s)
    if kind == "darts":
        from models.forecasting.darts_forecaster import DartsQuantileForecaster

        # The fast path: a small TiDE, few epochs, one fit per replay.
        return DartsQuantileForecaster(n_epochs=5, hidden_size=16, num_samples=100, seed=seed, device="cpu")
    if kind == "peak":
        from models.forecasting.peak_forecaster import DirectPeakForecaster

        # Its peak quantiles are what the policies' ``quantile`` rule reads (QuantileForecast.peak).
        return DirectPeakForecaster(default_horizon_s=horizon_s, seed=seed)
    raise ValueError(f"unknown forecaster {kind!r}; known: {', '.join(FORECASTERS)}")


@dataclass
class ReplayModels:
    """Forecaster + surrogate + profiling ledger for one policy's replay."""

    cluster: ClusterProfile
    space: ConfigSpace
    forecaster: Forecaster
    seed: int = 0
    fallback: Forecaster | None = None
    profile_duration_s: int = 300
    #: Stop waiting for a profiling run's recovery after this many seconds and record it censored
    #: there (None: wait as long as the twin measures, RECOVERY_CAP_S).
    recovery_wait_s: float | None = None
    #: Skip the failure injection of a run that fell behind the offered rate: it never catches up,
    #: so its recovery is recorded as the longest wait without spending it.
    skip_failure_when_behind: bool = False
    #: How the profiler reads a run's recovery (``flinktune.twin.profiling.RECOVERY_MEASURES``):
    #: ``drained`` (the lag back at its pre-failure level) or ``demeter`` (Demeter's profiler's checks).
    recovery_measure: str = "drained"
    observations: pd.DataFrame | None = None
    surrogate: Surrogate | None = None
    cpu_core_s: float = 0.0
    memory_mb_s: float = 0.0
    runs: int = 0
    #: Rows carried in from an earlier replay (:meth:`carry`): in :attr:`observations`, never charged.
    prior_rows: int = 0
    log: list[dict] = field(default_factory=list)
    _fits: dict[bytes, Surrogate] = field(default_factory=dict, repr=False)

    @property
    def profiled_max_rate(self) -> float:
        if self.observations is None or self.observations.empty:
            return 0.0
        return float(self.observations["input_rate"].max())

    def profile(self, configs: list[Configuration], rate: float, ts: float | None = None) -> pd.DataFrame:
        """Profile ``configs`` at ``rate`` on the twin, charge them, and refit the surrogate."""
        # Carried rows shift the noise seeds: a new run is a new measurement, not a repeat of an earlier replay's.
        seed = self.seed + self.prior_rows + self.runs
        obs = profile_configs(
            self.cluster, configs, [rate], duration_s=self.profile_duration_s, seed=seed, recovery_measure=self.recovery_measure
        )
        wait = float(self.recovery_wait_s) if self.recovery_wait_s is not None else RECOVERY_CAP_S
        recorded = []
        for cfg, row in zip(configs, obs.itertuples(index=False)):
            rec = float(row.recovery_s)
            if self.skip_failure_when_behind and row.throughput < KEPT_UP * row.input_rate:
                recovery, seconds = wait, float(self.profile_duration_s)
            elif self.recovery_wait_s is not None and rec >= wait:  # censored: stopped once the wait is over
                recovery, seconds = wait, self.profile_duration_s + wait
            else:
                # The drained measure confirms the recovery over STABLE_S more seconds; a check is the end.
                recovery, seconds = rec, self.profile_duration_s + rec + (STABLE_S if self.recovery_measure == "drained" else 0)
            recorded.append(recovery)
            self.cpu_core_s += cfg.total_cpu * seconds
            self.memory_mb_s += cfg.total_memory_mb * seconds
        obs["recovery_s"] = np.array(recorded, dtype=float)
        self.runs += len(configs)
        self.log.append({"ts": ts, "rate": float(rate), "configs": [c.to_dict() for c in configs]})
        self.observations = obs if self.observations is None else pd.concat([self.observations, obs], ignore_index=True)
        self._refit()
        return obs

    def bootstrap(self, rates: list[float], n_configs: int = 8, design: list[Configuration] | None = None) -> None:
        """The first profiling round: ``design`` (default: Demeter's space-filling design of
        ``n_configs`` over the whole space) at each of ``rates``."""
        design = list(design) if design is not None else initial_design(self.space, n_configs, self.seed)
        if not design:
            raise ValueError("bootstrap: the profiling design is empty")
        for r in rates:
            self.profile(design, r)

    def carry(self, prior: pd.DataFrame) -> None:
        """Start from ``prior`` profiling observations (an earlier replay's :attr:`observations`, a
        profile database that outlived its run): they become :attr:`observations`, the surrogate is
        fitted on them, and nothing is charged (their cost fell in the run that made them; :attr:`runs`
        and the CPU and memory ledgers count this replay's own runs only). Call it before any
        :meth:`profile`. ValueError names a missing or non-numeric column, or an empty table."""
        if self.observations is not None and not self.observations.empty:
            raise ValueError("carry: these models already hold observations; carry priors into fresh models only")
        if not isinstance(prior, pd.DataFrame):
            raise ValueError(f"carry: prior profiles must be a DataFrame, got {type(prior).__name__}")
        missing = [c for c in PRIOR_COLUMNS if c not in prior.columns]
        if missing:
            raise ValueError(f"carry: the prior profiles lack column(s) {missing}; a profile table has {list(PRIOR_COLUMNS)}")
        if prior.empty:
            raise ValueError("carry: the prior profiles have no rows (pass None to start with the bootstrap design)")
        rows = prior.reset_index(drop=True).copy()
        for col in PRIOR_COLUMNS:
            values = pd.to_numeric(rows[col], errors="coerce")
            bad = int((~np.isfinite(values.to_numpy(dtype=float))).sum())
            if bad:
                raise ValueError(f"carry: column {col!r} of the prior profiles has {bad} missing or non-numeric value(s)")
            rows[col] = values
        self.observations = rows
        self.prior_rows = len(rows)
        self._refit()

    def _refit(self) -> None:
        assert self.observations is not None, "_refit runs after profile() stored observations"
        self.surrogate = self._fit(self.observations)

    def fit_surrogate(self, rows: pd.DataFrame) -> Surrogate:
        """A surrogate fitted on ``rows`` (columns of :attr:`observations`; any subset, rates
        possibly reassigned), for policies that model a selection of the profiles (Demeter's
        per-chunk models). Recent fits are cached: the same rows give the same model."""
        key = pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes()
        fits = self.__dict__.setdefault("_fits", {})  # models saved before this cache existed have none
        cached = fits.get(key)
        if cached is None:
            cached = self._fit(rows)
            if len(fits) >= 16:  # a few chunks' models at a time
                fits.pop(next(iter(fits)))
            fits[key] = cached
        return cached

    def _fit(self, df: pd.DataFrame) -> Surrogate:
        from models.surrogate.gp import GPSurrogate

        X = np.array(
            [
                self.space.normalise(
                    Configuration(
                        int(r.parallelism), int(r.task_slots), float(r.cpu), int(r.memory_mb), int(r.checkpoint_interval_s)
                    )
                )
                for r in df.itertuples(index=False)
            ]
        )
        Y = df[["latency_ms", "cpu_used", "memory_used_mb", "recovery_s"]].to_numpy(dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # GP fitting warnings (jitter, optimiser) are not actionable here
            return GPSurrogate(seed=self.seed).fit(X, df["input_rate"].to_numpy(dtype=float), Y)

    def refresh(self) -> None:
        """Nothing to reload: :meth:`profile` refits the surrogate itself (``ModelProvider``)."""

    def save(self, path: str | Path) -> Path:
        """Write these models (forecasters, surrogate, observations, profiling ledger) to ``path``
        atomically, for a later :meth:`load`: the decide job's ``--models`` runs a replay tick by tick."""
        return write_signed(path, pickle.dumps(self))

    @classmethod
    def load(cls, path: str | Path) -> ReplayModels:
        """The models :meth:`save` wrote to ``path``, read only when its signature is this installation's.

        Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for one that holds no
        ``ReplayModels``."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"models file {path}: no such file (write one with ReplayModels.save)")
        payload = read_signed(path, "saved ReplayModels file")  # checked before pickle runs anything
        try:
            models = pickle.loads(payload)
        except Exception as exc:  # any unpickling error: the file is not what save() wrote
            raise ValueError(f"models file {path}: not a saved ReplayModels ({type(exc).__name__}: {exc})") from None
        if not isinstance(models, cls):
            raise ValueError(f"models file {path}: holds a {type(models).__name__}, not a saved ReplayModels")
        return models

    def forecast(self, history: pd.Series, horizon_s: int):
        """A forecast from the rate history so far: the main forecaster's, else the ``fallback``'s
        while the history is too short for the main one, else None."""
        for fc in (self.forecaster, self.fallback):
            if fc is None:
                continue
            try:
                return fc.predict(history, horizon_s)
            except ValueError as exc:  # ForecastInputError: too little history yet
                log.debug("no forecast from %s yet: %s", type(fc).__name__, exc)
        return None


@dataclass
class TraceForecast:
    """The replay's ``ForecastProvider``: ``models``' forecast from the last ``history_s`` of the
    replayed ``trace`` before ``now`` (the input rate the metrics source would show so far)."""

    models: ReplayModels
    trace: pd.Series
    horizon_s: int
    history_s: int = 6 * 3600
    #: The rates before the replay's first second (1 s steps, ending one second before it): a job in
    #: service has them, so the first forecasts already see hours of its own load. None: none.
    before: pd.Series | None = None

    def __post_init__(self) -> None:
        if self.before is not None and len(self.before):
            gap = self.trace.index[0] - self.before.index[-1]
            if gap != pd.Timedelta(seconds=1):
                raise ValueError(
                    f"TraceForecast: the history must end one second before the replay starts "
                    f"({self.trace.index[0]}), it ends at {self.before.index[-1]}"
                )
            self._series = pd.concat([self.before, self.trace])
        else:
            self._series = self.trace

    def forecast(self, job: str, now: float):
        elapsed = int(now - self._series.index[0].timestamp())
        return self.models.forecast(self._series.iloc[max(0, elapsed - self.history_s) : elapsed], self.horizon_s)
