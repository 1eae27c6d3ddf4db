"""Policies backed by an OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama, llama.cpp).

``OpenAIPolicy`` sends the observation's ``messages`` (the whole multi-turn conversation) or,
for a single-step observation without them, a system prompt plus ``obs["prompt"]``. It has a
sync ``__call__`` and an async ``acall`` sharing one request builder and one retry rule:
rate limits, timeouts, dropped connections and 5xx answers are retried with exponential
backoff and jitter (honouring ``Retry-After``); everything else fails at once with a message
that says what to do. It returns a :class:`~agentenv.records.Completion` carrying the server's
usage numbers and finish reason, which the environment writes into the turn record.

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
from typing import Any

import structlog

from agentenv.errors import ConfigError, PolicyCallError, PolicyError
from agentenv.policies.base import Observation
from agentenv.records import Completion

__all__ = ["DEFAULT_SYSTEM_PROMPT", "OpenAIPolicy", "build_messages", "openai_policy"]

log = structlog.get_logger()

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert Python programmer. Solve the task. Answer with the complete solution "
    "in a single ```python code block."
)
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


class OpenAIPolicy:
    """A chat model behind an OpenAI-compatible endpoint, as a policy (sync and async).

    ``model`` is the model id the server knows. ``base_url`` points at any compatible server
    (``http://127.0.0.1:8000/v1`` for vLLM, ``http://127.0.0.1:11434/v1`` for Ollama).
    ``max_retries`` retries transient failures with backoff ``backoff * 2**attempt`` seconds
    (capped at ``max_backoff``, with jitter). ``timeout`` bounds each request.
    ``extra_body`` is merged into every request (for server-specific options).
    """

    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 temperature: float = 0.2, max_tokens: int | None = None, top_p: float | None = None,
                 seed: int | None = None, timeout: float = 60.0, max_retries: int = 5,
                 backoff: float = 1.0, max_backoff: float = 30.0,
                 system_prompt: str = DEFAULT_SYSTEM_PROMPT,
                 extra_body: Mapping[str, Any] | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("OpenAIPolicy needs a model id, e.g. OpenAIPolicy('gpt-4o')")
        if max_retries < 0 or backoff < 0 or max_backoff < 0 or not timeout > 0:
            raise ConfigError("max_retries, backoff and max_backoff must be >= 0 and timeout > 0")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if key is None and self.base_url is None:
            raise PolicyError(
                "OpenAIPolicy has no API key: set the OPENAI_API_KEY environment variable (or pass "
                "api_key=...), or point base_url (CLI: --base-url) at an OpenAI-compatible server "
                "such as vLLM, Ollama or llama.cpp, e.g. http://127.0.0.1:8000/v1"
            )
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

    # -- requests ------------------------------------------------------------------------------
    def request(self, obs: Observation) -> dict[str, Any]:
        """The keyword arguments of one chat-completions call for this observation."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": build_messages(obs, self.system_prompt),
                                  "temperature": self.temperature}
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs

    def _completion(self, response: Any) -> Completion:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise PolicyCallError(f"the server at {self.base_url or 'api.openai.com'} answered with "
                                  "no choices; check that it serves chat completions for "
                                  f"model {self.model!r}")
        choice = choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(response, "usage", None)
        usage_dict = None
        if usage is not None:
            usage_dict = {"prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
                          "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0)}
        return Completion(text, usage=usage_dict, finish_reason=getattr(choice, "finish_reason", None))

    # -- retries -------------------------------------------------------------------------------
    def _retry_delay(self, attempt: int, exc: Exception) -> float | None:
        """Seconds to wait before retrying after ``exc``, or None when it must not be retried."""
        import openai

        if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
            retryable = True
        elif isinstance(exc, openai.APIStatusError):
            retryable = exc.status_code in _RETRY_STATUSES or exc.status_code >= 500
        else:
            retryable = False
        if not retryable or attempt >= self.max_retries:
            return None
        delay = min(self.max_backoff, self.backoff * (2 ** attempt)) * self._rng.uniform(0.5, 1.0)
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        if retry_after is not None:
            with contextlib.suppress(ValueError):  # an HTTP date: keep our own backoff
                delay = min(self.max_backoff, max(0.0, float(retry_after)))
        return delay

    def _final_error(self, exc: Exception, attempts: int) -> Exception:
        """Turn the last failure into an agentenv error that says what to do."""
        import openai

        where = self.base_url or "api.openai.com"
        if isinstance(exc, openai.AuthenticationError):
            return PolicyError(f"the server at {where} rejected the API key (401); set a valid "
                               "OPENAI_API_KEY or pass api_key=...")
        if isinstance(exc, openai.PermissionDeniedError):
            return PolicyError(f"the server at {where} denied access to model {self.model!r} (403); "
                               "check the key's permissions")
        if isinstance(exc, openai.NotFoundError):
            return PolicyError(f"model {self.model!r} or the chat-completions route was not found at "
                               f"{where} (404); check --model and that --base-url ends in /v1")
        if isinstance(exc, openai.APIConnectionError):
            kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "could not connect"
            return PolicyCallError(f"the request to {where} {kind} after {attempts} attempt(s); "
                                   "check that the server is up, or raise timeout/max_retries")
        if isinstance(exc, openai.APIStatusError):
            return PolicyCallError(f"the server at {where} answered {exc.status_code} after "
                                   f"{attempts} attempt(s): {exc.message}")
        return PolicyCallError(f"the call to {where} failed: {type(exc).__name__}: {exc}")

    def _log_retry(self, attempt: int, delay: float, exc: Exception) -> None:
        log.warning("policy_retry", model=self.model, attempt=attempt + 1, delay=round(delay, 3),
                    error=type(exc).__name__, status=getattr(exc, "status_code", None))

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
        import openai

        kwargs = self.request(obs)
        client = self._sync_client()
        attempt = 0
        while True:
            try:
                return self._completion(client.chat.completions.create(**kwargs))
            except openai.OpenAIError as exc:
                delay = self._retry_delay(attempt, exc)
                if delay is None:
                    raise self._final_error(exc, attempt + 1) from exc
                self._log_retry(attempt, delay, exc)
                time.sleep(delay)
                attempt += 1

    # -- async ---------------------------------------------------------------------------------
    def _async_client(self) -> Any:
        # An async HTTP client belongs to the event loop it was made on: keep one per loop.
        loop = asyncio.get_running_loop()
        entry = self._async_clients.get(id(loop))
        if entry is None or entry[0] is not loop:
            import openai

            for key, (old_loop, _) in list(self._async_clients.items()):
                if old_loop.is_closed():
                    del self._async_clients[key]
            client = openai.AsyncOpenAI(api_key=self._api_key, base_url=self.base_url,
                                        timeout=self.timeout, max_retries=0)
            entry = (loop, client)
            self._async_clients[id(loop)] = entry
        return entry[1]

    async def acall(self, obs: Observation) -> Completion:
        """Ask the model for the next answer without blocking the event loop."""
        import openai

        kwargs = self.request(obs)
        client = self._async_client()
        attempt = 0
        while True:
            try:
                return self._completion(await client.chat.completions.create(**kwargs))
            except openai.OpenAIError as exc:
                delay = self._retry_delay(attempt, exc)
                if delay is None:
                    raise self._final_error(exc, attempt + 1) from exc
                self._log_retry(attempt, delay, exc)
                await asyncio.sleep(delay)
                attempt += 1

    async def aclose(self) -> None:
        """Close the async client of the running loop (others are dropped with their loops)."""
        loop = asyncio.get_running_loop()
        entry = self._async_clients.pop(id(loop), None)
        if entry is not None:
            await entry[1].close()

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
