"""MLflow pyfunc wrapper for surrogates: raw knob values and a rate in, per-outcome Gaussians out.

Use :class:`SurrogatePyfunc` when logging a fitted :class:`GPSurrogate` or :class:`RGPESurrogate`
with ``models.registry``; log it with ``artifacts={"model": <file written by its save>}`` (the
file's ``kind`` picks the class on load). The wrapper is built with
the knob column names and their (low, high) bounds, so callers outside Python-land can send raw
values: each input row has one column per knob plus ``rate`` (rec/s); knobs are scaled to [0, 1]
as ``(v - low) / (high - low)``. The output has one row per input row and, per outcome,
``<outcome>_mean`` and ``<outcome>_std`` (model space, observation noise included) and
``<outcome>_median`` (the outcome's own unit). After loading, ``.model`` is the surrogate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel

from models.surrogate.types import SurrogateInputError

__all__ = ["SurrogatePyfunc", "load_surrogate"]


def load_surrogate(path, *, device: str = "cpu"):
    """A surrogate saved by ``GPSurrogate.save`` or ``RGPESurrogate.save``, by the ``kind`` in its state."""
    import torch

    from models.surrogate.gp import GPSurrogate
    from models.surrogate.rgpe_surrogate import RGPESurrogate

    state = torch.load(path, map_location="cpu", weights_only=True)
    kinds: dict[str, type[GPSurrogate] | type[RGPESurrogate]] = {GPSurrogate.name: GPSurrogate, RGPESurrogate.name: RGPESurrogate}
    kind = state.get("kind") if isinstance(state, dict) else None
    if kind not in kinds:
        raise ValueError(f"surrogate file {path}: unknown kind {kind!r}; expected one of {sorted(kinds)}")
    return kinds[kind].from_state(state, device=device)


class SurrogatePyfunc(PythonModel):
    """Pyfunc face of a saved GPSurrogate or RGPESurrogate (artifact key ``"model"``)."""

    def __init__(self, feature_names: Sequence[str], bounds: Sequence[tuple[float, float]]) -> None:
        if len(feature_names) != len(bounds):
            raise ValueError(f"{len(feature_names)} feature names but {len(bounds)} bounds")
        self.feature_names = list(feature_names)
        self.bounds = [(float(lo), float(hi)) for lo, hi in bounds]
        self.model: Any = None

    def load_context(self, context) -> None:
        self.model = load_surrogate(context.artifacts["model"], device="cpu")

    def normalise(self, frame: pd.DataFrame) -> np.ndarray:
        """Knob columns of ``frame`` scaled to [0, 1] with the stored bounds, shape (n, d)."""
        missing = [c for c in [*self.feature_names, "rate"] if c not in frame.columns]
        if missing:
            raise SurrogateInputError(f"surrogate input: missing column(s) {missing}; expected {[*self.feature_names, 'rate']}")
        raw = frame[self.feature_names].to_numpy(dtype="float64")
        lo = np.array([b[0] for b in self.bounds])
        span = np.array([b[1] - b[0] for b in self.bounds])
        return np.where(span > 0, (raw - lo) / np.where(span > 0, span, 1.0), 0.0)

    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        X = self.normalise(model_input)
        rates = model_input["rate"].to_numpy(dtype="float64")
        bad = ~np.isfinite(rates) | (rates < 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise SurrogateInputError(f"surrogate input: row {i} has rate {rates[i]!r}; need a finite rec/s >= 0")
        outcomes = self.model.outcomes
        cols = {f"{o}_{k}": np.empty(len(X)) for o in outcomes for k in ("mean", "std", "median")}
        # One posterior call per distinct rate: candidates are usually scored at a single rate.
        for rate in np.unique(rates):
            rows = np.flatnonzero(rates == rate)
            pred = self.model.predict(X[rows], float(rate))
            for j, o in enumerate(outcomes):
                cols[f"{o}_mean"][rows] = pred.mean[:, j]
                cols[f"{o}_std"][rows] = pred.std[:, j]
                cols[f"{o}_median"][rows] = pred.median(o)
        return pd.DataFrame(cols, index=model_input.index)
