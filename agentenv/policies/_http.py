"""A lean HTTP/1.1 JSON client on asyncio streams, for plain-HTTP OpenAI-compatible servers.

Why it exists: a rollout keeps dozens of model calls in flight, and every call's client-side CPU
is spent on the one event loop that also runs the environments. The official SDK's async stack
costs about 1.5 ms of CPU per request, which at concurrency 64 adds up to most of a 100 ms
model latency; this client costs a few hundred microseconds. ``OpenAIPolicy`` uses it only for
``http://`` base URLs that no proxy applies to (local or cluster inference servers: vLLM,
SGLang, Ollama, llama.cpp), where it is a safe subset of HTTP; everything else (TLS, proxies,
api.openai.com) goes through the SDK.

What it does: ``POST`` JSON, keep-alive connections reused from a pool, ``Content-Length`` and
chunked bodies, a stale pooled connection retried once on a fresh one, a timeout over the whole
exchange. Failures are :class:`HTTPStatusFailure` (a non-2xx answer) or
:class:`TransportFailure` (timeout, refused or broken connection); retrying is the caller's job.
Not here: TLS, proxies, redirects, compression (it asks for ``identity``), HTTP/2.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HTTPStatusFailure", "LeanHTTPClient", "TransportFailure", "proxy_applies"]

_Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_MAX_IDLE = 512


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
        self._head = "".join(f"{k}: {v}\r\n" for k, v in {
            "Host": netloc, "Content-Type": "application/json", "Accept": "application/json",
            "Accept-Encoding": "identity", "Connection": "keep-alive", **headers}.items())
        self._idle: list[_Connection] = []

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
        # A pooled connection may have been closed by the server while idle: retry once, fresh.
        for attempt in (0, 1):
            conn, reused = await self._acquire()
            try:
                conn[1].write(request)
                await conn[1].drain()
                status, headers, data, keep = await self._read_response(conn[0])
            except asyncio.CancelledError:
                self._close(conn)
                raise
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
                self._close(conn)
                if reused and attempt == 0:
                    continue
                raise TransportFailure(f"connection to {self.host}:{self.port} failed: "
                                       f"{type(exc).__name__}: {exc}") from None
            if keep and len(self._idle) < _MAX_IDLE:
                self._idle.append(conn)
            else:
                self._close(conn)
            return status, data, headers
        raise AssertionError("unreachable")  # pragma: no cover

    async def _acquire(self) -> tuple[_Connection, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn[0].at_eof() and not conn[1].is_closing():
                return conn, True
            self._close(conn)
        try:
            conn = await asyncio.open_connection(self.host, self.port, limit=2 ** 20)
        except OSError as exc:
            raise TransportFailure(f"could not connect to {self.host}:{self.port}: {exc}") from None
        return conn, False

    @staticmethod
    async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes, bool]:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, *header_lines = head.split("\r\n")
        version, status_text, *_ = [*status_line.split(" ", 2), ""]
        status = int(status_text)
        headers: dict[str, str] = {}
        for line in header_lines:
            if ":" in line:
                key, value = line.split(":", 1)
                headers[key.strip().lower()] = value.strip()
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int((await reader.readline()).split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()).strip():  # trailers, then the blank line
                        pass
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            data = b"".join(parts)
        elif "content-length" in headers:
            data = await reader.readexactly(int(headers["content-length"]))
        else:
            data = await reader.read()
            keep = False
        return status, headers, data, keep

    @staticmethod
    def _close(conn: _Connection) -> None:
        conn[1].close()

    async def aclose(self) -> None:
        """Close every pooled connection."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn[1].close()
        for conn in idle:
            with contextlib.suppress(OSError):
                await conn[1].wait_closed()
