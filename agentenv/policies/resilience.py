"""How a model call fails, and what is done about it: classification, retries, the breaker.

The policy's one HTTP path (:mod:`agentenv.policies.transport`) fails with a
:class:`StatusFailure` (a non-2xx answer), a :class:`BadAnswer` (a 2xx answer that is not a
chat completion), an aiohttp connection error or a timeout; :func:`classify` turns each into one
:class:`Failure` that says what happened in the server's own words (the body's
``error.message``, ``detail`` or ``message``, else its text) and what follows from it:

- ``transient``: worth retrying (timeouts, refused or cut connections, 408, 409, 429, 5xx);
  every other 4xx is an answer about the request itself and is never retried;
- ``server_down``: counts towards the :class:`CircuitBreaker` (timeouts, connections, 5xx);
  a rate limit or a rejected request proves the server is up;
- ``context_length``: a rejected request whose message says the conversation is too long.

:func:`retrying` is the retry policy (tenacity: bounded attempts, exponential backoff with full
jitter, ``Retry-After`` honoured). The :class:`CircuitBreaker` is shared by all of a policy's
calls, across episodes: after ``threshold`` consecutive ``server_down`` failures spanning at
least ``min_seconds`` it opens, and every call fails at once (``ServerUnavailable``) until
``cooldown`` has passed, when one call may probe again.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tenacity

__all__ = ["RETRY_STATUSES", "BadAnswer", "CircuitBreaker", "Failure", "StatusFailure", "classify", "retrying",
           "server_message"]

RETRY_STATUSES = frozenset({408, 409, 429})
# How servers word "the conversation does not fit": OpenAI, vLLM ("maximum context length", v1's
# "longer than the maximum model length"), SGLang ("the model's context length"), llama.cpp
# ("exceeds the available context size"), TGI ("`inputs` tokens + `max_new_tokens` must be <=
# N", "`inputs` must have less than N tokens"), Anthropic-style ("prompt is too long").
_CONTEXT = re.compile(r"context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long|"
                      r"token limit|tokens? exceeds?|exceeds? .*tokens|input is too long|too long for|"
                      r"maximum model length|max_model_len|inputs`? tokens \+ `?max_new_tokens|"
                      r"must have less than \d+ tokens",
                      re.IGNORECASE)
_CLIP = 400


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _CLIP else text[:_CLIP - 1] + "…"


def _words(payload: Any) -> str | None:
    """The human message inside a decoded error body, whichever convention the server uses."""
    if not isinstance(payload, dict):
        return None
    for key in ("error", "detail", "message"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, dict):
            inner = _words(value) or value.get("msg")
            if inner:
                return str(inner)
        if isinstance(value, list) and value:  # FastAPI's validation errors
            parts = []
            for item in value[:3]:
                if isinstance(item, dict):
                    where = ".".join(str(p) for p in item.get("loc", ()))
                    parts.append(f"{where}: {item.get('msg')}" if where else str(item.get("msg")))
                else:
                    parts.append(str(item))
            return "; ".join(parts)
    return None


def server_message(body: bytes | str | None) -> str:
    """What an error body says, on one line: its message or ``detail``, else its text."""
    if body is None:
        return "(no body)"
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        payload = json.loads(text)
    except ValueError:
        return _clip(text) or "(empty body)"
    words = _words(payload)
    return _clip(words if words is not None else json.dumps(payload))


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class StatusFailure(Exception):
    """A non-2xx answer: its status, the server's words and its ``Retry-After`` header."""

    def __init__(self, status: int, message: str, retry_after: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class Failure:
    """One failed call attempt, whatever raised it."""

    kind: str                  # "status" | "timeout" | "connection" | "bad_answer"
    message: str               # the server's words, or what the transport saw
    status: int | None = None
    retry_after: float | None = None

    @property
    def transient(self) -> bool:
        if self.kind in ("timeout", "connection"):
            return True
        return self.status is not None and (self.status in RETRY_STATUSES or self.status >= 500)

    @property
    def server_down(self) -> bool:
        return self.kind in ("timeout", "connection") or (self.status is not None and self.status >= 500)

    @property
    def context_length(self) -> bool:
        return self.status in (400, 413, 422) and bool(_CONTEXT.search(self.message))

    def describe(self) -> str:
        if self.kind == "status":
            return f"{self.status}: {self.message}"
        return f"{self.kind}: {self.message}"


class BadAnswer(Exception):
    """A 2xx answer that is not a chat completion (not JSON, or an error event in a stream)."""


def classify(exc: BaseException) -> Failure | None:
    """The :class:`Failure` an exception stands for; None when it is not a call failure."""
    import aiohttp

    if isinstance(exc, StatusFailure):
        return Failure("status", exc.message, exc.status, _retry_after(exc.retry_after))
    if isinstance(exc, BadAnswer):
        return Failure("bad_answer", str(exc))
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):  # aiohttp's ServerTimeoutError too
        return Failure("timeout", str(exc) or "no answer in time")
    if isinstance(exc, (aiohttp.ClientError, ConnectionError)):
        return Failure("connection", f"{type(exc).__name__}: {exc}")
    return None


class CircuitBreaker:
    """Consecutive server-down failures across every call of one policy (thread-safe)."""

    def __init__(self, threshold: int = 8, min_seconds: float = 2.0, cooldown: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = threshold
        self.min_seconds = min_seconds
        self.cooldown = cooldown
        self._clock = clock
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Close the breaker and forget the failures."""
        with self._lock:
            self.failures = 0
            self._first: float | None = None
            self._opened: float | None = None
            self.last = ""

    def failure(self, description: str) -> None:
        with self._lock:
            now = self._clock()
            self.failures += 1
            self.last = description
            if self._first is None:
                self._first = now
            half_open = self._opened is not None and now - self._opened >= self.cooldown
            if half_open or (self.failures >= self.threshold and now - self._first >= self.min_seconds):
                self._opened = now

    def success(self) -> None:
        with self._lock:
            self.failures, self._first, self._opened = 0, None, None

    def open_reason(self) -> str | None:
        """Why calls must not go out now, or None when they may."""
        with self._lock:
            if self._opened is None or self._clock() - self._opened >= self.cooldown:
                return None
            span = self._clock() - (self._first or self._clock())
            return f"{self.failures} consecutive failures over {span:.1f} s (last: {self.last})"


_TICK = 0.05  # how often a backoff sleep looks at its interrupt


def _sleeper(cls: type[tenacity.BaseRetrying], interrupt: Callable[[], bool]) -> Callable[[float], Any]:
    """A sleep for ``cls`` that ends early once ``interrupt()`` is true."""
    if issubclass(cls, tenacity.AsyncRetrying):
        async def asleep(seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0 and not interrupt():
                await asyncio.sleep(min(_TICK, left))
        return asleep

    def sleep(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not interrupt():
            time.sleep(min(_TICK, left))
    return sleep


def retrying(cls: type[tenacity.BaseRetrying], *, max_retries: int, backoff: float, max_backoff: float,
             retry_if: Callable[[BaseException], bool],
             before_sleep: Callable[[tenacity.RetryCallState], None],
             interrupt: Callable[[], bool] = lambda: False) -> Any:
    """A tenacity ``Retrying``/``AsyncRetrying``: ``max_retries`` retries of the exceptions
    ``retry_if`` accepts, waiting ``Retry-After`` when the server sent it, else exponential
    backoff from ``backoff`` s with full jitter, never more than ``max_backoff`` s. A wait ends
    early once ``interrupt()`` is true (the breaker opened: the next attempt fails at once)."""
    jitter = tenacity.wait_random_exponential(multiplier=backoff, max=max_backoff)

    def wait(state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        failure = classify(exc) if exc is not None else None
        if failure is not None and failure.retry_after is not None:
            return min(max_backoff, failure.retry_after)
        return float(jitter(state))

    return cls(stop=tenacity.stop_after_attempt(max_retries + 1), wait=wait,
               retry=tenacity.retry_if_exception(retry_if), before_sleep=before_sleep, reraise=True,
               sleep=_sleeper(cls, interrupt))
