"""Typed settings for every stage, read from the environment (prefix ``FLINKTUNE_``).

Use :func:`load_settings` in job entry points; pass the resulting :class:`Settings` down instead of
reading the environment again. All paths default to folders under ``var_dir`` so that the embedded
default (twin, local Spark, SQLite MLflow) needs no service. Credentials never live here: the
Kubernetes and Prometheus adapters take them from Airflow connections or the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "TimeoutSettings", "load_settings"]


class TimeoutSettings(BaseSettings):
    """How long flinktune waits on each outside service, and how often it retries (env prefix
    ``FLINKTUNE_TIMEOUT_``). Every call to Kubernetes, MLflow, Prometheus and Flink REST is bounded
    by these; retries use the clients' own support (urllib3 ``Retry``, MLflow's HTTP settings), and
    only reads are retried on a server error. ``apply_budget_s`` bounds one apply (the stability
    wait and a rollback together); :meth:`apply_budget` keeps it inside the decision interval."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_TIMEOUT_", extra="forbid", validate_default=True)

    kubernetes_request_s: float = Field(
        10.0, gt=0, le=300, description="Connect and read timeout of one Kubernetes API request, seconds."
    )
    kubernetes_retries: int = Field(
        2, ge=0, le=10, description="Retries of a Kubernetes read (connection errors, timeouts, HTTP 5xx)."
    )
    mlflow_request_s: float = Field(5.0, gt=0, le=300, description="Timeout of one MLflow HTTP request, seconds.")
    mlflow_retries: int = Field(1, ge=0, le=10, description="Retries of an MLflow HTTP request.")
    http_request_s: float = Field(10.0, gt=0, le=300, description="Timeout of one Prometheus or Flink REST request, seconds.")
    apply_budget_s: float = Field(480.0, gt=0, description="Most seconds one apply may take (stability wait plus rollback).")

    def apply_budget(self, decision_interval_s: float) -> float:
        """The apply budget, at most 80 % of the decision interval (the rest is for reading and deciding)."""
        return min(self.apply_budget_s, 0.8 * float(decision_interval_s))


class Settings(BaseSettings):
    """Where flinktune keeps its data and how it talks to its tracking and compute back ends."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_", extra="forbid", validate_default=True)

    var_dir: Path = Field(Path("var"), description="Root of all local state (lake, MLflow, reports, twin).")
    lake_dir: Path | None = Field(None, description="Metric lake root; defaults to <var_dir>/lake.")
    reports_dir: Path | None = Field(None, description="Where reports are written; defaults to <var_dir>/reports.")
    state_db: Path | None = Field(
        None, description="SQLite file of decisions and observations; defaults to <var_dir>/state/flinktune.db."
    )
    twin_dir: Path | None = Field(None, description="Persisted twin state per job; defaults to <var_dir>/twin.")
    mlflow_tracking_uri: str | None = Field(
        None, description="MLflow tracking URI; defaults to sqlite:///<var_dir>/mlflow/mlflow.db."
    )
    mlflow_artifact_root: Path | None = Field(
        None, description="MLflow artifact location for new experiments; defaults to <var_dir>/mlflow/artifacts."
    )
    spark_master: str = Field("local[2]", description="Spark master URL (local[N], spark://..., k8s://...).")
    spark_shuffle_partitions: int = Field(4, ge=1, description="spark.sql.shuffle.partitions for the ETL.")
    latency_target_ms: float = Field(1000.0, gt=0, description="Default p95 end-to-end latency target of a job, milliseconds.")
    recovery_limit_s: float = Field(180.0, gt=0, description="Recovery-time limit after a failure, seconds.")
    confidence: float = Field(0.95, gt=0.5, lt=1.0, description="Probability the constraints must hold for a pick.")
    decision_interval_s: int = Field(600, ge=60, description="Seconds between decisions.")
    forecast_horizon_s: int = Field(600, ge=60, description="Forecast horizon the policy plans for, seconds.")
    forecast_bin_s: int = Field(60, ge=10, description="Width of a forecast bin, seconds.")
    device: str = Field("auto", pattern="^(auto|cpu|cuda)$", description="Torch device for training: auto, cpu or cuda.")
    timeouts: TimeoutSettings = Field(default_factory=TimeoutSettings, description="Timeouts and retries of outside calls.")

    @model_validator(mode="after")
    def _fill_paths(self) -> Settings:
        var = self.var_dir
        self.lake_dir = self.lake_dir or var / "lake"
        self.reports_dir = self.reports_dir or var / "reports"
        self.state_db = self.state_db or var / "state" / "flinktune.db"
        self.twin_dir = self.twin_dir or var / "twin"
        self.mlflow_artifact_root = self.mlflow_artifact_root or var / "mlflow" / "artifacts"
        if self.mlflow_tracking_uri is None:
            self.mlflow_tracking_uri = f"sqlite:///{(var / 'mlflow' / 'mlflow.db').resolve()}"
        return self


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with explicit keyword overrides taking precedence."""
    return Settings(**overrides)
