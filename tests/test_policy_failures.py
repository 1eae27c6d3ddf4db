"""OpenAIPolicy when things go wrong, over real HTTP against the stand-in server: the server's
words in every error, what is retried, the circuit breaker, the preflight, streaming."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agentenv import MultiTurnCodingEnv
from agentenv.errors import PolicyCallError, PolicyError, ServerUnavailable
from agentenv.policies import OpenAIPolicy
from agentenv.records import Completion
from agentenv.rollout import RolloutConfig, arun_episode, run_episode, run_rollouts
from agentenv.tasks import Task
from agentenv.testing import ChatReply, ChatServer, ScriptedModel

ADD = Task(
    name="add",
    prompt="Write a Python function `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0"),
    reference_solution="def add(a, b):\n    return a + b\n",
    metadata={"attempts": ["def add(a, b):\n    return a - b\n"]},
)
SOLUTION = "```python\ndef add(a, b):\n    return a + b\n```"
OBS = {"prompt": ADD.prompt, "entry_point": "add", "task_name": "add"}
PATHS = ("sync", "async")


def fast(url: str, **kw: Any) -> OpenAIPolicy:
    options: dict[str, Any] = {"backoff": 0.01, "max_backoff": 0.05, "timeout": 5.0}
    options.update(kw)
    return OpenAIPolicy("test-model", base_url=url, **options)


def call(policy: OpenAIPolicy, path: str, obs: Mapping[str, Any] = OBS) -> Completion:
    """One call, blocking (sync) or awaited (async)."""
    if path == "sync":
        return policy(obs)

    async def main() -> Completion:
        try:
            return await policy.acall(obs)
        finally:
            await policy.aclose()

    return asyncio.run(main())


def failure(policy: OpenAIPolicy, path: str) -> BaseException:
    with pytest.raises(PolicyError) as caught:
        call(policy, path)
    return caught.value


@pytest.mark.parametrize("path", PATHS)
def test_a_rejected_request_says_what_the_server_said_and_is_not_retried(path: str) -> None:
    """A 400/422 carries the server's message and status, is not transient, and is sent once."""
    for status in (400, 422):
        with ChatServer([ChatReply("this server is pinned to model tiny-llama", status=status)]) as s:
            error = failure(fast(s.url), path)
            assert len(s.chat_requests) == 1
        assert isinstance(error, PolicyCallError) and not error.transient and error.status == status
        assert f"({status}): this server is pinned to model tiny-llama" in str(error)


@pytest.mark.parametrize("path", PATHS)
def test_408_409_429_and_5xx_are_retried_and_the_last_words_are_kept(path: str) -> None:
    """Transient statuses are retried; when they persist the error is transient and quotes them."""
    with ChatServer([ChatReply(status=408), ChatReply(status=409), ChatReply(status=429, retry_after=0),
                     ChatReply(SOLUTION)]) as s:
        assert "a + b" in call(fast(s.url), path)
        assert len(s.chat_requests) == 4
    with ChatServer([ChatReply("model 'nope' is not loaded", status=500)]) as s:
        error = failure(fast(s.url, max_retries=2), path)
        assert len(s.chat_requests) == 3
    assert isinstance(error, PolicyCallError) and error.transient
    assert "500 after 3 attempt(s): model 'nope' is not loaded" in str(error)


def too_long_on_turn_two(body: Mapping[str, Any]) -> ChatReply:
    if any(m.get("role") == "assistant" for m in body["messages"]):
        return ChatReply("This model's maximum context length is 40 tokens", status=400)
    return ChatReply("```python\ndef add(a, b):\n    return a - b\n```")


def test_a_context_length_error_ends_the_episode_with_the_graded_turn_kept() -> None:
    """Turn 2 is rejected as too long: turn 1 (graded) stays, stop_reason is context_length,
    and the recorded message points at --token-budget; sync and async alike."""
    with ChatServer(too_long_on_turn_two) as s:
        sync = run_episode(MultiTurnCodingEnv(tasks=[ADD], max_turns=3), fast(s.url), task_index=0)
        policy = fast(s.url)

        async def main() -> Any:
            try:
                return await arun_episode(MultiTurnCodingEnv(tasks=[ADD], max_turns=3), policy, task_index=0)
            finally:
                await policy.aclose()

        asynchronous = asyncio.run(main())
    for trajectory in (sync, asynchronous):
        assert trajectory.stop_reason == "context_length" and trajectory.truncated
        assert len(trajectory.turns) == 1 and trajectory.turns[0].outcome == "wrong_answer"
        assert "--token-budget" in trajectory.metadata["policy_error"]
        assert "maximum context length is 40 tokens" in trajectory.metadata["policy_error"]


@pytest.mark.parametrize("path", PATHS)
def test_a_dead_server_opens_the_breaker_so_calls_fail_at_once(
        path: str, unused_port: int, captured_events: list) -> None:
    """Refused connections count towards the breaker; once open, calls raise ServerUnavailable
    without waiting out their retries (the policy logs no policy_retry for them)."""
    policy = fast(f"http://127.0.0.1:{unused_port}/v1", max_retries=50, breaker_threshold=3,
                  breaker_seconds=0.0)
    error = failure(policy, path)
    assert isinstance(error, ServerUnavailable) and "3 consecutive failures" in str(error)
    assert any(e["event"] == "policy_retry" for e in captured_events)  # the control: it retried
    before = len(captured_events)
    assert isinstance(failure(policy, path), ServerUnavailable)
    assert [e for e in captured_events[before:] if e["event"] == "policy_retry"] == []


def test_a_server_killed_mid_run_stops_the_run_and_a_resume_completes_it(
        tmp_path: Path, unused_port: int) -> None:
    """The server dies after a few episodes: the run stops (stopped says why), every finished
    episode is on disk, and with the server back a rerun does exactly the rest."""
    tasks = [ADD] * 1
    config = RolloutConfig(mode="single_step", samples=12, concurrency=2)
    server = ChatServer(ScriptedModel([ADD]), latency=0.05, port=unused_port).start()
    policy = fast(server.url, max_retries=20, breaker_threshold=4, breaker_seconds=0.2)

    def on_episode(_trajectory: Any, n_done: int, _total: int) -> None:
        if n_done == 3:
            server.stop()

    result = run_rollouts(tasks, policy, config, tmp_path, on_episode=on_episode)
    assert result.stopped is not None and "stopped answering" in result.stopped
    done = len(result.trajectories)
    assert 3 <= done < 12
    assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == done
    with ChatServer(ScriptedModel([ADD]), port=unused_port):
        policy.preflight()  # closes the breaker
        again = run_rollouts(tasks, policy, config, tmp_path)
    assert again.stopped is None and again.skipped == done and len(again.trajectories) == 12


def test_the_preflight_says_what_to_fix(unused_port: int) -> None:
    """Nothing listening, an unknown model (404 or 500) and a good setup, each in one line."""
    with pytest.raises(PolicyError, match=r"cannot reach .* start it, or fix --base-url"):
        fast(f"http://127.0.0.1:{unused_port}/v1").preflight()
    with ChatServer([ChatReply("The model `test-model` does not exist", status=404)], model="tiny") as s, \
            pytest.raises(PolicyError, match=r"404: The model `test-model` does not exist.*serves tiny: fix --model"):
        fast(s.url).preflight()
    with ChatServer([ChatReply("Repository Not Found for url", status=500)], model="tiny") as s:
        with pytest.raises(PolicyError, match=r"500: Repository Not Found.*fix --model"):
            fast(s.url).preflight()
        assert len(s.chat_requests) == 1  # the preflight does not retry
    with ChatServer([SOLUTION]) as s:
        fast(s.url).preflight()
        assert s.chat_requests[-1].body["max_tokens"] == 1  # not listed: one token decides


def test_the_preflight_of_a_listed_model_generates_nothing() -> None:
    """A model that GET /models lists passes without a completion request."""
    with ChatServer([SOLUTION], model="test-model") as s:
        fast(s.url).preflight()
        assert [r.path for r in s.requests] == ["/v1/models"]


@pytest.mark.parametrize("path", PATHS)
def test_streamed_answers_match_plain_ones(path: str) -> None:
    """stream=True asks for events and assembles the same text, usage and finish reason."""
    with ChatServer([SOLUTION]) as s:
        plain = call(fast(s.url), path)
        streamed = call(fast(s.url, stream=True), path)
        body = s.chat_requests[-1].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert streamed == plain and streamed.usage == plain.usage and streamed.finish_reason == "stop"
