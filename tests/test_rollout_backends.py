"""The runner finds its backend in the registry by ``config.backend``; every backend runs its
episodes through the same executor, so a registered backend gives the same records."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agentenv.policies import ScriptedPolicy
from agentenv.policies.base import PolicyLike
from agentenv.records import Trajectory
from agentenv.rollout import LocalBackend, RolloutConfig, backend_names, run_rollouts
from agentenv.rollout import backends as registry
from agentenv.rollout.execute import EnvFactory
from agentenv.rollout.plan import EpisodeSpec
from agentenv.tasks.builtin import builtin_tasks
from agentenv.tasks.schema import Task

TASKS = builtin_tasks()[:2]


def test_local_and_ray_are_registered() -> None:
    assert {"local", "ray"} <= set(backend_names())


def test_the_runner_builds_the_backend_the_config_names(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    class Counting(LocalBackend):
        async def run(self, spec: EpisodeSpec) -> Trajectory:
            seen.append(spec.episode_id)
            return await super().run(spec)

    def factory(tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig,
                env_factory: EnvFactory) -> Counting:
        return Counting(tasks, policy, config, env_factory)

    config = RolloutConfig(samples=2, max_turns=2, concurrency=2)
    expected = run_rollouts(TASKS, ScriptedPolicy(TASKS), config)
    monkeypatch.setitem(registry._REGISTRY, "local", factory)
    result = run_rollouts(TASKS, ScriptedPolicy(TASKS), config)
    assert sorted(seen) == sorted(t.episode_id for t in result.trajectories)
    def key(t: Trajectory) -> tuple[object, ...]:  # everything but the timings
        return (t.episode_id, t.seed, t.final_reward, t.stop_reason, [r.response_text for r in t.turns])

    assert [key(t) for t in result.trajectories] == [key(t) for t in expected.trajectories]


def test_an_unregistered_backend_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentenv.errors import ConfigError

    monkeypatch.delitem(registry._REGISTRY, "local")
    with pytest.raises(ConfigError, match="no backend 'local' is registered"):
        run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig())
