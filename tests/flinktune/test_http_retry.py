"""The one retry policy: what is asked again, for which verb, and how a bad count is refused."""

import pytest
from urllib3.exceptions import NewConnectionError, ReadTimeoutError

from flinktune.http_retry import retry_policy


def _policy(**kw):
    return retry_policy(2, service="kubernetes", statuses=(500, 503), backoff_s=0.1, **kw)


def test_a_listed_status_is_asked_again_for_get_only():
    r = _policy()
    assert r.is_retry("GET", 503) and not r.is_retry("PATCH", 503) and not r.is_retry("GET", 404)
    assert r.total == 2 and r.respect_retry_after_header is False and not r.raise_on_status


def test_a_refused_connection_is_retried_for_every_verb_a_read_timeout_for_get_only():
    refused = NewConnectionError(None, "refused")  # type: ignore[arg-type]
    assert _policy().increment(method="PATCH", url="/x", error=refused).connect == 1
    timeout = ReadTimeoutError(None, "/x", "timed out")  # type: ignore[arg-type]
    assert _policy().increment(method="GET", url="/x", error=timeout).read == 1
    with pytest.raises(ReadTimeoutError):
        _policy().increment(method="PATCH", url="/x", error=timeout)


def test_backoff_is_capped_and_retry_after_is_the_callers_choice():
    r = retry_policy(6, service="Prometheus", statuses=(429,), backoff_s=0.5, max_backoff_s=8.0, retry_after=True)
    for _ in range(6):  # 0.5 s * 2**5 = 16 s uncapped
        r = r.increment(method="GET", url="/q", error=NewConnectionError(None, "refused"))  # type: ignore[arg-type]
    assert r.get_backoff_time() == 8.0 and r.respect_retry_after_header


def test_a_negative_count_names_the_service():
    with pytest.raises(ValueError, match=r"^Prometheus retries must be >= 0, got -1$"):
        retry_policy(-1, service="Prometheus", statuses=(503,), backoff_s=0.5)
