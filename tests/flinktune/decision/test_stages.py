"""The typed stage inputs: what the loop hands a policy from its model provider, and the one mode vocabulary."""

import pandas as pd
import pytest

from flinktune.clock import ManualClock
from flinktune.config_space import default_space
from flinktune.decision import Action
from flinktune.decision.backend import Backend
from flinktune.decision.loop import LoopSettings, build_decision_loop
from flinktune.decision.reconfig import ReconfigMode
from flinktune.decision.stages import ProfileBook, RealizeResult, StageProblem
from flinktune.decision.store import MemoryStateStore
from flinktune.decision.testing import (
    FixedForecast,
    FixedModels,
    FrameMetricsSource,
    FunctionSurrogate,
    RecordingRealizer,
    raw_samples,
)
from flinktune.policies import make_policy

SPACE = default_space()


class BookModels(FixedModels):
    """Fixed models that also serve their profiles (a :class:`ProfileBook`)."""

    def __init__(self, observations: pd.DataFrame) -> None:
        super().__init__(FunctionSurrogate(SPACE), float(observations["input_rate"].max()))
        self.observations, self.fitted = observations, []

    def fit_surrogate(self, rows: pd.DataFrame) -> FunctionSurrogate:
        self.fitted.append(len(rows))
        return FunctionSurrogate(SPACE)


class UnreachableModels(FixedModels):
    problem = "model store unreachable: connection refused"


def _loop(models, policy="static"):
    frame = raw_samples("j", 0, 1200, rate=20000, p95=120)
    backend = Backend("test", FrameMetricsSource(frame), RecordingRealizer(SPACE.maximum), ManualClock(600))
    return build_decision_loop(
        backend,
        LoopSettings("j", 250.0),
        policy=make_policy(policy, SPACE),
        space=SPACE,
        store=MemoryStateStore(),
        forecaster=FixedForecast(20000),
        models=models,
    )


def _state(loop):
    return loop.step().state


def test_a_mode_given_by_its_value_becomes_the_enum():
    assert RealizeResult(True, "rolled-back").mode is ReconfigMode.ROLLED_BACK  # type: ignore[arg-type]
    assert RealizeResult(False, ReconfigMode.NOOP).mode is ReconfigMode.NOOP


def test_an_unknown_mode_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"RealizeResult.mode: 'sideways' is not a reconfiguration mode \(noop, "):
        RealizeResult(True, "sideways")  # type: ignore[arg-type]


def test_the_context_carries_a_profile_books_observations_and_fit():
    obs = pd.DataFrame({"input_rate": [10000.0, 30000.0], "throughput": [10000.0, 29000.0]})
    models = BookModels(obs)
    assert isinstance(models, ProfileBook)
    loop = _loop(models)
    ctx = loop.context(_state(loop))
    assert ctx.observations is obs and ctx.profiled_max_rate == 30000.0
    assert ctx.fit_surrogate is not None and isinstance(ctx.fit_surrogate(obs.head(1)), FunctionSurrogate)
    assert models.fitted == [1]


def test_models_without_profiles_leave_the_fields_empty():
    models = FixedModels(FunctionSurrogate(SPACE), 5000.0)
    assert not isinstance(models, ProfileBook)
    loop = _loop(models)
    ctx = loop.context(_state(loop))
    assert ctx.observations is None and ctx.fit_surrogate is None and ctx.profiled_max_rate == 5000.0


def test_a_provider_that_cannot_serve_makes_the_guard_hold():
    models = UnreachableModels(FunctionSurrogate(SPACE), 5000.0)
    assert isinstance(models, StageProblem) and not isinstance(FixedModels(None, 0.0), StageProblem)
    out = _loop(models, policy="flinktune").step()
    assert UnreachableModels.problem in out.state.problems
    assert out.decision.action is Action.KEEP and "model store unreachable" in out.decision.reason
