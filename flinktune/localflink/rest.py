"""A small client for Flink's REST API (JSON over HTTP on 127.0.0.1).

Use :class:`FlinkRest` for single calls (``get``/``post``/``put``, jar upload); higher-level job
control lives in ``jobcontrol``. Every failure raises :class:`RestError` naming the method, the
URL, the HTTP status and Flink's own error text, so a failed rescale says why.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

__all__ = ["FlinkRest", "RestError"]


class RestError(RuntimeError):
    """A REST call failed; ``status`` is the HTTP status (0 when the server was unreachable)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class FlinkRest:
    """JSON calls against ``http://<host>:<port>``; ``timeout_s`` bounds every call."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout_s: float = 10.0) -> None:
        self.base = f"http://{host}:{port}"
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Any:
        url = self.base + path
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            try:
                errors = json.loads(detail).get("errors", detail)
                detail = "; ".join(str(e).strip().splitlines()[0] for e in errors) if isinstance(errors, list) else str(errors)
            except (ValueError, AttributeError):
                pass
            raise RestError(f"{method} {url}: HTTP {exc.code}: {detail[:500]}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise RestError(f"{method} {url}: unreachable ({getattr(exc, 'reason', exc)})") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise RestError(f"{method} {url}: answer is not JSON: {raw[:200]!r}") from None

    def get(self, path: str) -> Any:
        return self._call("GET", path, None, {})

    def post(self, path: str, payload: Any = None) -> Any:
        return self._call("POST", path, json.dumps(payload or {}).encode(), {"Content-Type": "application/json"})

    def put(self, path: str, payload: Any) -> Any:
        return self._call("PUT", path, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    def upload_jar(self, jar: str | Path) -> str:
        """Upload a jar (multipart field ``jarfile``); returns Flink's jar id."""
        jar = Path(jar)
        boundary = uuid.uuid4().hex
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="jarfile"; filename="{jar.name}"\r\n'
                "Content-Type: application/x-java-archive\r\n\r\n"
            ).encode()
            + jar.read_bytes()
            + f"\r\n--{boundary}--\r\n".encode()
        )
        answer = self._call("POST", "/jars/upload", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})
        if not answer or answer.get("status") != "success":
            raise RestError(f"POST {self.base}/jars/upload: upload of {jar} failed: {answer}")
        return Path(answer["filename"]).name

    def reachable(self) -> bool:
        try:
            self.get("/overview")
            return True
        except RestError:
            return False
