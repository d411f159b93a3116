"""A quiet JSON request handler for the local HTTP stand-ins of the tests (Kubernetes API server,
Prometheus, Flink REST).

Subclass :class:`JsonHandler` inside a test's fake server, implement the verbs it needs, and
answer with ``self._send(code, body)``; ``self.read_json()`` reads a request body. The fakes bind
127.0.0.1 on a free port and are shut down by the test that starts them.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

__all__ = ["JsonHandler"]


class JsonHandler(BaseHTTPRequestHandler):
    """Request handler that reads and writes JSON bodies and keeps the test output quiet."""

    def log_message(self, *args):
        pass

    def read_json(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def _send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
