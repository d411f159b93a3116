"""Where Prometheus is and how to authenticate: from the environment or an Airflow connection.

Use :func:`resolve_endpoint` in jobs: ``conn_id`` (an Airflow connection: host with scheme, port,
optional login/password, or ``{"token": ...}`` in its extra) wins; then the connection named by
``FLINKTUNE_PROMETHEUS_CONN_ID`` (production's scheduled ingest); otherwise the environment::

    FLINKTUNE_PROMETHEUS_URL       e.g. http://prometheus.monitoring:9090 (required)
    FLINKTUNE_PROMETHEUS_TOKEN     bearer token (optional)
    FLINKTUNE_PROMETHEUS_USER      basic-auth user (optional, with _PASSWORD)
    FLINKTUNE_PROMETHEUS_PASSWORD

Secrets never appear in ``repr``, in :meth:`PrometheusEndpoint.display_url` or in any error message.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ENV_PREFIX", "EndpointError", "PrometheusEndpoint", "endpoint_from_airflow", "endpoint_from_env", "resolve_endpoint"]

ENV_PREFIX = "FLINKTUNE_PROMETHEUS_"


class EndpointError(ValueError):
    """No usable Prometheus endpoint; the message names the variable or connection (never a secret)."""


@dataclass(frozen=True)
class PrometheusEndpoint:
    """Base URL plus optional bearer token or basic auth (secrets hidden from repr)."""

    url: str
    token: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EndpointError(f"Prometheus URL must be http(s)://host[:port][/prefix], got {self.display_url()!r}")
        if parts.username or parts.password:
            raise EndpointError("put Prometheus credentials in FLINKTUNE_PROMETHEUS_USER/_PASSWORD or _TOKEN, not in the URL")

    def display_url(self) -> str:
        """The URL without any user info, for messages and logs."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def api(self, path: str) -> str:
        return self.url.rstrip("/") + path

    def headers(self) -> dict[str, str]:
        """HTTP headers carrying the credentials (empty without any)."""
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.username is not None:
            pair = f"{self.username}:{self.password or ''}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode()}
        return {}


def endpoint_from_env(environ: Mapping[str, str] | None = None) -> PrometheusEndpoint:
    """The endpoint from ``FLINKTUNE_PROMETHEUS_*`` variables (see the module docstring)."""
    from flinktune.settings import PrometheusSettings, SettingsError, read_group

    try:
        s = read_group(PrometheusSettings, environ)
    except SettingsError as exc:
        raise EndpointError(str(exc)) from None
    if not s.url:
        raise EndpointError(f"no Prometheus endpoint: set {ENV_PREFIX}URL or pass an Airflow connection id")
    return PrometheusEndpoint(
        url=s.url,
        token=s.token.get_secret_value() if s.token else None,
        username=s.user or None,
        password=s.password.get_secret_value() if s.password else None,
    )


def endpoint_from_airflow(conn_id: str) -> PrometheusEndpoint:
    """The endpoint of Airflow connection ``conn_id`` (host may carry the scheme; ``extra.token`` = bearer)."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # Airflow raises its own not-found types across versions
        raise EndpointError(f"Airflow connection {conn_id!r} cannot be read: {type(exc).__name__}") from None
    host = conn.host or ""
    scheme = conn.conn_type if conn.conn_type in ("http", "https") else "http"
    base = host if "://" in host else f"{scheme}://{host}"
    if conn.port:
        base = f"{base.rstrip('/')}:{conn.port}"
    if conn.schema:
        base = f"{base.rstrip('/')}/{conn.schema.strip('/')}"
    try:
        extra = json.loads(conn.extra) if conn.extra else {}
    except ValueError:
        raise EndpointError(f"Airflow connection {conn_id!r}: extra is not JSON") from None
    return PrometheusEndpoint(url=base, token=extra.get("token"), username=conn.login or None, password=conn.password or None)


def resolve_endpoint(conn_id: str | None = None, environ: Mapping[str, str] | None = None) -> PrometheusEndpoint:
    """The Airflow connection ``conn_id``; without one, the connection ``FLINKTUNE_PROMETHEUS_CONN_ID`` names
    (how a scheduled ingest reaches Prometheus in production); without that, the URL and credentials of the
    environment."""
    from flinktune.settings import PrometheusSettings, SettingsError, read_group

    if not conn_id:
        try:
            conn_id = read_group(PrometheusSettings, environ).conn_id
        except SettingsError as exc:
            raise EndpointError(str(exc)) from None
    return endpoint_from_airflow(conn_id) if conn_id else endpoint_from_env(environ)
