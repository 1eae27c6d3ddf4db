"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests, benchmarks and demos.

It speaks just enough of the OpenAI HTTP API for ``openai.OpenAI(base_url=server.url)`` (and so
``OpenAIPolicy``) to work unchanged: ``POST /v1/chat/completions`` (non-streaming) and
``GET /v1/models``. What it answers is pluggable:

- a list of replies, served in order to successive requests (the last one repeats);
- a callable ``(request_body) -> str | ChatReply``;
- by default a :class:`ScriptedModel`: a stand-in "model" that recognises the task in the
  conversation and replays the task's scripted attempts turn by turn (the same script as
  ``ScriptedPolicy``), so a multi-turn rollout over HTTP shows real revision.

A :class:`ChatReply` can also be an error (``status=429`` with ``retry_after``, ``500``) or
carry an extra delay, to test retries and timeouts. Every request is recorded
(:attr:`ChatServer.requests`) so tests can assert that the full message history was sent. A
fixed ``latency`` makes the server a latency-bound stand-in for a real model in benchmarks.

Usage numbers are counted with a simple deterministic tokenizer (words and punctuation marks),
which is enough to check that they flow into the records. Not here: streaming, tools, images.

The server is one asyncio event loop in a background thread, speaking a strict subset of
HTTP/1.1 (keep-alive and pipelining, ``Content-Length`` or chunked request bodies,
``Expect: 100-continue``; an HTTP/1.0 request or ``Connection: close`` ends the connection).
A waiting reply costs a timer, not a thread, so a benchmark with dozens of requests in flight
measures the client, not the server: the reply is written ``latency`` seconds after the request
was fully read, whatever the server spent on it meanwhile. The builtin responders (a reply list,
``ScriptedModel``) run on the loop; any other callable runs in a worker thread, so a slow one
delays only its own reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
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
from http import HTTPStatus
from typing import Any

from agentenv.tasks.schema import Task

__all__ = ["ChatReply", "ChatServer", "RecordedRequest", "Responder", "ScriptedModel", "count_tokens"]

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
    """

    def __init__(self, tasks: Sequence[Task] | None = None,
                 scripts: Mapping[str, Sequence[str]] | None = None) -> None:
        if tasks is None:
            from agentenv.tasks.builtin import builtin_tasks

            tasks = builtin_tasks()
        from agentenv.policies.scripted import scripted_answer  # here, not on the first request

        self._answer = scripted_answer
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
        turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        return ChatReply(self._answer(task, turn, self.scripts.get(task.name)))


def _route(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/")


def _error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


_MAX_HEAD = 64 * 1024          # request line and headers
_MAX_BODY = 64 * 1024 * 1024   # a request body (a long conversation is a few MB at most)
_BACKLOG = 1024                # many clients connecting at once must not be refused


class _BadRequest(Exception):
    """A request that is not HTTP this server understands: answered 400, connection closed."""


@dataclass(frozen=True)
class _Head:
    """A request's line and headers (names in lower case), and how its body is framed."""

    method: str
    target: str
    keep_alive: bool
    headers: Mapping[str, str]
    chunked: bool
    length: int


@dataclass(frozen=True)
class _Request:
    """One whole request, and when its last byte had been read (event-loop clock)."""

    head: _Head
    body: bytes
    arrived: float


# (status, JSON payload, extra headers, seconds after arrival to send it)
_Answer = tuple[int, Any, dict[str, str], float]


def _parse_head(raw: bytes) -> _Head:
    request_line, *lines = raw.decode("latin-1").split("\r\n")
    parts = request_line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(f"malformed request line {request_line[:80]!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise _BadRequest(f"malformed header line {line[:80]!r}")
        headers[name.lower()] = value.strip()
    keep_alive = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    length = headers.get("content-length", "0")
    if not chunked and not length.isdigit():
        raise _BadRequest(f"bad Content-Length {length[:40]!r}")
    if not chunked and int(length) > _MAX_BODY:
        raise _BadRequest("the request body is too large")
    return _Head(method, target, keep_alive, headers, chunked, 0 if chunked else int(length))


def _take_chunked(buffer: bytearray) -> bytes | None:
    """Remove a whole chunked body from the start of ``buffer`` and return it; None (buffer
    untouched) while it has not all arrived."""
    parts: list[bytes] = []
    pos = total = 0
    while True:
        end = buffer.find(b"\r\n", pos)
        if end < 0:
            if len(buffer) - pos > _MAX_HEAD:
                raise _BadRequest("a chunk size line is too long")
            return None
        try:
            size = int(bytes(buffer[pos:end]).split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadRequest(f"bad chunk size line {bytes(buffer[pos:end])[:40]!r}") from None
        pos = end + 2
        if size == 0:
            while True:  # trailers, then the blank line
                end = buffer.find(b"\r\n", pos)
                if end < 0:
                    return None
                blank = end == pos
                pos = end + 2
                if blank:
                    del buffer[:pos]
                    return b"".join(parts)
        total += size
        if total > _MAX_BODY:
            raise _BadRequest("the request body is too large")
        if len(buffer) < pos + size + 2:
            return None
        parts.append(bytes(buffer[pos:pos + size]))
        pos += size + 2


class _Connection(asyncio.Protocol):
    """One client connection: parses requests as bytes arrive and answers them in order."""

    def __init__(self, server: ChatServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.head: _Head | None = None   # of a request whose body is still arriving
        self.answering = False           # a request is being answered (the next one waits)
        self.peer_closed = False         # the client will send nothing more
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server._connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.next_request()

    def eof_received(self) -> bool:
        self.peer_closed = True
        return self.answering  # keep the transport open to send the answer still due

    def abort(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.transport is not None:
            self.transport.abort()

    def next_request(self) -> None:
        while self.transport is not None and not self.answering:
            try:
                request = self._take_request()
            except _BadRequest as exc:
                self.answering = True
                self.send(self.server._response(
                    400, _error_body(f"bad request: {exc}", "invalid_request_error"), keep_alive=False), False)
                return
            if request is None:
                return
            self.answering = True
            self.server._dispatch(self, request)

    def _take_request(self) -> _Request | None:
        buffer = self.buffer
        if self.head is None:
            while buffer[:2] == b"\r\n":  # stray line breaks between requests
                del buffer[:2]
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _MAX_HEAD:
                    raise _BadRequest("the request headers are too large")
                return None
            self.head = _parse_head(bytes(buffer[:end]))
            del buffer[:end + 4]
            if self.head.headers.get("expect", "").lower() == "100-continue" and self.transport is not None:
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        head = self.head
        if head.chunked:
            body = _take_chunked(buffer)
            if body is None:
                return None
        else:
            if len(buffer) < head.length:
                return None
            body = bytes(buffer[:head.length])
            del buffer[:head.length]
        self.head = None
        return _Request(head, body, self.server._now())

    def send(self, data: bytes, keep_alive: bool) -> None:
        """Write one answer; then close, or go on with the next request."""
        self.timer = None
        if self.transport is None:
            return  # the client went away (e.g. it gave up waiting): nothing to answer
        self.transport.write(data)
        if not keep_alive or self.peer_closed:
            self.transport.close()
            return
        self.answering = False
        self.next_request()  # a pipelined request may be waiting


_date: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The Date header's value, formatted once per second."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, email.utils.formatdate(now, usegmt=True))
    return _date[1]


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _json_or_none(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


class ChatServer:
    """An OpenAI-compatible chat-completions server running in a background thread.

    Use it as a context manager (or call :meth:`start`/:meth:`stop`); ``url`` is the base URL
    to hand to a client (``http://127.0.0.1:PORT/v1``). A chat-completions reply is sent
    ``latency`` seconds (plus the reply's own ``delay``) after its request arrived.
    ``api_key``, when set, makes requests without ``Authorization: Bearer <api_key>`` fail
    with 401, like a real provider. ``chunked`` sends bodies with chunked transfer encoding and
    ``keep_alive=False`` closes the connection after every answer, as some servers do.
    """

    def __init__(self, responses: Sequence[str | ChatReply] | Responder | None = None, *,
                 latency: float = 0.0, model: str = "agentenv-test", host: str = "127.0.0.1",
                 port: int = 0, api_key: str | None = None, chunked: bool = False,
                 keep_alive: bool = True) -> None:
        if latency < 0:
            from agentenv.errors import ConfigError

            raise ConfigError(f"latency must be >= 0 seconds, got {latency!r}")
        self.latency = float(latency)
        self.model = model
        self.api_key = api_key
        self.chunked = chunked
        self.keep_alive = keep_alive
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
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._connections: set[_Connection] = set()
        self._bound_port = 0

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> ChatServer:
        """Bind and serve in a daemon thread; returns self. Idempotent.

        Returns once the socket is bound; a port in use raises ``OSError`` here. Safe to call
        from inside a running event loop (the server has its own, in its own thread).
        """
        if self._loop is None:
            loop = asyncio.new_event_loop()
            bound = threading.Event()
            failure: list[BaseException] = []

            def serve() -> None:
                asyncio.set_event_loop(loop)
                try:
                    self._server = loop.run_until_complete(loop.create_server(
                        lambda: _Connection(self), self._host, self._port, backlog=_BACKLOG))
                    self._bound_port = int(self._server.sockets[0].getsockname()[1])
                except BaseException as exc:  # reported by start() in the caller's thread
                    failure.append(exc)
                    return
                finally:
                    bound.set()
                loop.run_forever()

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
        if not thread.is_alive():
            loop.close()
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    async def _shutdown(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for connection in list(self._connections):
            connection.abort()
        if server is not None:
            await server.wait_closed()

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

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    # -- HTTP ----------------------------------------------------------------------------------
    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()  # everything below runs on the server's loop

    def _response(self, status: int, payload: Any, headers: Mapping[str, str] | None = None, *,
                  keep_alive: bool) -> bytes:
        """Status line, headers and body as one buffer: one segment on the wire."""
        data = json.dumps(payload).encode("utf-8")
        lines = [f"HTTP/1.1 {status} {_reason(status)}", f"Date: {_http_date()}",
                 "Server: agentenv-test", "Content-Type: application/json"]
        if self.chunked:  # as some servers do: the body in two chunks, then the last chunk
            half = len(data) // 2
            lines.append("Transfer-Encoding: chunked")
            data = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (data[:half], data[half:])
                            if part) + b"0\r\n\r\n"
        else:
            lines.append(f"Content-Length: {len(data)}")
        if not keep_alive:
            lines.append("Connection: close")
        lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data

    def _dispatch(self, connection: _Connection, request: _Request) -> None:
        """Record a request and have it answered (after the latency, for chat completions)."""
        head = request.head
        body = _json_or_none(request.body)
        self._record(RecordedRequest(method=head.method, path=head.target, body=body,
                                     authorization=head.headers.get("authorization"), received_at=time.time()))
        keep_alive = head.keep_alive and self.keep_alive
        answer = self._refusal(head, body)
        if answer is not None or self._inline:
            self._deliver(connection, request, answer or self._chat_answer(body, self._reply_for(body)), keep_alive)
            return
        pending = asyncio.get_running_loop().run_in_executor(self._executor, self._reply_for, body)

        def replied(future: asyncio.Future[ChatReply]) -> None:
            if not future.cancelled():
                self._deliver(connection, request, self._chat_answer(body, future.result()), keep_alive)

        pending.add_done_callback(replied)

    def _deliver(self, connection: _Connection, request: _Request, answer: _Answer, keep_alive: bool) -> None:
        status, payload, headers, delay = answer
        data = self._response(status, payload, headers, keep_alive=keep_alive)
        due = request.arrived + delay  # the reply leaves `delay` seconds after the request arrived
        if delay > 0 and due > self._now():
            connection.timer = asyncio.get_running_loop().call_at(due, connection.send, data, keep_alive)
        else:
            connection.send(data, keep_alive)

    def _refusal(self, head: _Head, body: Any) -> _Answer | None:
        """The answer to a request that gets no chat completion (other routes, auth, bad
        bodies), sent at once; None for a chat-completions request to answer."""
        route = _route(head.target)
        if head.method == "GET":
            if route == "/v1/models":
                return 200, {"object": "list", "data": [
                    {"id": self.model, "object": "model", "created": 0, "owned_by": "agentenv"}]}, {}, 0.0
            return 404, _error_body(f"no route for GET {head.target}", "invalid_request_error"), {}, 0.0
        if head.method != "POST":
            return 501, _error_body(f"method {head.method} is not supported", "invalid_request_error"), {}, 0.0
        if route != "/v1/chat/completions":
            return 404, _error_body(f"no route for POST {head.target}", "invalid_request_error"), {}, 0.0
        if self.api_key is not None and head.headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, _error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"), {}, 0.0
        if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
            return 400, _error_body("the body must be JSON with a 'messages' list", "invalid_request_error"), {}, 0.0
        if body.get("stream"):
            return 400, _error_body("this test server does not stream; send stream=false",
                                    "invalid_request_error"), {}, 0.0
        return None

    def _chat_answer(self, body: Mapping[str, Any], reply: ChatReply) -> _Answer:
        delay = self.latency + reply.delay
        if reply.status != 200:
            headers = {"Retry-After": f"{reply.retry_after:g}"} if reply.retry_after is not None else {}
            kind = "rate_limit_error" if reply.status == 429 else "server_error"
            return reply.status, _error_body(reply.content or f"scripted error {reply.status}", kind), headers, delay
        return 200, self._completion(body, reply), {}, delay

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
