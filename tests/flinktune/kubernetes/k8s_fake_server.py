"""A local stand-in for the Kubernetes API server, for the realizer and profiling-deployment tests.

Use :class:`LocalApiServer` as the base of a test's fake: subclass ``json_http.JsonHandler`` for the
verbs the test needs, pass it to :meth:`LocalApiServer._serve`, and use the server as a context
manager (it binds 127.0.0.1 on a free port and stops on exit). :meth:`LocalApiServer.api` gives a
real ``kubernetes`` client pointed at it, so the requests the code under test sends are real HTTP.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

from json_http import JsonHandler
from kubernetes import client

__all__ = ["LocalApiServer"]


class LocalApiServer:
    """Owns the HTTP server thread; subclasses call :meth:`_serve` with their handler class."""

    def _serve(self, handler: type[JsonHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def api(self) -> client.CustomObjectsApi:
        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        return client.CustomObjectsApi(client.ApiClient(cfg))
