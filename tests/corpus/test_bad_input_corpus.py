"""The bad-input and fault corpus: every case of ``cases.yaml`` through a real entry point, one runner.

Each case names what runs (``run``: the ``flinktune`` CLI in process, a ``python -m jobs.<name>``
main, the settings start-up check, a fleet file, a quantity check, the redaction of a message,
a log record or a decision's reason), the files and environment it gets, and its expected outcome:

- ``refused``: exit code 2 and exactly one line on stderr, ``error: ...``, holding ``says``;
- ``held``: the fleet keeps the job out of management, or the guard holds a planned scale-down over
  a faulty metrics window (``gate``, every setting at its default), with a reason holding ``says``;
- ``accepted``: exit code 0 (``says``, when given, appears in the output: a dropped row named); ``wrote``
  maps a glob under ``{tmp}`` to text the file it matches must hold (a report written, saying why).

For every case: no traceback, no "unexpected ... (a bug)", no hang (an alarm stops a case after
60 s; a refusal takes under 15 s), no credential (``S3CRETpw``) in any output, and no code from a
crafted model file run (the file its pickle would create is absent). ``{tmp}`` is the case's
folder, ``{in}`` its input files, ``{var}`` a state folder (``state/`` present, nothing else; ``state: report`` adds
a job ``demo``'s curated features and decisions, :func:`tests.report_state.state_folder`); ``server: html`` starts a
local server answering a login page, at ``{port}``, ``server: silent`` one that accepts connections and never
answers, ``server: refused`` names a port nothing listens on.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import pickle
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from typer.testing import CliRunner

from flinktune import quantities
from flinktune.cli.main import app
from flinktune.entry import run_main

CASES: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "cases.yaml").read_text())
SECRET = "S3CRETpw"
#: A refusal is checked before any work: it comes at once (a rehearsal used to start its stack first).
REFUSAL_S = 15.0


class Outcome(NamedTuple):
    code: int
    stdout: str
    stderr: str


class _Planted:
    """A pickle whose loading creates a file: what a crafted model file does."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.marker, "w"))


def _fill(value: str, tmp: Path, port: int = 0) -> str:
    out = value.replace("{tmp}", str(tmp)).replace("{in}", str(tmp / "in")).replace("{var}", str(tmp / "var"))
    return out.replace("{port}", str(port))


@contextlib.contextmanager
def _server(kind: str | None) -> Iterator[int]:
    """``html``: a 127.0.0.1 server answering every GET with a login page (a proxy in front of an API);
    ``silent``: a port whose connections are accepted (by the kernel) and never answered; ``refused``: a
    port nothing listens on."""
    if kind is None:
        yield 0
        return
    if kind in ("silent", "refused"):
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            if kind == "silent":
                listener.listen(8)
                yield listener.getsockname()[1]
                return
            port = listener.getsockname()[1]
        yield port  # closed: refused
        return
    import http.server
    import threading

    class Html(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>Please sign in</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Html)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _write_files(files: dict[str, Any], tmp: Path, port: int = 0) -> None:
    for name, body in files.items():
        path = tmp / "in" / name
        if isinstance(body, dict):
            from flinktune.signing import MAGIC

            payload = pickle.dumps(_Planted(str(tmp / "pwned")))
            data = {"crafted_pickle": payload, "forged_pickle": MAGIC + b"0" * 64 + b"\n" + payload}[body["make"]]
            path.write_bytes(data)
        else:
            path.write_text(_fill(body, tmp, port))


@contextlib.contextmanager
def _captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def _faulty_window(fault: str, window: int, now: int) -> Any:
    """A window of raw samples ending at ``now`` with one fault, as the decide job would fetch it."""
    import pandas as pd

    from flinktune.decision.testing import raw_samples

    df = raw_samples("j", now - window, window, rate=30000, lag=500, p95=180)
    if fault != "frozen":  # live values move every second, as a refreshing pipeline's do
        wiggle = (df["ts_ms"] // 1000 % 7).astype(float)
        df.loc[df["metric"].isin(["workloadRate", "latencyP95Ms"]), "value"] += wiggle
    rate = df[df["metric"] == "workloadRate"]
    if fault == "stale":
        df = df[df["ts_ms"] < (now - 600) * 1000] if window > 600 else df.assign(ts_ms=df["ts_ms"] - 900_000)
    elif fault == "duplicates":
        df = pd.concat([df, rate], ignore_index=True)
    elif fault == "cpu-in-percent":
        df.loc[df["metric"] == "cpuLoad", "value"] = 400.0
    elif fault == "heap-in-bytes":
        df.loc[df["metric"] == "heapUsedMb", "value"] = 2048.0 * 2**20
    elif fault == "latency-in-seconds":
        df.loc[df["metric"].isin(["latencyP95Ms", "latencyP50Ms"]), "value"] = 0.18
    elif fault == "parallelism-16-on-24":
        df = pd.concat([df, rate.assign(metric="configParallelism", value=16.0)], ignore_index=True)
    elif fault == "nan-values":
        df.loc[df["metric"] == "workloadRate", "value"] = float("nan")
    elif fault == "missing-rate":
        df = df[df["metric"] != "workloadRate"]
    elif fault == "job-stopped":
        df.loc[df["metric"] == "jobRunning", "value"] = 0.0
    elif fault != "frozen":
        raise AssertionError(f"unknown fault {fault!r}")
    return df


def _gate(fault: str) -> str:
    """The guard's decision on a planned scale-down over a faulty window, everything at its defaults."""
    from flinktune.config_space import Configuration, default_space
    from flinktune.decision import Action, Decision
    from flinktune.decision.evaluation import evaluate
    from flinktune.decision.guard import SafetyGuard
    from flinktune.runs.decide_cluster import FROZEN_AFTER_S
    from flinktune.settings import Settings

    s, space = Settings(), default_space()
    now = 100_000
    state = evaluate("j", _faulty_window(fault, s.decision_interval_s, now), space.maximum, now,
                     window_s=s.decision_interval_s, frozen_after_s=FROZEN_AFTER_S)  # fmt: skip
    planned = Decision(Action.RECONFIGURE, "scale down", "policy", target=Configuration(8, 4, 1.0, 1024, 30))
    decision = SafetyGuard(space, s.latency_target_ms).review(planned, state, now)
    return decision.reason if decision.action is Action.KEEP else ""


def _all_settings() -> None:
    from flinktune.pricing import load_prices
    from flinktune.settings import load_settings

    load_settings()
    load_prices()


def _run(case: dict[str, Any], tmp: Path, monkeypatch: pytest.MonkeyPatch, port: int = 0) -> Outcome:
    kind, *args = case["run"]
    args = [_fill(a, tmp, port) for a in args]
    env = {k: _fill(v, tmp, port) for k, v in (case.get("env") or {}).items()}
    if kind == "flinktune":
        res = CliRunner().invoke(app, args, env=env)
        return Outcome(res.exit_code, res.stdout, res.stderr)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with _captured() as (out, err):
        if kind.startswith("jobs."):
            code = importlib.import_module(kind).main(args)
        elif kind == "settings":
            code = run_main("settings", lambda _: _all_settings(), [])
        elif kind == "quantity":
            name, value = args
            target = getattr(quantities, name)
            if isinstance(target, quantities.Quantity):
                code = run_main("quantity", lambda _: quantities.check(target, value, "value"), [])
            else:
                code = run_main("quantity", lambda _: target(value, "value"), [])
        elif kind == "gate":
            reason = _gate(args[0])
            print(reason or "applied")
            code = 3 if reason else 0
        elif kind == "fleet-file":
            from flinktune.fleet import load_fleet_file

            entry = load_fleet_file(Path(args[0])).get(args[1])
            print(entry.held or "managed")
            code = 0 if entry.managed else 3
        elif kind == "redact":
            from flinktune.redaction import redact

            print(redact(args[0]))
            code = 0
        elif kind == "decision-reason":
            import json

            from flinktune.decision import Decision

            print(json.dumps(Decision.keep("probe", f"hold: {args[0]}").to_dict()))
            code = 0
        elif kind == "log":
            from flinktune.redaction import install_log_redaction

            install_log_redaction()
            buffer = io.StringIO()
            handler = logging.StreamHandler(buffer)
            log = logging.getLogger("flinktune.corpus")
            log.addHandler(handler)
            try:
                log.warning("%s", args[0])
            finally:
                log.removeHandler(handler)
            print(buffer.getvalue())
            code = 0
        else:
            raise AssertionError(f"unknown kind {kind!r}")
    return Outcome(code, out.getvalue(), err.getvalue())


def _alarm(signum: int, frame: object) -> None:
    raise TimeoutError("the case hung (over 60 s)")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "var" / "state").mkdir(parents=True)
    if case.get("state") == "report":
        from tests.report_state import state_folder

        state_folder(tmp_path / "var", "demo")
    monkeypatch.chdir(tmp_path)  # a default var/ or model file lands in the case's folder
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)
    t0 = time.monotonic()
    try:
        with _server(case.get("server")) as port:
            _write_files(case.get("files") or {}, tmp_path, port)
            got = _run(case, tmp_path, monkeypatch, port)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    wall = time.monotonic() - t0
    text = got.stdout + got.stderr
    assert "Traceback" not in text and "(a bug;" not in text, text
    assert SECRET not in text, f"a credential was shown: {text}"
    assert not (tmp_path / "pwned").exists(), "a crafted model file ran code"
    says = _fill(case.get("says", ""), tmp_path, port)
    if case["expect"] == "refused":
        lines = [line for line in got.stderr.splitlines() if line.strip()]
        assert got.code == 2, f"exit {got.code}; {text}"
        assert len(lines) == 1 and lines[0].startswith("error:"), got.stderr
        assert says in lines[0], f"{says!r} not in {lines[0]!r}"
        assert wall < REFUSAL_S, f"refused after {wall:.0f} s"
    elif case["expect"] == "held":
        assert got.code == 3 and says in got.stdout, text
    else:
        assert case["expect"] == "accepted"
        assert got.code == 0, text
        assert says in text, f"{says!r} not in {text!r}"
    for pattern, holds in (case.get("wrote") or {}).items():
        found = sorted(tmp_path.glob(pattern))
        assert found, f"nothing written at {pattern}"
        assert _fill(holds, tmp_path, port) in found[-1].read_text(), f"{holds!r} not in {found[-1]}"


def test_the_corpus_is_large_and_covers_every_entry_point() -> None:
    kinds = {c["run"][0] if c["run"][0] != "flinktune" else " ".join(c["run"][:2]) for c in CASES}
    assert len(CASES) >= 250 and len({c["id"] for c in CASES}) == len(CASES)
    for needed in ("settings", "flinktune replay", "flinktune rehearse", "flinktune twin", "flinktune report", "flinktune fleet",
                   "jobs.decide", "jobs.extract_metrics", "fleet-file", "gate", "quantity", "redact", "decision-reason", "log"):  # fmt: skip
        assert needed in kinds, needed
