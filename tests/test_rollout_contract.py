"""The environment contract the runner drives (agentenv.rollout.contract): both envs satisfy
every part of it; an env that has only the required part (reset, step, trajectory) runs on the
sync and the async loop; an env missing an optional part is refused, naming it, where that part
is needed (a snapshot to continue from, a repair tree), never with an AttributeError."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentenv import CodingEnv, MultiTurnCodingEnv
from agentenv.errors import ConfigError, SandboxError
from agentenv.policies import ScriptedPolicy
from agentenv.records import Trajectory
from agentenv.rollout import RolloutConfig, arun_episode, run_episode, run_repair_trees
from agentenv.rollout.contract import (
    AsyncEnv,
    BranchingEnv,
    Env,
    ResumableEnv,
    TurnLimited,
    reset_takes_seed,
)
from agentenv.rollout.partial import partial_record
from agentenv.tasks.builtin import builtin_tasks

TASKS = builtin_tasks()[:2]


class Minimal:
    """Only what the contract requires: no seed in reset, no astep, no max_turns, no snapshots."""

    def __init__(self) -> None:
        self.trajectory: Trajectory | None = None
        self.resets: list[int | None] = []

    def reset(self, task_index: int | None = None) -> dict[str, Any]:
        self.resets.append(task_index)
        self.trajectory = Trajectory(task_name=f"task{task_index}", max_turns=2)
        return {"prompt": "say done"}

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        assert self.trajectory is not None
        self.trajectory.stop_reason = "solved"
        return {}, 1.0, action == "done", {}


@pytest.mark.parametrize("env_class", [CodingEnv, MultiTurnCodingEnv])
def test_both_envs_satisfy_every_part_of_the_contract(env_class: Any) -> None:
    env = env_class(tasks=TASKS)
    for part in (Env, AsyncEnv, TurnLimited, ResumableEnv, BranchingEnv):
        assert isinstance(env, part), part.__name__
    assert reset_takes_seed(env)


def test_an_env_with_only_the_required_part_runs_on_both_loops() -> None:
    """No seed= reaches a reset that does not take one; the async loop steps it in a thread."""
    env = Minimal()
    assert isinstance(env, Env) and not isinstance(env, (AsyncEnv, TurnLimited, ResumableEnv))
    assert not reset_takes_seed(env)
    sync = run_episode(env, lambda obs: "done", task_index=1, seed=7)
    asynchronous = asyncio.run(arun_episode(env, lambda obs: "done", task_index=0, seed=7))
    assert (sync.task_name, asynchronous.task_name) == ("task1", "task0") and env.resets == [1, 0]
    assert sync.policy == "<lambda>" and sync.stop_reason == "solved"


def test_a_snapshot_for_an_env_that_cannot_restore_is_refused_by_name() -> None:
    snapshot = MultiTurnCodingEnv(tasks=TASKS, max_turns=2)
    snapshot.reset(task_index=0)
    snapshot.step("no code here")
    with pytest.raises(ConfigError, match=r"has no restore\(\)"):
        run_episode(Minimal(), lambda obs: "done", snapshot=snapshot.snapshot())


def test_an_interrupted_episode_of_an_env_without_snapshots_keeps_no_partial_record() -> None:
    env = Minimal()
    env.reset(task_index=0)
    assert partial_record(env, lambda obs: "", "e", 0, SandboxError("lost")) is None


def test_a_repair_tree_refuses_an_env_it_cannot_branch() -> None:
    config = RolloutConfig(max_turns=2)
    with pytest.raises(ConfigError, match="cannot be branched"):
        run_repair_trees(TASKS[:1], ScriptedPolicy(TASKS), config, initial=1,
                         env_factory=lambda config, tasks, seed: Minimal())
