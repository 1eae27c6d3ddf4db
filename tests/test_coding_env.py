"""CodingEnv: the walk-through's single-step environment, end to end through the sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentenv import TASKS, CodingEnv, mock_policy
from agentenv.errors import ConfigError, EnvStateError
from agentenv.records import Completion
from agentenv.tasks import Task

ADD_TASK = Task(
    name="add4",
    prompt="Write add(a, b).",
    entry_point="add",
    checks=("assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-1, 1) == 0",
            "assert add(10, 5) == 15"),
    visible_checks=("assert add(1, 2) == 3", "assert add(2, 2) == 4"),
)
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


def test_walkthrough_episode_on_add_scores_one() -> None:
    """reset(task_index=0) poses `add`; the mock policy solves it with reward 1.0 and done=True."""
    env = CodingEnv()
    obs = env.reset(task_index=0)
    assert {k: obs[k] for k in ("prompt", "entry_point", "task_name")} == {
        "prompt": TASKS[0].prompt, "entry_point": "add", "task_name": "add"}
    assert [m["role"] for m in obs["messages"]] == ["system", "user"]
    assert TASKS[0].prompt.strip() in obs["messages"][1]["content"]
    obs2, reward, done, info = env.step(mock_policy(obs))
    assert (obs2, reward, done) == ({}, 1.0, True)
    assert info["task_name"] == "add" and info["passed"] == info["total"] == len(TASKS[0].checks)
    assert info["timed_out"] is False


def test_hidden_checks_never_appear_in_the_observation() -> None:
    """The observation is the prompt, not the tests."""
    env = CodingEnv(tasks=[ADD_TASK])
    obs = env.reset()
    text = repr(obs)
    assert "add(10, 5)" not in text and "add(-1, 1)" not in text
    assert "add(2, 2)" in text  # a visible check is shown as an example


def test_partial_solution_earns_the_dense_fraction() -> None:
    """A solution right on 2 of 4 hidden checks earns 0.5."""
    env = CodingEnv(tasks=[ADD_TASK])
    env.reset()
    half = "def add(a, b):\n    return a + b if a > 0 else 99\n"
    _, reward, _, info = env.step(half)
    assert reward == 0.5 and info["passed"] == 2
    assert {f["index"] for f in info["failures"]} == {1, 2}


def test_no_code_is_gated_to_zero_without_running_anything() -> None:
    """Prose with no code scores 0.0 with outcome no_code."""
    env = CodingEnv(tasks=[ADD_TASK])
    env.reset()
    _, reward, done, info = env.step("I cannot solve this, sorry!")
    assert (reward, done, info["outcome"], info["passed"]) == (0.0, True, "no_code", 0)


def test_step_before_reset_says_to_call_reset() -> None:
    """Gymnasium-style message naming the fix."""
    with pytest.raises(EnvStateError, match=r"reset\(\)"):
        CodingEnv().step(RIGHT)


def test_second_step_in_one_episode_says_to_call_reset() -> None:
    """A bandit episode has exactly one step."""
    env = CodingEnv(tasks=[ADD_TASK])
    env.reset()
    env.step(RIGHT)
    with pytest.raises(EnvStateError, match=r"reset\(\)"):
        env.step(RIGHT)


def test_reset_is_seeded() -> None:
    """Two envs with the same seed pose the same task sequence."""
    a, b = CodingEnv(seed=7), CodingEnv(seed=7)
    assert [a.reset()["task_name"] for _ in range(10)] == [b.reset()["task_name"] for _ in range(10)]


def test_bad_task_index_and_settings_are_clear_errors() -> None:
    """Out-of-range indices, empty task lists and bad timeouts raise ConfigError."""
    env = CodingEnv(tasks=[ADD_TASK])
    with pytest.raises(ConfigError, match="task_index"):
        env.reset(task_index=5)
    with pytest.raises(ConfigError):
        CodingEnv(tasks=[])
    with pytest.raises(ConfigError):
        CodingEnv(timeout=0)


def test_trajectory_records_the_single_turn_with_visible_results_and_usage() -> None:
    """env.trajectory holds one TurnRecord, the visible-check score and the server's usage."""
    env = CodingEnv(tasks=[ADD_TASK], seed=3)
    env.reset()
    wrong_on_visible = "def add(a, b):\n    return 4 if a == 2 else a + b\n"
    env.step(Completion(wrong_on_visible, usage={"prompt_tokens": 9, "completion_tokens": 4},
                        finish_reason="stop"))
    traj = env.trajectory
    assert traj is not None and traj.mode == "single_step" and traj.stop_reason == "single_step"
    (turn,) = traj.turns
    assert turn.outcome == "pass" and turn.reward == 1.0
    assert (turn.visible_passed, turn.visible_total) == (2, 2)
    assert turn.usage == {"prompt_tokens": 9, "completion_tokens": 4} and turn.finish_reason == "stop"
    assert traj.terminated and not traj.truncated
    assert turn.action_tokens > 0 and turn.cumulative_tokens > turn.action_tokens
    assert set(traj.template_ids) == {"system", "task", "feedback"}  # the verdict is rendered too


def test_custom_reward_function_is_used() -> None:
    """reward_fn plugs in any (result, code) -> float."""
    env = CodingEnv(tasks=[ADD_TASK], reward_fn=lambda r, c: 0.25 if r.all_passed else 0.0)
    env.reset()
    assert env.step(RIGHT)[1] == 0.25


def test_astep_matches_step() -> None:
    """The async twin gives the same reward and info as step."""
    env = CodingEnv(tasks=[ADD_TASK])
    env.reset()
    _, r1, _, i1 = env.step(RIGHT)
    env.reset()
    _, r2, _, i2 = asyncio.run(env.astep(RIGHT))
    assert r1 == r2 == 1.0
    assert {k: i1[k] for k in ("passed", "total", "outcome")} == {k: i2[k] for k in ("passed", "total", "outcome")}


def test_coding_env_is_the_one_turn_face_of_the_multi_turn_core(tmp_path: Path) -> None:
    """Same task, same answer, same options: the same score, record and template ids as a
    one-turn MultiTurnCodingEnv (prompts_dir included), only the stop reason differs."""
    from agentenv import MultiTurnCodingEnv

    (tmp_path / "task.j2").write_text("TASK: {{ prompt }}")
    half = "def add(a, b):\n    return a + b if a > 0 else 99\n"
    single = CodingEnv(tasks=[ADD_TASK], prompts_dir=tmp_path, feedback_from="visible")
    multi = MultiTurnCodingEnv(tasks=[ADD_TASK], max_turns=1, prompts_dir=tmp_path, feedback_from="visible")
    obs_s, obs_m = single.reset(task_index=0), multi.reset(task_index=0)
    assert obs_s["messages"] == obs_m["messages"] and obs_s["messages"][1]["content"].startswith("TASK:")
    _, reward_s, _, info_s = single.step(half)
    _, reward_m, _, info_m = multi.step(half)
    assert reward_s == reward_m == 0.5
    assert single.trajectory is not None and multi.trajectory is not None
    assert single.trajectory.template_ids == multi.trajectory.template_ids
    strip = {"exec_seconds"}
    record_s = {k: v for k, v in single.trajectory.turns[0].to_dict().items() if k not in strip}
    record_m = {k: v for k, v in multi.trajectory.turns[0].to_dict().items() if k not in strip}
    assert record_s == record_m
    assert (info_s["stop_reason"], info_m["stop_reason"]) == ("single_step", "max_turns")
