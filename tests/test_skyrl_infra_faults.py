"""SkyRL: a step the sandbox could not grade is no turn and says so (metadata infra_error),
instead of an exception that stops the batch; the episode goes on."""

from __future__ import annotations

from typing import Any

import pytest

from agentenv.errors import SandboxError
from agentenv.tasks.schema import Task

skyrl_gym = pytest.importorskip("skyrl_gym")
from agentenv.integrations.skyrl import ENV_ID, to_skyrl_records  # noqa: E402

ADD = Task(name="add", prompt="Write `add(a, b)`.", entry_point="add",
           checks=("assert add(2, 3) == 5",))
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


def _lost(*args: Any, **kwargs: Any) -> Any:
    raise SandboxError("the sandbox worker died twice while running this submission")


def test_an_infra_fault_is_flagged_and_the_turn_can_be_taken_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from omegaconf import OmegaConf

    row = to_skyrl_records([ADD], max_turns=2)[0]
    env = skyrl_gym.make(ENV_ID, env_config=OmegaConf.create({}), extras=row)
    env.init(row["prompt"])
    monkeypatch.setattr(env.env.grader, "score", _lost)
    out = env.step(RIGHT)
    assert not out["done"] and "infra_error" in out["metadata"]
    assert "not graded" in out["observations"][0]["content"]
    monkeypatch.undo()
    out = env.step(RIGHT)
    assert out["done"] and out["reward"] == 1.0
    assert env.get_metrics()["turns"] == 1
