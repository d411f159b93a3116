"""A lower bound on the ysb 10-minute peak MAE: an oracle that knows the generator's state.

Run: ``.venv/bin/python -m benchmarks.forecasting.forecast_bound [--seeds 7,8,9] [--sims 1000] [--hours 18]
[--train-hours 12]``. Prints one JSON line per seed and a Markdown table.

Use it to tell whether a forecasting target on the twin's ysb trace is reachable at all. The oracle
knows more than any forecaster that reads the trace: the generator's draws up to the origin (every
regime segment that has begun, with its level, remaining length, ramp and drift sinusoid; the
AR(1) noise's current value; every spike that has begun, so a spike in progress and the number of
spikes still to come), and the constants the generator fixes from the whole 18 h (the shape's
min/range and the AR scale). It does not know the future draws: the next segment's target, length,
ramp and drift, future AR innovations, white noise, and where, how wide and how high future spikes
are. For each origin it simulates ``--sims`` futures from that conditional distribution and
predicts the median of their 10-minute peaks (the MAE-optimal point forecast under that
distribution). Origins and truth are those of ``benchmarks/forecasting/forecasting.py``: an origin every
minute from ``--train-hours`` while ten whole 60 s bins follow; peak = the highest of the next ten
60 s bin means of the true trace. MAE is reported on all those origins and on the last two thirds
of them (the report span of the older backtest, whose Demeter figures are in
docs/results/forecasting.md). A second, weaker oracle (``oracle_no_end``) does not know when the
current regime ends (its length is drawn given how long it has lasted); it still knows the
regime's drift, whose period depends on that length, so it is a diagnostic of what the regime's
end is worth, not a strict bound.

Why it bounds every model: a forecaster that reads only the past trace has less information than
the oracle, so its expected absolute error cannot be lower than that of the best predictor given
the oracle's information, which the simulated median approximates. Two approximations: the oracle
does not condition future draws on what the whole-trace constants reveal (e.g. that the shape must
still reach its maximum), and the median of ``--sims`` draws carries Monte Carlo error; both can
only make the oracle's MAE slightly higher than the exact bound.

:func:`draw_ysb` re-draws the generator's random numbers in the order
``flinktune.twin.workload.generate_trace`` draws them and keeps them as state; :func:`compose_ysb`
turns them back into the trace (tested equal to ``generate_trace`` bit for bit).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

from flinktune.twin.workload import WORKLOADS

__all__ = ["Segment", "YsbDraws", "compose_ysb", "draw_ysb", "main", "oracle_peaks"]

_DAY_S = 18 * 3600  # the generator draws the shape over 18 h at least
_AR_POLE, _AR_SD, _AR_PEAK, _WHITE_SD, _SMOOTH = 0.995, 0.012, 0.04, 0.01, 30
_BIN_S, _HORIZON_BINS = 60, 10


@dataclass(frozen=True)
class Segment:
    """One ysb regime: seconds ``[start, end)`` (``end`` cut at the trace end), drawn length ``seg``."""

    start: int
    end: int
    seg: int
    prev: float
    target: float
    ramp: int
    freq: float
    phase: float

    def level(self, k: np.ndarray) -> np.ndarray:
        """The regime's level ``k`` seconds after its start (any shape of ``k``), before normalising."""
        if self.ramp:
            base = np.where(k < self.ramp, self.prev + (self.target - self.prev) * k / self.ramp, self.target)
        else:
            base = np.full(k.shape, self.target)
        return base + 0.05 * np.sin(2 * math.pi * k / max(self.seg, 1) * self.freq + self.phase)


@dataclass(frozen=True)
class YsbDraws:
    """Every random draw of one ysb trace: ``n`` seconds asked, ``full`` drawn; ``spikes`` rows (at, width, amp)."""

    n: int
    full: int
    segments: list[Segment]
    ar_innovations: np.ndarray
    white: np.ndarray
    spikes: np.ndarray

    def level(self) -> np.ndarray:
        """The raw shape (``_ysb_shape``'s output) over ``full`` seconds."""
        out = np.empty(self.full)
        for s in self.segments:
            out[s.start : s.end] = s.level(np.arange(s.end - s.start))
        return out


def draw_ysb(seed: int, hours: float) -> YsbDraws:
    """The draws of ``generate_trace("ysb", hours, seed)``, in the generator's order."""
    n = int(round(hours * 3600))
    full = max(n, _DAY_S)
    rng = np.random.default_rng([seed, 0])
    segments: list[Segment] = []
    t, prev = 0, rng.uniform(0.3, 0.6)
    while t < full:
        seg = int(rng.uniform(20, 90) * 60)
        target = float(np.clip(prev + rng.normal(0.0, 0.35), 0.0, 1.0))
        ramp = min(seg, int(rng.uniform(0, 25) * 60)) if rng.random() < 0.7 else 0
        end = min(full, t + seg)
        freq = rng.uniform(0.5, 2.0)
        phase = rng.uniform(0, 6.3)
        segments.append(Segment(t, end, seg, float(prev), target, ramp, float(freq), float(phase)))
        t, prev = end, target
    ar_innovations = rng.normal(0.0, _AR_SD, full)
    white = rng.normal(0.0, _WHITE_SD, full)
    spikes = []
    for _ in range(int(full / 3600 * 1.5)):
        at, width = int(rng.integers(0, full)), int(rng.integers(5, 90))
        spikes.append((at, width, rng.uniform(0.05, 0.2)))
    return YsbDraws(n, full, segments, ar_innovations, white, np.array(spikes, dtype=float).reshape(-1, 3))


def _smooth(x: np.ndarray, window: int) -> np.ndarray:
    # The generator's centred moving average: output t averages x[t - window//2 : t + window - window//2].
    kernel = np.ones(window) / window
    padded = np.pad(x, (window // 2, window - 1 - window // 2), mode="edge")
    return np.convolve(padded, kernel, mode="valid")


@dataclass(frozen=True)
class _Constants:
    """What the generator fixes from the whole trace: shape min and range, AR scale, rate range."""

    shape_min: float
    shape_ptp: float
    ar_scale: float
    lo: float
    hi: float


def _constants(draws: YsbDraws, ar: np.ndarray) -> _Constants:
    level = draws.level()
    lo, hi = WORKLOADS["ysb"]
    return _Constants(float(level.min()), max(float(np.ptp(level)), 1e-9), _AR_PEAK / max(float(np.abs(ar).max()), 1e-9), lo, hi)


def compose_ysb(draws: YsbDraws) -> np.ndarray:
    """The 1 s rate trace (``n`` values) the draws make, computed as ``generate_trace`` does."""
    level = draws.level()
    shape = (level - level.min()) / max(np.ptp(level), 1e-9)
    ar = lfilter([1.0], [1.0, -_AR_POLE], draws.ar_innovations)
    ar = ar / max(np.abs(ar).max(), 1e-9) * _AR_PEAK
    x = _smooth(shape, _SMOOTH) + ar + draws.white
    for at, width, amp in draws.spikes:
        x[int(at) : int(at) + int(width)] += amp
    lo, hi = WORKLOADS["ysb"]
    return np.clip(lo + (hi - lo) * np.clip(x, -0.02, 1.02), 0.0, None)[: draws.n]


def _future_shape(
    draws: YsbDraws, c: _Constants, level: np.ndarray, origin: int, sims: int, rng: np.random.Generator, hide_end: bool = False
) -> np.ndarray:
    """Smoothed, normalised shape over ``[origin, origin + horizon)`` for each simulation: (sims, horizon).

    ``hide_end``: the current regime's end is drawn afresh (its length given that it has lasted
    so far) instead of known; its level path, ramp and drift stay known.
    """
    h = _BIN_S * _HORIZON_BINS
    before, after = _SMOOTH // 2, _SMOOTH - 1 - _SMOOTH // 2
    # Seconds the smoother reads, clamped to the trace as its edge padding does.
    secs = np.clip(np.arange(origin - before, origin + h + after), 0, draws.full - 1)
    # Segments that began by origin + after shaped the trace seen before the origin: the oracle knows them.
    last = [s for s in draws.segments if s.start <= origin + after][-1]
    if hide_end:
        elapsed = max(origin - last.start, 0)
        u = rng.uniform(max(20.0, (elapsed + 1) / 60), 90.0, sims)  # U(20, 90) min given int(60 u) > elapsed
        end = np.minimum(draws.full, last.start + (u * 60).astype(int))
    else:
        end = np.full(sims, last.end)
    # Before the current regime: the true level; in it: its formula (also past a hidden end's true value).
    path = np.where(secs < last.start, level[secs], last.level(np.maximum(secs - last.start, 0)))
    path = np.broadcast_to(path, (sims, secs.size)).copy()
    k = (secs[None, :] - end[:, None]).astype(float)
    unknown = k >= 0
    if unknown.any():
        # Segments last >= 20 min, so at most one new one begins inside a 10-minute window.
        prev = last.target
        target = np.clip(prev + rng.normal(0.0, 0.35, sims), 0.0, 1.0)[:, None]
        seg = (rng.uniform(20, 90, sims) * 60).astype(int)[:, None]
        ramped = rng.random(sims) < 0.7
        ramp = np.where(ramped, np.minimum(seg[:, 0], (rng.uniform(0, 25, sims) * 60).astype(int)), 0)[:, None]
        freq, phase = rng.uniform(0.5, 2.0, sims)[:, None], rng.uniform(0, 6.3, sims)[:, None]
        base = np.where(k < ramp, prev + (target - prev) * k / np.maximum(ramp, 1), target)
        new = base + 0.05 * np.sin(2 * math.pi * k / np.maximum(seg, 1) * freq + phase)
        path = np.where(unknown, new, path)
    path = (path - c.shape_min) / c.shape_ptp
    csum = np.cumsum(np.pad(path, ((0, 0), (1, 0))), axis=1)
    return (csum[:, _SMOOTH:] - csum[:, :-_SMOOTH]) / _SMOOTH


def oracle_peaks(draws: YsbDraws, origins: np.ndarray, sims: int = 1000, seed: int = 0, hide_end: bool = False) -> np.ndarray:
    """The oracle's 10-minute peak forecast (median of ``sims`` simulated futures) at each origin (seconds).

    ``hide_end`` makes it not know when the current regime ends (a diagnostic, see the module doc).
    """
    if sims < 1:
        raise ValueError(f"sims must be >= 1, got {sims}")
    h = _BIN_S * _HORIZON_BINS
    bad = (origins < 1) | (origins + h > draws.n)
    if bad.any():
        raise ValueError(f"origin {int(origins[bad][0])} s: needs 1 s of past and {h} s of trace after it (trace {draws.n} s)")
    ar = lfilter([1.0], [1.0, -_AR_POLE], draws.ar_innovations)
    c = _constants(draws, ar)
    level = draws.level()
    rng = np.random.default_rng([seed, 5])
    at, width, amp = draws.spikes[:, 0].astype(int), draws.spikes[:, 1].astype(int), draws.spikes[:, 2]
    out = np.empty(origins.size)
    rows = np.arange(sims)
    for i, o in enumerate(origins.astype(int)):
        x = _future_shape(draws, c, level, o, sims, rng, hide_end)
        # AR(1) from its value at o - 1, fresh innovations after.
        e = rng.normal(0.0, _AR_SD, (sims, h))
        x += c.ar_scale * lfilter([1.0], [1.0, -_AR_POLE], e, axis=1, zi=np.full((sims, 1), _AR_POLE * ar[o - 1]))[0]
        x += rng.normal(0.0, _WHITE_SD, (sims, h))
        # Spikes begun before o are known (those still running add to every future).
        for a, w, v in zip(at[at < o], width[at < o], amp[at < o]):
            if a + w > o:
                x[:, : min(a + w, o + h) - o] += v
        # The rest are uniform over [o, full): same count, fresh places, widths and heights.
        left = int((at >= o).sum())
        if left:
            pos = rng.integers(o, draws.full, (sims, left)) - o
            wid = rng.integers(5, 90, (sims, left))
            hgt = rng.uniform(0.05, 0.2, (sims, left))
            hit = pos < h
            delta = np.zeros((sims, h + 1))
            r = np.broadcast_to(rows[:, None], pos.shape)[hit]
            np.add.at(delta, (r, pos[hit]), hgt[hit])
            np.add.at(delta, (r, np.minimum(pos[hit] + wid[hit], h)), -hgt[hit])
            x += np.cumsum(delta, axis=1)[:, :h]
        rate = np.clip(c.lo + (c.hi - c.lo) * np.clip(x, -0.02, 1.02), 0.0, None)
        peaks = rate.reshape(sims, _HORIZON_BINS, _BIN_S).mean(axis=2).max(axis=1)
        out[i] = np.median(peaks)
    return out


def _truth_peaks(trace: np.ndarray, origins: np.ndarray) -> np.ndarray:
    h = _BIN_S * _HORIZON_BINS
    return np.array([trace[o : o + h].reshape(_HORIZON_BINS, _BIN_S).mean(axis=1).max() for o in origins.astype(int)])


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="7,8,9", help="comma-separated trace seeds")
    p.add_argument("--sims", type=int, default=1000, help="simulated futures per origin")
    p.add_argument("--hours", type=float, default=18.0)
    p.add_argument("--train-hours", type=float, default=12.0, help="first origin (as benchmarks/forecasting/forecasting.py)")
    a = p.parse_args(argv)
    try:
        seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    except ValueError:
        p.error(f"--seeds: expected comma-separated integers, got {a.seeds!r}")
    if not seeds:
        p.error("--seeds: give at least one seed")
    if a.sims < 1:
        p.error(f"--sims must be >= 1, got {a.sims}")
    if not 0 < a.train_hours < a.hours:
        p.error(f"need 0 < --train-hours < --hours, got {a.train_hours}, {a.hours}")
    rows = []
    for seed in seeds:
        draws = draw_ysb(seed, a.hours)
        trace = compose_ysb(draws)
        first, h = int(round(a.train_hours * 3600)), _BIN_S * _HORIZON_BINS
        first = -(-first // _BIN_S) * _BIN_S  # origins sit on bin starts
        origins = np.arange(first, draws.n - h + 1, _BIN_S)
        if not origins.size:
            p.error(f"no origin with a whole 10-minute horizon after --train-hours {a.train_hours} in {a.hours} h")
        truth = _truth_peaks(trace, origins)
        k = max(1, int(len(origins) / 3))  # the older backtest reported the origins after its first third
        row: dict = {"seed": seed, "origins": int(len(origins)), "sims": a.sims}
        for key, hide in (("oracle", False), ("oracle_no_end", True)):
            forecast = oracle_peaks(draws, origins, a.sims, seed, hide_end=hide)
            err = np.abs(forecast - truth)
            row[f"{key}_mae_all"] = round(float(err.mean()), 1)
            # A calibration check of the simulated distribution: about half the true peaks should fall below its median.
            row[f"{key}_truth_below_median"] = round(float(np.mean(truth < forecast)), 3)
            row[f"{key}_mae_last_two_thirds"] = round(float(err[k:].mean()), 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(
        "| seed | origins | oracle peak MAE: all origins | last two thirds | regime end hidden: all origins | last two thirds |\n"
        "|---|---|---|---|---|---|"
    )
    for r in rows:
        print(
            f"| {r['seed']} | {r['origins']} | {r['oracle_mae_all']:.0f} | {r['oracle_mae_last_two_thirds']:.0f} | "
            f"{r['oracle_no_end_mae_all']:.0f} | {r['oracle_no_end_mae_last_two_thirds']:.0f} |"
        )
    return rows


if __name__ == "__main__":
    main()
