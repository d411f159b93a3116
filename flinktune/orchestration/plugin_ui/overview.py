"""What the plugin page shows for one job: configuration in force, recent decisions, champions, report.

Use :func:`job_overview` from a read-only view (the Airflow plugin). It reads, never creates: a
missing state database, MLflow database or report folder becomes an explanatory ``None`` / note,
not a new empty file. It names no server path (a page tells its reader where to look by setting
and folder name, never by absolute path: a path tells a caller about the host). Shape::

    {"job": str, "mode": {"mode": "advise" | "act", "why": str},
     "config": {knob: value} | None, "config_since": float | None,     # from the newest decision
     "decisions": [{"ts", "policy", "action", "reason", "target", "changed", "mode", "dry_run"}],  # newest first
     "champions": [{"kind", "model", "version" | None, "url" | None, "note" | None}],
     "report": {"dir": folder name under FLINKTUNE_REPORTS_DIR, "markdown": "<dir>/report.md",
                "plots": [file name, ...], "html": bool, "verdict": str | None} | None}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["CHAMPION_KINDS", "job_mode", "job_overview", "latest_report_dir", "mlflow_ui_url"]

CHAMPION_KINDS = ("forecaster", "surrogate")


def mlflow_ui_url() -> str:
    """Base URL of the MLflow UI for links: ``FLINKTUNE_MLFLOW_UI_URL`` (default ``http://127.0.0.1:5000``)."""
    from flinktune.settings import MLflowSettings, read_group

    return read_group(MLflowSettings).ui_url.rstrip("/")


def latest_report_dir(reports_dir: str | Path, job: str) -> Path | None:
    """The newest ``<reports_dir>/<job>-<UTC stamp>/`` holding a ``report.md`` (stamps sort as time)."""
    root = Path(reports_dir)
    if not root.is_dir():
        return None
    dirs = sorted(
        p for p in root.glob(f"{job}-*") if p.is_dir() and (p / "report.md").is_file() and p.name[len(job) + 1 :][:1].isdigit()
    )  # "demo-2" must not claim "demo-20250101T..." folders
    return dirs[-1] if dirs else None


def _champions(job: str, tracking_uri: str) -> list[dict[str, Any]]:
    names = [(kind, f"flinktune-{kind}-{job}") for kind in CHAMPION_KINDS]
    if tracking_uri.startswith("sqlite:///") and not Path(tracking_uri[len("sqlite:///") :]).is_file():
        return [{"kind": k, "model": n, "version": None, "url": None, "note": "no MLflow database yet"} for k, n in names]
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    out = []
    for kind, name in names:
        try:
            version = str(client.get_model_version_by_alias(name, "champion").version)
        except MlflowException:
            out.append({"kind": kind, "model": name, "version": None, "url": None, "note": "no champion registered"})
            continue
        out.append(
            {
                "kind": kind,
                "model": name,
                "version": version,
                "url": f"{mlflow_ui_url()}/#/models/{name}/versions/{version}",
                "note": None,
            }
        )
    return out


def _verdict(report_dir: Path) -> str | None:
    """The report's one-line verdict from its summary.json (None for reports written before verdicts)."""
    try:
        return str(json.loads((report_dir / "summary.json").read_text())["verdict"]["headline"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def job_mode(job: str, switch: dict[str, Any] | None, settings: Any) -> Any:
    """The job's mode from its recorded switch and the fleet file (an annotation is the cluster's to read)."""
    from flinktune.decision.modes import resolve_mode

    if getattr(settings, "fleet_file", None) is not None:
        from flinktune.fleet import FleetError, load_fleet_file

        try:
            entry = load_fleet_file(settings.fleet_file).get(job)
            return resolve_mode(job, switch, entry.settings.mode if entry.settings else None, entry.source)
        except (FleetError, KeyError):
            pass  # the page still shows the recorded switch; the decide run names the fleet file's fault
    return resolve_mode(job, switch)


def job_overview(job: str, settings: Any, *, limit: int = 10) -> dict[str, Any]:
    """The overview of ``job`` (shape in the module docstring) from ``settings`` (a ``Settings``)."""
    from flinktune.decision.store import NoStateStore, open_state_store

    rows: list[dict[str, Any]] = []
    switch: dict[str, Any] | None = None
    try:
        store = open_state_store(settings, create=False)  # a read-only view never creates a store
    except NoStateStore:
        store = None
    if store is not None:
        frame = store.decisions(job, limit=limit)
        rows = json.loads(frame.to_json(orient="records"))[::-1]  # newest first for the page
        switch = store.job_mode(job)
    decisions = [
        {
            "ts": r["ts"],
            "policy": r["policy"],
            "action": r["action"],
            "reason": r["reason"],
            "target": json.loads(r["target"]) if r.get("target") else None,
            "changed": bool(r["changed"]),
            "mode": r.get("mode"),
            "dry_run": bool(r["dry_run"]),
        }
        for r in rows
    ]
    mode = job_mode(job, switch, settings)
    config, since = None, None
    if rows:
        newest = rows[0]
        config = json.loads(newest["state"])["config"]
        since = newest["ts"]
        if newest["changed"] and newest.get("target"):
            config = json.loads(newest["target"])  # applied at that tick: it is what runs now
    report_dir = latest_report_dir(settings.reports_dir, job)
    report = (
        None
        if report_dir is None
        else {
            "dir": report_dir.name,
            "markdown": f"{report_dir.name}/report.md",
            "plots": sorted(p.name for p in report_dir.glob("*.png")),
            "html": (report_dir / "report.html").is_file(),
            "verdict": _verdict(report_dir),
        }
    )
    return {
        "job": job,
        "mode": {"mode": mode.mode, "why": mode.line()},
        "config": config,
        "config_since": since,
        "decisions": decisions,
        "champions": _champions(job, str(settings.mlflow_tracking_uri)),
        "report": report,
    }
