"""The OpenAI-compatible test server: fixed latency from arrival, streaming, errors, lifecycle.

HTTP framing is aiohttp's; these tests check what the server itself decides."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from support.hangs import prompt

from agentenv.testing import ChatReply, ChatServer

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def raw_exchange(port: int, data: bytes, *, answers: int = 1,
                 timeout: float = 5.0) -> list[tuple[int, dict[str, str], Any]]:
    """Send raw bytes on one connection and read ``answers`` HTTP answers (100 Continue skipped)."""
    out: list[tuple[int, dict[str, str], Any]] = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        buffer = b""
        while len(out) < answers:
            while b"\r\n\r\n" not in buffer:
                chunk = sock.recv(65536)
                assert chunk, f"the server closed the connection after {len(out)} answer(s)"
                buffer += chunk
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            status_line, *lines = head.decode("latin-1").split("\r\n")
            status = int(status_line.split()[1])
            headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
            if status == 100:
                continue
            length = int(headers["content-length"])
            while len(buffer) < length:
                buffer += sock.recv(65536)
            out.append((status, headers, json.loads(buffer[:length])))
            buffer = buffer[length:]
    return out


def _until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition`` (polling) up to the suite's shared stall bound."""
    with prompt("waiting for a server condition"):
        while not condition():
            time.sleep(0.005)


def post(body: Mapping[str, Any], *, extra: str = "", path: str = "/v1/chat/completions") -> bytes:
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def test_a_reply_leaves_the_latency_after_its_request_arrived_and_waits_cost_no_thread() -> None:
    """Forty requests against a 1 s server all come back after >= 1 s, together, not queued:
    when the fortieth request is in, most replies are still waiting (queued one by one, 39 would
    have been answered). No elapsed time is bounded from above."""
    with ChatServer(["ok"], latency=1.0) as server:
        threads_before = threading.active_count()
        times: list[float] = []

        def one() -> None:
            started = time.perf_counter()
            status, _, payload = raw_exchange(server.port, post(BODY))[0]
            assert status == 200 and payload["choices"][0]["message"]["content"] == "ok"
            times.append(time.perf_counter() - started)

        callers = [threading.Thread(target=one) for _ in range(40)]
        for caller in callers:
            caller.start()
        _until(lambda: len(server.chat_requests) == 40)  # every request is in, its reply waiting
        answered_by_then = len(times)
        server_threads = threading.active_count() - threads_before - sum(c.is_alive() for c in callers)
        for caller in callers:
            caller.join()
    assert len(times) == 40 and min(times) >= 1.0  # a lower bound: load only adds to it
    assert answered_by_then < 20, answered_by_then
    assert server_threads < 5  # waiting replies hold a timer each; a thread each would be ~40


def sse_events(port: int, body: Mapping[str, Any]) -> list[Any]:
    """POST a streaming request and return the decoded ``data:`` events ([DONE] as a string)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(post({**body, "stream": True}, extra="Connection: close\r\n"))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    assert b"text/event-stream" in head
    events: list[Any] = []
    for line in rest.split(b"\n"):
        line = line.strip()
        if line.startswith(b"data:"):
            payload = line[5:].strip()
            events.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
    return events


def test_a_streamed_reply_is_server_sent_events_that_add_up_to_the_answer() -> None:
    """stream=true: chunks whose deltas concatenate to the reply, a finish reason, usage, [DONE]."""
    reply = "```python\ndef add(a, b):\n    return a + b\n```"
    with ChatServer([reply]) as server:
        events = sse_events(server.port, {**BODY, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == reply and len(chunks) > 3
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] > 0 and all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_errors_and_unknown_routes_are_json_in_the_openai_shape() -> None:
    """A scripted 429 carries Retry-After; unknown routes are 404 with error.message."""
    with ChatServer([ChatReply("slow down", status=429, retry_after=2)]) as server:
        status, headers, payload = raw_exchange(server.port, post(BODY))[0]
        assert (status, headers["retry-after"], payload["error"]["message"]) == (429, "2", "slow down")
        status, _, payload = raw_exchange(server.port, post(BODY, path="/v1/embeddings"))[0]
        assert status == 404 and "no route for POST /v1/embeddings" in payload["error"]["message"]
        status, _, payload = raw_exchange(server.port, post({"no": "messages"}))[0]
        assert status == 400 and "messages" in payload["error"]["message"]


def test_a_slow_callable_responder_delays_only_its_own_reply() -> None:
    """A user's responder runs in a worker thread: one slow reply does not hold up another.

    The slow reply is held until the fast one has come back: served one after the other, the
    fast request would wait for it (and time out)."""
    release = threading.Event()

    def responder(body: Mapping[str, Any]) -> str:
        text = str(body["messages"][-1]["content"])
        if text == "slow":
            release.wait(10)
        return text

    with ChatServer(responder) as server:
        slow = threading.Thread(target=raw_exchange, args=(
            server.port, post({"messages": [{"role": "user", "content": "slow"}]})))
        slow.start()
        try:
            _until(lambda: len(server.chat_requests) == 1)  # the slow request is being answered
            fast = raw_exchange(server.port, post({"messages": [{"role": "user", "content": "fast"}]}))[0]
            held = slow.is_alive() and not release.is_set()
        finally:
            release.set()
            slow.join()
    assert fast[2]["choices"][0]["message"]["content"] == "fast" and held


def test_stop_drops_replies_still_waiting_and_returns_promptly() -> None:
    """Stopping with an hour-long reply pending closes its connection at once instead of
    waiting for it (the shared stall bound, far below the delay, tells the two apart)."""
    server = ChatServer([ChatReply("late", delay=3600.0)]).start()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(post(BODY))
    _until(lambda: len(server.chat_requests) == 1)  # the reply is pending
    with prompt("stopping a server with a reply pending"):
        server.stop()
        server.stop()  # idempotent
    with contextlib.suppress(ConnectionResetError):  # a reset is as good as a close: no answer
        assert sock.recv(100) == b""
    sock.close()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.port


def test_starting_on_a_port_in_use_raises_in_the_caller() -> None:
    """Binding happens in start(), so a busy port is an OSError there, not a silent dead thread."""
    with ChatServer(["ok"]) as first, pytest.raises(OSError):
        ChatServer(["ok"], port=first.port).start()


def test_importing_the_library_never_imports_the_test_server() -> None:
    """agentenv.testing is for users' tests: `import agentenv` (and its policies) leave it,
    and aiohttp's server, unloaded."""
    import subprocess
    import sys

    code = ("import sys, agentenv, agentenv.policies, agentenv.rollout; "
            "print(sorted(m for m in sys.modules if m.startswith(('agentenv.testing', 'aiohttp.web'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
