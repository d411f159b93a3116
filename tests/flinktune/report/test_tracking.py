"""The MLflow reachability check: any HTTP answer is reachable, a refused or silent port is not, in one line
without credentials; a local store needs no check."""

from __future__ import annotations

import http.server
import socket
import threading
import time

from flinktune.report.tracking import tracking_unreachable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_any_http_answer_counts_as_reachable_and_the_path_prefix_is_kept():
    paths: list[str] = []

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert tracking_unreachable(f"http://bob:pw@127.0.0.1:{server.server_address[1]}/mlflow/", 2) == ""
    finally:
        server.shutdown()
        server.server_close()
    assert paths == ["/mlflow/health"]


def test_a_refused_or_silent_server_is_named_in_one_line_without_its_password():
    port = _free_port()
    assert tracking_unreachable(f"http://alice:S3CRETpw@127.0.0.1:{port}", 3) == (
        f"MLflow at http://127.0.0.1:{port} did not answer within 3 s (connection refused)"
    )
    assert tracking_unreachable(f"postgresql://alice:S3CRETpw@127.0.0.1:{port}/mlflow", 3) == (
        f"MLflow at postgresql://127.0.0.1:{port}/mlflow did not answer within 3 s (connection refused)"
    )
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # the kernel accepts; nothing answers
        t0 = time.monotonic()
        why = tracking_unreachable(f"https://alice:S3CRETpw@127.0.0.1:{listener.getsockname()[1]}", 0.5)
        waited = time.monotonic() - t0
    assert why.endswith("did not answer within 0.5 s (no answer)") and "S3CRETpw" not in why
    assert waited >= 0.5  # it did wait for an answer, once


def test_a_local_store_needs_no_check(tmp_path):
    assert tracking_unreachable(f"sqlite:///{tmp_path}/mlflow.db", 1) == ""
    assert tracking_unreachable(str(tmp_path / "mlruns"), 1) == ""
    assert tracking_unreachable((tmp_path / "mlruns").as_uri(), 1) == ""
