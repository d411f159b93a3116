"""Independent Gaussian-process surrogates, one BoTorch ``SingleTaskGP`` per outcome.

Use :class:`GPSurrogate` to predict latency, CPU, memory and recovery time of candidate
configurations at a planned rate from profiling observations (``Surrogate`` protocol). Inputs are
``[normalised knobs (d columns in [0, 1]), rate / rate_scale]``; outcomes follow
:mod:`models.surrogate.dataset` (log scale for ``LOG_OUTCOMES``, repair rules, duplicates
averaged). Each GP has a ``Standardize`` outcome transform and is fitted by maximising the exact
marginal log likelihood (``fit_gpytorch_mll``), in double precision.

Predictions are Gaussian marginals in model space. By default they include the fitted observation
noise (``observation_noise=True``): constraints are checked against what the job will *measure*,
which is noisy. Pass ``observation_noise=False`` for the latent function's uncertainty alone (what
more profiling could remove). An outcome whose training values are all equal gets no GP: it
predicts that constant with ``constant_std`` (model space) everywhere.

The fitted state (training data, hyperparameters, rate scale) can be exported with
:meth:`GPSurrogate.state` and restored with :meth:`GPSurrogate.from_state` without refitting.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from models.surrogate.dataset import TrainingData, check_knobs, model_inputs, prepare_training_data
from models.surrogate.state_file import TorchStateFile
from models.surrogate.types import OUTCOMES, SurrogateInputError, SurrogatePrediction
from models.torch_threads import single_thread

__all__ = ["GPSurrogate", "build_gp", "fit_gp", "resolve_device"]

STATE_VERSION = 1


def resolve_device(device: str) -> torch.device:
    """``"cpu"``, ``"cuda"`` (must exist) or ``"auto"`` (cuda when available) as a torch device."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but torch.cuda.is_available() is False")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    return torch.device(device)


def build_gp(train_x: torch.Tensor, train_y: torch.Tensor, train_yvar: torch.Tensor | None = None):
    """An unfitted SingleTaskGP on (m, k) inputs and (m, 1) targets with a Standardize transform;
    ``train_yvar`` (m, 1): fixed observation variances instead of a fitted noise."""
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize

    return SingleTaskGP(train_x, train_y, train_Yvar=train_yvar, outcome_transform=Standardize(m=1))


def fit_gp(train_x: torch.Tensor, train_y: torch.Tensor, *, seed: int = 0, train_yvar: torch.Tensor | None = None):
    """A SingleTaskGP fitted by exact marginal likelihood, in eval mode (``train_yvar``: see :func:`build_gp`)."""
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    model = build_gp(train_x, train_y, train_yvar)
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    # fit_gpytorch_mll may retry from random initial values when the optimiser fails.
    with torch.random.fork_rng(devices=[]), single_thread():
        torch.manual_seed(seed)
        fit_gpytorch_mll(mll)
    return model.eval()


class GPSurrogate(TorchStateFile):
    """One SingleTaskGP per outcome over ``[knobs, rate / rate_scale]``; implements ``Surrogate``.

    ``fit(X (n, d), rates (n,), Y (n, len(outcomes)))``; ``predict(X (m, d), rate) ->
    SurrogatePrediction`` with (m, len(outcomes)) mean and std. ``device`` is "cpu" (default),
    "cuda" or "auto".
    """

    name = "gp"

    def __init__(
        self,
        *,
        outcomes: tuple[str, ...] = OUTCOMES,
        device: str = "cpu",
        seed: int = 0,
        constant_std: float = 0.01,
        log_floor: float = 1e-3,
    ) -> None:
        self.outcomes = tuple(outcomes)
        self.device = device
        self.seed = int(seed)
        self.constant_std = float(constant_std)
        self.log_floor = float(log_floor)
        self.rate_scale: float | None = None
        self.d: int | None = None
        self._models: dict[str, Any] = {}
        self._constants: dict[str, float] = {}
        self.fit_info: dict[str, float] = {}

    @property
    def fitted(self) -> bool:
        return self.rate_scale is not None

    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=torch.float64, device=resolve_device(self.device))

    def fit(self, X: np.ndarray, rates: np.ndarray, Y: np.ndarray) -> GPSurrogate:
        """Fit every outcome's GP; raises SurrogateInputError on unusable data (see dataset rules)."""
        data = prepare_training_data(X, rates, Y, self.outcomes, log_floor=self.log_floor)
        self._fit_data(data)
        return self

    def _fit_data(self, data: TrainingData) -> None:
        self._models, self._constants = {}, {}
        info: dict[str, float] = {"rate_scale": data.rate_scale}
        for k, name in enumerate(self.outcomes):
            od = data.per_outcome[name]
            info[f"{name}.points"] = float(len(od.y))
            info[f"{name}.dropped"] = float(od.dropped)
            info[f"{name}.merged"] = float(od.merged)
            if od.constant:
                self._constants[name] = float(od.y[0])
                continue
            self._models[name] = fit_gp(self._tensor(od.x), self._tensor(od.y[:, None]), seed=self.seed + k)
        self.rate_scale, self.d = data.rate_scale, data.d
        self.fit_info = info

    def predict(self, X: np.ndarray, rate: float, *, observation_noise: bool = True) -> SurrogatePrediction:
        """Gaussian marginals at ``rate`` for each row of ``X`` (m, d); see the module doc for noise."""
        if not self.fitted:
            raise RuntimeError("GPSurrogate.predict called before fit (or from_state)")
        X = check_knobs(X)
        if X.shape[1] != self.d:
            raise SurrogateInputError(f"X has {X.shape[1]} knob columns, the surrogate was fitted on {self.d}")
        if not np.isfinite(X).all():
            raise SurrogateInputError("X contains NaN or inf; every candidate must be a full configuration")
        if not np.isfinite(rate) or rate < 0:
            raise SurrogateInputError(f"rate must be a finite rec/s >= 0, got {rate!r}")
        m = X.shape[0]
        assert self.rate_scale is not None  # fitted (checked above)
        x = self._tensor(model_inputs(X, np.full(m, float(rate)), self.rate_scale))
        mean = np.empty((m, len(self.outcomes)))
        std = np.empty_like(mean)
        with torch.no_grad(), single_thread():
            for j, name in enumerate(self.outcomes):
                if name in self._constants:
                    mean[:, j], std[:, j] = self._constants[name], self.constant_std
                    continue
                post = self._models[name].posterior(x, observation_noise=observation_noise)
                mean[:, j] = post.mean.squeeze(-1).cpu().numpy()
                std[:, j] = post.variance.clamp_min(0).sqrt().squeeze(-1).cpu().numpy()
        return SurrogatePrediction(self.outcomes, mean, std)

    def loo(self) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Leave-one-out predictions on the (deduplicated) training points, per outcome.

        Closed form for an exact GP with fixed hyperparameters (Rasmussen and Williams, 5.4.2):
        ``mu_i = y_i - [K^-1 r]_i / [K^-1]_ii`` and ``var_i = 1 / [K^-1]_ii`` with the noise in
        ``K``, so the spread is that of a new observation. Returns ``{outcome: (y, mean, std)}`` in
        model space; constant outcomes are left out.
        """
        out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        with torch.no_grad():
            for name, model in self._models.items():
                x = model.train_inputs[0]
                y = model.train_targets  # standardised
                K = model.covar_module(x).to_dense() + model.likelihood.noise * torch.eye(len(y), dtype=x.dtype, device=x.device)
                K_inv = torch.cholesky_inverse(torch.linalg.cholesky(K))
                r = y - model.mean_module(x)
                diag = K_inv.diagonal()
                mu = y - (K_inv @ r) / diag
                sd = diag.rsqrt()
                tf = model.outcome_transform
                m0, s0 = tf.means.squeeze(), tf.stdvs.squeeze()
                out[name] = ((y * s0 + m0).cpu().numpy(), (mu * s0 + m0).cpu().numpy(), (sd * s0).cpu().numpy())
        return out

    # -- state ------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to predict again: training tensors, hyperparameters, scale (CPU tensors)."""
        if not self.fitted:
            raise RuntimeError("cannot export the state of an unfitted GPSurrogate")
        per: dict[str, Any] = {}
        for name in self.outcomes:
            if name in self._constants:
                per[name] = {"kind": "constant", "value": self._constants[name]}
            else:
                model = self._models[name]
                per[name] = {
                    "kind": "gp",
                    "train_x": model.train_inputs[0].detach().cpu(),
                    # train_targets are standardised; keep the raw targets to rebuild the transform.
                    "train_y": model.outcome_transform.untransform(model.train_targets.unsqueeze(-1))[0].detach().cpu(),
                    "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                }
        return {
            "version": STATE_VERSION,
            "kind": self.name,
            "outcomes": list(self.outcomes),
            "rate_scale": self.rate_scale,
            "d": self.d,
            "seed": self.seed,
            "constant_std": self.constant_std,
            "log_floor": self.log_floor,
            "fit_info": dict(self.fit_info),
            "per_outcome": per,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], *, device: str = "cpu") -> GPSurrogate:
        """Rebuild a fitted surrogate from :meth:`state` without refitting."""
        if state.get("version") != STATE_VERSION or state.get("kind") != cls.name:
            raise ValueError(
                f"not a GPSurrogate state v{STATE_VERSION}: kind={state.get('kind')!r} version={state.get('version')!r}"
            )
        self = cls(
            outcomes=tuple(state["outcomes"]),
            device=device,
            seed=state["seed"],
            constant_std=state["constant_std"],
            log_floor=state["log_floor"],
        )
        dev = resolve_device(device)
        for name in self.outcomes:
            entry = state["per_outcome"][name]
            if entry["kind"] == "constant":
                self._constants[name] = float(entry["value"])
                continue
            model = build_gp(entry["train_x"].to(dev, torch.float64), entry["train_y"].to(dev, torch.float64))
            model.load_state_dict({k: v.to(dev) for k, v in entry["state_dict"].items()})
            self._models[name] = model.eval()
        self.rate_scale, self.d = float(state["rate_scale"]), int(state["d"])
        self.fit_info = dict(state.get("fit_info", {}))
        return self
