"""RGPE surrogate: per-rate-bucket GPs over the knobs, combined by rank weights for a planned rate.

Use :class:`RGPESurrogate` where :class:`~models.surrogate.gp.GPSurrogate` is used (``Surrogate``
protocol): ``fit(X (n, d), rates (n,), Y (n, len(outcomes)))``, ``predict(X (m, d), rate) ->
SurrogatePrediction``, ``state()``/``from_state()``, ``save()``/``load()``. It suits jobs profiled
at several rates, few runs per rate: what other rates showed about the *ordering* of
configurations carries over to the planned rate.

How a prediction at ``rate`` is made, per outcome:

1. Observations go to rate buckets by :class:`~models.surrogate.buckets.RateBuckets` (10k rec/s
   by default; with ``latency_limit_ms`` set, Demeter's rules also place a configuration that met
   the latency goal at a higher rate in lower buckets and one that missed it at a lower rate in
   higher buckets). Each bucket gets one GP per outcome over the knobs alone (the same
   :mod:`~models.surrogate.dataset` rules: log outcomes, NaN rows dropped, duplicates averaged).
2. The *target* bucket is the one containing ``rate``; every other bucket with at least
   ``min_base_points`` distinct points and a non-constant outcome is a base model (the
   ``max_base_models`` closest in rate when capped).
3. Fallback rule: when the target bucket has fewer than ``min_target_points`` (3) distinct points
   for the outcome, or its values there are all equal, the outcome is predicted by a *pooled* GP
   over ``[knobs, rate / rate_scale]`` on all observations (what ``GPSurrogate`` does); an
   outcome constant over all observations predicts that constant with ``constant_std``.
4. Otherwise: RGPE (:mod:`models.surrogate.rgpe`) over base models and the target GP, weights
   from ranking losses; without base models the target GP alone.

Bucket GPs are fitted in :meth:`fit`, all of them in one batched fit
(:func:`~models.surrogate.batched_fit.fit_gps`: the objective, start and optimiser of
``fit_gpytorch_mll``, without its random restarts); a refit reuses a bucket's GPs when that
bucket's training set is unchanged (new profiling at the planned rate only refits the target
bucket, warm-started from its last fit). Weights and pooled GPs are computed at the first prediction for a bucket and
cached; ``seed`` drives the rank-weight draws. ``device``: "cpu", "cuda" or "auto". Predictions
include observation noise unless ``observation_noise=False``. ``fit_info`` counts GPs fitted,
reused and ``gp_not_converged`` (optimiser stopped before its tolerances; the last iterate is
used).
"""

from __future__ import annotations

import hashlib
import warnings
from typing import Any

import gpytorch
import numpy as np
import torch

from models.surrogate.batched_fit import fit_gps
from models.surrogate.buckets import RateBuckets
from models.surrogate.dataset import check_knobs, prepare_training_data
from models.surrogate.gp import build_gp, resolve_device
from models.surrogate.outcome_models import ConstantModel, FixedRateModel
from models.surrogate.rgpe import RGPEModel, compute_rank_weights
from models.surrogate.state_file import TorchStateFile
from models.surrogate.types import OUTCOMES, SurrogateDataWarning, SurrogateInputError, SurrogatePrediction
from models.torch_threads import single_thread

__all__ = ["RGPESurrogate"]

STATE_VERSION = 1
_PARAMS = (
    "outcomes",
    "bucket_width",
    "bucket_origin",
    "latency_limit_ms",
    "min_target_points",
    "min_base_points",
    "max_base_models",
    "num_samples",
    "dilution_points",
    "seed",
    "constant_std",
    "log_floor",
)


class RGPESurrogate(TorchStateFile):
    """Rank-weighted GP ensembles across rate buckets; implements ``Surrogate`` (module doc has the rules)."""

    name = "rgpe"

    def __init__(
        self,
        *,
        outcomes: tuple[str, ...] = OUTCOMES,
        bucket_width: float = 10_000.0,
        bucket_origin: float = 0.0,
        latency_limit_ms: float | None = None,
        min_target_points: int = 3,
        min_base_points: int = 3,
        max_base_models: int | None = None,
        num_samples: int = 1024,
        dilution_points: int | None = 20,
        device: str = "cpu",
        seed: int = 0,
        constant_std: float = 0.01,
        log_floor: float = 1e-3,
    ) -> None:
        if min_target_points < 3:
            raise ValueError(f"min_target_points must be >= 3 (leave-one-out ranking), got {min_target_points}")
        self.outcomes = tuple(outcomes)
        self.buckets = RateBuckets(float(bucket_width), float(bucket_origin))
        self.bucket_width, self.bucket_origin = float(bucket_width), float(bucket_origin)
        self.latency_limit_ms = None if latency_limit_ms is None else float(latency_limit_ms)
        self.min_target_points, self.min_base_points = int(min_target_points), int(min_base_points)
        self.max_base_models = None if max_base_models is None else int(max_base_models)
        self.num_samples = int(num_samples)
        self.dilution_points = None if dilution_points is None else int(dilution_points)
        self.device, self.seed = device, int(seed)
        self.constant_std, self.log_floor = float(constant_std), float(log_floor)
        self.rate_scale: float | None = None
        self.d: int | None = None
        self._data: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._bucket_fits: dict[int, dict[str, dict[str, Any]]] = {}
        self._fit_cache: dict[str, dict[str, Any]] = {}
        self._counts = {"gp_fitted": 0, "gp_reused": 0, "gp_not_converged": 0}
        self._last_gp: dict[tuple[int, str], Any] = {}  # warm starts for refits
        self._pooled: dict[str, dict[str, Any]] = {}
        self._ensembles: dict[tuple[int, str], dict[str, Any]] = {}
        self.fit_info: dict[str, float] = {}

    @property
    def fitted(self) -> bool:
        return self._data is not None

    def _dev(self) -> torch.device:
        return resolve_device(self.device)

    # -- fitting ----------------------------------------------------------------------------------
    def fit(self, X: np.ndarray, rates: np.ndarray, Y: np.ndarray) -> RGPESurrogate:
        """Check the data (dataset rules, raising or warning once), then fit every bucket's GPs."""
        data = prepare_training_data(X, rates, Y, self.outcomes, log_floor=self.log_floor)
        X, rates, Y = np.asarray(X, "float64"), np.asarray(rates, "float64").reshape(-1), np.asarray(Y, "float64")
        ok = np.isfinite(X).all(axis=1) & np.isfinite(rates) & (rates >= 0)
        self._data = (X[ok], rates[ok], Y[ok])
        self.rate_scale, self.d = data.rate_scale, data.d
        self._pooled, self._ensembles = {}, {}
        previous = self._fit_cache
        self._fit_cache, self._bucket_fits = {}, {}
        self._counts = {"gp_fitted": 0, "gp_reused": 0, "gp_not_converged": 0}
        try:
            self._bucket_fits = self._fit_buckets([int(b) for b in np.unique(self.buckets.indices(rates[ok]))], previous)
        except BaseException:
            self._data = None  # never leave a half-fitted surrogate usable
            raise
        self.fit_info = {
            "rate_scale": data.rate_scale,
            "buckets": float(len(self._bucket_fits)),
            **{k: float(v) for k, v in self._counts.items()},
            **{f"{o}.points": float(len(data.per_outcome[o].y)) for o in self.outcomes},
        }
        return self

    def _bucket_sets(self, bucket: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Model-space training set ``(x (m, d), y (m,))`` of every outcome in one bucket."""
        assert self._data is not None  # fit sets the data before it fits a bucket
        X, rates, Y = self._data
        keys = [tuple(r) for r in np.round(X, 9)]
        lat_ok = known = None
        if self.latency_limit_ms is not None and "latency_ms" in self.outcomes:
            lat = Y[:, self.outcomes.index("latency_ms")]
            known = np.isfinite(lat) & (lat >= 0)
            lat_ok = np.where(known, lat, np.inf) <= self.latency_limit_ms
        rows = self.buckets.rows_for(bucket, rates, keys, lat_ok, known)
        out = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SurrogateDataWarning)  # already reported once by fit
            for j, name in enumerate(self.outcomes):
                y = Y[rows, j]
                r = rows[np.isfinite(y) & (y >= 0)]
                if r.size == 0:
                    out[name] = (np.empty((0, X.shape[1])), np.empty(0))
                    continue
                # Same dataset rules; a constant rate column makes rows with equal knobs duplicates.
                od = prepare_training_data(
                    X[r], np.ones(r.size), Y[r, j : j + 1], (name,), log_floor=self.log_floor, min_points=1
                ).per_outcome[name]
                out[name] = (od.x[:, :-1], od.y)
        return out

    def _fit_buckets(
        self, buckets: list[int], previous: dict[str, dict[str, Any]] | None = None
    ) -> dict[int, dict[str, dict[str, Any]]]:
        """Every outcome's model in ``buckets``: a GP whose training set is in ``previous`` is reused,
        all others are fitted together by one :func:`~models.surrogate.batched_fit.fit_gps` call
        (warm-started from that bucket's last GP, when there is one)."""
        fits: dict[int, dict[str, Any]] = {}  # None placeholders until the batched fit below
        todo: list[tuple[int, str, str, np.ndarray, np.ndarray]] = []
        for bucket in buckets:
            fits[bucket] = {}
            for name, (x, y) in self._bucket_sets(bucket).items():
                if len(y) < min(self.min_base_points, self.min_target_points):
                    fits[bucket][name] = {"kind": "none", "points": len(y)}
                elif np.ptp(y) < 1e-12:
                    fits[bucket][name] = {"kind": "constant", "value": float(y[0]), "points": len(y)}
                else:
                    key = hashlib.sha1(f"{name}|{self.seed}".encode() + x.tobytes() + y.tobytes()).hexdigest()
                    entry = (previous or {}).get(key)
                    if entry is None:
                        fits[bucket][name] = None  # filled below; keeps the outcome order
                        todo.append((bucket, name, key, x, y))
                        continue
                    self._counts["gp_reused"] += 1
                    self._fit_cache[key] = fits[bucket][name] = entry
                    self._last_gp[(bucket, name)] = entry["model"]
        if todo:
            dev = self._dev()
            sets = [(torch.as_tensor(x, device=dev), torch.as_tensor(y[:, None], device=dev)) for _, _, _, x, y in todo]
            with torch.enable_grad(), single_thread():  # may run lazily inside predict's no_grad block
                results = fit_gps(sets, starts=[self._last_gp.get((b, name)) for b, name, *_ in todo])
            for (bucket, name, key, _, y), r in zip(todo, results):
                self._counts["gp_fitted"] += 1
                self._counts["gp_not_converged"] += int(not r.converged)
                self._fit_cache[key] = fits[bucket][name] = {"kind": "gp", "points": len(y), "model": r.model}
                self._last_gp[(bucket, name)] = r.model
        return fits

    # -- per-bucket ensembles -----------------------------------------------------------------------
    def _pooled_model(self, name: str):
        if name not in self._pooled:
            assert self._data is not None  # only reached from a fitted surrogate
            X, rates, Y = self._data
            j = self.outcomes.index(name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SurrogateDataWarning)
                od = prepare_training_data(X, rates, Y[:, j : j + 1], (name,), log_floor=self.log_floor).per_outcome[name]
            if od.constant:
                self._pooled[name] = {"kind": "constant", "value": float(od.y[0])}
            else:
                dev = self._dev()
                with torch.enable_grad(), single_thread():  # runs lazily inside predict's no_grad block
                    gp = fit_gps([(torch.as_tensor(od.x, device=dev), torch.as_tensor(od.y[:, None], device=dev))])[0].model
                self._pooled[name] = {"kind": "gp", "points": len(od.y), "model": gp}
        return self._pooled[name]

    def _ensemble(self, bucket: int, name: str) -> dict[str, Any]:
        key = (bucket, name)
        if key in self._ensembles:
            return self._ensembles[key]
        if bucket not in self._bucket_fits:
            self._bucket_fits[bucket] = self._fit_buckets([bucket], self._fit_cache)[bucket]
        target = self._bucket_fits[bucket][name]
        if target["kind"] != "gp" or target["points"] < self.min_target_points:
            reason = "constant in target bucket" if target["kind"] == "constant" else f"{target['points']} target point(s)"
            entry = {"kind": "pooled", "reason": reason, "points": target["points"]}
        else:
            bases = sorted(
                (abs(b - bucket), b)
                for b, fits in self._bucket_fits.items()
                if b != bucket and fits[name]["kind"] == "gp" and fits[name]["points"] >= self.min_base_points
            )
            base_ids = [b for _, b in bases][: self.max_base_models]
            models = [self._bucket_fits[b][name]["model"] for b in base_ids]
            if models:
                # debug(False): the draws are taken at the target GP's own training points on purpose
                with single_thread(), gpytorch.settings.debug(False):
                    rw = compute_rank_weights(
                        models,
                        target["model"],
                        num_samples=self.num_samples,
                        dilution_points=self.dilution_points,
                        seed=self.seed + 7 * (bucket % 997) + self.outcomes.index(name),
                    )
                weights, keep = rw.weights, rw.keep_prob
            else:
                weights, keep = torch.ones(1, dtype=torch.float64), torch.zeros(0, dtype=torch.float64)
            entry = {
                "kind": "rgpe",
                "points": target["points"],
                "bases": base_ids,
                "weights": weights,
                "keep_prob": keep,
                "model": RGPEModel([*models, target["model"]], weights.to(self._dev())),
            }
        self._ensembles[key] = entry
        return entry

    def outcome_model(self, outcome: str, rate: float):
        """A one-output BoTorch ``Model`` of ``outcome`` at ``rate`` over the d knob columns (model space)."""
        self._check_fitted()
        if outcome not in self.outcomes:
            raise KeyError(f"unknown outcome {outcome!r}; known: {self.outcomes}")
        entry = self._ensemble(self.buckets.index(self._check_rate(rate)), outcome)
        if entry["kind"] == "rgpe":
            return entry["model"]
        pooled = self._pooled_model(outcome)
        if pooled["kind"] == "constant":
            return ConstantModel(pooled["value"], self.constant_std)
        assert self.rate_scale is not None  # set with the data (checked above)
        return FixedRateModel(pooled["model"], float(rate) / self.rate_scale)

    def weights(self, rate: float) -> dict[str, dict[str, Any]]:
        """Per outcome at ``rate``: how it is predicted and, for RGPE, the weight per bucket (diagnostics)."""
        self._check_fitted()
        b = self.buckets.index(self._check_rate(rate))
        out = {}
        for name in self.outcomes:
            e = self._ensemble(b, name)
            if e["kind"] == "rgpe":
                out[name] = {
                    "kind": "rgpe",
                    "target_bucket": b,
                    "target_points": e["points"],
                    "weights": {
                        **{str(x): float(w) for x, w in zip(e["bases"], e["weights"][:-1])},
                        "target": float(e["weights"][-1]),
                    },
                    "keep_prob": {str(x): float(p) for x, p in zip(e["bases"], e["keep_prob"])},
                }
            else:
                out[name] = {"kind": "pooled", "target_bucket": b, "target_points": e["points"], "reason": e["reason"]}
        return out

    # -- prediction -----------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not self.fitted:
            raise RuntimeError("RGPESurrogate used before fit (or from_state)")

    @staticmethod
    def _check_rate(rate: float) -> float:
        if not np.isfinite(rate) or rate < 0:
            raise SurrogateInputError(f"rate must be a finite rec/s >= 0, got {rate!r}")
        return float(rate)

    def predict(self, X: np.ndarray, rate: float, *, observation_noise: bool = True) -> SurrogatePrediction:
        """Gaussian marginals at ``rate`` for each row of ``X`` (m, d), shape (m, len(outcomes))."""
        self._check_fitted()
        X = check_knobs(X)
        if X.shape[1] != self.d:
            raise SurrogateInputError(f"X has {X.shape[1]} knob columns, the surrogate was fitted on {self.d}")
        if not np.isfinite(X).all():
            raise SurrogateInputError("X contains NaN or inf; every candidate must be a full configuration")
        x = torch.as_tensor(X, device=self._dev())
        mean = np.empty((len(X), len(self.outcomes)))
        std = np.empty_like(mean)
        # debug(False): candidates often are profiled configurations; gpytorch's "input matches
        # the training data" note is expected here.
        with torch.no_grad(), single_thread(), gpytorch.settings.debug(False):
            for j, name in enumerate(self.outcomes):
                # Joint posterior but only its diagonal is formed (lazy covariance); a (m, 1, d)
                # batch would instead copy the training set into every batch.
                post = self.outcome_model(name, rate).posterior(x, observation_noise=observation_noise)
                mean[:, j] = post.mean.reshape(-1).cpu().numpy()
                std[:, j] = post.variance.clamp_min(0).sqrt().reshape(-1).cpu().numpy()
        return SurrogatePrediction(self.outcomes, mean, std)

    # -- state ------------------------------------------------------------------------------------
    @staticmethod
    def _gp_state(model) -> dict[str, Any]:
        return {
            "train_x": model.train_inputs[0].detach().cpu(),
            "train_y": model.outcome_transform.untransform(model.train_targets.unsqueeze(-1))[0].detach().cpu(),
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        }

    def _fit_state(self, entry: dict[str, Any]) -> dict[str, Any]:
        if entry["kind"] != "gp":
            return {k: v for k, v in entry.items()}
        return {"kind": "gp", "points": entry["points"], **self._gp_state(entry["model"])}

    def state(self) -> dict[str, Any]:
        """Data, fitted bucket and pooled GPs, and computed weights (CPU tensors; ``weights_only`` safe)."""
        self._check_fitted()
        assert self._data is not None  # _check_fitted raised otherwise
        X, rates, Y = self._data
        return {
            "version": STATE_VERSION,
            "kind": self.name,
            "params": {p: (list(getattr(self, p)) if p == "outcomes" else getattr(self, p)) for p in _PARAMS},
            "rate_scale": self.rate_scale,
            "d": self.d,
            "fit_info": dict(self.fit_info),
            "data": [torch.as_tensor(a) for a in (X, rates, Y)],
            "buckets": {str(b): {o: self._fit_state(e) for o, e in fits.items()} for b, fits in self._bucket_fits.items()},
            "pooled": {o: self._fit_state(e) for o, e in self._pooled.items()},
            "ensembles": [
                {
                    "bucket": b,
                    "outcome": o,
                    "kind": e["kind"],
                    "reason": e.get("reason", ""),
                    "points": e["points"],
                    "bases": list(e.get("bases", [])),
                    "weights": e.get("weights"),
                    "keep_prob": e.get("keep_prob"),
                }
                for (b, o), e in self._ensembles.items()
            ],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], *, device: str = "cpu") -> RGPESurrogate:
        """Rebuild from :meth:`state` without refitting or recomputing weights."""
        if state.get("version") != STATE_VERSION or state.get("kind") != cls.name:
            raise ValueError(
                f"not an RGPESurrogate state v{STATE_VERSION}: kind={state.get('kind')!r} version={state.get('version')!r}"
            )
        params = dict(state["params"])
        params["outcomes"] = tuple(params["outcomes"])
        self = cls(**params, device=device)
        dev = self._dev()

        def load(entry: dict[str, Any]) -> dict[str, Any]:
            if entry["kind"] != "gp":
                return dict(entry)
            gp = build_gp(entry["train_x"].to(dev, torch.float64), entry["train_y"].to(dev, torch.float64))
            gp.load_state_dict({k: v.to(dev) for k, v in entry["state_dict"].items()})
            return {"kind": "gp", "points": entry.get("points", len(entry["train_x"])), "model": gp.eval()}

        self._data = tuple(t.numpy() for t in state["data"])
        self.rate_scale, self.d, self.fit_info = float(state["rate_scale"]), int(state["d"]), dict(state["fit_info"])
        self._bucket_fits = {int(b): {o: load(e) for o, e in fits.items()} for b, fits in state["buckets"].items()}
        self._pooled = {o: load(e) for o, e in state["pooled"].items()}
        for e in state["ensembles"]:
            b, o = int(e["bucket"]), e["outcome"]
            if e["kind"] == "pooled":
                self._ensembles[(b, o)] = {"kind": "pooled", "reason": e["reason"], "points": e["points"]}
                continue
            models = [*(self._bucket_fits[x][o]["model"] for x in e["bases"]), self._bucket_fits[b][o]["model"]]
            self._ensembles[(b, o)] = {
                "kind": "rgpe",
                "points": e["points"],
                "bases": list(e["bases"]),
                "weights": e["weights"],
                "keep_prob": e["keep_prob"],
                "model": RGPEModel(models, e["weights"].to(dev)),
            }
        return self
