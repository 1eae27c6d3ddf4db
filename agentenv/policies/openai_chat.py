"""Policies backed by an OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama, llama.cpp).

``OpenAIPolicy`` sends the observation's ``messages`` (the whole multi-turn conversation) or,
for a single-step observation without them, a system prompt plus ``obs["prompt"]``. It has a
sync ``__call__`` and an async ``acall`` sharing one request builder, one answer reader and one
failure policy (:mod:`agentenv.policies.resilience`): timeouts, dropped connections, 408, 409,
429 and 5xx answers are retried with backoff (honouring ``Retry-After``); any other 4xx fails
at once, in the server's own words. A circuit breaker shared by all calls stops a run whose
server is down (``ServerUnavailable``), and :meth:`OpenAIPolicy.preflight` checks the endpoint
and the model with one cheap request before a run. It returns a
:class:`~agentenv.records.Completion` carrying the server's usage numbers and finish reason.

HTTP: one path for both calls (:mod:`agentenv.policies.transport`, aiohttp): ``acall`` runs it
on the caller's event loop, the sync call runs the same coroutine on a private loop thread.
TLS, proxies (``HTTP(S)_PROXY``) and keep-alive come from aiohttp, and answers are read from the
raw JSON (no response models). ``stream=True`` asks for server-sent events and assembles the
answer from the chunks.

``openai_policy(obs, model="gpt-4o", temperature=0.2)`` is the walk-through's one-line form.
Credentials: ``api_key`` or ``OPENAI_API_KEY``; ``base_url`` or ``OPENAI_BASE_URL``. A local
server needs no key. Not here: tool calls.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import tenacity

from agentenv import settings
from agentenv.choices import Transport, parse, values
from agentenv.errors import (
    AgentEnvError,
    ConfigError,
    PolicyCallError,
    PolicyError,
    ServerUnavailable,
)
from agentenv.log import get_logger
from agentenv.policies.base import Observation
from agentenv.policies.resilience import (
    BadAnswer,
    CircuitBreaker,
    Failure,
    classify,
    retrying,
    server_message,
)
from agentenv.policies.transport import HTTPClient
from agentenv.records import Completion

__all__ = ["DEFAULT_SYSTEM_PROMPT", "TRANSPORTS", "OpenAIPolicy", "build_messages", "openai_policy"]

log = get_logger(__name__)

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert Python programmer. Solve the task. Answer with the complete solution "
    "in a single ```python code block."
)
TRANSPORTS = values(Transport)
_NO_KEY_PLACEHOLDER = "not-needed"  # local OpenAI-compatible servers ignore the key
_TOKEN_BUDGET_HINT = ("the conversation no longer fits the model's context: cap it with "
                      "--token-budget (MultiTurnCodingEnv(token_budget=...)) below the context length")


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


def _usage(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, Mapping):
        return None
    return {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0)}


class _Stream:
    """Assembles a streamed answer from its server-sent ``data:`` lines."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, int] | None = None
        self.chunks = 0

    def feed(self, line: bytes | str) -> bool:
        """Take one line of the event stream; True once the stream says it is done."""
        text = (line.decode("utf-8", "replace") if isinstance(line, bytes) else line).strip()
        if not text.startswith("data:"):
            return False  # blank separators, comments, event names
        data = text[5:].strip()
        if data == "[DONE]":
            return True
        try:
            chunk = json.loads(data)
        except ValueError:
            raise BadAnswer(f"a streamed event is not JSON: {data[:120]!r}") from None
        if not isinstance(chunk, Mapping):
            return False
        if "error" in chunk:  # servers report failures mid-stream as an event
            raise BadAnswer(f"the stream ended with an error: {server_message(json.dumps(chunk))}")
        self.chunks += 1
        self.usage = _usage(chunk.get("usage")) or self.usage
        for choice in chunk.get("choices") or ():
            if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
                delta = choice.get("delta")
                if isinstance(delta, Mapping) and delta.get("content"):
                    self.parts.append(str(delta["content"]))
                if choice.get("finish_reason"):
                    self.finish_reason = str(choice["finish_reason"])
        return False

    def completion(self) -> Completion:
        if not self.chunks:
            raise BadAnswer("the stream carried no completion chunks")
        return Completion("".join(self.parts), usage=self.usage, finish_reason=self.finish_reason)


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
    ``timeout`` bounds each request; ``max_retries`` retries transient failures with backoff
    from ``backoff`` s up to ``max_backoff`` s (full jitter). ``breaker_threshold`` server-down
    failures in a row, over at least ``breaker_seconds``, open the circuit breaker (0 turns it
    off). ``extra_body`` is merged into every request (for server-specific options).
    ``stream`` asks for streamed answers. ``transport`` names the HTTP client: "aiohttp" (or
    "auto", the same), the only one (see the module docstring).
    An observation's ``max_tokens`` (the env's allowance under its token budget) caps the
    request's ``max_tokens``; its ``seed`` (per sample) is sent as ``seed`` unless one was given.
    ``return_tokens=True`` asks a vLLM-style server for the prompt and completion token ids and
    the logprobs; the Completion carries them into the turn record (for trainer exports).
    """

    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 temperature: float = 0.2, max_tokens: int | None = None, top_p: float | None = None,
                 seed: int | None = None, timeout: float = settings.DEFAULT_POLICY_TIMEOUT,
                 max_retries: int = settings.DEFAULT_MAX_RETRIES, backoff: float = 1.0,
                 max_backoff: float = 30.0, breaker_threshold: int = settings.DEFAULT_BREAKER_FAILURES,
                 breaker_seconds: float = settings.DEFAULT_BREAKER_SECONDS,
                 system_prompt: str = DEFAULT_SYSTEM_PROMPT,
                 extra_body: Mapping[str, Any] | None = None, stream: bool = False,
                 transport: str = "auto", return_tokens: bool = False) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("OpenAIPolicy needs a model id, e.g. OpenAIPolicy('gpt-4o')")
        if max_retries < 0 or backoff < 0 or max_backoff < 0 or not timeout > 0:
            raise ConfigError("max_retries, backoff and max_backoff must be >= 0 and timeout > 0")
        if isinstance(breaker_threshold, bool) or not isinstance(breaker_threshold, int) or breaker_threshold < 0:
            raise ConfigError(f"breaker_threshold (--breaker-failures) must be a whole number >= 0 "
                              f"(0: never stop the run), got {breaker_threshold!r}")
        if not breaker_seconds >= 0:
            raise ConfigError(f"breaker_seconds (--breaker-seconds) must be >= 0, got {breaker_seconds!r}")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        transport = parse(Transport, transport, "transport").value
        self.model = model
        self.base_url = (base_url or settings.openai_base_url() or "").rstrip("/") or None
        key = api_key or settings.openai_api_key() or None
        if key is None and self.base_url is None:
            raise PolicyError(
                "OpenAIPolicy has no API key: set the OPENAI_API_KEY environment variable (or pass "
                "api_key=...), or point base_url (CLI: --base-url) at an OpenAI-compatible server "
                "such as vLLM, Ollama or llama.cpp, e.g. http://127.0.0.1:8000/v1"
            )
        self.transport = Transport.AIOHTTP.value  # "auto" is aiohttp, the one HTTP path
        self._api_key = key or _NO_KEY_PLACEHOLDER
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.top_p = top_p
        self.seed = seed
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.breaker_threshold = breaker_threshold
        self.breaker_seconds = breaker_seconds
        self.system_prompt = system_prompt
        self.extra_body = dict(extra_body or {})
        self.stream = stream
        self.return_tokens = return_tokens
        self._http = HTTPClient(self.base_url or "https://api.openai.com/v1", self._api_key, timeout)
        self.breaker = CircuitBreaker(self.breaker_threshold or 2**62, self.breaker_seconds)

    # The HTTP client pickles without its sessions (Ray workers rebuild them); the breaker
    # holds a lock: a fresh one.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("breaker", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.breaker = CircuitBreaker(self.breaker_threshold or 2**62, self.breaker_seconds)

    def __repr__(self) -> str:
        return f"OpenAIPolicy(model={self.model!r}, base_url={self._where!r}, temperature={self.temperature})"

    @property
    def _where(self) -> str:
        return self.base_url or "api.openai.com"

    @property
    def async_transport(self) -> str:
        """The HTTP client ``acall`` (and the sync call) uses: "aiohttp"."""
        return self.transport

    # -- requests ------------------------------------------------------------------------------
    def request(self, obs: Observation) -> dict[str, Any]:
        """The JSON body of one chat-completions request for this observation (``extra_body``
        and ``return_tokens`` fields merged into the top level, as they go on the wire)."""
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
        if self.stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        kwargs.update(self._extra_fields())
        return kwargs

    def _extra_fields(self) -> dict[str, Any]:
        """What ``return_tokens`` and ``extra_body`` add to every request's top level (last, so
        ``extra_body`` may override a standard field)."""
        fields: dict[str, Any] = {}
        if self.return_tokens:  # token ids (vLLM's return_token_ids) and logprobs, for trainers
            fields["logprobs"] = True
            fields["return_token_ids"] = True
        fields.update(self.extra_body)
        return fields

    def request_body(self, obs: Observation) -> dict[str, Any]:
        """The JSON body of the call for ``obs``, as it goes on the wire (same as :meth:`request`)."""
        return self.request(obs)

    def _completion(self, data: Any) -> Completion:
        """A Completion from the decoded JSON answer."""
        choices = data.get("choices") if isinstance(data, Mapping) else None
        if not choices or not isinstance(choices[0], Mapping):
            raise PolicyCallError(f"the server at {self._where} answered with no choices; check "
                                  f"that it serves chat completions for model {self.model!r}")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, Mapping):
            message = {}
        return Completion(str(message.get("content") or ""), usage=_usage(data.get("usage")),
                          finish_reason=choice.get("finish_reason"), **_token_fields(data, choice))

    # -- failures ------------------------------------------------------------------------------
    def _retry_if(self, exc: BaseException) -> bool:
        """Record a failed attempt with the breaker; True when it should be retried."""
        failure = classify(exc)
        if failure is None:
            return False
        if failure.server_down:
            self.breaker.failure(failure.describe())
        elif failure.kind == "status":  # the server answered: it is up
            self.breaker.success()
        return failure.transient and self.breaker.open_reason() is None

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        failure = classify(exc) if exc is not None else None
        log.warning("policy_retry", model=self.model, attempt=state.attempt_number,
                    delay=round(state.upcoming_sleep, 3), error=failure.kind if failure else None,
                    status=failure.status if failure else None)

    def _retrying(self, cls: type[tenacity.BaseRetrying]) -> Any:
        return retrying(cls, max_retries=self.max_retries, backoff=self.backoff,
                        max_backoff=self.max_backoff, retry_if=self._retry_if, before_sleep=self._log_retry,
                        interrupt=lambda: self.breaker.open_reason() is not None)

    def _check_breaker(self) -> None:
        reason = self.breaker.open_reason()
        if reason is not None:
            raise ServerUnavailable(f"the server at {self._where} stopped answering: {reason}")

    def _final_error(self, exc: BaseException, attempts: int) -> BaseException:
        """The agentenv error for a call that failed for good (the exception itself if it is
        not a call failure)."""
        failure = classify(exc)
        if failure is None:
            return exc
        where, words = self._where, failure.message
        if failure.status == 401:
            return PolicyError(f"the server at {where} rejected the API key (401: {words}); set a "
                               "valid OPENAI_API_KEY or pass api_key=...")
        if failure.status == 403:
            return PolicyError(f"the server at {where} denied access to model {self.model!r} "
                               f"(403: {words}); check the key's permissions")
        if failure.status == 404:
            return PolicyError(f"model {self.model!r} or the chat-completions route was not found at "
                               f"{where} (404: {words}); check --model and that --base-url ends in /v1")
        reason = self.breaker.open_reason()
        if reason is not None and failure.server_down:
            return ServerUnavailable(f"the server at {where} stopped answering: {reason}",
                                     status=failure.status)
        if failure.kind in ("timeout", "connection"):
            kind = "timed out" if failure.kind == "timeout" else "could not connect or was cut off"
            return PolicyCallError(f"the request to {where} {kind} after {attempts} attempt(s) ({words}); "
                                   "check that the server is up, or raise --policy-timeout/--max-retries",
                                   transient=True)
        if failure.kind == "bad_answer":
            return PolicyCallError(f"the server at {where} sent an answer that is not a chat "
                                   f"completion: {words}")
        if failure.transient:
            return PolicyCallError(f"the server at {where} answered {failure.status} after {attempts} "
                                   f"attempt(s): {words}", status=failure.status, transient=True)
        hint = f"; {_TOKEN_BUDGET_HINT}" if failure.context_length else ""
        return PolicyCallError(f"the server at {where} rejected the request ({failure.status}): {words}{hint}",
                               status=failure.status, context_length=failure.context_length)

    # -- calls ---------------------------------------------------------------------------------
    async def _call_once(self, body: dict[str, Any]) -> Completion:
        if body.get("stream"):
            stream = _Stream()
            await self._http.post_events("/chat/completions", body, stream.feed)
            return stream.completion()
        return self._completion(await self._http.post_json("/chat/completions", body))

    async def acall(self, obs: Observation) -> Completion:
        """Ask the model for the next answer without blocking the event loop."""
        body = self.request(obs)
        attempts = 0
        try:
            async for attempt in self._retrying(tenacity.AsyncRetrying):
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    self._check_breaker()
                    completion = await self._call_once(body)
        except AgentEnvError:
            raise
        except Exception as exc:
            raise self._final_error(exc, attempts) from exc
        self.breaker.success()
        return completion

    def __call__(self, obs: Observation) -> Completion:
        """Ask the model for the next answer (blocking): :meth:`acall` on the HTTP client's own
        loop thread."""
        return self._http.run(self.acall(obs))

    async def aclose(self) -> None:
        """Close the HTTP session of the running loop (others close with their loops)."""
        await self._http.aclose()

    def close(self) -> None:
        """Close the sync calls' session. The policy stays usable: a new one is made on demand."""
        self._http.close()

    # -- preflight -----------------------------------------------------------------------------
    def _listed_models(self) -> list[str]:
        """The model ids ``GET /models`` lists (raises what the HTTP client raises when it fails)."""
        data = self._http.run(self._http.get_json("/models"))
        items = data.get("data") if isinstance(data, Mapping) else None
        return [str(m["id"]) for m in items or () if isinstance(m, Mapping) and m.get("id")]

    def preflight(self) -> None:
        """Check the endpoint and the model before a run, as cheaply as the server allows.

        ``GET /models`` first: a server that lists the model passes with nothing generated.
        Otherwise (not listed, or the server lists nothing) one one-token completion decides.
        With ``return_tokens`` or ``extra_body`` that completion is always asked for, with those
        fields, so a server that refuses them (or, for ``return_tokens``, answers without token
        ids) stops the run here instead of failing every episode.
        Raises :class:`PolicyError` with one line that says what to fix; closes the breaker.
        """
        self.breaker.reset()
        listed: list[str] = []
        try:
            listed = self._listed_models()
        except Exception as exc:
            failure = classify(exc)
            if failure is None and not isinstance(exc, AgentEnvError):
                raise
            if failure is not None and (failure.kind in ("connection", "timeout") or failure.status == 401):
                raise PolicyError(self._preflight_message(failure, listed)) from None
            # Listing models is optional for a server (404, 405, a body that is not a list).
        extra = self._extra_fields()
        if self.model in listed and not extra:
            return
        body = {"model": self.model, "messages": [{"role": "user", "content": "Say OK."}],
                "max_tokens": 1, **extra}
        try:
            completion = self._completion(self._http.run(self._http.post_json("/chat/completions", body)))
        except AgentEnvError as exc:
            raise PolicyError(f"preflight: {exc}") from None
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            raise PolicyError(self._preflight_message(failure, listed)) from None
        if self.return_tokens and completion.token_ids is None:
            raise PolicyError(f"{self._where} answered without token ids: --return-tokens "
                              "(return_tokens=True) needs a server that returns them "
                              "(vLLM's return_token_ids); drop the flag for this server")

    def _preflight_message(self, failure: Failure, listed: list[str]) -> str:
        where = self._where
        if failure.kind == "connection":
            return (f"cannot reach an OpenAI-compatible server at {where} ({failure.message}); "
                    "start it, or fix --base-url (e.g. http://127.0.0.1:8000/v1)")
        if failure.kind == "timeout":
            return (f"{where} did not answer within {self.timeout:g} s; check the server, or raise "
                    "--policy-timeout")
        if failure.status == 401:
            return f"{where} rejected the API key (401: {failure.message}); set a valid OPENAI_API_KEY"
        fields = sorted(self._extra_fields())
        if fields and failure.kind == "status" and failure.status in (400, 422) and (
                self.model in listed or any(f in failure.message for f in fields)):
            why = ("--return-tokens (return_tokens=True) needs a server that returns token ids "
                   "(vLLM); drop the flag for this server" if self.return_tokens
                   else "drop those extra_body fields for this server")
            return (f"{where} refused the fields {', '.join(fields)} ({failure.describe()}): {why}")
        if listed and self.model not in listed:
            shown = ", ".join(listed[:5]) + (", ..." if len(listed) > 5 else "")
            hint = f"; it serves {shown}: fix --model"
        elif failure.status == 404 and not listed:
            hint = "; check that --base-url ends in /v1 and --model names a model it serves"
        else:
            hint = "; check --model and the server's log"
        return (f"{where} answered {failure.describe()} to a one-token request for model "
                f"{self.model!r}{hint}")


@functools.lru_cache(maxsize=16)
def _cached_policy(model: str, temperature: float, base_url: str | None, api_key: str | None) -> OpenAIPolicy:
    return OpenAIPolicy(model, base_url=base_url, api_key=api_key, temperature=temperature)


def openai_policy(obs: Observation, model: str = "gpt-4o", temperature: float = 0.2) -> str:
    """The walk-through's policy: ask an OpenAI(-compatible) model for the next answer.

    Reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``; reuses one client per setting.
    """
    policy = _cached_policy(model, temperature, settings.openai_base_url(), settings.openai_api_key())
    return policy(obs)
