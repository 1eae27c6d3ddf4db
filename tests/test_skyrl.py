"""SkyRL-gym: our env made through skyrl_gym's registry (skyrl_gym.make(env_class, env_config,
extras=row)) and stepped the way SkyRL's generator steps a BaseTextEnv."""

from __future__ import annotations

from typing import Any

import pytest

from agentenv.tasks.schema import Task

skyrl_gym = pytest.importorskip("skyrl_gym")
from agentenv.integrations.skyrl import ENV_ID, CodingTextEnv, to_skyrl_records  # noqa: E402

ADD = Task(name="add", prompt="Write `add(a, b)`.", entry_point="add",
           checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(0, 0) == 0",
                   "assert add(10, 5) == 15"),
           visible_checks=("assert add(2, 3) == 5",))
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"


def generate(env: Any, prompt: list[dict[str, str]], replies: list[str]) -> tuple[list[dict[str, str]], list[float]]:
    """SkyRL's agent loop: init, then step each model output, appending the observations."""
    chat, _ = env.init(prompt)
    chat = list(chat)
    rewards = []
    for reply in replies:
        out = env.step(reply)
        rewards.append(out["reward"])
        chat += [{"role": "assistant", "content": reply}, *out["observations"]]
        if out["done"]:
            break
    env.close()
    return chat, rewards


def env_config(**options: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create(options)


def test_the_env_is_registered_under_its_env_class() -> None:
    """Importing the adapter registers agentenv_coding; rows name it as their env_class."""
    row = to_skyrl_records([ADD])[0]
    assert row["env_class"] == ENV_ID
    assert isinstance(skyrl_gym.make(ENV_ID, env_config=env_config(), extras=row), CodingTextEnv)


def test_a_revision_episode_through_skyrls_loop() -> None:
    """Wrong then right: feedback comes back as a user message, the episode ends solved."""
    row = to_skyrl_records([ADD], max_turns=3)[0]
    env = skyrl_gym.make(ENV_ID, env_config=env_config(feedback_from="visible"), extras=row)
    chat, rewards = generate(env, row["prompt"], [WRONG, RIGHT, RIGHT])
    # Step rewards are the change in score (the env's default), so they sum to the final score.
    assert rewards == [0.25, 0.75] and sum(rewards) == 1.0
    assert [m["role"] for m in chat[-3:]] == ["assistant", "user", "assistant"]
    assert "add(10, 5)" not in chat[-2]["content"]  # visible-only feedback
    assert env.get_metrics() == {"turns": 2, "solved": 1.0, "final_reward": 1.0}


def test_env_config_and_row_set_the_turn_limit() -> None:
    """env_config.max_turns applies; a row's max_turns overrides it; out of turns ends the episode."""
    row = dict(to_skyrl_records([ADD])[0], max_turns=None)
    env = skyrl_gym.make(ENV_ID, env_config=env_config(max_turns=2, timeout=2.0), extras=row)
    assert env.max_turns == 2 and env.env.timeout == 2.0
    _, rewards = generate(env, row["prompt"], [WRONG, WRONG, WRONG])
    assert len(rewards) == 2 and env.env.trajectory.stop_reason == "max_turns"
    row = to_skyrl_records([ADD], max_turns=1)[0]
    assert skyrl_gym.make(ENV_ID, env_config=env_config(max_turns=5), extras=row).max_turns == 1


def test_a_row_without_a_task_says_how_to_build_one() -> None:
    """The error names to_skyrl_records."""
    from agentenv.errors import ConfigError

    with pytest.raises(ConfigError, match="to_skyrl_records"):
        skyrl_gym.make(ENV_ID, env_config=env_config(), extras={"extra_info": {}})
