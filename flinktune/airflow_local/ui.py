"""What ``flinktune ui`` starts over a state folder: the Airflow API server (its UI and the flinktune
page) on the folder's Airflow home, and the MLflow UI on the folder's store, both on 127.0.0.1.

Use :func:`ui_servers` to get the two commands, their environments and readiness URLs, and
:func:`read_login` once the API server is up for the password Airflow generated for the local user.
Nothing is started here (the caller runs the commands, each in a session of its own, and stops them
by process group), and Airflow is never imported: it reads its configuration on first import.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from flinktune.airflow_local.airflow_home import airflow_env

__all__ = ["MLFLOW_SERVER_ENV", "UI_USER", "UiServer", "read_login", "ui_servers"]

#: The one local user of the demo's UI (Airflow's simple auth manager, role admin).
UI_USER = "admin"
_PASSWORDS = "simple_auth_manager_passwords.json.generated"


@dataclass(frozen=True)
class UiServer:
    """One server to start: a name, its command and environment, the URL it answers on when ready
    and the URL a person opens."""

    name: str
    command: list[str]
    env: dict[str, str]
    ready_url: str
    url: str


#: What flinktune starts an MLflow server with: tracking and the registry only. The server's job runner (for
#: MLflow's own evaluation and trace jobs, which flinktune never submits) would start half a dozen idle
#: consumer processes beside it.
MLFLOW_SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def ui_servers(var_dir: str | Path, *, airflow_port: int, mlflow_port: int) -> list[UiServer]:
    """The Airflow API server and the MLflow UI over ``var_dir`` (absolute paths, loopback only).

    The Airflow home ``<var_dir>/airflow`` must have been prepared (``prepare_airflow_home``); the
    MLflow store is the folder's own (``<var_dir>/mlflow/mlflow.db``), so the runs, registered models and
    the report's experiment that the pipeline logged are the ones shown.
    """
    var = Path(var_dir).resolve()
    airflow_base = f"http://127.0.0.1:{airflow_port}"
    mlflow_base = f"http://127.0.0.1:{mlflow_port}"
    common = {**os.environ, "FLINKTUNE_VAR_DIR": str(var), "MLFLOW_DISABLE_TELEMETRY": "true"}
    af_env = {
        **common,
        **airflow_env(var),
        "FLINKTUNE_MLFLOW_UI_URL": mlflow_base,  # the plugin links the champions there
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{UI_USER}:admin",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(airflow_port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": airflow_base,
        # Fresh secrets per start: tokens of an earlier start stop working, which a local viewer never notices.
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(32),
    }
    airflow = UiServer(
        "airflow-api-server",
        [sys.executable, "-m", "airflow", "api-server", "--port", str(airflow_port)],
        af_env,
        f"{airflow_base}/api/v2/monitor/health",
        f"{airflow_base}/",
    )
    store = f"sqlite:///{var / 'mlflow' / 'mlflow.db'}"
    artifacts = (var / "mlflow" / "artifacts").as_uri()
    serve = ["--backend-store-uri", store, "--default-artifact-root", artifacts]
    listen = ["--host", "127.0.0.1", "--port", str(mlflow_port), "--workers", "1"]
    mlflow = UiServer(
        "mlflow-ui",
        [sys.executable, "-m", "mlflow", "server", *serve, *listen],
        {**common, **MLFLOW_SERVER_ENV},
        f"{mlflow_base}/health",
        f"{mlflow_base}/",
    )
    return [airflow, mlflow]


def read_login(var_dir: str | Path) -> str | None:
    """The password Airflow generated for :data:`UI_USER` in the folder's home, or None before it did."""
    path = Path(airflow_env(var_dir)["AIRFLOW_HOME"]) / _PASSWORDS
    try:
        password = json.loads(path.read_text() or "{}").get(UI_USER)
    except (OSError, ValueError):
        return None
    return str(password) if password else None
