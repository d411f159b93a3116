"""Input-rate traces for the twin: seeded generators, bursts and trace files.

Use :func:`generate_trace` for the two workloads of the benchmark ("ysb": irregular, about
17k-88k rec/s over 18 h with regimes, plateaus, ramps, noise and spikes; "tsw": about 30k-113k
rec/s, a 6 h period wave plus noise), :func:`inject_bursts` to add sudden steps, and
:func:`load_trace_csv` for a recorded trace (``timestamp,value`` or Demeter's ``timestamp|value``).

Every trace is a ``pd.Series`` named ``rate``: float rec/s on a tz-aware UTC DatetimeIndex at a
regular step (1 s unless asked otherwise).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from flinktune.limits import MAX_RATE

__all__ = ["WORKLOADS", "TraceError", "generate_trace", "inject_bursts", "load_trace_csv"]

#: Workload kinds and their nominal (low, high) rate over an 18 h trace, rec/s.
WORKLOADS: dict[str, tuple[float, float]] = {"ysb": (17_000.0, 88_000.0), "tsw": (30_000.0, 113_000.0)}
#: The shortest trace accepted by default: one decision interval (Settings.decision_interval_s), seconds.
MIN_TRACE_S = 600.0
_DEFAULT_START = pd.Timestamp("2024-01-01T00:00:00Z")


class TraceError(ValueError):
    """A trace cannot be used; the message names the file and line (or the argument)."""


def _smooth(x: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or x.size < 2:
        return x
    kernel = np.ones(window) / window
    padded = np.pad(x, (window // 2, window - 1 - window // 2), mode="edge")
    return np.convolve(padded, kernel, mode="valid")


def _ysb_shape(n: int, rng: np.random.Generator) -> np.ndarray:
    """Regimes of 20-90 min at random levels joined by ramps or steps, in [0, 1]."""
    level = np.empty(n)
    t, prev = 0, rng.uniform(0.3, 0.6)
    while t < n:
        seg = int(rng.uniform(20, 90) * 60)
        target = float(np.clip(prev + rng.normal(0.0, 0.35), 0.0, 1.0))
        ramp = min(seg, int(rng.uniform(0, 25) * 60)) if rng.random() < 0.7 else 0
        end = min(n, t + seg)
        k = np.arange(end - t)
        if ramp:
            level[t:end] = np.where(k < ramp, prev + (target - prev) * k / ramp, target)
        else:
            level[t:end] = target
        # Plateaus drift a little inside a regime.
        level[t:end] += 0.05 * np.sin(2 * math.pi * k / max(seg, 1) * rng.uniform(0.5, 2.0) + rng.uniform(0, 6.3))
        t, prev = end, target
    return level


def _tsw_shape(n: int, rng: np.random.Generator) -> np.ndarray:
    """A 6 h period wave with a harmonic, in [0, 1]."""
    x = np.arange(n) / (6 * 3600.0)
    phase = rng.uniform(0, 2 * math.pi)
    wave = np.sin(2 * math.pi * x + phase) + 0.25 * np.sin(4 * math.pi * x + 2 * phase + 0.7)
    return (wave + 1.25) / 2.5


def _ar1(noise: np.ndarray, phi: float) -> np.ndarray:
    """``y[t] = noise[t] + phi * y[t-1]`` (y[-1] = 0): the same numbers as scipy's ``lfilter([1], [1, -phi])``,
    without loading scipy.signal (and scipy.stats with it), about a second of CPU at start-up."""
    out, y = [], 0.0
    for v in noise.tolist():
        y = v + phi * y
        out.append(y)
    return np.array(out)


def generate_trace(kind: str, hours: float, seed: int, start: pd.Timestamp | str | None = None, step_s: int = 1) -> pd.Series:
    """A seeded rate trace of ``hours`` at ``step_s`` resolution (same arguments => same trace).

    The shape is drawn at 1 s and mapped onto the workload's nominal range, so a long trace spans
    about the whole range; a short one covers part of it.
    """
    if kind not in WORKLOADS:
        raise TraceError(f"unknown workload kind {kind!r}; known: {sorted(WORKLOADS)}")
    if not hours > 0:
        raise TraceError(f"hours must be > 0, got {hours!r}")
    if step_s < 1:
        raise TraceError(f"step_s must be >= 1, got {step_s!r}")
    n = int(round(hours * 3600))
    rng = np.random.default_rng([seed, 0 if kind == "ysb" else 1])
    # Draw the shape over a whole 18 h day at least, so a trace's range does not depend on its length.
    full = max(n, 18 * 3600)
    shape = _ysb_shape(full, rng) if kind == "ysb" else _tsw_shape(full, rng)
    lo, hi = WORKLOADS[kind]
    shape = (shape - shape.min()) / max(np.ptp(shape), 1e-9)
    # AR(1) noise (minutes-scale wiggle) plus white noise (generator jitter).
    ar = _ar1(rng.normal(0.0, 0.012, full), 0.995)
    ar = ar / max(np.abs(ar).max(), 1e-9) * 0.04
    x = _smooth(shape, 30) + ar + rng.normal(0.0, 0.01, full)
    if kind == "ysb":
        for _ in range(int(full / 3600 * 1.5)):  # short spikes, about 1.5 per hour
            at, width = int(rng.integers(0, full)), int(rng.integers(5, 90))
            x[at : at + width] += rng.uniform(0.05, 0.2)
    rate = np.clip(lo + (hi - lo) * np.clip(x, -0.02, 1.02), 0.0, None)[:n][::step_s]
    t0 = pd.Timestamp(start) if start is not None else _DEFAULT_START
    t0 = t0.tz_localize("UTC") if t0.tzinfo is None else t0.tz_convert("UTC")
    index = pd.date_range(t0, periods=rate.size, freq=f"{step_s}s", name="ts")
    return pd.Series(rate.astype(float), index=index, name="rate")


def inject_bursts(
    series: pd.Series,
    seed: int,
    n: int,
    low: float = 0.2,
    high: float = 1.0,
    duration_s: tuple[int, int] | int = (120, 900),
) -> pd.Series:
    """Add ``n`` sudden steps of +``low``..+``high`` (fraction of the rate) lasting ``duration_s`` (fixed or (min, max)) seconds."""
    if not 0 <= low <= high:
        raise TraceError(f"bursts need 0 <= low <= high, got low={low}, high={high}")
    lo_d, hi_d = (duration_s, duration_s) if isinstance(duration_s, int) else duration_s
    if lo_d < 1 or hi_d < lo_d:
        raise TraceError(f"burst duration_s must be >= 1 s and (min <= max), got {duration_s!r}")
    step = (series.index[1] - series.index[0]).total_seconds() if len(series) > 1 else 1.0
    rng = np.random.default_rng([seed, 2])
    values = series.to_numpy(dtype=float).copy()
    for _ in range(n):
        length = max(1, int(round(rng.integers(lo_d, hi_d + 1) / step)))
        at = int(rng.integers(0, max(1, values.size - length)))
        values[at : at + length] *= 1.0 + rng.uniform(low, high)
    return pd.Series(values, index=series.index, name="rate")


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _parse_ts(text: str, where: str) -> float:
    if _NUMBER.match(text):
        v = float(text)
        return v / 1000.0 if v > 1e11 else v  # epoch ms vs epoch s
    try:
        ts = pd.Timestamp(text)
    except (ValueError, TypeError):
        raise TraceError(f"{where}: timestamp {text!r} is neither epoch s, epoch ms nor ISO 8601") from None
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return ts.value / 1e9


#: A column name: letters first (a timestamp or a rate never is one); "nan" and "inf" are values.
_HEADER = re.compile(r"[A-Za-z_][A-Za-z0-9_ ()/.\[\]-]*")
_NOT_NAMES = frozenset({"nan", "inf", "infinity", "-inf", "none", "null"})


def load_trace_csv(path: str | Path, scale: float = 1.0, *, min_span_s: float = MIN_TRACE_S) -> pd.Series:
    """Read ``timestamp,value`` / ``timestamp|value`` lines (optional header) into a 1 s trace.

    Timestamps may be epoch seconds, epoch milliseconds or ISO 8601; the step must be regular (any
    size); values are rec/s, multiplied by ``scale`` and linearly interpolated onto a 1 s grid.
    Raises :class:`TraceError` naming the file and line for a malformed line, a timestamp that does
    not increase, a negative, NaN or unphysical rate (:data:`flinktune.limits.MAX_RATE`), an
    irregular step, an empty file or a trace shorter than ``min_span_s`` (one decision interval).
    """
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read trace: {exc}") from None
    times: list[float] = []
    values: list[float] = []
    header: str | None = None
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        parts = [p.strip() for p in re.split(r"[,|]", line)]
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise TraceError(f"{where}: expected 'timestamp,value' or 'timestamp|value', got {raw!r}")
        if not times and header is None and all(_HEADER.fullmatch(p) and p.lower() not in _NOT_NAMES for p in parts):
            header = line  # the header line: two column names, nothing that could be data
            continue
        try:
            value = float(parts[1])
        except ValueError:
            raise TraceError(f"{where}: value {parts[1]!r} is not a number") from None
        if not math.isfinite(value) or value < 0 or value * scale >= MAX_RATE:
            raise TraceError(f"{where}: rate {parts[1]!r} must be a finite number >= 0 and below {MAX_RATE:g} rec/s")
        ts = _parse_ts(parts[0], where)
        if times and ts <= times[-1]:
            raise TraceError(f"{where}: timestamp {parts[0]!r} does not increase (previous line is later or equal)")
        if len(times) >= 2:
            step, gap = times[1] - times[0], ts - times[-1]
            if abs(gap - step) > max(1e-3, 0.01 * step):
                raise TraceError(f"{where}: irregular step of {gap:g} s; the trace's step is {step:g} s")
        times.append(ts)
        values.append(value * scale)
    if not times:
        raise TraceError(f"{path}: empty trace (no data lines)")
    t = np.asarray(times)
    # A 1-row or 1-ms-step trace would replay as one second: too short to decide anything on.
    if t[-1] - t[0] < min_span_s:
        raise TraceError(
            f"{path}: the trace spans {t[-1] - t[0]:g} s ({len(t)} line(s)); at least {min_span_s:g} s "
            "(one decision interval) is needed; check the timestamps' unit"
        )
    grid = np.arange(math.ceil(t[0]), math.floor(t[-1]) + 1, dtype=np.int64)
    if grid.size == 0:
        raise TraceError(f"{path}: the trace spans less than one whole second")
    rate = np.interp(grid.astype(float), t, np.asarray(values))
    index = pd.DatetimeIndex(pd.to_datetime(grid, unit="s", utc=True), name="ts")
    return pd.Series(rate, index=index, name="rate")
