"""verifiers 0.4 (verifiers.v1): our taskset and env resolved by plugin id through verifiers'
own loaders, our rubric scored by verifiers' Task.score on real Traces, and the env's run()
driven turn by turn.

verifiers' rollout loop itself (Env.run_episode) launches the agent as a harness program that
its runtime bootstraps with uv downloaded at run time, which this offline machine cannot do;
run() is therefore driven through a stand-in with the shape of verifiers' Interaction API
(turn(message) -> Segment(last_reply, terminated), .trace), and the trace it fills is real."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

vf = pytest.importorskip("verifiers.v1")
from agentenv.integrations.verifiers import (  # noqa: E402
    CodingTask,
    CodingTaskset,
    CodingTasksetConfig,
    CodingVerifiersEnv,
)

RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"


def add_task(**config: Any) -> CodingTask:
    from verifiers.v1.utils.loaders import load_taskset

    taskset = load_taskset(CodingTasksetConfig(id="agentenv_coding", **config))
    return next(iter(taskset.include(names=["add"])))


def trace_for(task: CodingTask, reply: str | None = None) -> Any:
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask

    return Trace(task=TraceTask(type=type(task).__name__, data=task.data),
                 agent=AgentInfo(config=vf.AgentConfig()), root_reply=reply)


def test_verifiers_resolves_our_taskset_and_env_by_plugin_id() -> None:
    """--env.taskset.id agentenv_coding finds CodingTaskset and, with it, CodingVerifiersEnv."""
    from verifiers.v1.utils.loaders import environment_class, taskset_class

    assert taskset_class("agentenv_coding") is CodingTaskset
    assert environment_class("agentenv_coding") is CodingVerifiersEnv


def test_the_taskset_prompts_each_task_without_its_hidden_checks() -> None:
    """One task per builtin task; the prompt is agentenv's task template."""
    from verifiers.v1.utils.loaders import load_taskset

    from agentenv import TASKS

    tasks = list(load_taskset(CodingTasksetConfig(id="agentenv_coding")))
    assert [t.data.name for t in tasks] == [t.name for t in TASKS]
    add = tasks[0]
    assert "add" in add.data.prompt_text and "add(10, 5)" not in add.data.prompt_text
    assert add.data.system_prompt


@pytest.mark.parametrize(("reply", "reward"), [(RIGHT, 1.0), (WRONG, 0.2), ("no code", 0.0)])
def test_verifiers_scores_a_reply_with_our_rubric(reply: str, reward: float) -> None:
    """Task.score (verifiers' own scoring) records tests_passed from the sandbox."""
    task = add_task()
    trace = trace_for(task, reply)
    asyncio.run(task.score(trace))
    assert trace.rewards["tests_passed"].score == pytest.approx(reward)
    assert trace.rewards["tests_passed"].weight == 1.0
    assert trace.metrics["turns"] == 1.0


@dataclass
class Segment:
    last_reply: str
    terminated: bool = False


class Interaction:
    """verifiers' Interaction in miniature: each turn() answers with the next scripted reply."""

    def __init__(self, task: CodingTask, replies: list[str]) -> None:
        self.trace = trace_for(task)
        self.replies = list(replies)
        self.user_turns: list[str] = []

    async def turn(self, message: str | None = None) -> Segment:
        if message is not None:
            self.user_turns.append(message)
        if not self.replies:
            return Segment("", terminated=True)
        return Segment(self.replies.pop(0))


class Player:
    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.last: Interaction | None = None

    @contextlib.asynccontextmanager
    async def interaction(self, task: CodingTask) -> AsyncIterator[Interaction]:
        self.last = Interaction(task, self.replies)
        yield self.last


@dataclass
class Agents:
    player: Player


def loaded_env(**config: Any) -> tuple[CodingVerifiersEnv, CodingTask]:
    """The env as verifiers builds it (load_environment), and its taskset's `add` task."""
    from verifiers.v1.utils.loaders import load_environment

    from agentenv.integrations.verifiers import CodingVerifiersEnvConfig

    env = load_environment(CodingVerifiersEnvConfig(
        taskset=CodingTasksetConfig(id="agentenv_coding", **config)))
    assert isinstance(env, CodingVerifiersEnv)
    return env, next(iter(env.taskset.include(names=["add"])))


def test_the_env_feeds_back_failures_until_the_reply_passes() -> None:
    """run(): wrong then right; the feedback is the user turn; the rubric reads the episode."""
    env, task = loaded_env(max_turns=3, feedback_from="visible")
    player = Player([WRONG, RIGHT, RIGHT])
    asyncio.run(env.run(task, Agents(player)))
    interaction = player.last
    assert interaction is not None and len(interaction.user_turns) == 1
    assert "add(10, 5)" not in interaction.user_turns[0]  # visible-only feedback
    episode = interaction.trace.info["agentenv"]
    assert episode["stop_reason"] == "solved" and episode["outcomes"][-1] == "pass"
    asyncio.run(task.score(interaction.trace))
    assert interaction.trace.rewards["tests_passed"].score == 1.0
    assert interaction.trace.metrics == {"solved": 1.0, "turns": 2.0}


def test_the_env_stops_at_max_turns() -> None:
    """Out of turns ends the exchange with the last score as the reward."""
    env, task = loaded_env(max_turns=2)
    player = Player([WRONG, WRONG, RIGHT])
    asyncio.run(env.run(task, Agents(player)))
    assert player.last is not None
    assert player.last.trace.info["agentenv"]["stop_reason"] == "max_turns"
    assert player.last.trace.info["agentenv"]["turns"] == 2
