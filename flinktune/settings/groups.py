"""The typed settings groups of every stage, one ``BaseSettings`` class per concern (prefix ``FLINKTUNE_``).

Use them through :mod:`flinktune.settings` (``load_settings``, ``read_group``), which reads the
environment and turns a bad value into one line naming the variable; this module only declares
the fields, their defaults and their descriptions. All paths default to folders under ``var_dir``
so that the embedded default (twin, local Spark, SQLite MLflow) needs no service.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from flinktune.quantities import CronText, K8sCpu, K8sMemory, Latency, Recovery, TrackingUri, cron, dns_label

__all__ = [
    "PREFIX",
    "BackendSettings",
    "KubernetesSettings",
    "LocalFlinkSettings",
    "MLflowSettings",
    "ProfilingSettings",
    "PrometheusSettings",
    "ScheduleSettings",
    "Settings",
    "SparkSettings",
    "TimeoutSettings",
    "TrainerSettings",
]

#: The prefix of every flinktune environment variable.
PREFIX = "FLINKTUNE_"


def _json_value(value: Any) -> Any:
    """The one JSON-from-environment parser: a string is decoded, anything else (a default, a
    value given in code) passes through for the field's own type check."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at column {exc.colno}") from None


#: A field read as JSON from the environment (a JSON object or list, checked by the inner type).
# NoDecode: the environment source hands the text over as is, so a bad JSON value is reported by
# _json_value (naming the variable), not by pydantic-settings' own decoder.
JsonObject = Annotated[dict[str, Any], NoDecode, BeforeValidator(_json_value)]
JsonStrMap = Annotated[dict[str, str], NoDecode, BeforeValidator(_json_value)]
JsonList = Annotated[list[dict[str, Any]], NoDecode, BeforeValidator(_json_value)]


class TimeoutSettings(BaseSettings):
    """How long flinktune waits on each outside service, and how often it retries (env prefix
    ``FLINKTUNE_TIMEOUT_``). Every call to Kubernetes, MLflow, Prometheus and Flink REST is bounded
    by these; retries use the clients' own support (urllib3 ``Retry``, MLflow's HTTP settings), and
    only reads are retried on a server error. ``apply_budget_s`` bounds one apply (the stability
    wait and a rollback together); :meth:`apply_budget` keeps it inside the decision interval."""

    model_config = SettingsConfigDict(
        env_prefix="FLINKTUNE_TIMEOUT_", extra="forbid", validate_default=True, env_ignore_empty=True, allow_inf_nan=False
    )

    kubernetes_request_s: float = Field(
        10.0, gt=0, le=300, description="Connect and read timeout of one Kubernetes API request, seconds."
    )
    kubernetes_retries: int = Field(
        2, ge=0, le=10, description="Retries of a Kubernetes read (connection errors, timeouts, HTTP 5xx)."
    )
    mlflow_request_s: float = Field(5.0, gt=0, le=300, description="Timeout of one MLflow HTTP request, seconds.")
    mlflow_retries: int = Field(1, ge=0, le=10, description="Retries of an MLflow HTTP request.")
    http_request_s: float = Field(10.0, gt=0, le=300, description="Timeout of one Prometheus or Flink REST request, seconds.")
    http_retries: int = Field(
        2, ge=0, le=10, description="Retries of a Prometheus read (refused connections, timeouts, HTTP 429 and 5xx)."
    )
    apply_budget_s: float = Field(480.0, gt=0, description="Most seconds one apply may take (stability wait plus rollback).")

    def apply_budget(self, decision_interval_s: float) -> float:
        """The apply budget, at most 80 % of the decision interval (the rest is for reading and deciding)."""
        return min(self.apply_budget_s, 0.8 * float(decision_interval_s))


class Settings(BaseSettings):
    """Where flinktune keeps its data and how it talks to its tracking and compute back ends."""

    model_config = SettingsConfigDict(
        env_prefix="FLINKTUNE_", extra="forbid", validate_default=True, env_ignore_empty=True, allow_inf_nan=False
    )

    var_dir: Path = Field(Path("var"), description="Root of all local state (lake, MLflow, reports, twin).")
    lake_dir: Path | None = Field(None, description="Metric lake root; defaults to <var_dir>/lake.")
    data_docs: bool = Field(
        True,
        description="Run every data-contract check as a GX Checkpoint of the lake's GX project, publishing Data Docs "
        "and logging the batch for the report's data-quality section (a few seconds per batch); false: the same "
        "rules, quarantine and errors, without Checkpoints, Data Docs or the batch log.",
    )
    reports_dir: Path | None = Field(None, description="Where reports are written; defaults to <var_dir>/reports.")
    state_db: Path | None = Field(
        None, description="SQLite file of decisions and observations; defaults to <var_dir>/state/flinktune.db."
    )
    state_url: str | None = Field(
        None,
        pattern=r"^postgresql(\+psycopg2)?://",
        description="SQLAlchemy URL of a PostgreSQL state store (postgresql://user:password@host:5432/db), shared by "
        "every worker and the API server; pass it from a Secret (or leave the password out and set PGPASSWORD), never "
        "in a file or a spec; messages print it without the password. Unset: the embedded SQLite file state_db.",
    )
    twin_dir: Path | None = Field(None, description="Persisted twin state per job; defaults to <var_dir>/twin.")
    airflow_db_cache: Path | None = Field(
        None,
        description="Folder of migrated, empty Airflow SQLite databases, one per Airflow version: a new local "
        "AIRFLOW_HOME (the demo, the local pipeline) starts from a copy instead of running `airflow db migrate` "
        "(10-20 s). Unset: every new home migrates its own.",
    )
    mlflow_tracking_uri: TrackingUri | None = Field(
        None, description="MLflow tracking URI; defaults to sqlite:///<var_dir>/mlflow/mlflow.db."
    )
    mlflow_artifact_root: Path | None = Field(
        None, description="MLflow artifact location for new experiments; defaults to <var_dir>/mlflow/artifacts."
    )
    spark_master: str = Field("local[2]", description="Spark master URL (local[N], spark://..., k8s://...).")
    spark_shuffle_partitions: int = Field(4, ge=1, description="spark.sql.shuffle.partitions for the ETL.")
    spark_driver_java_options: str = Field(
        "-XX:TieredStopAtLevel=1",
        description="JVM options of the ETL's Spark driver (spark.driver.extraJavaOptions), where this process starts "
        "it (local and client mode). The default keeps the JIT at its first tier: an ETL batch is minutes of metrics, "
        "and a short-lived JVM spends much of its CPU compiling (about 30 % less CPU on the local ETL). Empty: "
        "the JVM's own default.",
    )
    latency_target_ms: Latency = Field(1000.0, description="Default p95 end-to-end latency target of a job, milliseconds.")
    recovery_limit_s: Recovery = Field(180.0, description="Recovery-time limit after a failure, seconds.")
    confidence: float = Field(0.95, gt=0.5, lt=1.0, description="Probability the constraints must hold for a pick.")
    decision_interval_s: int = Field(
        300, ge=60, description="Seconds between decisions (the cadence the replay benchmark measured flinktune at)."
    )
    watch_every_s: int = Field(
        60, ge=0, description="Seconds between watch checks that decide early when the backlog grows (0: off)."
    )
    forecast_horizon_s: int = Field(600, ge=60, description="Forecast horizon the policy plans for, seconds.")
    forecast_bin_s: int = Field(60, ge=10, description="Width of a forecast bin, seconds.")
    device: str = Field("auto", pattern="^(auto|cpu|cuda)$", description="Torch device for training: auto, cpu or cuda.")
    fleet_file: Path | None = Field(
        None,
        description="A fleet.yaml: the DAGs' scheduled runs act on each of its jobs (unset: the one job of the run's params).",
    )
    fleet_discover: bool = Field(
        False,
        description="On Kubernetes, the fleet is the FlinkDeployments labelled flinktune.io/managed=true (instead of a file).",
    )
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


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


class BackendSettings(BaseSettings):
    """Which back end each stage uses (see :mod:`flinktune.backends.choice`)."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="forbid", env_ignore_empty=True, allow_inf_nan=False)

    cluster: Annotated[Literal["twin", "kubernetes", "local-flink"], BeforeValidator(_lower)] = Field(
        "twin", description="Where decisions are applied and profiling runs: twin, kubernetes or local-flink (the rehearsal)."
    )
    training: Annotated[Literal["in_process", "kubernetes"], BeforeValidator(_lower)] = Field(
        "in_process", description="Train in the Airflow worker (in_process) or in a GPU pod (kubernetes)."
    )
    spark_submit: Annotated[Literal["", "client", "cluster", "kubernetes"], BeforeValidator(_lower)] = Field(
        "",
        description="Empty: the ETL runs in the worker's Python; client or cluster: spark-submit to a standalone master "
        "with this deploy mode; kubernetes: a SparkApplication through the Spark operator (SparkKubernetesOperator).",
    )


class KubernetesSettings(BaseSettings):
    """Where the Flink jobs live on Kubernetes. Credentials come from the pod's service account or
    ``KUBECONFIG`` (the client's own variable), never from here."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_K8S_", extra="forbid", env_ignore_empty=True, allow_inf_nan=False)

    namespace: Annotated[str, AfterValidator(lambda v: dns_label(v, "") if v else v)] = Field(
        "", description="Namespace of the FlinkDeployments (required with FLINKTUNE_CLUSTER=kubernetes)."
    )
    home_namespace: Annotated[str, AfterValidator(lambda v: dns_label(v, ""))] = Field(
        "flinktune",
        description="Namespace of flinktune's own pods (trainer pods, Spark executors), where its volume claim and "
        "Secrets live; never the FlinkDeployments' namespace, which holds neither.",
    )
    vertex_ids: JsonStrMap = Field(
        default_factory=dict,
        validation_alias="FLINKTUNE_VERTEX_IDS",
        description="JSON object, vertex name -> Flink job vertex id, for per-vertex parallelism.",
    )
    crd_dir: Path | None = Field(
        None, validation_alias="FLINKTUNE_CRD_DIR", description="Folder of the operator's CRDs; default: the shipped copy."
    )


class SparkSettings(BaseSettings):
    """Extra Spark properties and Spark on Kubernetes (master and partitions are on :class:`Settings`)."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_SPARK_", extra="forbid", env_ignore_empty=True, allow_inf_nan=False)

    conf: JsonObject = Field(
        default_factory=dict, description='JSON object of extra Spark properties, e.g. {"spark.executor.memory": "4g"}.'
    )
    image: str = Field("", description="Image of docker/Dockerfile.spark-job (required with FLINKTUNE_SPARK_SUBMIT=kubernetes).")
    service_account: str = Field(
        "flinktune-spark", description="Service account of the Spark executors on Kubernetes (no API rights)."
    )
    driver_service_account: str = Field(
        "flinktune-spark-driver", description="Service account of the Spark driver on Kubernetes (creates its executor pods)."
    )

    @field_validator("conf")
    @classmethod
    def _scalar_properties(cls, conf: dict[str, Any]) -> dict[str, Any]:
        for key, value in conf.items():
            if not isinstance(value, (str, int, float, bool)):
                raise ValueError(f"property {key!r} must be a string, number or boolean, got {type(value).__name__}")
        return conf

    def properties(self) -> dict[str, str]:
        """``conf`` as Spark wants it: strings, booleans lower-case."""
        return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in self.conf.items()}


_GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


class TrainerSettings(BaseSettings):
    """The GPU trainer pod (``FLINKTUNE_TRAINING=kubernetes``; :mod:`flinktune.orchestration.dag_tasks.trainer_pod`,
    run by ``KubernetesPodOperator``: :mod:`flinktune.orchestration.dag_tasks.k8s_operators`)."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_TRAINER_", extra="forbid", env_ignore_empty=True, allow_inf_nan=False)

    image: str = Field("", description="Image of docker/Dockerfile.trainer (required with FLINKTUNE_TRAINING=kubernetes).")
    service_account: str = Field("flinktune-trainer", description="Service account of the trainer pod.")
    gpus: int = Field(1, ge=0, description="GPUs the pod requests; 0 trains on CPU.")
    cpu: K8sCpu = Field("2", description="CPU request and limit of the pod (Kubernetes quantity).")
    memory: K8sMemory = Field("8Gi", description="Memory request and limit of the pod (Kubernetes quantity).")
    node_selector: JsonStrMap = Field(
        default_factory=lambda: {"nvidia.com/gpu.present": "true"}, description="JSON object: the pod's nodeSelector."
    )
    tolerations: JsonList = Field(
        default_factory=lambda: [dict(_GPU_TOLERATION)], description="JSON list of the pod's tolerations."
    )
    secret: str = Field("", description="A Secret whose keys become the pod's environment (envFrom).")
    secret_refs: JsonStrMap = Field(
        default_factory=dict,
        description='JSON object {"VARIABLE": "secret-name:key"}, each given to the pod as a secretKeyRef.',
    )
    var_pvc: str = Field("flinktune-var", description="PersistentVolumeClaim holding the state folder (lake, reports).")


class ProfilingSettings(BaseSettings):
    """What one profiling deployment on Kubernetes may use, JobManager included."""

    model_config = SettingsConfigDict(
        env_prefix="FLINKTUNE_PROFILE_BUDGET_", extra="forbid", env_ignore_empty=True, allow_inf_nan=False
    )

    cpu: float = Field(50.0, gt=0, description="Most CPU cores one profiling deployment may reserve.")
    memory_mb: int = Field(430000, gt=0, description="Most memory one profiling deployment may reserve, MiB.")


class MLflowSettings(BaseSettings):
    """The MLflow UI (tracking URI and artifact root are on :class:`Settings`)."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_MLFLOW_", extra="forbid", env_ignore_empty=True, allow_inf_nan=False)

    ui_url: str = Field(
        "http://127.0.0.1:5000",
        pattern=r"^https?://\S+$",
        description="Base URL of the MLflow UI, for links in the Airflow plugin.",
    )


class LocalFlinkSettings(BaseSettings):
    """Where the local Flink distribution is (:mod:`flinktune.localflink.distribution`)."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_FLINK_", extra="forbid", env_ignore_empty=True, allow_inf_nan=False)

    home: Path | None = Field(None, description="A Flink distribution folder; default: the pyflink of the Flink venv.")
    venv: Path | None = Field(None, description="The virtualenv holding apache-flink; default: <repo>/.venv-flink.")
    jobs_dir: Path | None = Field(
        None, description="With FLINKTUNE_CLUSTER=local-flink: the folder of the jobs' attachment files (<job>.json)."
    )


class PrometheusSettings(BaseSettings):
    """Prometheus from the environment when no Airflow connection is given (:mod:`flinktune.extract.endpoint`)."""

    model_config = SettingsConfigDict(
        env_prefix="FLINKTUNE_PROMETHEUS_", extra="forbid", env_ignore_empty=True, allow_inf_nan=False
    )

    conn_id: str = Field(
        "",
        description="Airflow connection of Prometheus that extraction uses when none is passed (the scheduled "
        "ingest); empty: the url and credentials below.",
    )
    url: str = Field("", pattern=r"^(https?://\S+)?$", description="Base URL, e.g. http://prometheus.monitoring:9090.")
    token: SecretStr | None = Field(None, description="Bearer token (optional).")
    user: str = Field("", description="Basic-auth user (optional, with the password).")
    password: SecretStr | None = Field(None, description="Basic-auth password.")
    bin: Path | None = Field(None, description="The prometheus binary the rehearsal starts; default /usr/bin/prometheus.")
    names: Annotated[Literal["default", "flink-operator-gauges"], BeforeValidator(_lower)] = Field(
        "default",
        description="Where the job-level metrics come from: default (Kafka exporter, flinktune_config_*) or "
        "flink-operator-gauges (the benchmark job's own gauges through Flink's reporter).",
    )


class ScheduleSettings(BaseSettings):
    """The DAGs' cadences (read when the DAG files are parsed). Production keeps the defaults; the
    rehearsal (:mod:`flinktune.rehearsal`) shortens them to run the whole chain in minutes."""

    model_config = SettingsConfigDict(
        env_prefix="FLINKTUNE_SCHEDULE_", extra="forbid", env_ignore_empty=True, allow_inf_nan=False
    )

    ingest_every_s: int = Field(300, ge=10, le=86400, description="Seconds between flinktune_ingest runs.")
    decide_cron: CronText = Field(
        "*/5 * * * *",
        description="Cron (UTC) of flinktune_decide's schedule (FLINKTUNE_DECISION_INTERVAL_S apart).",
    )
    retrain_cron: CronText = Field("0 */6 * * *", description="Cron (UTC) of flinktune_train's schedule.")
    watch_cron: Annotated[str, AfterValidator(lambda text: cron(text, "", allow=("off",)))] = Field(
        "* * * * *",
        description="Cron (UTC) of flinktune_watch, which triggers flinktune_decide for a fleet job whose backlog outgrew "
        "its size between decisions; off: the watch runs only when triggered.",
    )
    decide_queue: str = Field(
        "",
        pattern=r"^[A-Za-z0-9_.:-]*$",
        description="Celery queue of flinktune_decide's tasks, so that no ETL or training task can hold a decision "
        "back (give it a worker of its own); empty: Airflow's default queue.",
    )
