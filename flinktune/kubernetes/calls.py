"""Bounded Kubernetes API calls: a client whose every request has a timeout and bounded retries.

Use :func:`bounded_api` wherever a ``CustomObjectsApi`` is made (:func:`flinktune.backends.cluster.kubernetes_api`,
the tests' local API server), and pass :func:`request_timeout` as ``_request_timeout`` on each call.
Retries are urllib3's own ``Retry`` on the client's pool: connection errors are retried for every
verb (nothing was sent), read timeouts and HTTP 5xx only for GET (a PATCH that timed out may have
landed: the decision loop's write-ahead row and reconciliation settle it, not a blind resend).
"""

from __future__ import annotations

from typing import Any

from flinktune.http_retry import retry_policy

__all__ = ["bounded_api", "request_timeout"]

#: Server answers worth another read: the API server or a proxy in front of it was briefly unavailable.
_RETRY_STATUS = (500, 502, 503, 504)


def request_timeout(seconds: float) -> tuple[float, float]:
    """The ``_request_timeout`` of one call: (connect, read) seconds."""
    if not seconds > 0:
        raise ValueError(f"kubernetes request timeout must be > 0 s, got {seconds}")
    return (float(seconds), float(seconds))


def bounded_api(configuration: Any, *, retries: int) -> Any:
    """A ``kubernetes.client.CustomObjectsApi`` on ``configuration`` (copied) with :func:`flinktune.http_retry.retry_policy` (short backoff)."""
    import copy

    from kubernetes import client

    cfg = copy.copy(configuration)
    cfg.retries = retry_policy(retries, service="kubernetes", statuses=_RETRY_STATUS, backoff_s=0.1)
    return client.CustomObjectsApi(client.ApiClient(cfg))
