"""Airflow plugin: a read-only view of flinktune's jobs, served by the Airflow API server.

Mounted at ``/flinktune`` on the API server (``airflow api-server``) when the plugins folder is
this repository's ``plugins/`` (see :mod:`flinktune.airflow_local.airflow_home`). HTML pages:

- ``GET /flinktune/`` -> the jobs with recorded decisions, each linking to its page.
- ``GET /flinktune/job/<job>`` -> the configuration in force, the last decisions with reasons,
  the champion model versions (linked to the MLflow UI at ``FLINKTUNE_MLFLOW_UI_URL``) and the
  latest report's verdict and plots (``GET /flinktune/job/<job>/plots/<file>.png``), linking to
- ``GET /flinktune/job/<job>/report`` -> the latest report's HTML (interactive plots, self-contained),
  its Data Docs links pointing at
- ``GET /flinktune/data-docs/<path>`` -> the GX Data Docs site of the lake (``FLINKTUNE_LAKE_DIR``);
  a browser refuses the report's ``file://`` links from an http page. Nothing outside the site is served.

JSON:

- ``GET /flinktune/jobs`` -> ``{"jobs": [name, ...]}``: jobs with recorded decisions.
- ``GET /flinktune/decisions?job=demo&limit=20`` -> ``{"job", "decisions": [row, ...]}``,
  newest last; a row is the state store's ``decisions`` table (action, reason, target, ...).

The state store is PostgreSQL at ``FLINKTUNE_STATE_URL`` when set, else the SQLite file
``FLINKTUNE_STATE_DB`` (default ``<FLINKTUNE_VAR_DIR>/state/flinktune.db``), opened read-only per request. Every route is behind Airflow's own authentication: the API server's auth manager
resolves the caller from a bearer JWT (``POST /auth/token``) or the UI's session cookie, and the
caller needs read access to the runs of the ``flinktune_decide`` DAG (the Viewer role and above,
unless DAG-level permissions say otherwise); no token is a 401, an invalid or refused one a 403,
exactly as on ``/api/v2``. Responses name settings, never
server paths (a path tells a caller about the host; the operator knows where ``FLINKTUNE_STATE_DB``
points). Airflow loads this file in every process (dag.test runs included), so the flinktune
modules, which pull in pandas, are imported inside the handlers only.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from flinktune.job_name import JOB_NAME_PATTERN  # the one job-name rule (light: re and pydantic)

__all__ = ["DECISIONS_DAG", "FlinktunePlugin", "create_app", "require_airflow_reader"]

_JSON_COLUMNS = ("target", "profile_configs", "state", "inputs")  # stored as JSON text
_PLOT_PATTERN = r"^[A-Za-z0-9_-]+\.png$"  # a bare file name: no path can escape the report folder
NO_STATE = "no flinktune state database yet (FLINKTUNE_STATE_DB or FLINKTUNE_STATE_URL): no decision has been recorded"
UNREADABLE_STATE = (
    "the flinktune state store (FLINKTUNE_STATE_DB or FLINKTUNE_STATE_URL) cannot be read; the API server's log says why"
)


log = logging.getLogger(__name__)
_bearer = HTTPBearer(auto_error=False)  # the same header Airflow's get_user reads; it decides, not this


#: Decisions and reports are what this DAG's runs produce: who may read its runs may read them.
DECISIONS_DAG = "flinktune_decide"


async def require_airflow_reader(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> None:
    """Airflow's own checks, as on ``/api/v2``: ``get_user`` (bearer JWT, else the UI's session
    cookie; 401 without either, 403 for an invalid token), then ``requires_access_dag("GET", RUN)``
    on :data:`DECISIONS_DAG` (403 when the auth manager refuses). Imported per request: the core API's
    security module takes seconds to import, and Airflow imports this plugin in every process."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import get_user, requires_access_dag
    from starlette.concurrency import run_in_threadpool

    user = await get_user(request=request, _oauth_token=None, bearer_credentials=credentials)
    check = requires_access_dag("GET", DagAccessEntity.RUN, param_dag_id=DECISIONS_DAG)
    await run_in_threadpool(check, request, user)  # it reads the metadata database (the DAG's team)


def _base(request: Request) -> str:
    return request.scope.get("root_path", "").rstrip("/") + "/"


def create_app(state_db: str | Path | None = None) -> FastAPI:
    """The FastAPI app; ``state_db`` fixes the database (tests), else settings are read per request.

    Every route depends on :func:`require_airflow_reader` (Airflow's auth manager), so it answers
    only inside an API server whose auth manager is initialised (``airflow api-server``, or
    ``airflow.api_fastapi.app.create_app`` in tests)."""
    app = FastAPI(
        title="flinktune",
        description="Decisions recorded by flinktune's decision loop (read-only).",
        # One app-level dependency: no route can be added that skips authentication.
        dependencies=[Depends(require_airflow_reader)],
    )

    def _settings() -> Any:
        from flinktune.settings import load_settings

        return load_settings(state_db=state_db) if state_db is not None else load_settings()

    def _store() -> Any:
        from flinktune.decision.store import NoStateStore, StateStoreError, open_state_store

        try:
            return open_state_store(_settings(), create=False)  # a read-only view never creates a store
        except NoStateStore:
            raise HTTPException(status_code=404, detail=NO_STATE) from None
        except StateStoreError as exc:
            log.error("flinktune plugin: %s", exc)  # the operator's log names the file or server; the response does not
            raise HTTPException(status_code=503, detail=UNREADABLE_STATE) from None

    @app.get("/jobs")
    def jobs() -> dict[str, list[str]]:
        return {"jobs": _store().jobs()}

    @app.get("/decisions")
    def decisions(
        job: str = Query(..., pattern=JOB_NAME_PATTERN, description="Flink job name"),
        limit: int = Query(20, ge=1, le=500, description="Newest decisions to return"),
    ) -> dict[str, Any]:
        store = _store()
        frame = store.decisions(job, limit=limit)
        # to_json turns NaN into null and numpy scalars into plain JSON numbers.
        rows = json.loads(frame.to_json(orient="records"))
        for row in rows:
            for column in _JSON_COLUMNS:
                if isinstance(row.get(column), str):
                    row[column] = json.loads(row[column])
        return {"job": job, "decisions": rows}

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request) -> str:
        from flinktune.orchestration.plugin_ui.overview_html import index_page

        try:
            store = _store()
        except HTTPException as exc:
            return index_page([], base=_base(request), note=str(exc.detail))
        from flinktune.orchestration.plugin_ui.overview import job_mode

        jobs = store.jobs()
        settings = _settings()
        return index_page(jobs, base=_base(request), modes={j: job_mode(j, store.job_mode(j), settings).mode for j in jobs})

    @app.get("/job/{job}", response_class=HTMLResponse)
    def job_page(request: Request, job: str = PathParam(..., pattern=JOB_NAME_PATTERN)) -> str:
        from flinktune.orchestration.plugin_ui.overview import job_overview
        from flinktune.orchestration.plugin_ui.overview_html import job_page as render

        return render(job_overview(job, _settings()), base=_base(request))

    @app.get("/job/{job}/report", response_class=HTMLResponse)
    def report_html(request: Request, job: str = PathParam(..., pattern=JOB_NAME_PATTERN)) -> str:
        from flinktune.orchestration.plugin_ui.data_docs import data_docs_root, hide_server_paths, served_links
        from flinktune.orchestration.plugin_ui.overview import latest_report_dir

        settings = _settings()
        folder = latest_report_dir(settings.reports_dir, job)
        if folder is None or not (folder / "report.html").is_file():
            raise HTTPException(status_code=404, detail=f"no HTML report for job {job} (run flinktune_report)")
        html = (folder / "report.html").read_text(encoding="utf-8")
        html = served_links(html, data_docs_root(settings.lake_dir), _base(request))
        # The report was written to be read from disk and names its files: the plugin names none.
        folders = {
            "FLINKTUNE_REPORTS_DIR": settings.reports_dir, "FLINKTUNE_LAKE_DIR": settings.lake_dir,
            "FLINKTUNE_TWIN_DIR": settings.twin_dir, "FLINKTUNE_MLFLOW_ARTIFACT_ROOT": settings.mlflow_artifact_root,
            "FLINKTUNE_STATE_DB": settings.state_db, "FLINKTUNE_VAR_DIR": settings.var_dir,
        }  # fmt: skip
        return hide_server_paths(html, folders)

    @app.get("/data-docs/{path:path}")
    def data_docs(path: str) -> FileResponse:
        from flinktune.orchestration.plugin_ui.data_docs import data_docs_file, data_docs_root

        found = data_docs_file(data_docs_root(_settings().lake_dir), path)
        if found is None:
            raise HTTPException(status_code=404, detail="no such page in the Data Docs site (FLINKTUNE_LAKE_DIR)")
        return FileResponse(found)

    @app.get("/job/{job}/plots/{name}")
    def plot(
        job: str = PathParam(..., pattern=JOB_NAME_PATTERN), name: str = PathParam(..., pattern=_PLOT_PATTERN)
    ) -> FileResponse:
        from flinktune.orchestration.plugin_ui.overview import latest_report_dir

        folder = latest_report_dir(_settings().reports_dir, job)
        if folder is None or not (folder / name).is_file():
            raise HTTPException(status_code=404, detail=f"no plot {name} in the latest report of job {job}")
        return FileResponse(folder / name, media_type="image/png")

    return app


class FlinktunePlugin(AirflowPlugin):
    """Registers the decisions view with the Airflow 3 API server."""

    name = "flinktune"
    # A plain list attribute, as AirflowPlugin declares it (a ClassVar would not match the base class).
    fastapi_apps = [{"app": create_app(), "url_prefix": "/flinktune", "name": "flinktune"}]  # noqa: RUF012
