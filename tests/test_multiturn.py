"""MultiTurnCodingEnv: the revise-on-failure loop, its RL semantics, budget, feedback and records."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentenv import MultiTurnCodingEnv
from agentenv.envs.budget import MIN_REPLY_TOKENS
from agentenv.envs.conversation import ConversationState
from agentenv.errors import EnvStateError, SandboxError
from agentenv.grading.redact import redact_secrets, secret_values
from agentenv.grading.scoring import SandboxGrader, Scored
from agentenv.policies import ScriptedPolicy, mock_policy
from agentenv.records import Completion, Trajectory
from agentenv.tasks import Task
from agentenv.tasks.builtin import builtin_tasks

ADD4 = Task(
    name="add4",
    prompt="Write a Python function `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    checks=(
        "assert add(2, 3) == 5",
        "assert add(10, 5) == 15",
        "assert add(-1, 1) == 0",
        "assert add(-4, -6) == -10",
    ),
)
WRONG = "Here you go:\n```python\ndef add(a, b):\n    return a - b\n```"             # 0 of 4
HALF = "Fixed:\n```python\ndef add(a, b):\n    return abs(a) + abs(b)\n```"           # 2 of 4
RIGHT = "Now correct:\n```python\ndef add(a, b):\n    return a + b\n```"              # 4 of 4

# Hidden checks carry a marker that must never reach the policy under feedback_from="visible".
HIDDEN_MARK = "HIDDEN-7f3a"
VISIBLE_TASK = Task(
    name="add_visible",
    prompt="Write a Python function `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    checks=(
        "assert add(2, 3) == 5",
        f"assert add(1000, 2000) == 3000, '{HIDDEN_MARK} big'",
        f"assert add(-7, -8) == -15, '{HIDDEN_MARK} negative'",
        f"assert add(0, 0) == 0, '{HIDDEN_MARK} zero'",
    ),
    visible_checks=("assert add(2, 3) == 5",),
)
ONLY_VISIBLE = "```python\ndef add(a, b):\n    return 5\n```"  # passes the visible check only


def run_episode(env: MultiTurnCodingEnv, policy: Callable[[dict[str, Any]], str], **reset: Any
                ) -> tuple[list[dict[str, Any]], list[float], list[dict[str, Any]]]:
    """The walk-through's loop; returns every observation, reward and info."""
    obs = env.reset(**reset)
    observations, rewards, infos = [obs], [], []
    done = False
    while not done:
        obs, reward, done, info = env.step(policy(obs))
        observations.append(obs)
        rewards.append(reward)
        infos.append(info)
    return observations, rewards, infos


def scripted(*answers: str) -> Callable[[dict[str, Any]], str]:
    """A policy answering turn k with answers[k-1] (the last one repeats)."""
    def policy(obs: dict[str, Any]) -> str:
        return answers[min(obs["turn"], len(answers)) - 1]
    return policy


# -- the walk-through and the done-when list -------------------------------------------------

def test_walkthrough_multiturn_loop_runs_as_written() -> None:
    """`MultiTurnCodingEnv(max_turns=3, seed=0)` and the while-not-done loop solve `add` by revision."""
    env = MultiTurnCodingEnv(max_turns=3, seed=0)
    policy = ScriptedPolicy()
    idx = 0
    obs = env.reset(task_index=idx)
    done = False
    steps = 0
    while not done:
        raw = policy(obs)
        obs, reward, done, info = env.step(raw)
        steps += 1
    assert info["stop_reason"] == "solved" and reward > 0 and env.trajectory is not None
    assert env.trajectory.final_reward == 1.0 and sum(env.trajectory.rewards) > 1.0  # scores per turn
    assert steps == 2  # the scripted buggy attempt, then the fix
    assert env.state is ConversationState.SOLVED


def test_wrong_half_right_on_add_gives_rewards_deltas_and_solved() -> None:
    """Wrong → half-right → right on a 4-check `add` scores 0, .5, 1; the step rewards are the deltas
    0, .5, .5 (summing to the final score); solved."""
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3)
    _, rewards, infos = run_episode(env, scripted(WRONG, HALF, RIGHT))
    assert rewards == [0.0, 0.5, 0.5] and sum(rewards) == 1.0
    assert env.trajectory is not None and env.trajectory.rewards == [0.0, 0.5, 1.0]
    assert [i["delta"] for i in infos] == [0.0, 0.5, 0.5]
    assert infos[-1]["stop_reason"] == "solved"
    assert infos[-1]["terminated"] is True and infos[-1]["truncated"] is False
    traj = env.trajectory
    assert traj is not None
    assert [t.delta for t in traj.turns] == [0.0, 0.5, 0.5]
    assert [t.outcome for t in traj.turns] == ["wrong_answer", "wrong_answer", "pass"]
    assert traj.turns[1].newly_passed == (0, 1) and traj.turns[2].newly_passed == (2, 3)
    assert traj.solved_turn == 3 and traj.final_reward == 1.0 and not traj.first_turn_solved


def test_always_wrong_policy_ends_after_exactly_max_turns_truncated() -> None:
    """An always-wrong policy gets exactly max_turns steps, then truncation with stop_reason max_turns."""
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=4)
    _, rewards, infos = run_episode(env, scripted(WRONG))
    assert len(rewards) == 4
    assert [i["truncated"] for i in infos] == [False, False, False, True]
    assert infos[-1]["stop_reason"] == "max_turns" and infos[-1]["terminated"] is False
    assert env.state is ConversationState.OUT_OF_TURNS
    assert env.trajectory is not None and env.trajectory.truncated


def test_token_budget_ends_a_long_episode_with_token_budget() -> None:
    """A budget far below 50 turns of feedback ends the episode early with stop_reason token_budget."""
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=50, token_budget=1200)
    observations, rewards, infos = run_episode(env, scripted(WRONG))
    assert 1 < len(rewards) < 50
    assert infos[-1]["stop_reason"] == "token_budget" and infos[-1]["truncated"] is True
    assert env.state is ConversationState.OUT_OF_TOKENS
    for obs in observations[:-1]:  # every observation handed to the policy fits the budget
        assert obs["tokens_used"] <= 1200 and obs["tokens_left"] == 1200 - obs["tokens_used"]
    cumulative = [t.cumulative_tokens for t in env.trajectory.turns]  # type: ignore[union-attr]
    assert cumulative == sorted(cumulative)


def test_feedback_is_trimmed_to_the_room_left_before_giving_up() -> None:
    """When the feedback does not fit but a useful part does, it is cut with a marker and the episode goes on."""
    probe = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3)
    probe.reset()
    _, _, _, info = probe.step(WRONG)
    feedback_tokens = info["observation_tokens"]
    after_action = info["tokens_used"] - feedback_tokens
    budget = after_action + feedback_tokens // 2 + MIN_REPLY_TOKENS  # half the feedback, and a reply
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3, token_budget=budget)
    env.reset()
    obs, _, done, info = env.step(WRONG)
    assert not done and info["feedback_trimmed"] is True
    assert "feedback truncated" in obs["feedback"]
    assert obs["feedback"].endswith("Reply with the complete corrected solution in a ```python code block.")
    assert "You have 2 attempts left." in obs["feedback"]  # the instructions survive the trim
    assert obs["messages"][-1]["content"] == obs["feedback"]
    assert obs["tokens_used"] <= budget - MIN_REPLY_TOKENS and obs["max_tokens"] >= MIN_REPLY_TOKENS
    assert info["observation_tokens"] < feedback_tokens


def test_user_template_directory_changes_the_feedback_text(tmp_path: Path) -> None:
    """A feedback.j2 in prompts_dir replaces the packaged one; the others stay packaged."""
    (tmp_path / "feedback.j2").write_text(
        "CUSTOM turn {{ turn }}: {{ passed }}/{{ total }}"
        "{% for f in failures %} | {{ f.kind }} {{ f.check }}{% endfor %}"
        " ({{ turns_left }} left)", encoding="utf-8")
    default = MultiTurnCodingEnv(tasks=[ADD4])
    env = MultiTurnCodingEnv(tasks=[ADD4], prompts_dir=tmp_path)
    env.reset()
    obs, _, _, _ = env.step(HALF)
    assert obs["feedback"].startswith("CUSTOM turn 1: 2/4 | assertion assert add(-1, 1) == 0")
    assert obs["feedback"].endswith("(2 left)")
    assert env.template_ids["feedback"] != default.template_ids["feedback"]
    assert env.template_ids["system"] == default.template_ids["system"]
    assert env.trajectory is not None
    assert env.trajectory.template_ids == dict(env.template_ids)


def test_visible_feedback_never_shows_hidden_check_text() -> None:
    """With feedback_from="visible", no hidden check text reaches any observation or info."""
    env = MultiTurnCodingEnv(tasks=[VISIBLE_TASK], max_turns=3, feedback_from="visible")
    wrong = "```python\ndef add(a, b):\n    return a - b - 1\n```"
    observations, rewards, infos = run_episode(env, scripted(wrong, ONLY_VISIBLE, ONLY_VISIBLE))
    assert infos[-1]["stop_reason"] == "max_turns"
    assert rewards == [0.0, 0.25, 0.0]  # reward still comes from the 4 hidden checks (as deltas)
    shown = json.dumps(observations) + json.dumps(infos)
    assert HIDDEN_MARK not in shown and "add(1000, 2000)" not in shown and "add(-7, -8)" not in shown
    assert "assert add(2, 3) == 5" in observations[1]["feedback"]  # the visible failure is shown
    assert "passes every visible example" in observations[2]["feedback"]
    assert env.trajectory is not None and env.trajectory.feedback_from == "visible"
    assert env.trajectory.decided_by == "checks"
    assert [t.visible_passed for t in env.trajectory.turns] == [0, 1, 1]


def test_default_feedback_shows_hidden_failures_for_seed_compatibility() -> None:
    """With the default feedback_from="all", hidden failures are shown (the contrast to the test above)."""
    env = MultiTurnCodingEnv(tasks=[VISIBLE_TASK], max_turns=2)
    env.reset()
    obs, reward, _, _ = env.step(ONLY_VISIBLE)
    assert reward == 0.25 and "add(1000, 2000)" in obs["feedback"]


def test_visible_mode_solves_on_hidden_checks_only() -> None:
    """Termination follows the hidden checks: a full solution ends the episode as solved."""
    env = MultiTurnCodingEnv(tasks=[VISIBLE_TASK], max_turns=3, feedback_from="visible")
    _, rewards, infos = run_episode(env, scripted(ONLY_VISIBLE, RIGHT))
    assert rewards == [0.25, 0.75] and infos[-1]["stop_reason"] == "solved"


def test_secret_env_var_raised_by_candidate_code_never_reaches_an_observation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Candidate code that raises a secret env var's value cannot put it into an observation."""
    secret = "sk-test-9f8e7d6c5b4a39281706"
    monkeypatch.setenv("AGENTENV_TEST_OPENAI_API_KEY", secret)
    leaky = ("```python\ndef add(a, b):\n    import os\n"
             "    raise RuntimeError('key=' + os.environ.get('AGENTENV_TEST_OPENAI_API_KEY', 'absent'))\n```")
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=2)
    observations, _, infos = run_episode(env, scripted(leaky))
    assert "RuntimeError" in observations[1]["feedback"]  # the exception is reported...
    everything = json.dumps(observations) + json.dumps(infos)
    assert secret not in everything  # ...but never the secret
    assert secret not in json.dumps(env.trajectory.to_dict())  # type: ignore[union-attr]


def test_secret_value_in_a_failure_message_is_redacted_from_feedback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Even a secret that reaches a failure message (here: written into the code) is redacted from feedback."""
    secret = "tok-5e4d3c2b1a0f9e8d"
    monkeypatch.setenv("AGENTENV_TEST_TOKEN", secret)
    leaky = f"```python\ndef add(a, b):\n    raise RuntimeError('{secret}')\n```"
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=2)
    env.reset()
    obs, _, _, info = env.step(leaky)
    assert secret not in obs["feedback"] and "[redacted]" in obs["feedback"]
    assert secret not in json.dumps(info["failures"])


def test_redact_secrets_replaces_every_secret_value() -> None:
    """redact_secrets removes each configured secret; secret_values picks secret-looking names only."""
    env = {"MY_API_KEY": "abcdefgh1234", "PATH": "/usr/bin:/bin", "GH_TOKEN": "short"}
    secrets = secret_values(env)
    assert secrets == ("abcdefgh1234",)
    assert redact_secrets("x abcdefgh1234 y abcdefgh1234", secrets) == "x [redacted] y [redacted]"


def test_secret_values_follow_the_process_environment_as_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret set, changed or removed after an earlier call is seen by the next one."""
    monkeypatch.delenv("AGENTENV_TEST_SECRET", raising=False)
    before = secret_values()
    monkeypatch.setenv("AGENTENV_TEST_SECRET", "first-value-123")
    assert "first-value-123" in secret_values() and "first-value-123" not in before
    monkeypatch.setenv("AGENTENV_TEST_SECRET", "second-value-456")
    assert "second-value-456" in secret_values() and "first-value-123" not in secret_values()
    monkeypatch.delenv("AGENTENV_TEST_SECRET")
    assert secret_values() == before


def test_long_failure_messages_are_truncated_with_a_visible_marker() -> None:
    """A 20,000-character exception message reaches the feedback cut, with a marker."""
    noisy = "```python\ndef add(a, b):\n    raise ValueError('x' * 20000)\n```"
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=2)
    env.reset()
    obs, _, _, _ = env.step(noisy)
    assert "truncated" in obs["feedback"]
    assert len(obs["feedback"]) < 4 * 1500


# -- observations ----------------------------------------------------------------------------

def test_first_observation_has_the_documented_keys_and_no_hidden_checks() -> None:
    """reset() returns prompt, entry_point, task_name, messages, feedback, turn, turns_left, tokens."""
    env = MultiTurnCodingEnv()
    for index, task in enumerate(builtin_tasks()):
        obs = env.reset(task_index=index)
        assert {"prompt", "entry_point", "task_name", "messages", "feedback", "turn", "turns_left",
                "tokens_used", "tokens_left"} <= set(obs)
        assert (obs["turn"], obs["turns_left"], obs["feedback"], obs["tokens_left"]) == (1, 3, "", None)
        assert [m["role"] for m in obs["messages"]] == ["system", "user"]
        text = json.dumps(obs)
        for check in set(task.checks) - set(task.visible_checks):
            assert str(check) not in text, (task.name, check)


def test_messages_are_the_whole_conversation_in_chat_format() -> None:
    """After two turns the messages alternate assistant (raw text) and user (feedback)."""
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3)
    env.reset()
    env.step(WRONG)
    obs, _, _, _ = env.step(HALF)
    roles = [m["role"] for m in obs["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert obs["messages"][2]["content"] == WRONG and obs["messages"][4]["content"] == HALF
    assert obs["messages"][-1]["content"] == obs["feedback"]
    assert (obs["turn"], obs["turns_left"]) == (3, 1)
    obs["messages"].append({"role": "user", "content": "edited by the policy"})
    obs["messages"][0]["content"] = "overwritten"
    assert env.step(RIGHT)[0]["messages"][0]["content"] != "overwritten"


def test_tokens_used_adds_only_what_each_step_adds() -> None:
    """tokens_used grows by exactly the action and feedback tokens of each step (no re-counting)."""
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3)
    obs = env.reset()
    before = obs["tokens_used"]
    for answer in (WRONG, HALF):
        obs, _, _, info = env.step(answer)
        assert obs["tokens_used"] == before + info["action_tokens"] + info["observation_tokens"]
        before = obs["tokens_used"]
    assert obs["tokens_used"] == env.counter.count_chat(obs["messages"])  # the API's prompt_tokens


# -- state errors and the async twin ---------------------------------------------------------

def test_step_before_reset_says_to_call_reset() -> None:
    """step() before reset() raises EnvStateError naming reset()."""
    env = MultiTurnCodingEnv(tasks=[ADD4])
    with pytest.raises(EnvStateError, match=r"reset\(\)"):
        env.step(RIGHT)


def test_step_after_the_episode_ended_says_to_call_reset() -> None:
    """step() after done raises EnvStateError naming reset(); reset() starts a fresh episode."""
    env = MultiTurnCodingEnv(tasks=[ADD4])
    env.reset()
    env.step(RIGHT)
    with pytest.raises(EnvStateError, match=r"reset\(\)"):
        env.step(RIGHT)
    obs = env.reset()
    assert obs["turn"] == 1 and env.state is ConversationState.AWAITING_SUBMISSION


def test_astep_gives_the_same_episode_as_step() -> None:
    """astep() runs the same logic with the awaited sandbox: same rewards, records and messages."""
    sync_env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3)
    _, sync_rewards, _ = run_episode(sync_env, scripted(WRONG, HALF, RIGHT))

    async def episode() -> tuple[list[float], Trajectory]:
        env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3)
        obs = env.reset()
        rewards, done = [], False
        while not done:
            obs, reward, done, _ = await env.astep(scripted(WRONG, HALF, RIGHT)(obs))
            rewards.append(reward)
        assert env.trajectory is not None
        return rewards, env.trajectory

    rewards, trajectory = asyncio.run(episode())
    assert rewards == sync_rewards
    assert sync_env.trajectory is not None
    strip = ("exec_seconds",)
    assert [{k: v for k, v in t.to_dict().items() if k not in strip} for t in trajectory.turns] == \
        [{k: v for k, v in t.to_dict().items() if k not in strip} for t in sync_env.trajectory.turns]


def test_overlapping_asteps_on_one_env_are_refused() -> None:
    """A second astep() while the first is grading raises EnvStateError; the first completes."""
    async def both() -> tuple[Any, Any]:
        env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3)
        env.reset()
        first, second = await asyncio.gather(env.astep(WRONG), env.astep(WRONG),
                                             return_exceptions=True)
        return first, second

    first, second = asyncio.run(both())
    assert isinstance(first, tuple) and first[1] == 0.0
    assert isinstance(second, EnvStateError) and "being graded" in str(second)


def test_reset_while_a_step_is_being_graded_is_refused() -> None:
    """reset() during a pending astep() raises EnvStateError; the step still completes."""
    async def race() -> tuple[Any, Any]:
        env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3)
        env.reset()

        async def reset_soon() -> None:
            await asyncio.sleep(0)
            env.reset()

        stepped, reset = await asyncio.gather(env.astep(RIGHT), reset_soon(), return_exceptions=True)
        return stepped, reset

    stepped, reset = asyncio.run(race())
    assert isinstance(stepped, tuple) and stepped[3]["stop_reason"] == "solved"
    assert isinstance(reset, EnvStateError) and "being graded" in str(reset)


class FlakyGrader:
    """A grader whose first call fails like a broken sandbox, then grades for real."""

    def __init__(self) -> None:
        self.inner = SandboxGrader()
        self.calls = 0

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        self.calls += 1
        if self.calls == 1:
            raise SandboxError("sandbox worker died; retry")
        return self.inner.score(task, code, timeout=timeout)

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored:
        return self.score(task, code, timeout=timeout)


def test_a_grader_fault_leaves_the_turn_retryable() -> None:
    """With on_infra_error="raise" an infrastructure error propagates, records nothing, and the
    same turn can be stepped again (the default flags it instead: tests/test_env_infra_faults.py)."""
    env = MultiTurnCodingEnv(tasks=[ADD4], grader=FlakyGrader(), on_infra_error="raise")
    obs = env.reset()
    with pytest.raises(SandboxError):
        env.step(WRONG)
    assert env.state is ConversationState.AWAITING_SUBMISSION
    assert env.trajectory is not None and env.trajectory.turns == []
    obs2, reward, _, info = env.step(WRONG)
    assert info["turn"] == 1 and reward == 0.0
    assert obs2["messages"][:2] == obs["messages"] and len(obs2["messages"]) == 4


# -- records ---------------------------------------------------------------------------------

def test_trajectory_round_trips_through_json_with_episode_fields() -> None:
    """env.trajectory survives json.dumps/loads and carries the episode-level fields."""
    env = MultiTurnCodingEnv(tasks=[ADD4], max_turns=3, seed=7, token_budget=5000)
    run_episode(env, scripted(WRONG, RIGHT))
    traj = env.trajectory
    assert traj is not None
    data = json.loads(json.dumps(traj.to_dict()))
    assert Trajectory.from_dict(data) == traj
    assert data["task_name"] == "add4" and data["seed"] == 7 and data["max_turns"] == 3
    assert data["token_budget"] == 5000 and data["stop_reason"] == "solved"
    assert data["solved_turn"] == 2 and data["first_turn_solved"] is False and data["final_reward"] == 1.0
    assert set(data["template_ids"]) == {"system", "task", "feedback"}
    turn = data["turns"][0]
    for key in ("turn", "response_text", "code", "code_hash", "outcome", "passed", "total",
                "fraction", "reward", "delta", "newly_passed", "newly_failed", "action_tokens",
                "observation_tokens", "cumulative_tokens", "exec_seconds"):
        assert key in turn
    assert turn["action_tokens"] > 0 and turn["observation_tokens"] > 0


def test_completion_usage_and_finish_reason_reach_the_turn_record() -> None:
    """A Completion's usage numbers and finish reason are copied into the TurnRecord."""
    env = MultiTurnCodingEnv(tasks=[ADD4])
    env.reset()
    env.step(Completion(RIGHT, usage={"prompt_tokens": 120, "completion_tokens": 30},
                        finish_reason="stop"))
    record = env.trajectory.turns[0]  # type: ignore[union-attr]
    assert record.usage == {"prompt_tokens": 120, "completion_tokens": 30}
    assert record.finish_reason == "stop"


def test_no_code_turn_is_gated_to_zero_and_told_so() -> None:
    """Prose without code scores 0 with outcome no_code and feedback saying code was missing."""
    env = MultiTurnCodingEnv(tasks=[ADD4])
    env.reset()
    obs, reward, done, info = env.step("I am not sure how to do this.")
    assert (reward, done, info["outcome"]) == (0.0, False, "no_code")
    assert "could not find any Python code" in obs["feedback"]


def test_reset_seed_makes_task_choice_reproducible() -> None:
    """The same seed picks the same sequence of tasks."""
    tasks = builtin_tasks()
    a = MultiTurnCodingEnv(tasks=tasks, seed=3)
    b = MultiTurnCodingEnv(tasks=tasks, seed=3)
    picks_a = [a.reset()["task_name"] for _ in range(6)]
    picks_b = [b.reset()["task_name"] for _ in range(6)]
    assert picks_a == picks_b
    assert a.reset(seed=11)["task_name"] == b.reset(seed=11)["task_name"]
    assert a.trajectory is not None and a.trajectory.seed == 11


def test_mock_policy_still_solves_add_in_one_turn() -> None:
    """The walk-through's mock policy solves `add` on the first turn: first_turn_solved."""
    env = MultiTurnCodingEnv(max_turns=3, seed=0)
    _, rewards, infos = run_episode(env, mock_policy, task_index=0)
    assert rewards == [1.0] and infos[0]["terminated"] is True
    assert env.trajectory is not None and env.trajectory.first_turn_solved
