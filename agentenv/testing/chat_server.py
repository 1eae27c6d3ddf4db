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
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentenv.tasks.schema import Task

__all__ = ["ChatReply", "ChatServer", "RecordedRequest", "Responder", "ScriptedModel", "count_tokens"]

_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """The server's toy token count: words and punctuation marks."""
    return len(_TOKEN.findall(text))


def _truncate_tokens(text: str, limit: int) -> tuple[str, bool]:
    """Cut ``text`` after its ``limit``-th token; returns (text, was_cut)."""
    for i, match in enumerate(_TOKEN.finditer(text)):
        if i == limit:
            return text[:match.start()].rstrip(), True
    return text, False


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
        self.tasks = list(tasks)
        self.scripts = dict(scripts or {})

    def find_task(self, messages: Sequence[Mapping[str, Any]]) -> Task | None:
        first_user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        by_prompt = [t for t in self.tasks if t.prompt.strip() and t.prompt.strip() in first_user]
        if by_prompt:
            return max(by_prompt, key=lambda t: len(t.prompt.strip()))
        for task in self.tasks:
            ep = re.escape(task.entry_point)
            if re.search(rf"\b{ep}\(|`{ep}`", first_user):
                return task
        return None

    def __call__(self, body: Mapping[str, Any]) -> ChatReply:
        from agentenv.policies.scripted import scripted_answer

        messages = body.get("messages") or []
        task = self.find_task(messages)
        if task is None:
            return ChatReply("I do not recognise this task, so I have no code to offer.")
        turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        return ChatReply(scripted_answer(task, turn, self.scripts.get(task.name)))


def _route(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/")


def _error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive, so a client's connection pool is reused
    disable_nagle_algorithm = True  # else a small reply waits ~40 ms on delayed ACKs
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: tests and benchmarks read the recorded requests instead

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        owner = self.server.owner
        data = json.dumps(payload).encode("utf-8")
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"Date: {self.date_time_string()}",
                 "Server: agentenv-test", "Content-Type: application/json"]
        if owner.chunked:  # as some servers do: the body in two chunks, then the last chunk
            half = len(data) // 2
            lines.append("Transfer-Encoding: chunked")
            data = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (data[:half], data[half:])
                            if part) + b"0\r\n\r\n"
        else:
            lines.append(f"Content-Length: {len(data)}")
        if not owner.keep_alive:
            lines.append("Connection: close")
            self.close_connection = True
        lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
        # Status, headers and body in one write: one segment on the wire, no waiting between them.
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _record(self, body: Any) -> None:
        self.server.owner._record(RecordedRequest(
            method=self.command, path=self.path, body=body,
            authorization=self.headers.get("Authorization"), received_at=time.time(),
        ))

    def do_GET(self) -> None:
        self._record(None)
        owner = self.server.owner
        if _route(self.path) == "/v1/models":
            self._send_json(200, {"object": "list", "data": [
                {"id": owner.model, "object": "model", "created": 0, "owned_by": "agentenv"}]})
        else:
            self._send_json(404, _error_body(f"no route for GET {self.path}", "invalid_request_error"))

    def do_POST(self) -> None:
        body = self._read_body()
        self._record(body)
        owner = self.server.owner
        if _route(self.path) != "/v1/chat/completions":
            self._send_json(404, _error_body(f"no route for POST {self.path}", "invalid_request_error"))
            return
        if owner.api_key is not None and self.headers.get("Authorization") != f"Bearer {owner.api_key}":
            self._send_json(401, _error_body("Incorrect API key provided.", "invalid_request_error",
                                             "invalid_api_key"))
            return
        if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
            self._send_json(400, _error_body("the body must be JSON with a 'messages' list",
                                             "invalid_request_error"))
            return
        if body.get("stream"):
            self._send_json(400, _error_body("this test server does not stream; send stream=false",
                                             "invalid_request_error"))
            return
        reply = owner._reply_for(body)
        delay = owner.latency + reply.delay
        if delay > 0:
            time.sleep(delay)
        if reply.status != 200:
            headers = {"Retry-After": f"{reply.retry_after:g}"} if reply.retry_after is not None else {}
            kind = "rate_limit_error" if reply.status == 429 else "server_error"
            self._send_json(reply.status, _error_body(reply.content or f"scripted error {reply.status}",
                                                      kind), headers)
            return
        self._send_json(200, owner._completion(body, reply))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256   # many clients connecting at once must not be refused
    owner: ChatServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (its timeout) closes the socket under us: not worth a traceback.
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class ChatServer:
    """An OpenAI-compatible chat-completions server running in a background thread.

    Use it as a context manager (or call :meth:`start`/:meth:`stop`); ``url`` is the base URL
    to hand to a client (``http://127.0.0.1:PORT/v1``). ``latency`` is added to every reply.
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
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> ChatServer:
        """Bind and serve in a daemon thread; returns self. Idempotent."""
        if self._httpd is None:
            httpd = _Server((self._host, self._port), _Handler)
            httpd.owner = self
            self._httpd = httpd
            self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="agentenv-chat-server", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running; call start() or use it as a context manager")
        return int(self._httpd.server_address[1])

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
        return {
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
