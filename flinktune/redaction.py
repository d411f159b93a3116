"""Secrets taken out of any text before it is shown, logged or stored.

Use :func:`redact` on every message that may quote a URL, a connection string or an exception
from a client library (a decision's reason, an error line of an entry point); call
:func:`install_log_redaction` once at start-up so that every log record is redacted too. What is
removed: a URI's user info (``http://alice:pw@host`` -> ``http://***@host``), ``password=`` /
``token=`` / ``secret=`` style pairs (query strings, JSON, connection extras) and HTTP
``Authorization`` credentials (``Bearer ...``, ``Basic ...``).
"""

from __future__ import annotations

import logging
import re

__all__ = ["MASK", "install_log_redaction", "redact"]

MASK = "***"

# scheme://user[:password]@host: the user info goes (a user name alone may be a token, too).
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@'\"]+@")
_KEYS = (
    r"(?:password|passwd|pwd|token|access_token|refresh_token|api[_.-]?key|apikey|secret|client[_.-]?secret"
    r"|access[_.-]?key|secret[_.-]?key|private[_.-]?key|auth|credentials?)"
)
# key=value, key='value', "key": "value" (JSON, connection extras); a bare "NAME: text" is a
# message naming a variable, not a pair.
_PAIR = re.compile(
    rf"""(?P<key>\b[\w.-]*{_KEYS}\s*=\s*|["'][\w.-]*{_KEYS}["']\s*:\s*)(?P<q>["'])?(?P<value>(?(q)[^"']*|[^\s,;&}}\]'"]+))""",
    re.IGNORECASE,
)
_AUTH = re.compile(r"\b(?P<kind>Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{6,}", re.IGNORECASE)


def redact(text: object) -> str:
    """``text`` (made a string) with every credential it quotes replaced by ``***``."""
    s = str(text)
    s = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", s)
    s = _PAIR.sub(lambda m: f"{m['key']}{m['q'] or ''}{MASK}" if m["value"] not in ("", MASK) else m[0], s)
    return _AUTH.sub(lambda m: f"{m['kind']} {MASK}", s)


class _Redacting(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler's own error path
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            # The traceback's text is formatted here, once, and redacted with it.
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


_FILTER = _Redacting()
_installed = False


def install_log_redaction() -> None:
    """Redact every log record from now on (idempotent): records are cleaned as they are made,
    whichever logger or handler writes them."""
    global _installed
    if _installed:
        return
    base = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = base(*args, **kwargs)  # type: ignore[arg-type]  # the factory's own signature
        _FILTER.filter(record)
        return record

    logging.setLogRecordFactory(factory)
    _installed = True
