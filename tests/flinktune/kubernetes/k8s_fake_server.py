"""A local stand-in for the Kubernetes API server, for the realizer and profiling-deployment tests.

Use :class:`LocalApiServer` as the base of a test's fake: subclass ``json_http.JsonHandler`` for the
verbs the test needs, pass it to :meth:`LocalApiServer._serve`, and use the server as a context
manager (it binds 127.0.0.1 on a free port and stops on exit). :meth:`LocalApiServer.api` gives a
real ``kubernetes`` client pointed at it, so the requests the code under test sends are real HTTP
(with the production retry policy, :func:`flinktune.kubernetes.calls.bounded_api`).

:class:`FaultyDeploymentServer` serves one FlinkDeployment (GET, merge PATCH) and fails the calls a
test schedules: an HTTP status (409, 403, 500), a delay past the client's timeout (the PATCH still
lands: success the client never heard of), a hang until the server stops, or a PATCH that succeeds
followed by failing reads.
"""

from __future__ import annotations

import threading
import time
from http.server import ThreadingHTTPServer

from json_http import JsonHandler
from kubernetes import client

from flinktune.kubernetes.body import merge_patch
from flinktune.kubernetes.calls import bounded_api

__all__ = ["Fault", "FaultyDeploymentServer", "LocalApiServer"]


class LocalApiServer:
    """Owns the HTTP server thread; subclasses call :meth:`_serve` with their handler class."""

    def _serve(self, handler: type[JsonHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True  # a hung handler must not keep the test waiting at shutdown
        self.released = threading.Event()  # hanging handlers wait on this; set when the server stops
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def api(self, retries: int = 0) -> client.CustomObjectsApi:
        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        return bounded_api(cfg, retries=retries)


class Fault:
    """What the server does to one request instead of (or before) answering it."""

    def __init__(self, kind: str, status: int = 500, delay_s: float = 0.0) -> None:
        if kind not in ("status", "delay", "hang"):
            raise ValueError(f"fault kind {kind!r}: one of status, delay, hang")
        self.kind, self.status, self.delay_s = kind, status, delay_s


class FaultyDeploymentServer(LocalApiServer):
    """One FlinkDeployment behind GET and merge PATCH, with scheduled faults.

    ``faults[verb]`` is a list consumed one per request of that verb (None: answer normally);
    ``always[verb]`` applies to every request of the verb while set. After a PATCH the object reports
    ``UPGRADING`` for ``stable_after`` reads, then ``STABLE``/``RUNNING`` (never, with ``stable_after=None``).
    ``calls`` logs (verb, answer) and ``patches`` every PATCH that changed the object.
    """

    def __init__(self, obj, *, stable_after: int | None = 1) -> None:
        self.obj, self.stable_after = obj, stable_after
        self.faults: dict[str, list[Fault | None]] = {"GET": [], "PATCH": []}
        self.always: dict[str, Fault | None] = {"GET": None, "PATCH": None}
        self.calls: list[tuple[str, str]] = []
        self.patches: list[dict] = []
        self.reads_since_patch = 0
        self.lock = threading.Lock()
        srv = self

        class Handler(JsonHandler):
            def _fault(self, verb: str) -> Fault | None:
                with srv.lock:
                    queued = srv.faults[verb].pop(0) if srv.faults[verb] else None
                return queued or srv.always[verb]

            def do_GET(self):
                fault = self._fault("GET")
                if fault is not None and fault.kind == "hang":
                    srv.calls.append(("GET", "hang"))
                    srv.released.wait(30)
                    return
                if fault is not None and fault.kind == "status":
                    srv.calls.append(("GET", str(fault.status)))
                    return self._send(fault.status, {"kind": "Status", "code": fault.status, "reason": "injected"})
                with srv.lock:
                    srv.reads_since_patch += 1
                    if srv.patches and srv.stable_after is not None and srv.reads_since_patch > srv.stable_after:
                        srv.obj["status"] = {
                            "lifecycleState": "STABLE",
                            "jobStatus": {"state": "RUNNING"},
                            "observedGeneration": srv.obj["metadata"]["generation"],
                        }
                    body = srv.obj
                if fault is not None and fault.kind == "delay":
                    time.sleep(fault.delay_s)
                srv.calls.append(("GET", "200"))
                self._send(200, body)

            def do_PATCH(self):
                body = self.read_json()
                fault = self._fault("PATCH")
                if fault is not None and fault.kind == "hang":
                    srv.calls.append(("PATCH", "hang"))
                    srv.released.wait(30)
                    return
                if fault is not None and fault.kind == "status":
                    srv.calls.append(("PATCH", str(fault.status)))
                    return self._send(fault.status, {"kind": "Status", "code": fault.status, "reason": "injected"})
                with srv.lock:
                    rv = body.get("metadata", {}).get("resourceVersion")
                    if rv is not None and rv != srv.obj["metadata"]["resourceVersion"]:
                        srv.calls.append(("PATCH", "409"))
                        return self._send(409, {"kind": "Status", "code": 409, "reason": "Conflict"})
                    merged = merge_patch(srv.obj, body)
                    merged["metadata"]["resourceVersion"] = str(int(srv.obj["metadata"]["resourceVersion"]) + 1)
                    merged["metadata"]["generation"] = srv.obj["metadata"]["generation"] + 1
                    merged["status"] = {"lifecycleState": "UPGRADING"}
                    srv.obj, srv.reads_since_patch = merged, 0
                    srv.patches.append(body)
                if fault is not None and fault.kind == "delay":  # landed, but the client stops listening first
                    time.sleep(fault.delay_s)
                srv.calls.append(("PATCH", "200"))
                self._send(200, merged)

        self._serve(Handler)
