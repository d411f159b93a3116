"""How long ``flinktune report`` takes on a finished demo folder with MLflow silent, refused and fine.

Use it on a demo's state folder (``flinktune demo --var-dir /tmp/rep-demo``) to check the report's
bound: with MLflow out of reach the report is still written, says so, and answers within seconds.
Each case runs the CLI in a fresh process (imports included, as a user sees it): ``silent`` points
the tracking URI at a local port that accepts connections and never answers, ``refused`` at a port
nothing listens on, ``fine`` at the folder's own SQLite store. Prints a Markdown table (wall
and CPU seconds, what the report said about MLflow) and exits 1 when a report was not written.

``python -m benchmarks.scale.report_time --var-dir /tmp/rep-demo [--cases silent,refused,fine] [--repeat 1]``
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["main", "time_case"]

CASES = ("silent", "refused", "fine")


def _refused_port() -> int:
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def time_case(case: str, var_dir: Path, job: str, listener: socket.socket) -> tuple[float, float, str, bool]:
    """(wall s, CPU s of the command and its workers, what the report said of MLflow, whether it was written)."""
    env = dict(os.environ)
    if case == "silent":
        env["FLINKTUNE_MLFLOW_TRACKING_URI"] = f"http://127.0.0.1:{listener.getsockname()[1]}"
    elif case == "refused":
        env["FLINKTUNE_MLFLOW_TRACKING_URI"] = f"http://127.0.0.1:{_refused_port()}"
    else:
        env.pop("FLINKTUNE_MLFLOW_TRACKING_URI", None)
    cmd = [sys.executable, "-m", "flinktune.cli", "report", "--job", job, "--var-dir", str(var_dir)]
    t0, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall, r1 = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    found = re.search(r"^report: (.+report\.md)$", res.stdout, re.M)
    written = res.returncode == 0 and found is not None and Path(found.group(1)).is_file()
    said = ""
    if written and found is not None:
        said = next((ln for ln in Path(found.group(1)).read_text().splitlines() if ln.startswith("Not logged to MLflow")), "")
    if not said and written:  # the report itself is silent on MLflow: what the command printed
        said = (
            "(printed) written without the MLflow logging"
            if "without the MLflow logging" in res.stdout + res.stderr
            else "logged"
        )
    said = said or f"exit {res.returncode}: {(res.stderr or res.stdout).strip()[-300:]}"
    return wall, cpu, said, written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--var-dir", type=Path, required=True, help="A finished demo's state folder.")
    p.add_argument("--job", default="demo")
    p.add_argument("--cases", default=",".join(CASES), help=f"Comma-separated, of {', '.join(CASES)}.")
    p.add_argument("--repeat", type=int, default=1, help="Runs per case (each a fresh process).")
    a = p.parse_args(argv)
    cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        p.error(f"--cases: unknown {bad}; known: {', '.join(CASES)}")
    if not (a.var_dir / "state").is_dir():
        p.error(f"--var-dir {a.var_dir}: no state/ folder; run `flinktune demo --var-dir {a.var_dir}` first")
    ok = True
    print("| MLflow | run | wall (s) | CPU (s) | the report says |\n|---|---|---|---|---|")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # the kernel accepts the connection; nobody ever answers it
        for case in cases:
            for k in range(a.repeat):
                wall, cpu, said, written = time_case(case, a.var_dir, a.job, listener)
                ok &= written
                print(f"| {case} | {k + 1} | {wall:.1f} | {cpu:.1f} | {said.replace('|', '/')} |", flush=True)
    try:
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    print(f"\nload average at the end: {load} on {os.cpu_count()} CPUs")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
