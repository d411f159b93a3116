"""Which candidates to profile next: constrained qLogNEHVI over a discrete candidate set.

Use :func:`suggest_profiling` when the surrogate is too unsure at the planned rate to pick a
configuration with confidence. As in Demeter, the objectives are the candidates' reserved CPU
and memory (known exactly, so not modelled: ``-log(reserved)`` is maximised) and the constraints
are the latency and recovery models (``model value <= limit``, model space: log ms and log s).
The acquisition is BoTorch's ``qLogNoisyExpectedHypervolumeImprovement`` with those constraints,
optimised by enumeration over the candidates inside the profiling budget
(``optimize_acqf_discrete``: q picks by sequential conditioning, no repeats). A candidate scores
high when it is cheap and may well be feasible, and the batch spreads over the cost trade-off.

Outcome models come from ``surrogate.outcome_model(outcome, rate)`` when the surrogate has it
(:class:`~models.surrogate.rgpe_surrogate.RGPESurrogate`: joint posteriors); otherwise from
``surrogate.predict`` marginals, independent across candidates (any ``Surrogate``).

Reference point: per objective, the worst value among budget candidates minus 10 % of their
range (0.1 when the range is 0), so every budget candidate can add hypervolume. Baseline (the
noisy Pareto front to improve on): the ``profiled`` candidates when given, else the budget
candidate with the most reserved resources (the safe default, like Demeter's static maximum).

Inside :func:`~models.surrogate.shared_acquisition.sharing_acquisitions` (a fleet's decision
cycle), calls with the same surrogate object and inputs at rates in one 2.5 % grid cell share one
acquisition, run at the cell's centre rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from models.surrogate.dataset import check_knobs
from models.surrogate.outcome_models import StackedModel, TabulatedModel
from models.surrogate.shared_acquisition import active_share
from models.torch_threads import single_thread

__all__ = ["constraint_models", "suggest_profiling"]


def _skip_kernel_compile() -> None:
    """Use BoTorch's fused qLogEHVI kernel only when it is already built.

    BoTorch 0.18 JIT-compiles that C++ kernel at the first acquisition it builds in a process
    (about 2 minutes on 2 busy cores, measured); a profiling suggestion must take about a
    second, and the pure-Python path gives the same values. Relies on the pinned version's
    module state (``_C``, ``_load_attempted``).
    """
    from botorch.acquisition.multi_objective import logei

    if getattr(logei, "_load_attempted", True):
        return
    try:
        import logei_fused_ext  # a prebuilt kernel, when installed

        logei._C = logei_fused_ext
    except ImportError:
        pass
    logei._load_attempted = True


def constraint_models(surrogate: Any, X: torch.Tensor, rate: float, outcomes: Sequence[str]) -> list:
    """One-output BoTorch models of ``outcomes`` at ``rate`` over the knob columns of ``X`` (m, d)."""
    if hasattr(surrogate, "outcome_model"):
        return [surrogate.outcome_model(o, rate) for o in outcomes]
    pred = surrogate.predict(X.cpu().numpy(), float(rate))
    return [
        TabulatedModel(X, torch.as_tensor(pred.mean[:, pred.outcomes.index(o)]).to(X), torch.as_tensor(pred.std_of(o)).to(X))
        for o in outcomes
    ]


def _check(X_candidates, budget_mask, reserved, q, latency_limit_log, recovery_limit_log, profiled):
    X = check_knobs(X_candidates, name="X_candidates")
    m = X.shape[0]
    if not np.isfinite(X).all():
        r = int(np.argwhere(~np.isfinite(X))[0][0])
        raise ValueError(f"X_candidates row {r} has a NaN or inf knob")
    keys = {}
    for i, row in enumerate(np.round(X, 9)):
        k = row.tobytes()
        if k in keys:
            raise ValueError(f"X_candidates rows {keys[k]} and {i} are the same configuration; candidates must be distinct")
        keys[k] = i
    mask = np.asarray(budget_mask)
    if mask.shape != (m,) or mask.dtype != bool:
        raise ValueError(f"budget_mask must be a bool array of shape ({m},), got {mask.dtype} {mask.shape}")
    res = np.asarray(reserved, dtype="float64")
    if res.shape != (m, 2) or not (np.isfinite(res).all() and (res > 0).all()):
        raise ValueError(f"reserved must be (m={m}, 2) finite positive [cpu, memory] per candidate, got shape {res.shape}")
    if int(q) < 1:
        raise ValueError(f"q must be >= 1, got {q!r}")
    for name, v in (("latency_limit_log", latency_limit_log), ("recovery_limit_log", recovery_limit_log)):
        if not np.isfinite(v):
            raise ValueError(f"{name} must be finite, got {v!r}")
    prof = np.asarray([] if profiled is None else profiled, dtype="int64").reshape(-1)
    if prof.size and (prof.min() < 0 or prof.max() >= m):
        raise ValueError(f"profiled indices must lie in [0, {m}), got {prof.tolist()}")
    return X, mask, res, prof


def suggest_profiling(
    surrogate: Any,
    X_candidates: np.ndarray,
    rate: float,
    *,
    latency_limit_log: float,
    recovery_limit_log: float,
    budget_mask: np.ndarray,
    reserved: np.ndarray,
    q: int = 3,
    seed: int = 0,
    profiled: Sequence[int] | None = None,
    num_mc_samples: int = 128,
    outcomes: tuple[str, str] = ("latency_ms", "recovery_s"),
    ref_point: Sequence[float] | None = None,
) -> np.ndarray:
    """Indices into ``X_candidates`` of up to ``q`` configurations to profile at ``rate``, best first.

    ``X_candidates`` (m, d) normalised knobs, distinct rows; ``budget_mask`` (m,) bool: which fit
    the profiling budget; ``reserved`` (m, 2): each candidate's reserved [CPU, memory] (any
    positive units); limits in model space (``log(ms)``, ``log(s)``). Returns every budget
    candidate when there are at most ``q`` of them (cheapest first) and an empty array when
    there is none. Seeded: the same inputs give the same picks. ``ref_point``: the hypervolume
    reference per objective in the maximised space ``-log(reserved)`` (default: see the module
    doc). Bad input raises ``ValueError`` naming the argument.
    """
    X, mask, res, prof = _check(X_candidates, budget_mask, reserved, q, latency_limit_log, recovery_limit_log, profiled)
    ref = None if ref_point is None else np.asarray(ref_point, dtype="float64").reshape(-1)
    if ref is not None and (ref.shape != (2,) or not np.isfinite(ref).all()):
        raise ValueError(f"ref_point must be 2 finite values (CPU, memory in -log(reserved) space), got {ref_point!r}")
    inside = np.flatnonzero(mask)
    if inside.size <= q:
        return inside[np.argsort(res[inside].sum(axis=1) / res.max(axis=0).sum(), kind="stable")]
    lat_lim, rec_lim = float(latency_limit_log), float(recovery_limit_log)

    def _acquire(at_rate: float) -> np.ndarray:
        """The picks at ``at_rate`` (the planned rate, or its grid cell's centre when shared)."""
        from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
        from botorch.acquisition.multi_objective.objective import GenericMCMultiOutputObjective
        from botorch.optim.optimize import optimize_acqf_discrete
        from botorch.sampling.normal import SobolQMCNormalSampler

        _skip_kernel_compile()
        d = X.shape[1]
        obj = -np.log(res)
        tx = torch.as_tensor(X, dtype=torch.float64)
        Z = torch.cat([tx, torch.as_tensor(obj, dtype=torch.float64)], dim=-1)  # knobs + known objectives
        lo, hi = obj[inside].min(axis=0), obj[inside].max(axis=0)
        span = np.where(hi - lo > 0, hi - lo, 1.0)
        ref_point = torch.as_tensor(lo - 0.1 * span if ref is None else ref, dtype=torch.float64)
        base = prof if prof.size else inside[[int(np.argmin(obj[inside].sum(axis=1)))]]

        def known_objectives(samples: torch.Tensor, X: torch.Tensor | None) -> torch.Tensor:
            assert X is not None  # qLogNEHVI passes the candidates, whose trailing columns are the objectives
            return X[..., d:].expand(*samples.shape[:-1], 2)

        with torch.random.fork_rng(devices=[]), single_thread():
            torch.manual_seed(int(seed))
            models = constraint_models(surrogate, tx, at_rate, outcomes)
            # Evaluate where the models live (a GPU when the surrogate was built there).
            dev = next((t.device for mdl in models for t in (*mdl.parameters(), *mdl.buffers())), torch.device("cpu"))
            Zd = Z.to(dev)
            acq = qLogNoisyExpectedHypervolumeImprovement(
                model=StackedModel(models, columns=d),
                ref_point=ref_point.to(dev),
                X_baseline=Zd[torch.as_tensor(base, device=dev)],
                sampler=SobolQMCNormalSampler(sample_shape=torch.Size([num_mc_samples]), seed=int(seed)),
                objective=GenericMCMultiOutputObjective(known_objectives),
                constraints=[lambda s: s[..., 0] - lat_lim, lambda s: s[..., 1] - rec_lim],
                prune_baseline=False,
                cache_root=False,
            )
            with torch.no_grad():
                picked, _ = optimize_acqf_discrete(
                    acq, q=int(q), choices=Zd[torch.as_tensor(inside, device=dev)], max_batch_size=256, unique=True
                )
        # Map the chosen rows back to candidate indices (rows are distinct).
        dist = torch.cdist(picked[:, :d].cpu(), tx)
        return dist.argmin(dim=-1).numpy().astype("int64")

    # In a fleet's cycle, jobs asking the same question at nearby rates share one acquisition.
    share = active_share()
    if share is None:
        return _acquire(float(rate))
    question = (
        X,
        mask,
        res,
        int(q),
        lat_lim,
        rec_lim,
        prof,
        int(seed),
        int(num_mc_samples),
        tuple(outcomes),
        None if ref is None else tuple(ref),
    )
    return share.picks(surrogate, float(rate), question, _acquire)
