"""A token budget that binds: the allowance in every observation, max_tokens on the wire, replies
cut at the allowance, chat counts as the API makes them, trimmed feedback that leaves a reply room."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentenv.envs.budget import MIN_REPLY_TOKENS
from agentenv.envs.coding import CodingEnv
from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.errors import ConfigError
from agentenv.policies import OpenAIPolicy, ScriptedPolicy
from agentenv.rollout.episode import run_episode
from agentenv.tasks import Task
from agentenv.tasks.builtin import builtin_tasks
from agentenv.testing import ChatServer
from agentenv.tokens import OFFLINE_ENCODING, TokenCounter, get_tokenizer

ADD = Task(name="add", prompt="Write `add(a, b)` returning a + b.", entry_point="add",
           checks=("assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(10, 5) == 15"))
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
# A correct answer buried after ~800 tokens of prose: it only passes if it is not cut.
LONG_RIGHT = ("Let me think step by step. " * 130) + "\n\n" + RIGHT


def cookbook_count(encoding: Any, messages: list[dict[str, str]]) -> int:
    """OpenAI's documented chat accounting for the cl100k/o200k models: 3 tokens per message,
    plus the role's and the content's tokens, plus 3 that prime the reply."""
    total = 0
    for message in messages:
        total += 3
        for value in message.values():
            total += len(encoding.encode_ordinary(value))
    return total + 3


def test_counts_match_the_apis_chat_accounting_for_the_shipped_encoding() -> None:
    encoding = get_tokenizer(OFFLINE_ENCODING)
    counter = TokenCounter(encoding)
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=3, tokenizer=encoding)
    obs = env.reset(task_index=0)
    assert obs["tokens_used"] == cookbook_count(encoding, obs["messages"]) == counter.count_chat(obs["messages"])
    for answer in (WRONG, WRONG):
        before = obs
        obs, _, _, info = env.step(answer)
        # the reply costs what the API bills as completion_tokens: its content, nothing more
        assert info["action_tokens"] == len(encoding.encode_ordinary(answer))
        assert before["tokens_used"] + info["action_tokens"] == \
            cookbook_count(encoding, before["messages"]) + len(encoding.encode_ordinary(answer))
        if not info["truncated"]:
            assert obs["tokens_used"] == cookbook_count(encoding, obs["messages"])


def test_an_overlong_reply_is_cut_at_the_allowance_and_graded_as_cut() -> None:
    """The audit's case: an ~800-token reply under a 300-token budget was graded whole, rewarded
    1.0 and ended "solved" at 927 tokens. Now it is cut at obs["max_tokens"]."""
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=3, token_budget=300)
    obs = env.reset(task_index=0)
    assert env.counter.count(LONG_RIGHT) > 700
    allowance = obs["max_tokens"]
    assert 0 < allowance <= 300 - obs["tokens_used"]
    obs, reward, _done, info = env.step(LONG_RIGHT)
    assert info["reply_cut"] and reward == 0.0 and info["outcome"] == "no_code"
    record = env.trajectory.turns[0]  # type: ignore[union-attr]
    assert record.reply_cut and record.finish_reason == "length"
    assert record.action_tokens == env.counter.count(record.response_text) <= allowance
    assert LONG_RIGHT.startswith(record.response_text)
    assert info["tokens_used"] <= 300


@pytest.mark.parametrize("budget", [260, 300, 400, 600, 900])
def test_no_point_of_any_builtin_episode_is_over_budget(budget: int) -> None:
    """Scripted replies on every builtin task: every request plus its reply fits the budget, and
    every observation handed to the policy leaves it room for a reply."""
    tasks = builtin_tasks()
    policy = ScriptedPolicy(tasks)
    for index, task in enumerate(tasks):
        env = MultiTurnCodingEnv(tasks=tasks, max_turns=4, token_budget=budget)
        try:
            obs = env.reset(task_index=index)
        except Exception:
            continue  # this task's prompt alone does not fit: refused up front, with a clear error
        done = False
        while not done:
            assert obs["tokens_used"] + obs["max_tokens"] <= budget
            assert obs["max_tokens"] >= 1
            obs, _, done, info = env.step(policy(obs))
            assert info["tokens_used"] <= budget, task.name
            if info["feedback_trimmed"] and not done:
                assert obs["max_tokens"] >= MIN_REPLY_TOKENS
                assert "attempt" in obs["feedback"].rsplit("\n\n", 1)[-1]


def test_the_openai_policy_sends_the_allowance_and_the_seed() -> None:
    with ChatServer([LONG_RIGHT, RIGHT]) as server:
        env = MultiTurnCodingEnv(tasks=[ADD], max_turns=3, token_budget=600, seed=0)
        policy = OpenAIPolicy("test-model", base_url=server.url, api_key="x", max_retries=0)
        trajectory = run_episode(env, policy, task_index=0, seed=1234)
        bodies = [r.body for r in server.chat_requests]
    assert bodies and all(b["seed"] == 1234 for b in bodies)
    assert all(isinstance(b["max_tokens"], int) and b["max_tokens"] < 600 for b in bodies)
    assert trajectory.total_tokens <= 600


def test_policy_max_tokens_is_the_smaller_of_its_own_and_the_allowance() -> None:
    policy = OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1", api_key="x", max_tokens=50)
    obs = {"prompt": "p"}
    assert policy.request({**obs, "max_tokens": 20})["max_tokens"] == 20
    assert policy.request({**obs, "max_tokens": 200})["max_tokens"] == 50
    assert policy.request({**obs, "max_tokens": None})["max_tokens"] == 50
    assert "seed" not in policy.request(obs)
    assert policy.request({**obs, "seed": 7})["seed"] == 7


def test_single_step_budget_binds_too() -> None:
    env = CodingEnv(tasks=[ADD], token_budget=200)
    obs = env.reset(task_index=0)
    assert obs["max_tokens"] == 200 - obs["tokens_used"]
    _, reward, done, info = env.step(LONG_RIGHT)
    assert done and info["reply_cut"] and reward == 0.0 and info["tokens_used"] <= 200


def test_a_budget_without_room_for_a_reply_is_refused() -> None:
    from agentenv.errors import ConfigError

    env = MultiTurnCodingEnv(tasks=[ADD], token_budget=60)
    with pytest.raises(ConfigError, match="no room for a reply"):
        env.reset(task_index=0)


@pytest.mark.parametrize("budget", [400, 500, 700, 1000, 1500])
def test_a_reply_that_uses_its_whole_allowance_still_gets_a_next_observation(budget: int) -> None:
    """While the allowance holds back a reserve (it is less than the room left), that reserve is
    exactly what the next observation (trimmed if need be) and a minimal reply need: a policy
    that always writes max_tokens tokens is never cut off there. Once the budget cannot hold
    another turn, the allowance is all the room left and the episode ends on its budget."""
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=4, token_budget=budget)
    obs = env.reset(task_index=0)
    done = False
    while not done:
        reserved = obs["max_tokens"] < budget - obs["tokens_used"]
        reply = env.counter.truncate(WRONG + "\n" + "more words here " * 600, obs["max_tokens"])
        obs, _, done, info = env.step(reply)
        assert not info["reply_cut"] and info["tokens_used"] <= budget
        if reserved:
            assert info["stop_reason"] != "token_budget"
            if not done:
                assert obs["max_tokens"] >= MIN_REPLY_TOKENS
        else:
            assert done


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budget=st.integers(150, 1200), max_turns=st.integers(1, 4),
       lengths=st.lists(st.integers(0, 900), min_size=4, max_size=4), right_at=st.integers(0, 4))
def test_no_reply_is_ever_graded_past_the_budget(budget: int, max_turns: int, lengths: list[int],
                                                 right_at: int) -> None:
    """Replies of any length (prose before the code, 0-900 words) under any budget: what is graded
    is never longer than the observation's allowance, and no request plus its graded reply
    exceeds the budget, as OpenAI's chat accounting counts it."""
    encoding = get_tokenizer(OFFLINE_ENCODING)
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=max_turns, token_budget=budget, tokenizer=encoding)
    try:
        obs = env.reset(task_index=0)
    except ConfigError:
        assume(False)  # no room for a reply: refused up front
    done, turn = False, 0
    while not done:
        allowance = obs["max_tokens"]
        prompt = cookbook_count(encoding, obs["messages"])
        assert prompt == obs["tokens_used"] and 1 <= allowance <= budget - prompt
        reply = "word " * lengths[turn] + (RIGHT if turn == right_at else WRONG)
        obs, _, done, _ = env.step(reply)
        record = env.trajectory.turns[-1]  # type: ignore[union-attr]
        graded = len(encoding.encode_ordinary(record.response_text))
        assert graded <= allowance and prompt + graded <= budget
        assert record.reply_cut == (len(encoding.encode_ordinary(reply)) > allowance)
        assert reply.startswith(record.response_text)
        turn += 1
