"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for users' tests and demos.

It speaks enough of the OpenAI HTTP API for ``openai.OpenAI(base_url=server.url)`` (and so
``OpenAIPolicy``) to work unchanged: ``POST /v1/chat/completions`` (plain JSON, or server-sent
events with ``"stream": true``) and ``GET /v1/models``. What it answers is pluggable:

- a list of replies, served in order to successive requests (the last one repeats);
- a callable ``(request_body) -> str | ChatReply``;
- by default a :class:`ScriptedModel`: a stand-in "model" that recognises the task in the
  conversation and replays the task's scripted attempts turn by turn (the same script as
  ``ScriptedPolicy``), so a multi-turn rollout over HTTP shows real revision; with
  ``reads_feedback=True`` it revises as ``ReaderPolicy`` does instead (the fix is likelier the
  more failures the feedback quotes), so a prompt-template experiment over HTTP shows an effect.

A :class:`ChatReply` can also be an error (``status=429`` with ``retry_after``, ``500``, a
``400`` whose message says the context is too long) or carry an extra delay, to test retries
and timeouts. Every request is recorded (:attr:`ChatServer.requests`) so tests can assert that
the full message history was sent. A fixed ``latency`` makes the server a latency-bound
stand-in for a real model in benchmarks.

Usage numbers are counted with a simple deterministic tokenizer (words and punctuation marks),
which is enough to check that they flow into the records. Not here: tools, images.

HTTP is aiohttp's server, on its own event loop in a background thread. A waiting reply costs
a sleeping handler, not a thread, and is sent ``latency`` seconds after the request was fully
read, whatever the server spent on it meanwhile. The builtin responders (a reply list,
``ScriptedModel``) run on the loop; any other callable runs in a worker thread, so a slow one
delays only its own reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from agentenv.tasks.schema import Task

__all__ = ["KNOWN_FIELDS", "ChatReply", "ChatServer", "RecordedRequest", "Responder", "ScriptedModel", "count_tokens"]

_TOKEN = re.compile(r"\w+|[^\w\s]")


@functools.lru_cache(maxsize=4096)  # conversations resend the same messages turn after turn
def count_tokens(text: str) -> int:
    """The server's toy token count: words and punctuation marks."""
    return len(_TOKEN.findall(text))


def _truncate_tokens(text: str, limit: int) -> tuple[str, bool]:
    """Cut ``text`` after its ``limit``-th token; returns (text, was_cut)."""
    for i, match in enumerate(_TOKEN.finditer(text)):
        if i == limit:
            return text[:match.start()].rstrip(), True
    return text, False


def _toy_ids(text: str) -> list[int]:
    """Stable toy token ids: each word or punctuation mark hashed into a 50,000-token vocabulary."""
    return [int.from_bytes(hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=4).digest(), "big")
            % 50_000 for t in _TOKEN.findall(text)]


def _token_ids(body: Mapping[str, Any], content: str) -> tuple[list[int], list[int]]:
    """vLLM's ``return_token_ids`` answer with toy ids: the prompt rendered as ChatML (so each
    turn's prompt starts with the previous prompt and reply) and the reply's ids."""
    chat = "".join(f"<|im_start|>{m.get('role')}\n{m.get('content') or ''}<|im_end|>\n"
                   for m in body.get("messages", []) if isinstance(m, Mapping))
    return _toy_ids(chat + "<|im_start|>assistant\n"), _toy_ids(content)


@dataclass(frozen=True)
class ChatReply:
    """One scripted answer: the assistant's text, or an HTTP error when ``status`` is not 200.

    ``delay`` adds to the server's fixed latency for this reply (to make a client time out);
    ``retry_after`` sets the ``Retry-After`` header of an error reply, in seconds.
    ``prompt_tokens``/``completion_tokens`` override the counted usage.
    """

    content: str = ""
    finish_reason: str = "stop"
    status: int = 200
    retry_after: float | None = None
    delay: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server saw it: path, parsed JSON body (or None) and a few headers."""

    method: str
    path: str
    body: Any
    authorization: str | None
    received_at: float = field(compare=False)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of a chat-completions request ([] otherwise)."""
        if isinstance(self.body, Mapping) and isinstance(self.body.get("messages"), list):
            return list(self.body["messages"])
        return []


Responder = Callable[[Mapping[str, Any]], "str | ChatReply"]


class ScriptedModel:
    """A stand-in model: finds the task in the conversation and replays its script by turn.

    The task is the one whose prompt text appears in the first user message (the longest such
    prompt wins); failing that, the one whose entry point is named there as ``name(`` or
    ```name```. The turn is one plus the number of assistant messages already in the
    conversation. The answer for turn ``t`` is the ``t``-th scripted attempt (the task's
    ``metadata["attempts"]``, or ``scripts[task.name]``), then the reference solution, each in
    a ```` ```python ```` fence. An unknown task gets a polite answer with no code.

    With ``reads_feedback=True`` the answer is :class:`~agentenv.policies.ReaderPolicy`'s for
    the same conversation (the request's ``seed``, if any, as the episode seed): its revisions
    depend on what the feedback messages show. ``scripts`` does not apply then.
    """

    def __init__(self, tasks: Sequence[Task] | None = None,
                 scripts: Mapping[str, Sequence[str]] | None = None, *,
                 reads_feedback: bool = False) -> None:
        if tasks is None:
            from agentenv.tasks.builtin import builtin_tasks

            tasks = builtin_tasks()
        from agentenv.policies.reader import ReaderPolicy  # here, not on the first request
        from agentenv.policies.scripted import scripted_answer

        self._answer = scripted_answer
        self._reader = ReaderPolicy(list(tasks)) if reads_feedback else None
        self.tasks = list(tasks)
        self.scripts = dict(scripts or {})
        self._index()

    def _index(self) -> None:
        """What every request looks up: stripped prompts, entry-point patterns, past answers."""
        self._indexed = list(self.tasks)
        self._prompts = [(t.prompt.strip(), t) for t in self.tasks if t.prompt.strip()]
        self._entry_points = [(re.compile(rf"\b{re.escape(t.entry_point)}\(|`{re.escape(t.entry_point)}`"), t)
                              for t in self.tasks]
        self._found: dict[str, object] = {}

    def find_task(self, messages: Sequence[Mapping[str, Any]]) -> Task | None:
        first_user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        if self.tasks != self._indexed:  # the task list was changed in place
            self._index()
        # Every turn and every sample of a task resends the same first message.
        found = self._found.get(first_user, self)
        if found is self:
            found = self._find(first_user)
            if len(self._found) >= 4096:
                self._found.clear()
            self._found[first_user] = found
        return found if isinstance(found, Task) else None

    def _find(self, first_user: str) -> Task | None:
        by_prompt = [(prompt, t) for prompt, t in self._prompts if prompt in first_user]
        if by_prompt:
            return max(by_prompt, key=lambda pair: len(pair[0]))[1]
        for pattern, task in self._entry_points:
            if pattern.search(first_user):
                return task
        return None

    def __call__(self, body: Mapping[str, Any]) -> ChatReply:
        messages = body.get("messages") or []
        task = self.find_task(messages)
        if task is None:
            return ChatReply("I do not recognise this task, so I have no code to offer.")
        if self._reader is not None:
            if self._reader.tasks.get(task.name) is not task:
                self._reader.tasks[task.name] = task  # the task list was changed in place
            return ChatReply(self._reader({"task_name": task.name, "messages": messages,
                                           "seed": body.get("seed")}))
        turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        return ChatReply(self._answer(task, turn, self.scripts.get(task.name)))


def _route(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/")


def _error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


# The request fields the server knows: OpenAI's chat-completions parameters and vLLM's
# ``return_token_ids``. Any other field is refused, as OpenAI (400) and servers that validate
# their body (``transformers serve``: 422) refuse it; a client that sends an SDK argument such
# as ``extra_body`` as a field is caught here, not in production.
KNOWN_FIELDS = frozenset({
    "model", "messages", "temperature", "top_p", "n", "stream", "stream_options", "stop",
    "max_tokens", "max_completion_tokens", "presence_penalty", "frequency_penalty", "logit_bias",
    "logprobs", "top_logprobs", "user", "seed", "tools", "tool_choice", "parallel_tool_calls",
    "response_format", "service_tier", "store", "metadata", "modalities", "reasoning_effort",
    "return_token_ids",
})

_MAX_BODY = 64 * 1024 * 1024   # a request body (a long conversation is a few MB at most)
_BACKLOG = 1024                # many clients connecting at once must not be refused


# (status, JSON payload, extra headers) of an answer that is not a chat completion
_Refusal = tuple[int, dict[str, Any], dict[str, str]]


class ChatServer:
    """An OpenAI-compatible chat-completions server running in a background thread.

    Use it as a context manager (or call :meth:`start`/:meth:`stop`); ``url`` is the base URL
    to hand to a client (``http://127.0.0.1:PORT/v1``). A chat-completions reply is sent
    ``latency`` seconds (plus the reply's own ``delay``) after its request arrived; with
    ``"stream": true`` in the request it comes as server-sent events, a few words per chunk.
    ``api_key``, when set, makes requests without ``Authorization: Bearer <api_key>`` fail
    with 401, like a real provider. ``chunked`` sends bodies with chunked transfer encoding and
    ``keep_alive=False`` closes the connection after every answer, as some servers do.
    A request field outside :data:`KNOWN_FIELDS` and ``fields`` (server-specific options a
    test means to send) is refused with 400, as OpenAI refuses it.
    """

    def __init__(self, responses: Sequence[str | ChatReply] | Responder | None = None, *,
                 latency: float = 0.0, model: str = "agentenv-test", host: str = "127.0.0.1",
                 port: int = 0, api_key: str | None = None, chunked: bool = False,
                 keep_alive: bool = True, fields: Sequence[str] = ()) -> None:
        if latency < 0:
            from agentenv.errors import ConfigError

            raise ConfigError(f"latency must be >= 0 seconds, got {latency!r}")
        self.latency = float(latency)
        self.model = model
        self.api_key = api_key
        self.chunked = chunked
        self.keep_alive = keep_alive
        self.fields = KNOWN_FIELDS | frozenset(fields)
        self._host, self._port = host, port
        self._responder: Responder
        self._script: list[ChatReply] | None = None
        if responses is None:
            self._responder = ScriptedModel()
        elif callable(responses):
            self._responder = responses
        else:
            self._script = [r if isinstance(r, ChatReply) else ChatReply(str(r)) for r in responses]
            if not self._script:
                from agentenv.errors import ConfigError

                raise ConfigError("responses must hold at least one reply (or pass a callable)")
            self._responder = self._next_scripted
        self._served = 0
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        # Builtin responders are quick and run on the loop; a user's callable gets a thread.
        self._inline = self._script is not None or isinstance(self._responder, ScriptedModel)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._bound_port = 0

    # -- lifecycle -----------------------------------------------------------------------------
    def _app(self) -> web.Application:
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_route("*", "/{anything:.*}", self._no_route)
        return app

    def start(self) -> ChatServer:
        """Bind and serve in a daemon thread; returns self. Idempotent.

        Returns once the socket is bound; a port in use raises ``OSError`` here. Safe to call
        from inside a running event loop (the server has its own, in its own thread).
        """
        if self._loop is None:
            loop = asyncio.new_event_loop()
            bound = threading.Event()
            failure: list[BaseException] = []

            async def bind() -> None:
                # handler_cancellation: a client that gives up cancels its handler's wait.
                runner = web.AppRunner(self._app(), access_log=None, handler_cancellation=True,
                                       shutdown_timeout=0.05)
                await runner.setup()
                try:
                    site = web.TCPSite(runner, self._host, self._port, backlog=_BACKLOG)
                    await site.start()
                except BaseException:
                    await runner.cleanup()
                    raise
                self._runner = runner
                self._bound_port = int(runner.addresses[0][1])

            def serve() -> None:
                asyncio.set_event_loop(loop)
                try:
                    loop.run_until_complete(bind())
                except BaseException as exc:  # reported by start() in the caller's thread
                    failure.append(exc)
                    return
                finally:
                    bound.set()
                loop.run_forever()
                # Stopped: handlers still waiting out their latency are cancelled, then the loop closes.
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.close()

            if not self._inline:
                self._executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="agentenv-chat-responder")
            thread = threading.Thread(target=serve, name="agentenv-chat-server", daemon=True)
            thread.start()
            bound.wait()
            if failure:
                thread.join()
                loop.close()
                executor, self._executor = self._executor, None
                if executor is not None:
                    executor.shutdown(wait=False)
                raise failure[0]
            self._loop, self._thread = loop, thread
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections (replies still waiting are not sent) and close
        the socket. Idempotent."""
        loop, self._loop = self._loop, None
        thread, self._thread = self._thread, None
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    async def _shutdown(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()  # replies still waiting are cancelled within 50 ms

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._loop is None:
            raise RuntimeError("the server is not running; call start() or use it as a context manager")
        return self._bound_port

    @property
    def url(self) -> str:
        """Base URL for an OpenAI client: ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    # -- what was asked ------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The chat-completions requests received so far."""
        return [r for r in self.requests if r.method == "POST" and _route(r.path) == "/v1/chat/completions"]

    def clear(self) -> None:
        """Forget the recorded requests (the script position is kept)."""
        with self._lock:
            self._requests.clear()

    async def _record(self, request: web.Request) -> Any:
        """Record a request; returns its JSON body (None when it has none or it is not JSON)."""
        raw = await request.read()
        body = None
        if raw:
            with contextlib.suppress(ValueError):
                body = json.loads(raw)
        with self._lock:
            self._requests.append(RecordedRequest(
                method=request.method, path=request.path_qs, body=body,
                authorization=request.headers.get("Authorization"), received_at=time.time()))
        return body

    # -- HTTP ----------------------------------------------------------------------------------
    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> web.Response:
        response = web.json_response(payload, status=status, headers=dict(headers or {}))
        if self.chunked:  # as some servers do
            response.enable_chunked_encoding()
        if not self.keep_alive:
            response.force_close()
        return response

    async def _models(self, request: web.Request) -> web.Response:
        await self._record(request)
        return self._json(200, {"object": "list", "data": [
            {"id": self.model, "object": "model", "created": 0, "owned_by": "agentenv"}]})

    async def _no_route(self, request: web.Request) -> web.Response:
        await self._record(request)
        if request.method not in ("GET", "POST"):
            return self._json(501, _error_body(f"method {request.method} is not supported",
                                               "invalid_request_error"))
        return self._json(404, _error_body(f"no route for {request.method} {request.path_qs}",
                                           "invalid_request_error"))

    def _refusal(self, request: web.Request, body: Any) -> _Refusal | None:
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, _error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"), {}
        if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
            return 400, _error_body("the body must be JSON with a 'messages' list", "invalid_request_error"), {}
        unknown = sorted(str(key) for key in body if key not in self.fields)
        if unknown:
            return 400, _error_body(f"Unrecognized request argument supplied: {', '.join(unknown)}",
                                    "invalid_request_error"), {}
        return None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        body = await self._record(request)
        arrived = loop.time()
        refusal = self._refusal(request, body)
        if refusal is not None:
            return self._json(*refusal)
        if self._inline:
            reply = self._reply_for(body)
        else:
            reply = await loop.run_in_executor(self._executor, self._reply_for, body)
        wait = arrived + self.latency + reply.delay - loop.time()
        if wait > 0:  # the reply leaves its delay after the request arrived
            await asyncio.sleep(wait)
        if reply.status != 200:
            headers = {"Retry-After": f"{reply.retry_after:g}"} if reply.retry_after is not None else {}
            kind = "rate_limit_error" if reply.status == 429 else (
                "invalid_request_error" if reply.status < 500 else "server_error")
            return self._json(reply.status, _error_body(reply.content or f"scripted error {reply.status}",
                                                        kind), headers)
        completion = self._completion(body, reply)
        if body.get("stream"):
            return await self._stream(request, body, completion)
        return self._json(200, completion)

    async def _stream(self, request: web.Request, body: Mapping[str, Any],
                      completion: dict[str, Any]) -> web.StreamResponse:
        """The completion as server-sent events: a role chunk, the text a few words at a time,
        the finish reason, the usage when asked for (``stream_options.include_usage``), [DONE]."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        if not self.keep_alive:
            response.force_close()
        await response.prepare(request)
        base = {key: completion[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        choice = completion["choices"][0]
        pieces = re.findall(r"\S*\s*", choice["message"]["content"])[:-1] or [""]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": "".join(pieces[i:i + 4])} for i in range(0, len(pieces), 4)]
        events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
        options = body.get("stream_options")
        if isinstance(options, Mapping) and options.get("include_usage"):
            events.append({**base, "choices": [], "usage": completion["usage"]})
        for event in events:
            await response.write(f"data: {json.dumps(event)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    # -- what to answer ------------------------------------------------------------------------
    def _next_scripted(self, body: Mapping[str, Any]) -> ChatReply:
        assert self._script is not None
        with self._lock:
            reply = self._script[min(self._served, len(self._script) - 1)]
            self._served += 1
        return reply

    def _reply_for(self, body: Mapping[str, Any]) -> ChatReply:
        try:
            reply = self._responder(body)
        except Exception as exc:  # a broken responder is a server error, as it would be for real
            return ChatReply(f"responder failed: {type(exc).__name__}: {exc}", status=500)
        return reply if isinstance(reply, ChatReply) else ChatReply(str(reply))

    def _completion(self, body: Mapping[str, Any], reply: ChatReply) -> dict[str, Any]:
        content, finish = reply.content, reply.finish_reason
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if isinstance(limit, int) and limit > 0:
            content, cut = _truncate_tokens(content, limit)
            if cut:
                finish = "length"
        prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else sum(
            count_tokens(str(m.get("content") or "")) + 3 for m in body.get("messages", [])
            if isinstance(m, Mapping))
        completion_tokens = (reply.completion_tokens if reply.completion_tokens is not None
                             else count_tokens(content))
        completion: dict[str, Any] = {
            "id": f"chatcmpl-agentenv-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
                "logprobs": None,
            }],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        if body.get("return_token_ids"):  # vLLM's fields, with toy ids and made-up logprobs
            prompt_ids, reply_ids = _token_ids(body, content)
            completion["prompt_token_ids"] = prompt_ids
            choice = completion["choices"][0]
            choice["token_ids"] = reply_ids
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [{"logprob": -0.01 * (i % 7)} for i in range(len(reply_ids))]}
        return completion
