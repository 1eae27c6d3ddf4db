"""TRL's tool env: a submission the sandbox could not grade is not a turn, and the rollout's
reward is None (TRL masks it), never 0; the next episode is scored as usual."""

from __future__ import annotations

from typing import Any

import pytest

from agentenv.errors import SandboxError
from agentenv.integrations.trl import environment_factory, to_records
from agentenv.tasks.schema import Task

ADD = Task(name="add", prompt="Write add.", entry_point="add", checks=("assert add(2, 3) == 5",))
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return 0\n"
ROW = {k: v for k, v in to_records([ADD])[0].items() if k != "prompt"}


def _lost(*args: Any, **kwargs: Any) -> Any:
    raise SandboxError("the sandbox worker died twice while running this submission")


def test_an_infra_fault_is_no_turn_and_masks_the_rollout(monkeypatch: pytest.MonkeyPatch) -> None:
    env = environment_factory([ADD], max_turns=2)()
    env.reset(**ROW)
    monkeypatch.setattr(env._grader, "score", _lost)
    feedback = env.submit(WRONG)
    assert "not graded" in feedback
    trajectory = env.env.trajectory
    assert trajectory is not None and trajectory.turns == []
    assert env.get_reward() is None
    monkeypatch.undo()
    env.submit(WRONG)  # the turn is still there to take
    assert env.get_reward() is None  # the episode was disturbed: still masked
    env.reset(**ROW)
    env.submit(RIGHT)
    assert env.get_reward() == 1.0
