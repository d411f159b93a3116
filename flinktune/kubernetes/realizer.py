"""Apply configurations to a FlinkDeployment with the kubernetes client (the production Realizer).

Use :class:`KubernetesRealizer` as the loop's ``Realizer`` for jobs run by the Flink Kubernetes
Operator. ``apply`` reads the object, builds a patch of the owned fields only
(:func:`flinktune.kubernetes.body.config_patch`), validates the patched object against the CRD,
and sends it as a JSON merge patch carrying the ``resourceVersion`` it read; a 409 conflict
(someone else wrote in between) is retried on a fresh read. It then follows ``status`` until the
operator reports the job stable and running on the new spec, or rolls back to the previous
configuration when the operator reports a failure or the wait runs out. ``dry_run=True`` only
returns the diff.

Every API call carries ``request_timeout_s`` (the client's ``_request_timeout``; retries are the
client's, :mod:`flinktune.kubernetes.calls`), and one apply stays within ``budget_s``: the wait for
the new spec gets the first half (at most ``stable_timeout_s``), the rollback and its wait the rest,
so a job that never becomes stable costs at most the budget, never twice the stability timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flinktune.clock import Clock, SystemClock
from flinktune.config_space import Configuration
from flinktune.decision.reconfig import ReconfigMode
from flinktune.decision.stages import RealizeResult
from flinktune.kubernetes.body import config_from_object, config_patch, dry_run_diff, merge_patch
from flinktune.kubernetes.calls import request_timeout
from flinktune.kubernetes.controllers import other_controller
from flinktune.kubernetes.crd import CRDSchema, load_crd_schema, validate_object

__all__ = ["GROUP", "PLURAL", "VERSION", "KubernetesRealizer", "RealizeError"]

GROUP, VERSION, PLURAL = "flink.apache.org", "v1beta1", "flinkdeployments"
_FAILED = {"FAILED", "ROLLED_BACK", "ROLLING_BACK"}


class RealizeError(RuntimeError):
    """The change could not be sent (conflicts exhausted, rejected by the API server)."""


@dataclass
class KubernetesRealizer:
    """``api`` is a ``kubernetes.client.CustomObjectsApi``; ``vertex_ids`` maps vertex names to job vertex ids."""

    api: Any
    namespace: str
    vertex_ids: Mapping[str, str]
    schema: CRDSchema | None = None
    clock: Clock = field(default_factory=SystemClock)
    sleep: Callable[[float], None] = time.sleep
    max_conflicts: int = 3
    stable_timeout_s: float = 600.0
    poll_s: float = 5.0
    dry_run: bool = False
    request_timeout_s: float = 10.0
    budget_s: float = 480.0
    last_diff: str = ""
    #: Why the job must not be changed (another controller sizes it), from the last read; None when it may be.
    held: str | None = None

    def __post_init__(self) -> None:
        self.schema = self.schema or load_crd_schema()
        if not (self.budget_s > 0 and self.stable_timeout_s > 0 and self.request_timeout_s > 0):
            raise ValueError(
                f"KubernetesRealizer: budget_s, stable_timeout_s and request_timeout_s must be > 0, got "
                f"{self.budget_s}, {self.stable_timeout_s} and {self.request_timeout_s}"
            )

    def _get(self, job: str) -> dict[str, Any]:
        return self.api.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, job, _request_timeout=request_timeout(self.request_timeout_s)
        )

    def current(self, job: str) -> Configuration:
        obj = self._get(job)
        self.held = other_controller(obj)
        return config_from_object(obj, self.vertex_ids)

    def _send(self, job: str, target: Configuration) -> tuple[dict[str, Any], ReconfigMode, Configuration]:
        from kubernetes.client.exceptions import ApiException

        for attempt in range(1, self.max_conflicts + 1):
            obj = self._get(job)  # a fresh read each time: the conflict means ours was stale
            before = config_from_object(obj, self.vertex_ids)
            held = other_controller(obj)
            if held:  # turned on since the decision read the job: never patch under another controller
                raise RealizeError(held)
            patch, mode = config_patch(obj, target, self.vertex_ids)
            validate_object(
                merge_patch(obj, patch),
                self.schema or load_crd_schema(),
                what=f"FlinkDeployment {self.namespace}/{job} after the patch",
            )
            self.last_diff = dry_run_diff(obj, patch)
            if self.dry_run:
                return obj, ReconfigMode.DRY_RUN, before
            try:
                sent = self.api.patch_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL, job, patch, _request_timeout=request_timeout(self.request_timeout_s)
                )
                return sent, mode, before
            except ApiException as exc:
                if exc.status != 409 or attempt == self.max_conflicts:
                    raise RealizeError(
                        f"patching FlinkDeployment {self.namespace}/{job} failed (HTTP {exc.status}, attempt {attempt}): {exc.reason}"
                    ) from None
        raise RealizeError("unreachable")

    def _wait_stable(self, job: str, generation: int | None, deadline: float) -> tuple[bool, str]:
        start = self.clock.now()
        while True:
            st = self._get(job).get("status") or {}
            life = st.get("lifecycleState")
            job_state = (st.get("jobStatus") or {}).get("state")
            observed = st.get("observedGeneration")
            caught_up = generation is None or observed is None or observed >= generation
            if life in _FAILED or (st.get("error") and caught_up):
                return False, f"operator reports {life}: {st.get('error') or 'no detail'}"
            if caught_up and life == "STABLE" and job_state == "RUNNING":
                return True, "stable and running"
            now = self.clock.now()
            if now >= deadline:
                return (
                    False,
                    f"not stable after {now - start:.0f} s, the wait's share of the budget (lifecycle {life}, job {job_state})",
                )
            self.sleep(max(0.0, min(self.poll_s, deadline - now)))

    def apply(self, job: str, config: Configuration) -> RealizeResult:
        before = self.current(job)
        if before == config:
            return RealizeResult(False, ReconfigMode.NOOP, 0.0, f"already running {config.describe()}")
        t0 = self.clock.now()
        obj, mode, before = self._send(job, config)
        if mode is ReconfigMode.DRY_RUN:
            return RealizeResult(False, ReconfigMode.DRY_RUN, 0.0, self.last_diff)
        end = t0 + self.budget_s
        ok, why = self._wait_stable(
            job, (obj.get("metadata") or {}).get("generation"), min(t0 + self.stable_timeout_s, t0 + self.budget_s / 2)
        )
        if ok:
            return RealizeResult(True, mode, self.clock.now() - t0, f"{before.describe()} -> {config.describe()} ({mode}); {why}")
        self._send(job, before)  # roll back to what ran before, within what is left of the budget
        _back, why_back = self._wait_stable(job, None, end)
        return RealizeResult(
            False,
            ReconfigMode.ROLLED_BACK,
            self.clock.now() - t0,
            f"{config.describe()} failed ({why}); rolled back to {before.describe()}: {why_back}",
        )
