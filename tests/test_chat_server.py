"""The OpenAI-compatible test server: fixed latency from arrival, HTTP framing, lifecycle."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

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


def post(body: Mapping[str, Any], *, extra: str = "", path: str = "/v1/chat/completions") -> bytes:
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def test_a_reply_leaves_the_latency_after_its_request_arrived_and_waits_cost_no_thread() -> None:
    """Forty requests against a 0.3 s server all come back after >= 0.3 s, together, not queued."""
    with ChatServer(["ok"], latency=0.3) as server:
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
        time.sleep(0.1)
        server_threads = threading.active_count() - threads_before - sum(c.is_alive() for c in callers)
        for caller in callers:
            caller.join()
    assert len(times) == 40 and min(times) >= 0.3
    assert max(times) < 40 * 0.3 / 4  # generous: queued one by one would take 12 s
    assert server_threads < 5  # waiting replies hold a timer each; a thread each would be ~40


def test_pipelined_requests_on_one_connection_are_answered_in_order() -> None:
    """Two requests sent back to back on one connection get two answers, in order."""
    with ChatServer(["first", "second"]) as server:
        answers = raw_exchange(server.port, post(BODY) + post(BODY), answers=2)
    assert [a[2]["choices"][0]["message"]["content"] for a in answers] == ["first", "second"]


def test_a_chunked_request_body_with_expect_100_continue_is_read() -> None:
    """Chunked request bodies and Expect: 100-continue, as some clients send them, work."""
    data = json.dumps(BODY).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (data[:7], data[7:])) + b"0\r\n\r\n"
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
    with ChatServer(["ok"]) as server:
        status, _, payload = raw_exchange(server.port, request)[0]
        assert server.chat_requests[-1].messages == BODY["messages"]
    assert status == 200 and payload["choices"][0]["message"]["content"] == "ok"


def test_a_malformed_request_gets_a_400_and_the_connection_is_closed() -> None:
    """Garbage instead of a request line is answered 400 with a JSON error, then closed."""
    with ChatServer(["ok"]) as server:
        status, headers, payload = raw_exchange(server.port, b"HELLO THERE\r\n\r\n")[0]
    assert status == 400 and headers["connection"] == "close"
    assert "malformed request line" in payload["error"]["message"]


def test_connection_close_and_http_1_0_requests_end_the_connection() -> None:
    """The server answers, then closes, when the client asks for it or speaks HTTP/1.0."""
    with ChatServer(["ok"]) as server:
        closing = raw_exchange(server.port, post(BODY, extra="Connection: close\r\n"))[0]
        old = raw_exchange(server.port, post(BODY).replace(b"HTTP/1.1", b"HTTP/1.0", 1))[0]
    assert closing[1]["connection"] == "close" and old[1]["connection"] == "close"


def test_a_slow_callable_responder_delays_only_its_own_reply() -> None:
    """A user's responder runs in a worker thread: one slow reply does not hold up another."""
    def responder(body: Mapping[str, Any]) -> str:
        text = str(body["messages"][-1]["content"])
        if text == "slow":
            time.sleep(1.0)
        return text

    with ChatServer(responder) as server:
        slow = threading.Thread(target=raw_exchange, args=(
            server.port, post({"messages": [{"role": "user", "content": "slow"}]})))
        slow.start()
        time.sleep(0.05)
        started = time.perf_counter()
        fast = raw_exchange(server.port, post({"messages": [{"role": "user", "content": "fast"}]}))[0]
        elapsed = time.perf_counter() - started
        slow.join()
    assert fast[2]["choices"][0]["message"]["content"] == "fast" and elapsed < 0.9


def test_stop_drops_replies_still_waiting_and_returns_promptly() -> None:
    """Stopping with a 30 s reply pending closes its connection at once instead of waiting."""
    server = ChatServer([ChatReply("late", delay=30.0)]).start()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(post(BODY))
    time.sleep(0.1)
    started = time.perf_counter()
    server.stop()
    server.stop()  # idempotent
    assert time.perf_counter() - started < 5
    with contextlib.suppress(ConnectionResetError):  # a reset is as good as a close: no answer
        assert sock.recv(100) == b""
    sock.close()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.port


def test_starting_on_a_port_in_use_raises_in_the_caller() -> None:
    """Binding happens in start(), so a busy port is an OSError there, not a silent dead thread."""
    with ChatServer(["ok"]) as first, pytest.raises(OSError):
        ChatServer(["ok"], port=first.port).start()
