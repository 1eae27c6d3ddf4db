"""OpenAIPolicy over real HTTP against the local OpenAI-compatible test server (no mocked client)."""

from __future__ import annotations

import asyncio
import itertools
import pickle
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

import pytest

from agentenv import CodingEnv, MultiTurnCodingEnv
from agentenv.errors import ConfigError, PolicyCallError, PolicyError
from agentenv.policies import DEFAULT_SYSTEM_PROMPT, OpenAIPolicy, openai_policy
from agentenv.records import Completion
from agentenv.rollout import arun_episode, run_episode
from agentenv.tasks import Task
from agentenv.testing import ChatReply, ChatServer, ScriptedModel, count_tokens

ADD = Task(
    name="add",
    prompt="Write a Python function `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    checks=("assert add(2, 3) == 5", "assert add(10, 5) == 15", "assert add(-1, 1) == 0",
            "assert add(-4, -6) == -10"),
    reference_solution="def add(a, b):\n    return a + b\n",
    metadata={"attempts": ["def add(a, b):\n    return a - b\n",
                           "def add(a, b):\n    return abs(a) + abs(b)\n"]},
)
SOLUTION = "```python\ndef add(a, b):\n    return a + b\n```"
T = TypeVar("T")
OBS = {"prompt": ADD.prompt, "entry_point": "add", "task_name": "add"}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(ScriptedModel([ADD])) as s:
        yield s


def closing(policy: OpenAIPolicy, make: Callable[[OpenAIPolicy], Awaitable[T]]) -> T:
    """Run ``make(policy)`` on a fresh loop, closing the policy's client for that loop after."""
    async def main() -> T:
        try:
            return await make(policy)
        finally:
            await policy.aclose()

    return asyncio.run(main())


def fast(url: str, **kw: object) -> OpenAIPolicy:
    """A policy with tiny backoffs, so retry tests stay quick."""
    options: dict[str, object] = {"backoff": 0.01, "max_backoff": 0.05, "timeout": 5.0}
    options.update(kw)
    return OpenAIPolicy("test-model", base_url=url, **options)  # type: ignore[arg-type]


def test_a_single_step_observation_is_sent_as_system_and_user_messages(server: ChatServer) -> None:
    """Without obs['messages'] the policy sends the system prompt and the task prompt."""
    fast(server.url)(OBS)
    body = server.chat_requests[-1].body
    assert body["model"] == "test-model"
    assert body["messages"] == [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
                                {"role": "user", "content": ADD.prompt}]
    assert body["temperature"] == pytest.approx(0.2)


def test_the_observations_messages_are_sent_verbatim(server: ChatServer) -> None:
    """With obs['messages'] the whole conversation is what reaches the server."""
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": ADD.prompt},
                {"role": "assistant", "content": "try 1"}, {"role": "user", "content": "2 tests failed"}]
    fast(server.url)({**OBS, "messages": messages})
    assert server.chat_requests[-1].messages == messages


def test_the_completion_carries_the_servers_usage_and_finish_reason(server: ChatServer) -> None:
    """The returned text is a Completion with prompt/completion tokens and the finish reason."""
    completion = fast(server.url)(OBS)
    assert isinstance(completion, Completion)
    assert completion.finish_reason == "stop"
    assert completion.usage == {"prompt_tokens": count_tokens(DEFAULT_SYSTEM_PROMPT) + 3
                                + count_tokens(ADD.prompt) + 3,
                                "completion_tokens": count_tokens(str(completion))}


def test_usage_and_finish_reason_reach_the_turn_record() -> None:
    """Through CodingEnv, the server's numbers land in the trajectory's TurnRecord."""
    with ChatServer([ChatReply(SOLUTION, prompt_tokens=111, completion_tokens=22)]) as s:
        env = CodingEnv(tasks=[ADD])
        trajectory = run_episode(env, fast(s.url), task_index=0)
    record = trajectory.turns[0]
    assert record.usage == {"prompt_tokens": 111, "completion_tokens": 22}
    assert record.finish_reason == "stop" and record.reward == 1.0
    assert trajectory.policy == "openai" and trajectory.model == "test-model"


def test_max_tokens_is_sent_and_a_cut_answer_reports_finish_reason_length() -> None:
    """max_tokens reaches the server; an answer cut at the limit says finish_reason='length'."""
    with ChatServer([SOLUTION]) as s:
        completion = fast(s.url, max_tokens=3)(OBS)
        assert s.chat_requests[-1].body["max_tokens"] == 3
    assert completion.finish_reason == "length"
    assert completion.usage is not None and completion.usage["completion_tokens"] == 3


def test_every_turn_sends_the_full_history_and_the_trajectory_shows_the_revision(server: ChatServer) -> None:
    """Multi-turn over HTTP: turn t sends 2t messages (history + feedback) and the model revises."""
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=3, seed=0)
    trajectory = run_episode(env, fast(server.url), task_index=0)
    requests = server.chat_requests
    assert [len(r.messages) for r in requests] == [2, 4, 6]
    for earlier, later in itertools.pairwise(requests):
        assert later.messages[:len(earlier.messages)] == earlier.messages  # history kept, in order
    assert requests[2].messages[2]["role"] == "assistant"
    assert "a - b" in requests[2].messages[2]["content"]             # turn 1's answer was sent back
    assert "failed" in requests[1].messages[-1]["content"].lower()  # with the feedback on it
    assert [t.reward for t in trajectory.turns] == [0.0, 0.5, 1.0]
    assert trajectory.stop_reason == "solved"
    assert all(t.usage and t.usage["prompt_tokens"] > 0 for t in trajectory.turns)


def test_rate_limits_are_retried_honouring_retry_after() -> None:
    """Two 429 answers then a good one: the policy waits and returns the good one."""
    with ChatServer([ChatReply(status=429, retry_after=0), ChatReply(status=429, retry_after=0),
                     ChatReply(SOLUTION)]) as s:
        completion = fast(s.url)(OBS)
        assert len(s.chat_requests) == 3
    assert "return a + b" in completion


def test_server_errors_are_retried_then_fail_with_a_policy_call_error() -> None:
    """A server that keeps answering 500 is retried max_retries times, then PolicyCallError."""
    with ChatServer([ChatReply("boom", status=500)]) as s:
        with pytest.raises(PolicyCallError, match="500 after 3 attempt"):
            fast(s.url, max_retries=2)(OBS)
        assert len(s.chat_requests) == 3


def test_timeouts_are_retried() -> None:
    """A reply slower than the timeout is retried; the next, fast one is returned."""
    with ChatServer([ChatReply(SOLUTION, delay=1.0), ChatReply(SOLUTION)]) as s:
        completion = fast(s.url, timeout=0.2)(OBS)
        assert len(s.chat_requests) == 2
    assert "return a + b" in completion


def test_a_bad_request_is_not_retried() -> None:
    """A 400 (e.g. context too long) fails at once: retrying cannot help."""
    with ChatServer([ChatReply("context length exceeded", status=400)]) as s:
        with pytest.raises(PolicyCallError, match="400"):
            fast(s.url)(OBS)
        assert len(s.chat_requests) == 1


def test_a_rejected_api_key_says_what_to_set() -> None:
    """A 401 from the server becomes a PolicyError naming OPENAI_API_KEY, without retries."""
    with ChatServer([SOLUTION], api_key="right") as s:
        with pytest.raises(PolicyError, match="OPENAI_API_KEY"):
            OpenAIPolicy("m", base_url=s.url, api_key="wrong")(OBS)
        assert len(s.chat_requests) == 1
        assert "return a + b" in OpenAIPolicy("m", base_url=s.url, api_key="right")(OBS)
        assert s.chat_requests[-1].authorization == "Bearer right"


def test_no_api_key_and_no_base_url_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without credentials the error names OPENAI_API_KEY and --base-url before any request."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(PolicyError, match=r"OPENAI_API_KEY.*--base-url"):
        OpenAIPolicy("gpt-4o")


def test_an_unknown_route_is_reported_as_a_wrong_base_url() -> None:
    """A base URL missing /v1 hits a 404, reported as a hint to fix --base-url."""
    with ChatServer([SOLUTION]) as s, pytest.raises(PolicyError, match="/v1"):
        fast(s.url.removesuffix("/v1"))(OBS)


def test_bad_settings_are_rejected_at_construction() -> None:
    """Empty model names and non-positive max_tokens are configuration errors."""
    with pytest.raises(ConfigError):
        OpenAIPolicy("", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError):
        OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1", max_tokens=0)


def test_async_calls_overlap_instead_of_queueing() -> None:
    """Eight concurrent acall()s are all in flight at once: the server answers none of them
    until all eight have arrived (queued calls would never get there and time out)."""
    all_in = threading.Barrier(8, timeout=10)

    def responder(body: Mapping[str, Any]) -> str:
        all_in.wait()
        return SOLUTION

    with ChatServer(responder) as s:
        policy = fast(s.url)

        async def main() -> list[str]:
            try:
                return await asyncio.gather(*(policy.acall(OBS) for _ in range(8)))
            finally:
                await policy.aclose()

        answers = asyncio.run(main())
    assert len(answers) == 8 and all("a + b" in a for a in answers)
    assert not all_in.broken


def test_async_retries_work_like_sync_ones() -> None:
    """acall retries a 429 and returns usage like the sync call."""
    with ChatServer([ChatReply(status=429, retry_after=0), ChatReply(SOLUTION)]) as s:
        completion = closing(fast(s.url), lambda p: p.acall(OBS))
        assert len(s.chat_requests) == 2
    assert isinstance(completion, Completion) and completion.usage is not None


def test_async_failures_end_in_the_same_errors_as_sync_ones() -> None:
    """A 500 that persists, a 400, a 401 and a timeout give the sync path's error types."""
    async def outcome(replies: list[ChatReply], **kw: object) -> BaseException:
        with ChatServer(replies, api_key="k") as s:
            policy = fast(s.url, api_key="k", max_retries=1, **kw)
            try:
                await policy.acall(OBS)
            except Exception as exc:
                return exc
            finally:
                await policy.aclose()
        raise AssertionError("no error")

    async def main() -> list[BaseException]:
        return [await outcome([ChatReply("down", status=500)]),
                await outcome([ChatReply("too long", status=400)]),
                await outcome([ChatReply(SOLUTION, delay=1.0)], timeout=0.2)]

    server_error, bad_request, timeout = asyncio.run(main())
    assert isinstance(server_error, PolicyCallError) and "500 after 2 attempt" in str(server_error)
    assert isinstance(bad_request, PolicyCallError) and "too long" in str(bad_request)
    assert isinstance(timeout, PolicyCallError) and "timed out" in str(timeout)
    with ChatServer([SOLUTION], api_key="right") as s, pytest.raises(PolicyError, match="OPENAI_API_KEY"):
        closing(fast(s.url, api_key="wrong"), lambda p: p.acall(OBS))


def test_arun_episode_drives_a_multi_turn_env_with_the_async_client() -> None:
    """The async episode loop reaches the same revision as the sync one."""
    with ChatServer(ScriptedModel([ADD])) as s:
        env = MultiTurnCodingEnv(tasks=[ADD], max_turns=3, seed=0)
        trajectory = closing(fast(s.url), lambda p: arun_episode(env, p, task_index=0))
        assert [len(r.messages) for r in s.chat_requests] == [2, 4, 6]
    assert [t.reward for t in trajectory.turns] == [0.0, 0.5, 1.0]
    assert all(t.usage and t.finish_reason == "stop" for t in trajectory.turns)


def test_there_is_one_http_path_aiohttp() -> None:
    """auto means aiohttp for every URL (TLS and proxies included); no other client is offered."""
    assert OpenAIPolicy("m", base_url="http://127.0.0.1:8000/v1").async_transport == "aiohttp"
    assert OpenAIPolicy("m", base_url="https://example.invalid/v1").async_transport == "aiohttp"
    assert OpenAIPolicy("m", base_url="https://example.invalid/v1", transport="aiohttp").transport == "aiohttp"
    for other in ("sdk", "carrier-pigeon"):
        with pytest.raises(ConfigError, match="transport"):
            OpenAIPolicy("m", base_url="http://127.0.0.1:8000/v1", transport=other)


@pytest.mark.parametrize(("chunked", "keep_alive"), [(True, True), (False, False)])
def test_chunked_bodies_and_closed_connections_are_read(chunked: bool, keep_alive: bool) -> None:
    """Chunked transfer encoding and Connection: close answers are read correctly, call after call."""
    with ChatServer([SOLUTION], chunked=chunked, keep_alive=keep_alive) as s:
        policy = fast(s.url)

        async def main() -> list[str]:
            try:
                return [await policy.acall(OBS) for _ in range(3)]
            finally:
                await policy.aclose()

        answers = asyncio.run(main())
    assert answers == [answers[0]] * 3 and "return a + b" in answers[0]


def test_a_pooled_connection_the_server_dropped_is_replaced_transparently(unused_port: int) -> None:
    """A keep-alive connection closed while idle (a restarted server) is replaced, not an error."""
    policy = fast(f"http://127.0.0.1:{unused_port}/v1", max_retries=0)

    async def main() -> list[str]:
        answers: list[str] = []
        try:
            with ChatServer([SOLUTION], port=unused_port):
                answers.append(await policy.acall(OBS))
            await asyncio.sleep(0.1)  # the loop sees the close, as it would mid-run
            with ChatServer([SOLUTION], port=unused_port) as restarted:
                answers.append(await policy.acall(OBS))  # the pooled connection is dead by now
                assert len(restarted.chat_requests) == 1
        finally:
            await policy.aclose()
        return answers

    answers = asyncio.run(main())
    assert len(answers) == 2 and all("return a + b" in a for a in answers)


def test_a_host_name_is_resolved() -> None:
    """http://localhost:PORT works whichever address family localhost resolves to first."""
    with ChatServer([SOLUTION]) as s:
        policy = fast(f"http://localhost:{s.port}/v1")

        async def main() -> str:
            try:
                return await policy.acall(OBS)
            finally:
                await policy.aclose()

        assert "return a + b" in asyncio.run(main())


def test_an_unreachable_server_is_retried_then_reported(unused_port: int) -> None:
    """Connection refused is transient: retried, then a PolicyCallError saying to check the server."""
    policy = fast(f"http://127.0.0.1:{unused_port}/v1", max_retries=1)
    with pytest.raises(PolicyCallError, match="server is up"):
        closing(policy, lambda p: p.acall(OBS))
    with pytest.raises(PolicyCallError, match="server is up"):
        policy(OBS)


def test_the_policy_survives_pickling_and_still_calls_the_server(server: ChatServer) -> None:
    """Clients are dropped on pickling (for Ray workers) and rebuilt on first use."""
    policy = fast(server.url)
    policy(OBS)
    clone = pickle.loads(pickle.dumps(policy))
    assert "def add" in clone(OBS)
    assert clone.model == policy.model and clone.base_url == policy.base_url


def test_openai_policy_function_reads_the_environment(server: ChatServer,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk-through's openai_policy(obs, model=..., temperature=...) uses OPENAI_BASE_URL."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    answer = openai_policy(OBS, model="gpt-4o", temperature=0.4)
    assert "def add" in answer
    assert server.chat_requests[-1].body["temperature"] == pytest.approx(0.4)


def test_the_test_server_records_every_request_and_serves_models() -> None:
    """GET /v1/models lists the model; unknown routes are 404 JSON; all requests are recorded."""
    import json
    import urllib.error
    import urllib.request

    with ChatServer([SOLUTION], model="tiny") as s:
        with urllib.request.urlopen(f"{s.url}/models") as response:
            assert json.load(response)["data"][0]["id"] == "tiny"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{s.url}/nothing")
        assert err.value.code == 404
        assert [r.path for r in s.requests] == ["/v1/models", "/v1/nothing"]


def test_the_async_client_goes_through_the_environments_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY routes requests for an unreachable host through the proxy (here the stand-in
    server, which answers them); NO_PROXY exempts a host."""
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with ChatServer([SOLUTION]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        policy = fast("http://model-host.invalid:8000/v1", max_retries=0)

        async def main() -> str:
            try:
                return await policy.acall(OBS)
            finally:
                await policy.aclose()

        assert "return a + b" in asyncio.run(main())
        assert len(proxy.chat_requests) == 1
        monkeypatch.setenv("NO_PROXY", "model-host.invalid")
        with pytest.raises(PolicyCallError, match="could not connect"):
            asyncio.run(main())


def test_a_blocking_call_works_from_inside_a_running_event_loop(server: ChatServer) -> None:
    """The sync call runs on the HTTP client's own loop thread, so calling it from async code
    (a notebook cell, a callback) answers instead of failing on the caller's running loop."""
    policy = fast(server.url)

    async def main() -> str:
        return policy(OBS)

    assert "def add" in asyncio.run(main())
    policy.close()


def test_a_closed_policy_opens_a_new_session_on_its_next_call(server: ChatServer) -> None:
    """close() ends the blocking calls' session and loop thread; the next call makes new ones."""
    policy = fast(server.url)
    first = policy(OBS)
    policy.close()
    assert policy(OBS) == first and len(server.chat_requests) == 2
    policy.close()
    policy.close()  # closing twice is harmless


def test_a_blocking_call_from_the_policys_own_loop_is_refused_not_a_deadlock(server: ChatServer) -> None:
    """Code running on the HTTP client's loop thread that calls the policy synchronously would
    wait for itself forever; it gets an error that says to await acall instead."""
    policy = fast(server.url)
    policy(OBS)  # starts the loop thread

    async def nested() -> str:
        return policy(OBS)

    with pytest.raises(RuntimeError, match=r"await policy\.acall"):
        policy._http.run(nested())
    assert "def add" in policy(OBS)  # the loop is still serving
    policy.close()
