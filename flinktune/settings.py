"""Typed settings for every stage, read from the environment (prefix ``FLINKTUNE_``).

Use :func:`load_settings` in job entry points; pass the resulting :class:`Settings` down instead of
reading the environment again. All paths default to folders under ``var_dir`` so that the embedded
default (twin, local Spark, SQLite MLflow) needs no service. Credentials never live here: the
Kubernetes and Prometheus adapters take them from Airflow connections or the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "load_settings"]


class Settings(BaseSettings):
    """Where flinktune keeps its data and how it talks to its tracking and compute back ends."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_", extra="forbid", validate_default=True)

    var_dir: Path = Field(Path("var"), description="Root of all local state (lake, MLflow, reports, twin).")
    lake_dir: Path | None = Field(None, description="Metric lake root; defaults to <var_dir>/lake.")
    reports_dir: Path | None = Field(None, description="Where reports are written; defaults to <var_dir>/reports.")
    state_db: Path | None = Field(None, description="SQLite file of decisions and observations; defaults to <var_dir>/state/flinktune.db.")
    twin_dir: Path | None = Field(None, description="Persisted twin state per job; defaults to <var_dir>/twin.")
    mlflow_tracking_uri: str | None = Field(
        None, description="MLflow tracking URI; defaults to sqlite:///<var_dir>/mlflow/mlflow.db."
    )
    mlflow_artifact_root: Path | None = Field(
        None, description="MLflow artifact location for new experiments; defaults to <var_dir>/mlflow/artifacts."
    )
    spark_master: str = Field("local[2]", description="Spark master URL (local[N], spark://..., k8s://...).")
    spark_shuffle_partitions: int = Field(4, ge=1, description="spark.sql.shuffle.partitions for the ETL.")
    latency_target_ms: float = Field(
        1000.0, gt=0, description="Default p95 end-to-end latency target of a job, milliseconds."
    )
    recovery_limit_s: float = Field(180.0, gt=0, description="Recovery-time limit after a failure, seconds.")
    confidence: float = Field(0.95, gt=0.5, lt=1.0, description="Probability the constraints must hold for a pick.")
    decision_interval_s: int = Field(600, ge=60, description="Seconds between decisions.")
    forecast_horizon_s: int = Field(600, ge=60, description="Forecast horizon the policy plans for, seconds.")
    forecast_bin_s: int = Field(60, ge=10, description="Width of a forecast bin, seconds.")
    device: str = Field("auto", pattern="^(auto|cpu|cuda)$", description="Torch device for training: auto, cpu or cuda.")

    @model_validator(mode="after")
    def _fill_paths(self) -> "Settings":
        var = self.var_dir
        self.lake_dir = self.lake_dir or var / "lake"
        self.reports_dir = self.reports_dir or var / "reports"
        self.state_db = self.state_db or var / "state" / "flinktune.db"
        self.twin_dir = self.twin_dir or var / "twin"
        self.mlflow_artifact_root = self.mlflow_artifact_root or var / "mlflow" / "artifacts"
        if self.mlflow_tracking_uri is None:
            self.mlflow_tracking_uri = f"sqlite:///{(var / 'mlflow' / 'mlflow.db').resolve()}"
        return self


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit keyword overrides taking precedence."""
    return Settings(**overrides)  # type: ignore[arg-type]
