"""Policies backed by an OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama, llama.cpp).

``OpenAIPolicy`` sends the observation's ``messages`` (the whole multi-turn conversation) or,
for a single-step observation without them, a system prompt plus ``obs["prompt"]``. It has a
sync ``__call__`` and an async ``acall`` sharing one request builder and one retry rule:
rate limits, timeouts, dropped connections and 5xx answers are retried with exponential
backoff and jitter (honouring ``Retry-After``); everything else fails at once with a message
that says what to do. It returns a :class:`~agentenv.records.Completion` carrying the server's
usage numbers and finish reason, which the environment writes into the turn record.

Transports: the sync call always uses the official ``openai`` SDK. The async call uses the SDK
too, except for plain ``http://`` base URLs no proxy applies to (a local or cluster inference
server), where the lean asyncio client of :mod:`agentenv.policies._http` keeps client CPU per
call small enough for dozens of calls in flight (``transport="auto"``, the default; force one
with ``"sdk"`` or ``"lean"``).

``openai_policy(obs, model="gpt-4o", temperature=0.2)`` is the walk-through's one-line form.
Credentials: ``api_key`` or ``OPENAI_API_KEY``; ``base_url`` or ``OPENAI_BASE_URL``. A local
server needs no key. Not here: streaming, tool calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentenv.errors import ConfigError, PolicyCallError, PolicyError
from agentenv.log import get_logger
from agentenv.policies._http import (
    HTTPStatusFailure,
    LeanHTTPClient,
    TransportFailure,
    proxy_applies,
)
from agentenv.policies.base import Observation
from agentenv.records import Completion

__all__ = ["DEFAULT_SYSTEM_PROMPT", "TRANSPORTS", "OpenAIPolicy", "build_messages", "openai_policy"]

log = get_logger(__name__)

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert Python programmer. Solve the task. Answer with the complete solution "
    "in a single ```python code block."
)
TRANSPORTS = ("auto", "sdk", "lean")
_NO_KEY_PLACEHOLDER = "not-needed"  # local OpenAI-compatible servers ignore the key
_RETRY_STATUSES = frozenset({408, 409, 429})


def build_messages(obs: Observation, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> list[dict[str, str]]:
    """The chat messages for an observation: its ``messages``, or [system, user(prompt)]."""
    messages = obs.get("messages")
    if messages:
        out = []
        for m in messages:
            if not isinstance(m, Mapping) or "role" not in m:
                raise PolicyError(f"observation messages must be dicts with 'role' and 'content', got {m!r:.80}")
            out.append({"role": str(m["role"]), "content": str(m.get("content") or "")})
        return out
    prompt = obs.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise PolicyError("the observation has neither 'messages' nor a 'prompt'; pass the dict "
                          "that env.reset()/env.step() returned")
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": prompt}]


@dataclass(frozen=True)
class _Failure:
    """One failed call, whichever transport made it: what the retry rule and messages need."""

    kind: str                  # "status" | "timeout" | "connection" | "other"
    message: str
    status: int | None = None
    retry_after: str | None = None

    @property
    def retryable(self) -> bool:
        if self.kind in ("timeout", "connection"):
            return True
        return self.kind == "status" and self.status is not None and (
            self.status in _RETRY_STATUSES or self.status >= 500)


def _failure(exc: BaseException) -> _Failure | None:
    """Normalise a transport exception; None for exceptions that are not call failures."""
    import openai

    if isinstance(exc, HTTPStatusFailure):
        return _Failure("status", exc.message, exc.status, exc.retry_after)
    if isinstance(exc, TransportFailure):
        return _Failure("timeout" if exc.timeout else "connection", str(exc))
    if isinstance(exc, openai.APITimeoutError):
        return _Failure("timeout", str(exc))
    if isinstance(exc, openai.APIConnectionError):
        return _Failure("connection", str(exc))
    if isinstance(exc, openai.APIStatusError):
        retry_after = exc.response.headers.get("retry-after") if exc.response is not None else None
        return _Failure("status", exc.message, exc.status_code, retry_after)
    if isinstance(exc, openai.OpenAIError):
        return _Failure("other", f"{type(exc).__name__}: {exc}")
    return None


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def _token_fields(response: Any, choice: Any) -> dict[str, Any]:
    """Token ids and logprobs from a vLLM-style answer (``prompt_token_ids`` on the response or
    the choice, ``token_ids`` and ``logprobs.content[].logprob`` on the choice); {} without them."""
    prompt = _ints(_field(response, "prompt_token_ids")) or _ints(_field(choice, "prompt_token_ids"))
    completion = _ints(_field(choice, "token_ids"))
    content = _field(_field(choice, "logprobs"), "content") if _field(choice, "logprobs") is not None else None
    logprobs = None
    if isinstance(content, (list, tuple)):
        values = [_field(item, "logprob") for item in content]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            logprobs = [float(v) for v in values]
    out: dict[str, Any] = {}
    if prompt is not None:
        out["prompt_token_ids"] = prompt
    if completion is not None:
        out["token_ids"] = completion
    if logprobs is not None:
        out["logprobs"] = logprobs
    return out


class OpenAIPolicy:
    """A chat model behind an OpenAI-compatible endpoint, as a policy (sync and async).

    ``model`` is the model id the server knows. ``base_url`` points at any compatible server
    (``http://127.0.0.1:8000/v1`` for vLLM, ``http://127.0.0.1:11434/v1`` for Ollama).
    ``max_retries`` retries transient failures with backoff ``backoff * 2**attempt`` seconds
    (capped at ``max_backoff``, with jitter). ``timeout`` bounds each request.
    ``extra_body`` is merged into every request (for server-specific options).
    ``transport`` picks the async HTTP client (see the module docstring).
    An observation's ``max_tokens`` (the env's allowance under its token budget) caps the
    request's ``max_tokens``; its ``seed`` (per sample) is sent as ``seed`` unless one was given.
    ``return_tokens=True`` asks a vLLM-style server for the prompt and completion token ids and
    the logprobs; the Completion carries them into the turn record (for trainer exports).
    """

    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 temperature: float = 0.2, max_tokens: int | None = None, top_p: float | None = None,
                 seed: int | None = None, timeout: float = 60.0, max_retries: int = 5,
                 backoff: float = 1.0, max_backoff: float = 30.0,
                 system_prompt: str = DEFAULT_SYSTEM_PROMPT,
                 extra_body: Mapping[str, Any] | None = None, transport: str = "auto",
                 return_tokens: bool = False) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("OpenAIPolicy needs a model id, e.g. OpenAIPolicy('gpt-4o')")
        if max_retries < 0 or backoff < 0 or max_backoff < 0 or not timeout > 0:
            raise ConfigError("max_retries, backoff and max_backoff must be >= 0 and timeout > 0")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if transport not in TRANSPORTS:
            raise ConfigError(f"transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/") or None
        key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if key is None and self.base_url is None:
            raise PolicyError(
                "OpenAIPolicy has no API key: set the OPENAI_API_KEY environment variable (or pass "
                "api_key=...), or point base_url (CLI: --base-url) at an OpenAI-compatible server "
                "such as vLLM, Ollama or llama.cpp, e.g. http://127.0.0.1:8000/v1"
            )
        plain_http = self.base_url is not None and self.base_url.startswith("http://")
        if transport == "lean" and not plain_http:
            raise ConfigError("transport='lean' speaks plain HTTP only; give an http:// base_url "
                              "or use transport='sdk'")
        self.transport = transport
        self._lean = transport == "lean" or (
            transport == "auto" and plain_http and not proxy_applies(str(self.base_url)))
        self._api_key = key or _NO_KEY_PLACEHOLDER
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.top_p = top_p
        self.seed = seed
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.system_prompt = system_prompt
        self.extra_body = dict(extra_body or {})
        self.return_tokens = return_tokens
        self._init_clients()

    def _init_clients(self) -> None:
        self._lock = threading.Lock()
        self._client: Any = None
        self._async_clients: dict[int, tuple[asyncio.AbstractEventLoop, Any]] = {}
        self._rng = random.Random()

    # Clients hold sockets and locks: drop them when pickled (Ray workers), rebuild lazily.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_lock", "_client", "_async_clients", "_rng"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_clients()

    def __repr__(self) -> str:
        where = self.base_url or "api.openai.com"
        return f"OpenAIPolicy(model={self.model!r}, base_url={where!r}, temperature={self.temperature})"

    @property
    def async_transport(self) -> str:
        """The HTTP client ``acall`` uses: "lean" or "sdk"."""
        return "lean" if self._lean else "sdk"

    # -- requests ------------------------------------------------------------------------------
    def request(self, obs: Observation) -> dict[str, Any]:
        """The keyword arguments of one SDK chat-completions call for this observation."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": build_messages(obs, self.system_prompt),
                                  "temperature": self.temperature}
        # The observation's allowance under the env's token budget, and its per-sample seed.
        limit, seed = obs.get("max_tokens"), obs.get("seed")
        max_tokens = self.max_tokens
        if isinstance(limit, int) and not isinstance(limit, bool):
            max_tokens = max(1, limit if max_tokens is None else min(max_tokens, limit))
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        if self.seed is not None:
            kwargs["seed"] = self.seed
        elif isinstance(seed, int) and not isinstance(seed, bool):
            kwargs["seed"] = seed
        if self.return_tokens:  # token ids (vLLM's return_token_ids) and logprobs, for trainers
            kwargs["logprobs"] = True
            kwargs["extra_body"] = {"return_token_ids": True, **self.extra_body}
        elif self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs

    def request_body(self, obs: Observation) -> dict[str, Any]:
        """The JSON body of the same call, as it goes on the wire."""
        body = self.request(obs)
        extra = body.pop("extra_body", {})
        return {**body, **extra}

    def _no_choices(self) -> PolicyCallError:
        return PolicyCallError(f"the server at {self.base_url or 'api.openai.com'} answered with "
                               f"no choices; check that it serves chat completions for model {self.model!r}")

    def _completion(self, response: Any) -> Completion:
        """A Completion from the SDK's response object."""
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise self._no_choices()
        choice = choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(response, "usage", None)
        usage_dict = None
        if usage is not None:
            usage_dict = {"prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
                          "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0)}
        return Completion(text, usage=usage_dict, finish_reason=getattr(choice, "finish_reason", None),
                          **_token_fields(response, choice))

    def _completion_from_json(self, data: Any) -> Completion:
        """A Completion from the decoded JSON answer (the lean transport)."""
        choices = data.get("choices") if isinstance(data, Mapping) else None
        if not choices or not isinstance(choices[0], Mapping):
            raise self._no_choices()
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, Mapping):
            message = {}
        usage = data.get("usage")
        usage_dict = None
        if isinstance(usage, Mapping):
            usage_dict = {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                          "completion_tokens": int(usage.get("completion_tokens") or 0)}
        return Completion(str(message.get("content") or ""), usage=usage_dict,
                          finish_reason=choice.get("finish_reason"), **_token_fields(data, choice))

    # -- retries -------------------------------------------------------------------------------
    def _retry_delay(self, attempt: int, failure: _Failure) -> float | None:
        """Seconds to wait before retrying, or None when the failure must not be retried."""
        if not failure.retryable or attempt >= self.max_retries:
            return None
        delay = min(self.max_backoff, self.backoff * (2 ** attempt)) * self._rng.uniform(0.5, 1.0)
        if failure.retry_after is not None:
            with contextlib.suppress(ValueError):  # an HTTP date: keep our own backoff
                delay = min(self.max_backoff, max(0.0, float(failure.retry_after)))
        return delay

    def _final_error(self, failure: _Failure, attempts: int) -> PolicyError:
        """Turn the last failure into an agentenv error that says what to do."""
        where = self.base_url or "api.openai.com"
        if failure.status == 401:
            return PolicyError(f"the server at {where} rejected the API key (401); set a valid "
                               "OPENAI_API_KEY or pass api_key=...")
        if failure.status == 403:
            return PolicyError(f"the server at {where} denied access to model {self.model!r} (403); "
                               "check the key's permissions")
        if failure.status == 404:
            return PolicyError(f"model {self.model!r} or the chat-completions route was not found at "
                               f"{where} (404); check --model and that --base-url ends in /v1")
        if failure.kind in ("timeout", "connection"):
            kind = "timed out" if failure.kind == "timeout" else "could not connect or was cut off"
            return PolicyCallError(f"the request to {where} {kind} after {attempts} attempt(s); "
                                   "check that the server is up, or raise timeout/max_retries")
        if failure.kind == "status":
            return PolicyCallError(f"the server at {where} answered {failure.status} after "
                                   f"{attempts} attempt(s): {failure.message}")
        return PolicyCallError(f"the call to {where} failed: {failure.message}")

    def _on_failure(self, exc: BaseException, attempt: int) -> float:
        """The delay before the next attempt; raises the final error when there is none."""
        failure = _failure(exc)
        if failure is None:
            raise exc
        delay = self._retry_delay(attempt, failure)
        if delay is None:
            raise self._final_error(failure, attempt + 1) from exc
        log.warning("policy_retry", model=self.model, attempt=attempt + 1, delay=round(delay, 3),
                    error=failure.kind, status=failure.status)
        return delay

    # -- sync ----------------------------------------------------------------------------------
    def _sync_client(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(api_key=self._api_key, base_url=self.base_url,
                                             timeout=self.timeout, max_retries=0)
            return self._client

    def __call__(self, obs: Observation) -> Completion:
        """Ask the model for the next answer (blocking)."""
        kwargs = self.request(obs)
        client = self._sync_client()
        attempt = 0
        while True:
            try:
                return self._completion(client.chat.completions.create(**kwargs))
            except Exception as exc:
                time.sleep(self._on_failure(exc, attempt))
                attempt += 1

    # -- async ---------------------------------------------------------------------------------
    def _async_client(self) -> Any:
        # An async HTTP client belongs to the event loop it was made on: keep one per loop.
        loop = asyncio.get_running_loop()
        entry = self._async_clients.get(id(loop))
        if entry is None or entry[0] is not loop:
            for key, (old_loop, _) in list(self._async_clients.items()):
                if old_loop.is_closed():
                    del self._async_clients[key]
            client: Any
            if self._lean:
                assert self.base_url is not None
                client = LeanHTTPClient(self.base_url, timeout=self.timeout, headers={
                    "Authorization": f"Bearer {self._api_key}", "User-Agent": "agentenv"})
            else:
                import openai

                client = openai.AsyncOpenAI(api_key=self._api_key, base_url=self.base_url,
                                            timeout=self.timeout, max_retries=0)
            entry = (loop, client)
            self._async_clients[id(loop)] = entry
        return entry[1]

    async def _acall_once(self, client: Any, obs: Observation) -> Completion:
        if self._lean:
            return self._completion_from_json(
                await client.post_json("/chat/completions", self.request_body(obs)))
        return self._completion(await client.chat.completions.create(**self.request(obs)))

    async def acall(self, obs: Observation) -> Completion:
        """Ask the model for the next answer without blocking the event loop."""
        client = self._async_client()
        attempt = 0
        while True:
            try:
                return await self._acall_once(client, obs)
            except Exception as exc:
                await asyncio.sleep(self._on_failure(exc, attempt))
                attempt += 1

    async def aclose(self) -> None:
        """Close the async client of the running loop (others are dropped with their loops)."""
        loop = asyncio.get_running_loop()
        entry = self._async_clients.pop(id(loop), None)
        if entry is not None:
            client = entry[1]
            await (client.aclose() if isinstance(client, LeanHTTPClient) else client.close())

    def close(self) -> None:
        """Close the sync client. The policy stays usable: a new client is made on demand."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


@functools.lru_cache(maxsize=16)
def _cached_policy(model: str, temperature: float, base_url: str | None, api_key: str | None) -> OpenAIPolicy:
    return OpenAIPolicy(model, base_url=base_url, api_key=api_key, temperature=temperature)


def openai_policy(obs: Observation, model: str = "gpt-4o", temperature: float = 0.2) -> str:
    """The walk-through's policy: ask an OpenAI(-compatible) model for the next answer.

    Reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``; reuses one client per setting.
    """
    policy = _cached_policy(model, temperature, os.environ.get("OPENAI_BASE_URL") or None,
                            os.environ.get("OPENAI_API_KEY") or None)
    return policy(obs)
