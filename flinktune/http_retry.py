"""The one urllib3 retry policy of flinktune's HTTP clients (the Kubernetes API, Prometheus).

Use :func:`retry_policy` wherever a client's pool or a ``requests`` adapter takes a ``Retry``: a
refused connection is retried for every verb (nothing was sent); a read timeout or one of the
given statuses only for GET (a PATCH that timed out may have landed, and the caller settles that,
not a blind resend). The last answer is returned, not raised, so the caller reports it.
"""

from __future__ import annotations

from collections.abc import Collection

from urllib3.util.retry import Retry

__all__ = ["retry_policy"]


def retry_policy(
    retries: int,
    *,
    service: str,
    statuses: Collection[int],
    backoff_s: float,
    max_backoff_s: float = Retry.DEFAULT_BACKOFF_MAX,
    jitter_s: float = 0.0,
    retry_after: bool = False,
) -> Retry:
    """``retries`` more tries against ``service`` (named in the error), waiting ``backoff_s * 2**n``
    (at most ``max_backoff_s``, plus up to ``jitter_s``) between them; ``retry_after``: honour the
    server's ``Retry-After``. ValueError when ``retries`` is negative."""
    if retries < 0:
        raise ValueError(f"{service} retries must be >= 0, got {retries}")
    return Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        other=0,
        status_forcelist=tuple(statuses),
        allowed_methods=frozenset({"GET"}),
        backoff_factor=backoff_s,
        backoff_max=max_backoff_s,
        backoff_jitter=jitter_s,
        raise_on_status=False,
        respect_retry_after_header=retry_after,
    )
