"""The rehearsal's topology, part by part: Flink clusters with their jobs, Prometheus, MLflow,
Spark standalone and Airflow 3 as deployed (api-server, scheduler, dag-processor, Celery workers).

Use :func:`start_topology` inside a :class:`~flinktune.rehearsal.servers.Stack`: it starts every
part in dependency order, registers its stop with the stack, and returns a :class:`Topology` with
the addresses the scenario and the report need. Every port is free and on 127.0.0.1; all state
lives under ``var_dir``.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import requests

from flinktune.airflow_local.airflow_home import airflow_env
from flinktune.airflow_local.ui import MLFLOW_SERVER_ENV
from flinktune.config_space import Configuration
from flinktune.localflink import ClusterSpec, JobControl, LocalFlinkCluster, LocalFlinkRealizer, RateFile
from flinktune.localflink.attach import Attachment, write_attachment
from flinktune.localflink.jobcontrol import JobSpec
from flinktune.rehearsal.servers import Databases, Server, Stack, StackError, free_port, free_port_range, http_ok, tcp_open

__all__ = [
    "DAGS",
    "DECIDE_WORKER_PRELOAD",
    "PROMETHEUS_CONN_ID",
    "CeleryWorker",
    "JobPlan",
    "Topology",
    "plan_celery_workers",
    "start_topology",
]

#: The DAGs the rehearsal runs on their schedules (report and replay stay paused; profile is triggered).
DAGS = ("flinktune_ingest", "flinktune_train", "flinktune_decide")
PROMETHEUS_CONN_ID = "flinktune_prometheus"  # the Airflow connection the rehearsal defines (an AIRFLOW_CONN_ variable)
_REPORTER_PORTS = 8  # per cluster: the JobManager and up to seven TaskManagers


@dataclass(frozen=True)
class JobPlan:
    """One benchmark job: its name, cost per record (CPU ``work`` and a ``wait_us`` per record), and the offered
    rate low -> high -> low (rec/s)."""

    name: str
    work: int
    low: float
    high: float
    keys: int = 500
    wait_us: int = 0


@dataclass
class Topology:
    """What was started and where it answers."""

    var_dir: Path
    env: dict[str, str]
    api: str
    token: str
    clusters: dict[str, LocalFlinkCluster] = field(default_factory=dict)
    rates: dict[str, RateFile] = field(default_factory=dict)
    prometheus: str = ""
    spark_master: str = ""
    queue: str = ""
    state_url: str = ""  # the state store the workers share (PostgreSQL)

    def session(self) -> requests.Session:
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {self.token}"
        return s


def _flink(stack: Stack, var_dir: Path, jobs: tuple[JobPlan, ...], jar: Path, reporter_base: int, topo: Topology) -> None:
    for i, plan in enumerate(jobs):
        first = reporter_base + i * _REPORTER_PORTS
        spec = ClusterSpec(
            rest_port=free_port(),
            rpc_port=free_port(),
            jm_memory_mb=768,
            tm_slots=1,
            tm_memory_mb=1024,
            extra={
                "metrics.reporter.prom.factory.class": "org.apache.flink.metrics.prometheus.PrometheusReporterFactory",
                "metrics.reporter.prom.port": f"{first}-{first + _REPORTER_PORTS - 1}",
            },
        )
        cluster = LocalFlinkCluster(var_dir / "flink" / plan.name, spec)
        stack.on_stop(f"Flink cluster of {plan.name} down", cluster.down)
        t0 = time.monotonic()
        cluster.up(timeout_s=240)
        rate = RateFile(var_dir / "flink" / plan.name / "rate.txt")
        rate.set(plan.low)
        control = JobControl(
            cluster.rest,
            JobSpec(jar=jar, name=plan.name, rate_file=rate.path, work=plan.work, keys=plan.keys, wait_us=plan.wait_us),
        )
        LocalFlinkRealizer(cluster, control, Configuration(1, 1, 1.0, 1024, 10), timeout_s=240).deploy()
        write_attachment(
            var_dir / "flink" / "jobs",
            Attachment(
                job=plan.name,
                cluster_dir=str(cluster.state_dir),
                jar=str(jar),
                rate_file=str(rate.path),
                work=plan.work,
                keys=plan.keys,
                parallelism=(1, 2),
                wait_us=plan.wait_us,
            ),
        )
        topo.clusters[plan.name], topo.rates[plan.name] = cluster, rate
        stack.log(f"Flink cluster and job {plan.name} running at p=1 (REST {spec.rest_port}, {time.monotonic() - t0:.0f} s)")


def _prometheus(stack: Stack, var_dir: Path, first: int, n: int) -> str:
    from flinktune.settings import PrometheusSettings, read_group

    binary = str(read_group(PrometheusSettings).bin or "/usr/bin/prometheus")
    if not Path(binary).exists():
        raise StackError(f"no Prometheus binary at {binary}: apt-get install prometheus, or set FLINKTUNE_PROMETHEUS_BIN")
    home = var_dir / "prometheus"
    home.mkdir(parents=True, exist_ok=True)
    targets = ", ".join(f"'127.0.0.1:{p}'" for p in range(first, first + n))
    (home / "prometheus.yml").write_text(
        "global: {scrape_interval: 2s, scrape_timeout: 1500ms}\n"
        f"scrape_configs:\n  - job_name: flink\n    static_configs: [{{targets: [{targets}]}}]\n"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    stack.start(
        "prometheus",
        [
            binary,
            f"--config.file={home / 'prometheus.yml'}",
            f"--storage.tsdb.path={home / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1d",
            "--log.level=warn",
        ],
        ready=http_ok(f"{url}/-/ready"),
        timeout_s=60,
    )
    return url


def _mlflow(stack: Stack, var_dir: Path, env: dict[str, str], db_url: str) -> tuple[str, Server]:
    """Start the MLflow server (not waited for: it takes a minute to import; see :func:`start_topology`)."""
    port = free_port()
    artifacts = var_dir / "mlflow-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    server = stack.start(
        "mlflow",
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            db_url,
            "--default-artifact-root",
            artifacts.as_uri(),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        env={**env, **MLFLOW_SERVER_ENV},
    )
    return f"http://127.0.0.1:{port}", server


def _spark(stack: Stack, var_dir: Path, env: dict[str, str], workers: int) -> str:
    import pyspark

    home = Path(pyspark.__file__).parent
    spark_class = str(home / "bin" / "spark-class")
    port, ui = free_port(), free_port()
    senv = {
        **env,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(var_dir / "spark" / "logs"),
        "SPARK_WORKER_DIR": str(var_dir / "spark" / "work"),
    }
    stack.start(
        "spark-master",
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        env=senv,
        ready=lambda: tcp_open(port),
        timeout_s=120,
    )
    master = f"spark://127.0.0.1:{port}"
    for i in range(workers):
        stack.start(
            f"spark-worker-{i + 1}",
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
                "--port",
                str(free_port()),
                master,
            ],
            env=senv,
        )

    def all_registered() -> bool:
        try:
            return int(requests.get(f"http://127.0.0.1:{ui}/json/", timeout=3).json().get("aliveworkers", 0)) >= workers
        except (requests.RequestException, ValueError):
            return False

    deadline = time.monotonic() + 120
    while not all_registered():
        stack.check()
        if time.monotonic() > deadline:
            raise StackError(f"the Spark workers did not register with {master} within 120 s (logs in {stack.logs})")
        time.sleep(1)
    stack.log(f"Spark standalone {master} with {workers} workers")
    return master


def _decide_queue(queue: str) -> str:
    """The Celery queue of the rehearsal's decide tasks, beside its default ``queue``."""
    return f"{queue}-decide"


#: The decide worker loads a decide run's modules once, before it forks a task (Great Expectations, MLflow, the loop).
DECIDE_WORKER_PRELOAD = "flinktune.orchestration.dag_tasks.worker_preload"


@dataclass(frozen=True)
class CeleryWorker:
    """One Celery worker of the rehearsal: the queue it serves, how many tasks it runs at once, its own settings."""

    name: str
    queue: str
    concurrency: int
    env: dict[str, str] = field(default_factory=dict)


def plan_celery_workers(queue: str, workers: int, deciders: int) -> list[CeleryWorker]:
    """``workers`` one-task workers on the default ``queue`` (ETL, training) and one decide worker that runs
    ``deciders`` tasks at once (one per job: the jobs decide side by side, not one after the other) with
    :data:`DECIDE_WORKER_PRELOAD` imported before it forks."""
    if workers < 1 or deciders < 1:
        raise ValueError(f"celery workers: need at least one worker and one decider, got {workers} and {deciders}")
    out = [CeleryWorker(f"airflow-celery-worker-{i + 1}", queue, 1) for i in range(workers)]
    preload = json.dumps({"imports": [DECIDE_WORKER_PRELOAD]})
    out.append(
        CeleryWorker(
            f"airflow-celery-worker-{workers + 1}",
            _decide_queue(queue),
            deciders,
            {"AIRFLOW__CELERY__EXTRA_CELERY_CONFIG": preload},
        )
    )
    return out


def _airflow_env(var_dir: Path, env: dict[str, str], airflow_db: str) -> str:
    """Add the Airflow settings of the deployed topology to ``env``; returns the API's base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    queue = f"rehearsal-{uuid.uuid4().hex[:8]}"  # the machine's Redis is shared: our own queue, our own tasks
    env.update(airflow_env(var_dir, database_url=airflow_db))
    env.update({
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": "redis://127.0.0.1:6379/0",
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + airflow_db,  # the same psycopg2 driver as the metadata
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": "1",
        "AIRFLOW__OPERATORS__DEFAULT_QUEUE": queue,
        "FLINKTUNE_SCHEDULE_DECIDE_QUEUE": _decide_queue(queue),  # decisions on a worker of their own
        # Queued tasks count against it too: room for two ETL or training tasks, the decide chain and what waits.
        "AIRFLOW__CORE__PARALLELISM": "6",
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "2",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": base, "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32), "AIRFLOW__API__SECRET_KEY": secrets.token_hex(32),
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        # The DAG files do not change during a rehearsal: parse them at the start, then rarely (it cost a fifth of a core).
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "300", "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "300",
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    })  # fmt: skip
    (Path(env["AIRFLOW_HOME"]) / "logs").mkdir(parents=True, exist_ok=True)
    return base


def _airflow(stack: Stack, env: dict[str, str], workers: list[CeleryWorker], topo: Topology) -> None:
    base, port = env["AIRFLOW__API__BASE_URL"], env["AIRFLOW__API__PORT"]
    queue = env["AIRFLOW__OPERATORS__DEFAULT_QUEUE"]
    af = [sys.executable, "-m", "airflow"]
    stack.start(
        "airflow-api-server",
        [*af, "api-server", "--port", port],
        env=env,
        ready=http_ok(f"{base}/api/v2/monitor/health"),
        timeout_s=300,
    )
    stack.start("airflow-scheduler", [*af, "scheduler"], env=env)
    stack.start("airflow-dag-processor", [*af, "dag-processor"], env=env)
    # --skip-serve-logs: Airflow's worker log server listens on every interface (it takes no host), and the
    # API server reads the task logs from the shared folder on this machine anyway.
    # The decide queue's worker too: a decision that waits behind a five-minute ETL acts on stale data.
    for i, w in enumerate(workers):
        stack.start(
            w.name,
            [
                *af,
                "celery",
                "worker",
                "--queues",
                w.queue,
                "--concurrency",
                str(w.concurrency),
                "--celery-hostname",
                f"worker{i + 1}@rehearsal",
                "--skip-serve-logs",
            ],
            env={**env, **w.env},
        )
    passwords = Path(env["AIRFLOW_HOME"]) / "simple_auth_manager_passwords.json.generated"
    deadline = time.monotonic() + 60
    while not (passwords.is_file() and json.loads(passwords.read_text() or "{}").get("admin")):
        if time.monotonic() > deadline:
            raise StackError(f"the API server wrote no admin password to {passwords}")
        time.sleep(1)
    password = json.loads(passwords.read_text())["admin"]
    answer = requests.post(f"{base}/auth/token", json={"username": "admin", "password": password}, timeout=30)
    if answer.status_code not in (200, 201):
        raise StackError(f"POST {base}/auth/token: HTTP {answer.status_code}: {answer.text[:200]}")
    topo.api, topo.token, topo.queue = base, answer.json()["access_token"], queue
    api = topo.session()
    # flinktune_decide maps its decide tasks into this pool; Airflow runs no task of a missing pool. A slot per
    # task the decide worker runs at once: every job decides in the same minute.
    deciders = max(w.concurrency for w in workers if w.queue == _decide_queue(queue))
    pool = api.post(
        f"{base}/api/v2/pools",
        json={"name": "flinktune_fleet", "slots": deciders, "description": "flinktune jobs deciding at once"},
        timeout=30,
    )
    if pool.status_code not in (200, 201, 409):
        raise StackError(f"could not create the pool flinktune_fleet: HTTP {pool.status_code}: {pool.text[:200]}")
    deadline = time.monotonic() + 300
    for dag_id in DAGS:
        while not api.get(f"{base}/api/v2/dags/{dag_id}", timeout=30).ok:
            stack.check()
            if time.monotonic() > deadline:
                raise StackError(f"{dag_id} was not parsed within 300 s; see {stack.logs / 'airflow-dag-processor.log'}")
            time.sleep(2)
        if not api.patch(f"{base}/api/v2/dags/{dag_id}", json={"is_paused": False}, timeout=30).ok:
            raise StackError(f"could not unpause {dag_id}")
    stack.log(f"Airflow: {', '.join(DAGS)} unpaused, on their schedules (queue {queue})")


def start_topology(
    stack: Stack,
    var_dir: Path,
    jobs: tuple[JobPlan, ...],
    *,
    jar: Path,
    flinktune_env: dict[str, str],
    policy: str = "ds2",
    latency_target_ms: float = 3000.0,
    spark_workers: int = 2,
    celery_workers: int = 2,
) -> Topology:
    """Start every part (see the module docstring); ``flinktune_env`` are the ``FLINKTUNE_*`` schedule
    and goal settings the workers run with; ``policy`` and ``latency_target_ms`` go in the fleet file
    of both jobs. Databases are dropped when the stack stops.

    The slow Python starts (MLflow's server, Airflow's database migration: a minute each on two
    shared cores) run while the Flink clusters and Spark come up, and are waited for after them.
    """
    var_dir = var_dir.resolve()
    db = Databases()
    stack.on_stop("throwaway PostgreSQL databases dropped", db.drop)
    if not tcp_open(6379):
        raise StackError("no Redis at 127.0.0.1:6379 (the Celery broker)")
    mlflow_db, airflow_db, state_db = db.create("mlflow"), db.create("airflow"), db.create("state")
    base_env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    mlflow_url, mlflow = _mlflow(stack, var_dir, base_env, mlflow_db)
    fleet = var_dir / "fleet.yaml"
    fleet.parent.mkdir(parents=True, exist_ok=True)
    # mode: act: the rehearsal plays an install whose operator switched its jobs to act (every job starts in advice).
    fleet.write_text(
        "jobs:\n"
        + "".join(
            f"  - name: {j.name}\n    policy: {policy}\n    latency_target_ms: {latency_target_ms:g}\n    mode: act\n"
            for j in jobs
        )
    )
    env = {
        **base_env,
        "FLINKTUNE_VAR_DIR": str(var_dir),
        "FLINKTUNE_CLUSTER": "local-flink",
        "FLINKTUNE_FLINK_JOBS_DIR": str(var_dir / "flink" / "jobs"),
        "FLINKTUNE_FLEET_FILE": str(fleet),
        "FLINKTUNE_STATE_URL": state_db,  # as in production: the store every worker shares is PostgreSQL
        "FLINKTUNE_PROMETHEUS_NAMES": "flink-operator-gauges",
        "FLINKTUNE_MLFLOW_TRACKING_URI": mlflow_url,
        **flinktune_env,
    }
    _airflow_env(var_dir, env, airflow_db)
    migrate = stack.start("airflow-db-migrate", [sys.executable, "-m", "airflow", "db", "migrate"], env=env, oneshot=True)
    reporter_base = free_port_range(_REPORTER_PORTS * len(jobs))
    topo = Topology(var_dir, env, "", "", state_url=state_db)
    _flink(stack, var_dir, jobs, jar, reporter_base, topo)
    topo.prometheus = _prometheus(stack, var_dir, reporter_base, _REPORTER_PORTS * len(jobs))
    topo.spark_master = _spark(stack, var_dir, base_env, spark_workers)
    env.update(
        {
            # As in production: the scheduled ingest reaches Prometheus through an Airflow connection.
            f"AIRFLOW_CONN_{PROMETHEUS_CONN_ID.upper()}": topo.prometheus,
            "FLINKTUNE_PROMETHEUS_CONN_ID": PROMETHEUS_CONN_ID,
            "FLINKTUNE_SPARK_MASTER": topo.spark_master,
            "FLINKTUNE_SPARK_CONF": json.dumps(
                {
                    "spark.executor.memory": "512m",
                    "spark.executor.cores": "1",
                    "spark.cores.max": "1",
                    # Each batch is a few minutes of two jobs' metrics: an executor that stops at the JIT's first
                    # tier and collects with one thread costs half the CPU on the cores the clusters share.
                    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
                    "spark.driver.host": "127.0.0.1",
                    "spark.driver.bindAddress": "127.0.0.1",
                }
            ),
        }
    )
    stack.wait_ready(mlflow, http_ok(f"{mlflow_url}/health"), timeout_s=300)
    stack.wait_exit(migrate, timeout_s=600)
    _airflow(stack, env, plan_celery_workers(env["AIRFLOW__OPERATORS__DEFAULT_QUEUE"], celery_workers, len(jobs)), topo)
    return topo
