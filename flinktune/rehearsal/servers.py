"""The rehearsal's servers: each a real process in its own process group, stopped by that group.

Use :class:`Stack` as a context manager: :meth:`Stack.start` runs one command in a new session
(so its session holds it and everything it forks: Celery's pool, Airflow's task runners, which
make process groups of their own, uvicorn's workers, Spark's executors), waits until its
readiness check passes, and records it; leaving the block (normally, on an error or on Ctrl-C)
stops every server in reverse order, its process group then the rest of its session, SIGTERM
then SIGKILL, and reports what it stopped. Nothing listens beyond 127.0.0.1 except Flink's Prometheus reporter,
which has no bind option.

The PostgreSQL and Redis servers are the machine's (127.0.0.1:5432, trust auth, user ``postgres``;
127.0.0.1:6379): :class:`Databases` creates throwaway databases and drops them at the end; Celery
is isolated by a queue of its own, not a Redis database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Databases",
    "Server",
    "Stack",
    "StackError",
    "free_port",
    "free_port_range",
    "http_ok",
    "session_members",
    "tcp_open",
]


class StackError(RuntimeError):
    """A server did not start or a service is not there; the message names it and its log."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_range(n: int, start: int = 20000, stop: int = 40000) -> int:
    """The first port of ``n`` consecutive ports free on every interface (Flink's reporter binds them all)."""
    base = start + (os.getpid() * 37) % 5000  # side-by-side rehearsals start their search apart
    for first in range(base, stop - n, n):
        socks = []
        try:
            for port in range(first, first + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("", port))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise StackError(f"no {n} consecutive free ports in [{start}, {stop})")


def tcp_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def http_ok(url: str) -> Callable[[], bool]:
    """A readiness check: ``url`` answers 2xx."""

    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                return 200 <= r.status < 300
        except OSError:
            return False

    return check


def session_members(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``. Every server starts a session of its own, and
    what it forks stays in it even in another process group: Airflow's task runner makes its own
    group (and outlives a killed Celery worker with its Spark driver JVM), so a group kill misses it."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(sid) and fields[0] != "Z":
            out.append(int(d.name))
    return out


@dataclass
class Server:
    """One started process group: its name, process, log file and when it became ready."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    ready_s: float = 0.0
    started: float = 0.0  # time.monotonic() at the start
    oneshot: bool = False  # a command that ends by design (a migration): its exit is not a failure

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM the whole group, wait, then SIGKILL whatever of the group is left."""
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        try:  # children that outlived the leader (pool workers, executors)
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):  # the session's other groups (task runners and their JVMs)
            members = session_members(self.pid)
            for pid in members:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while members and time.monotonic() < deadline:
                time.sleep(0.2)
                members = session_members(self.pid)
            if not members:
                break


@dataclass
class Stack:
    """The started servers, stopped in reverse order when the block ends (see the module docstring)."""

    logs: Path
    log: Callable[[str], None] = print
    servers: list[Server] = field(default_factory=list)
    cleanups: list[tuple[str, Callable[[], object]]] = field(default_factory=list)

    def __enter__(self) -> Stack:
        self.logs.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(
        self,
        name: str,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        ready: Callable[[], bool] | None = None,
        timeout_s: float = 120.0,
        oneshot: bool = False,
    ) -> Server:
        """Start ``cmd`` in a new session with its output in ``<logs>/<name>.log``; wait for ``ready``
        (None: return at once; :meth:`wait_ready` or :meth:`wait_exit` later lets slow starts overlap)."""
        log = self.logs / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                list(cmd),
                env=dict(env) if env is not None else None,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = Server(name, proc, log, oneshot=oneshot)
        server.started = time.monotonic()
        self.servers.append(server)  # registered first: a server that never gets ready is stopped too
        if ready is not None:
            self.wait_ready(server, ready, timeout_s)
        elif not oneshot:
            self.log(f"{name} starting (PID {proc.pid})")
        return server

    def wait_ready(self, server: Server, ready: Callable[[], bool], timeout_s: float = 120.0) -> None:
        """Wait until ``ready()`` (counted from the start); raise naming the log if it exits or times out."""
        while not ready():
            if not server.alive():
                raise StackError(
                    f"{server.name} exited with {server.proc.returncode} while starting; last lines of {server.log}:\n{server.tail()}"
                )
            if time.monotonic() - server.started > timeout_s:
                raise StackError(
                    f"{server.name} was not ready within {timeout_s:.0f} s; last lines of {server.log}:\n{server.tail()}"
                )
            time.sleep(0.5)
        server.ready_s = time.monotonic() - server.started
        self.log(f"{server.name} up (PID {server.pid}, {server.ready_s:.0f} s)")

    def wait_exit(self, server: Server, timeout_s: float = 600.0) -> None:
        """Wait for a one-shot command to end; raise naming its log unless it exited with 0."""
        try:
            rc = server.proc.wait(timeout=max(1.0, timeout_s - (time.monotonic() - server.started)))
        except subprocess.TimeoutExpired:
            raise StackError(f"{server.name} did not finish within {timeout_s:.0f} s; see {server.log}") from None
        if rc != 0:
            raise StackError(f"{server.name} failed with exit code {rc}; last lines of {server.log}:\n{server.tail()}")
        self.log(f"{server.name} done ({time.monotonic() - server.started:.0f} s)")

    def on_stop(self, what: str, fn: Callable[[], object]) -> None:
        """Run ``fn`` when the stack stops, after the servers started before it (LIFO with them)."""
        self.cleanups.append((what, fn))

    def check(self) -> None:
        """Raise naming any server that has exited."""
        dead = [s for s in self.servers if not s.oneshot and not s.alive()]
        if dead:
            s = dead[0]
            raise StackError(f"{s.name} (PID {s.pid}) exited with {s.proc.returncode}; last lines of {s.log}:\n{s.tail()}")

    def stop(self) -> list[int]:
        """Stop every server (reverse start order) and run the cleanups; returns the stopped PIDs."""
        stopped = []
        while self.servers:
            s = self.servers.pop()
            s.stop()
            stopped.append(s.pid)
            self.log(f"{s.name} stopped (PID {s.pid})")
        while self.cleanups:
            what, fn = self.cleanups.pop()
            try:
                fn()
                self.log(f"{what} done")
            except Exception as exc:  # keep stopping the rest; say what was left
                self.log(f"{what} failed: {type(exc).__name__}: {exc}")
        return stopped


@dataclass
class Databases:
    """Throwaway PostgreSQL databases on the machine's server (trust auth), dropped by :meth:`drop`."""

    host: str = "127.0.0.1"
    port: int = 5432
    user: str = "postgres"
    prefix: str = field(default_factory=lambda: f"flinktune_rehearsal_{uuid.uuid4().hex[:8]}")
    created: list[str] = field(default_factory=list)

    def _admin(self):  # type: ignore[no-untyped-def]
        import psycopg2

        try:
            con = psycopg2.connect(dbname="postgres", host=self.host, port=self.port, user=self.user, connect_timeout=5)
        except psycopg2.OperationalError as exc:
            raise StackError(f"PostgreSQL at {self.host}:{self.port} (user {self.user}) does not answer: {exc}") from None
        con.autocommit = True
        return con

    def create(self, role: str) -> str:
        """Create ``<prefix>_<role>``; returns its SQLAlchemy URL."""
        name = f"{self.prefix}_{role}"
        con = self._admin()
        try:
            with con.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            con.close()
        self.created.append(name)
        return self.url(name)

    def url(self, name: str, driver: str = "postgresql+psycopg2") -> str:
        return f"{driver}://{self.user}@{self.host}:{self.port}/{name}"

    def drop(self) -> None:
        con = self._admin()
        try:
            with con.cursor() as cur:
                for name in self.created:
                    cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            con.close()
        self.created.clear()
