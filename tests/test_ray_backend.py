"""The Ray backend on a real local Ray instance: same episodes and rewards as the local backend."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="the Ray backend needs the 'ray' extra")

from agentenv.errors import PolicyCallError  # noqa: E402
from agentenv.policies import OpenAIPolicy, ScriptedPolicy  # noqa: E402
from agentenv.policies.scripted import turn_of  # noqa: E402
from agentenv.records import Trajectory  # noqa: E402
from agentenv.rollout import RolloutConfig, run_rollouts  # noqa: E402
from agentenv.tasks.builtin import builtin_tasks  # noqa: E402
from agentenv.testing import ChatServer, ScriptedModel  # noqa: E402

TASKS = builtin_tasks()[:4]


@pytest.fixture(scope="module", autouse=True)
def local_ray(ray_cluster: Any) -> Iterator[None]:
    """The real Ray cluster shared with tests/test_ray_pool.py (tests/conftest.py: three
    one-CPU nodes on this machine)."""
    # The policies defined in this file must reach the workers by value: tests/ is not a package.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield


def comparable(trajectory: Trajectory) -> dict[str, Any]:
    data = trajectory.to_dict()
    for turn in data["turns"]:
        turn.pop("exec_seconds")
    return data


class FailsOnOneTask(ScriptedPolicy):
    """Scripted, except that every call about one task fails like an overloaded server."""

    def __call__(self, obs: Any) -> str:
        if obs["task_name"] == TASKS[2].name:
            raise PolicyCallError("the server kept answering 503", status=503, transient=True)
        return super().__call__(obs)


def test_ray_backend_gives_the_same_episodes_and_rewards_as_local(tmp_path: Path) -> None:
    """Multi-turn, 2 samples per task: the Ray run's records equal the local run's, line for line."""
    local = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(samples=2, seed=5), tmp_path / "local")
    remote = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(samples=2, seed=5, backend="ray"),
                          tmp_path / "ray")
    assert [comparable(t) for t in remote.trajectories] == [comparable(t) for t in local.trajectories]
    assert remote.summary["mean_reward"] == local.summary["mean_reward"]
    written = [json.loads(line) for line in (tmp_path / "ray" / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(r["episode_id"] for r in written) == sorted(t.episode_id for t in local.trajectories)
    assert json.loads((tmp_path / "ray" / "summary.json").read_text())["run"]["backend"] == "ray"


def test_a_failed_call_inside_an_actor_fails_only_that_episode() -> None:
    """A transient PolicyCallError raised in a Ray actor comes back (still transient) as that
    episode's error; others finish."""
    result = run_rollouts(TASKS, FailsOnOneTask(TASKS), RolloutConfig(mode="single_step", backend="ray"))
    assert [e.task_name for e in result.errors] == [TASKS[2].name]
    assert "503" in result.errors[0].error and len(result.trajectories) == 3


class FailsOnTurnTwoOfOneTask(ScriptedPolicy):
    """Scripted from the first attempt, except that turn 2 of one task fails like a dead server."""

    def __call__(self, obs: Any) -> str:
        if obs["task_name"] == TASKS[2].name and turn_of(obs) == 2:
            raise PolicyCallError("the server kept answering 503", status=503, transient=True)
        return super().__call__(obs)


def test_an_episode_stopped_inside_an_actor_comes_back_partial_and_the_resume_continues_it(
        tmp_path: Path) -> None:
    """The graded turn of an episode that failed in a Ray actor reaches the driver's store as a
    partial record; a rerun (on Ray too) goes on from it."""
    config = RolloutConfig(max_turns=3, backend="ray")
    first = run_rollouts(TASKS, FailsOnTurnTwoOfOneTask(TASKS, sample=False), config, tmp_path)
    assert [e.task_name for e in first.errors] == [TASKS[2].name]
    (partial,) = first.partial
    assert partial.task_name == TASKS[2].name and len(partial.turns) == 1
    again = run_rollouts(TASKS, ScriptedPolicy(TASKS, sample=False), config, tmp_path)
    assert again.continued == 1 and not again.errors and len(again.trajectories) == 4
    done = next(t for t in again.trajectories if t.task_name == TASKS[2].name)
    assert done.turns[0] == partial.turns[0] and [t.turn for t in done.turns] == [1, 2]


def test_actors_reach_an_openai_compatible_server_with_a_pickled_policy() -> None:
    """OpenAIPolicy travels to the actors and sends each episode's history to the local server."""
    with ChatServer(ScriptedModel(TASKS)) as server:
        policy = OpenAIPolicy("test-model", base_url=server.url, backoff=0.01)
        result = run_rollouts(TASKS[:2], policy, RolloutConfig(max_turns=3, backend="ray", concurrency=4))
        requests = server.chat_requests
    assert result.errors == []
    assert all(t.model == "test-model" and t.turns[0].usage for t in result.trajectories)
    assert len(requests) == sum(len(t.turns) for t in result.trajectories)
    assert max(len(r.messages) for r in requests) == 2 * max(len(t.turns) for t in result.trajectories)


def test_the_cli_runs_on_ray_with_backend_ray(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`agentenv run --backend ray` uses the running Ray instance and records the backend."""
    import structlog

    from agentenv.cli import main

    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in TASKS[:2]))
    try:
        code = main(["run", "--backend", "ray", "--tasks", str(tasks_file), "--samples", "2",
                     "--out", str(tmp_path / "run"), "--no-progress"])
    finally:
        structlog.reset_defaults()
    assert code == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["run"]["backend"] == "ray" and summary["episodes"] == 4
