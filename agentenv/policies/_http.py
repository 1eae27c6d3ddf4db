"""A lean HTTP/1.1 JSON client on asyncio's socket API, for plain-HTTP OpenAI-compatible servers.

Why it exists: a rollout keeps dozens of model calls in flight, and every call's client-side CPU
is spent on the one event loop that also runs the environments. The official SDK's async stack
costs about 1.5 ms of CPU per request, which at concurrency 64 adds up to most of a 100 ms
model latency; this client costs about a tenth of that. It talks to non-blocking sockets
through the loop's ``sock_*`` calls (no transport, protocol or stream objects per connection),
since opening the connections is most of what a cold round of requests costs.
``OpenAIPolicy`` uses it only for ``http://`` base URLs that no proxy applies to (local or
cluster inference servers: vLLM, SGLang, Ollama, llama.cpp), where it is a safe subset of
HTTP; everything else (TLS, proxies, api.openai.com) goes through the SDK.

What it does: ``POST`` JSON, keep-alive connections reused from a pool, ``Content-Length`` and
chunked bodies, a stale pooled connection retried once on a fresh one, a timeout over the whole
exchange. The host name is resolved once per client (again after a failed connect). Failures
are :class:`HTTPStatusFailure` (a non-2xx answer) or :class:`TransportFailure` (timeout,
refused or broken connection); retrying is the caller's job.
Not here: TLS, proxies, redirects, compression (it asks for ``identity``), HTTP/2.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import select
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HTTPStatusFailure", "LeanHTTPClient", "TransportFailure", "proxy_applies"]

_MAX_IDLE = 512
_MAX_HEAD = 64 * 1024
_RECV = 256 * 1024
_Address = tuple[int, Any]  # (address family, socket address)


class TransportFailure(Exception):
    """The exchange did not complete: a timeout, or a connection refused, reset or cut short."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class HTTPStatusFailure(Exception):
    """The server answered with a non-2xx status."""

    def __init__(self, status: int, message: str, retry_after: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


class _CutShort(Exception):
    """The server closed the connection before the answer was complete."""


def proxy_applies(url: str) -> bool:
    """True when the environment's proxy settings would route a request to ``url``."""
    import urllib.request

    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    bypass = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 - missing from typeshed
    return not bypass(parts.hostname or "")


def _error_message(data: bytes) -> str:
    try:
        payload = json.loads(data)
    except ValueError:
        return data[:300].decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if payload.get("message"):
            return str(payload["message"])
    return str(payload)[:300]


async def _connect(loop: asyncio.AbstractEventLoop, sock: socket.socket, address: Any) -> None:
    """Connect a non-blocking socket to a resolved address: ``loop.sock_connect`` without its
    per-call address parsing, and without a trip through the event loop when the handshake is
    already over (as it usually is on loopback)."""
    if not hasattr(select, "poll"):  # Windows: its event loops connect their own way
        await loop.sock_connect(sock, address)
        return
    try:
        sock.connect(address)
        return
    except (BlockingIOError, InterruptedError):
        pass
    ready = select.poll()
    ready.register(sock, select.POLLOUT)
    if not ready.poll(0):
        fd = sock.fileno()
        done: asyncio.Future[None] = loop.create_future()

        def writable() -> None:
            if not done.done():
                done.set_result(None)

        loop.add_writer(fd, writable)
        try:
            await done
        finally:
            loop.remove_writer(fd)
    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if error:
        raise OSError(error, f"connect to {address!r} failed: {os.strerror(error)}")


class _Connection:
    """A connected non-blocking socket and the bytes read from it but not yet used."""

    __slots__ = ("buffer", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def idle_and_open(self) -> bool:
        """True when the server has neither closed this idle connection nor sent anything on it."""
        try:
            self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return not self.buffer  # nothing to read: still open
        except OSError:
            return False
        return False  # closed (b"") or unsolicited bytes: not reusable

    async def fill(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read at least one more byte into the buffer (_CutShort at end of stream)."""
        chunk = await loop.sock_recv(self.sock, _RECV)
        if not chunk:
            raise _CutShort("the server closed the connection mid-answer")
        self.buffer += chunk

    async def read_until(self, loop: asyncio.AbstractEventLoop, separator: bytes, limit: int) -> bytes:
        """The bytes up to and including ``separator``."""
        start = 0
        while (end := self.buffer.find(separator, start)) < 0:
            if len(self.buffer) > limit:
                raise ValueError(f"no {separator!r} within {limit} bytes")
            start = max(0, len(self.buffer) - len(separator) + 1)
            await self.fill(loop)
        end += len(separator)
        data = bytes(self.buffer[:end])
        del self.buffer[:end]
        return data

    async def read_exactly(self, loop: asyncio.AbstractEventLoop, n: int) -> bytes:
        while len(self.buffer) < n:
            await self.fill(loop)
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    async def read_to_end(self, loop: asyncio.AbstractEventLoop) -> bytes:
        while chunk := await loop.sock_recv(self.sock, _RECV):
            self.buffer += chunk
        data = bytes(self.buffer)
        self.buffer.clear()
        return data

    def close(self) -> None:
        self.sock.close()


class LeanHTTPClient:
    """POST JSON to one ``http://`` origin over pooled keep-alive connections (one event loop)."""

    def __init__(self, base_url: str, *, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"LeanHTTPClient takes an http:// URL, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.base_path = parts.path.rstrip("/")
        self.timeout = timeout
        netloc = self.host if parts.port is None else f"{self.host}:{self.port}"
        if ":" in self.host:  # an IPv6 literal goes back in brackets
            netloc = f"[{self.host}]" if parts.port is None else f"[{self.host}]:{self.port}"
        self._head = "".join(f"{k}: {v}\r\n" for k, v in {
            "Host": netloc, "Content-Type": "application/json", "Accept": "application/json",
            "Accept-Encoding": "identity", "Connection": "keep-alive", **headers}.items())
        self._idle: list[_Connection] = []
        self._addresses: list[_Address] | None = None

    async def post_json(self, path: str, payload: Any) -> Any:
        """POST ``payload`` as JSON to ``base_path + path``; return the decoded JSON answer."""
        body = json.dumps(payload).encode("utf-8")
        request = (f"POST {self.base_path}{path} HTTP/1.1\r\n{self._head}"
                   f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body
        try:
            if sys.version_info >= (3, 11):  # no extra task per request, unlike wait_for
                async with asyncio.timeout(self.timeout):
                    status, data, headers = await self._send(request)
            else:  # pragma: no cover - Python 3.10
                status, data, headers = await asyncio.wait_for(self._send(request), self.timeout)
        except asyncio.TimeoutError:
            raise TransportFailure(f"no answer within {self.timeout:g} s", timeout=True) from None
        if not 200 <= status < 300:
            raise HTTPStatusFailure(status, _error_message(data), headers.get("retry-after"))
        try:
            return json.loads(data)
        except ValueError:
            raise TransportFailure(f"the server answered {status} with a body that is not JSON: "
                                   f"{data[:120]!r}") from None

    async def _send(self, request: bytes) -> tuple[int, bytes, dict[str, str]]:
        loop = asyncio.get_running_loop()
        # A pooled connection may have been closed by the server while idle: retry once, fresh.
        for attempt in (0, 1):
            conn, reused = await self._acquire(loop)
            try:
                await loop.sock_sendall(conn.sock, request)
                status, headers, data, keep = await self._read_response(loop, conn)
            except asyncio.CancelledError:
                conn.close()
                raise
            except (OSError, _CutShort, ValueError) as exc:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise TransportFailure(f"connection to {self.host}:{self.port} failed: "
                                       f"{type(exc).__name__}: {exc}") from None
            if keep and not conn.buffer and len(self._idle) < _MAX_IDLE:
                self._idle.append(conn)
            else:
                conn.close()
            return status, data, headers
        raise AssertionError("unreachable")  # pragma: no cover

    async def _resolve(self, loop: asyncio.AbstractEventLoop) -> list[_Address]:
        if self._addresses is None:
            try:
                ip = ipaddress.ip_address(self.host)
            except ValueError:
                infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
                self._addresses = [(family, address) for family, _, _, _, address in infos]
            else:
                family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
                address = (self.host, self.port) if ip.version == 4 else (self.host, self.port, 0, 0)
                self._addresses = [(family, address)]
        return self._addresses

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        try:
            addresses = await self._resolve(loop)
        except OSError as exc:
            raise TransportFailure(f"could not resolve {self.host}: {exc}") from None
        error: OSError | None = None
        for family, address in addresses:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await _connect(loop, sock, address)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            except BaseException:
                sock.close()
                raise
            return _Connection(sock)
        self._addresses = None  # the server may have moved: look the name up again next time
        raise TransportFailure(f"could not connect to {self.host}:{self.port}: {error}") from None

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> tuple[_Connection, bool]:
        while self._idle:
            conn = self._idle.pop()
            if conn.idle_and_open():
                return conn, True
            conn.close()
        return await self._connect(loop), False

    @staticmethod
    async def _read_response(loop: asyncio.AbstractEventLoop, conn: _Connection
                             ) -> tuple[int, dict[str, str], bytes, bool]:
        while True:
            head = (await conn.read_until(loop, b"\r\n\r\n", _MAX_HEAD)).decode("latin-1")
            status_line, *header_lines = head.rstrip("\r\n").split("\r\n")
            version, status_text, *_ = [*status_line.split(" ", 2), ""]
            status = int(status_text)
            if not 100 <= status < 200:
                break  # a 1xx interim answer (100 Continue) comes before the real one
        headers: dict[str, str] = {}
        for line in header_lines:
            if ":" in line:
                key, value = line.split(":", 1)
                headers[key.strip().lower()] = value.strip()
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size_line = await conn.read_until(loop, b"\r\n", _MAX_HEAD)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await conn.read_until(loop, b"\r\n", _MAX_HEAD)).strip():  # trailers, blank line
                        pass
                    break
                parts.append(await conn.read_exactly(loop, size))
                await conn.read_exactly(loop, 2)
            data = b"".join(parts)
        elif "content-length" in headers:
            data = await conn.read_exactly(loop, int(headers["content-length"]))
        else:
            data = await conn.read_to_end(loop)
            keep = False
        return status, headers, data, keep

    async def aclose(self) -> None:
        """Close every pooled connection."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
