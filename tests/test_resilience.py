"""Failure classification, the server's words, and the circuit breaker (no network)."""

from __future__ import annotations

import json

import pytest

from agentenv.policies.resilience import (
    CircuitBreaker,
    Failure,
    StatusFailure,
    classify,
    server_message,
)


@pytest.mark.parametrize(("body", "words"), [
    ({"error": {"message": "model 'x' not found", "type": "invalid_request_error"}}, "model 'x' not found"),
    ({"detail": "This server is pinned to model tiny-llama"}, "This server is pinned to model tiny-llama"),
    ({"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}, "body.messages: field required"),
    ({"error": "context window exceeded"}, "context window exceeded"),
    ({"message": "overloaded"}, "overloaded"),
    ({"object": "error", "code": 7}, '{"object": "error", "code": 7}'),
])
def test_the_servers_message_is_found_whatever_the_convention(body: object, words: str) -> None:
    """OpenAI's error.message, FastAPI's detail (string or validation list), plain message."""
    assert server_message(json.dumps(body).encode()) == words


def test_a_non_json_body_is_quoted_on_one_short_line() -> None:
    """An HTML error page becomes one clipped line, never a multi-kilobyte message."""
    text = server_message(b"<html>\n<body>Bad Gateway</body>\n</html>" + b"x" * 2000)
    assert "\n" not in text and text.startswith("<html> <body>Bad Gateway") and len(text) <= 400
    assert server_message(b"") == "(empty body)"


@pytest.mark.parametrize(("status", "transient", "down"), [
    (400, False, False), (401, False, False), (404, False, False), (422, False, False),
    (408, True, False), (409, True, False), (429, True, False), (500, True, True), (503, True, True),
])
def test_only_408_409_429_and_5xx_are_retried_and_only_5xx_count_as_down(
        status: int, transient: bool, down: bool) -> None:
    """Every other 4xx is an answer about the request: retrying it cannot help."""
    failure = classify(StatusFailure(status, "words"))
    assert failure is not None and (failure.transient, failure.server_down) == (transient, down)


def test_every_way_the_http_path_fails_has_one_kind() -> None:
    """The one HTTP path's exceptions (aiohttp's, timeouts, ours) map onto the one taxonomy;
    anything else is not a call failure (a bug, raised as it is)."""
    import asyncio

    import aiohttp

    from agentenv.policies.resilience import BadAnswer

    def kind(exc: BaseException) -> str | None:
        failure = classify(exc)
        return None if failure is None else failure.kind

    assert kind(aiohttp.ServerDisconnectedError()) == "connection"
    assert kind(ConnectionRefusedError(111, "refused")) == "connection"
    assert kind(asyncio.TimeoutError()) == "timeout"
    assert kind(aiohttp.ServerTimeoutError("read")) == "timeout"
    assert kind(BadAnswer("not JSON")) == "bad_answer"
    retry = classify(StatusFailure(429, "slow down", "3"))
    assert retry is not None and retry.retry_after == 3.0 and retry.transient
    assert classify(ValueError("a bug")) is None


def test_context_length_errors_are_recognised_by_their_words() -> None:
    """A 400 that talks about the context is a context-length failure; other 400s are not."""
    assert Failure("status", "This model's maximum context length is 4096 tokens", 400).context_length
    assert Failure("status", "Input is too long for requested model", 400).context_length
    assert not Failure("status", "temperature must be <= 2", 400).context_length
    for words in ("the request exceeds the available context size. try increasing the context size",  # llama.cpp
                  "The decoder prompt (length 5000) is longer than the maximum model length of 4096.",  # vLLM v1
                  "The input (5000 tokens) is longer than the model's context length (4096 tokens).",  # SGLang
                  "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096.",  # TGI
                  "Input validation error: `inputs` must have less than 2048 tokens. Given: 2222"):  # TGI
        assert Failure("status", words, 400).context_length, words
    assert not Failure("status", "`max_new_tokens` must be <= 192", 422).context_length
    assert not Failure("status", "maximum context length", 500).context_length


def test_the_breaker_opens_after_enough_failures_over_enough_time_and_a_success_closes_it() -> None:
    """threshold failures are not enough within min_seconds; after it, calls are refused
    until the cooldown passes; one success closes it."""
    now = [0.0]
    breaker = CircuitBreaker(threshold=3, min_seconds=2.0, cooldown=10.0, clock=lambda: now[0])
    for _ in range(5):
        breaker.failure("connection: refused")
    assert breaker.open_reason() is None  # a burst of simultaneous failures is not an outage
    now[0] = 2.5
    breaker.failure("connection: refused")
    reason = breaker.open_reason()
    assert reason is not None and "6 consecutive failures" in reason and "refused" in reason
    now[0] = 13.0
    assert breaker.open_reason() is None  # half-open: one probe may go out
    breaker.failure("connection: refused")
    assert breaker.open_reason() is not None  # the probe failed: open again
    breaker.success()
    assert breaker.open_reason() is None and breaker.failures == 0
