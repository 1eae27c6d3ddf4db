"""The one HTTP path of the OpenAI-compatible policy: aiohttp, for async and blocking callers.

What this module owns:

- one :class:`aiohttp.ClientSession` per event loop (a session belongs to the loop it was made
  on), closed with its loop: ``asyncio.run()`` finalizes the loop's async generators before it
  closes the loop, so a directly awaited call leaves no unclosed session;
- a private event loop on a daemon thread for blocking callers: the sync call runs the very
  same coroutine there, so sync and async share one request path, one answer reader and one
  failure taxonomy (:mod:`agentenv.policies.resilience`);
- sending a JSON body and reading the answer as JSON, or line by line as a server-sent event
  stream;
- the environment's proxy (``HTTP(S)_PROXY``, ``ALL_PROXY`` minus ``NO_PROXY``), looked up once
  per session (aiohttp's ``trust_env`` would look it up, and read ``~/.netrc``, in a worker
  thread on every request).

A failed request raises what :func:`~agentenv.policies.resilience.classify` reads:
:class:`~agentenv.policies.resilience.StatusFailure` (a non-2xx answer, in the server's words,
with its ``Retry-After``), :class:`~agentenv.policies.resilience.BadAnswer` (a 2xx answer that
is not JSON), :class:`aiohttp.ClientError` or :class:`TimeoutError` (``timeout`` bounds each
request as a whole).

Why aiohttp rather than the ``openai`` SDK or httpx: at dozens of calls in flight each call's
client CPU is spent on the event loop that also runs the environments. Measured against the
stand-in server with 64 calls in flight (client CPU per call): aiohttp 0.18 ms; httpx on an
aiohttp transport 0.39 ms; the SDK on its aiohttp backend 0.97 ms; httpx on its own connection
pool 9.7 ms. ``benchmarks/rollout_concurrency.py`` measures the whole runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from agentenv import settings
from agentenv.policies.resilience import BadAnswer, StatusFailure, server_message

__all__ = ["HTTPClient", "decode_json"]

T = TypeVar("T")
# id(loop) -> (loop, session, its lifetime, the proxy it uses)
_Sessions = dict[int, tuple[asyncio.AbstractEventLoop, Any, AsyncGenerator[None, None], str | None]]


def decode_json(raw: bytes | str) -> Any:
    """The decoded JSON of a 2xx answer; :class:`BadAnswer` when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        raise BadAnswer(f"the answer is not JSON: {raw[:120]!r}") from None


class _LoopThread:
    """An event loop running on a daemon thread, for callers that block."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="agentenv-http", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:  # it would wait for itself forever
            coro.close()
            raise RuntimeError("a blocking policy call was made from the policy's own HTTP loop; "
                               "await policy.acall(obs) there instead")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # an interrupted caller leaves no request behind
            raise

    def close(self, sessions: _Sessions) -> None:
        """Close the sessions made on the loop (their lifetimes end), then stop the loop.
        ``sessions`` is held strongly by the caller: the loop itself only holds weak references
        to the lifetimes, which a collected client would take with it unclosed."""
        if self.loop.is_closed():
            return
        if threading.current_thread() is self.thread:  # dropped by code on the loop itself
            self.loop.call_soon(self.loop.stop)
            return

        async def shutdown() -> None:
            for key, (loop, _session, lifetime, _proxy) in list(sessions.items()):
                if loop is self.loop:
                    sessions.pop(key, None)
                    await lifetime.aclose()
            await self.loop.shutdown_asyncgens()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


async def _session_lifetime(session: Any) -> AsyncGenerator[None, None]:
    """Holds a session open until it is finalized (aclose(), or its loop's shutdown)."""
    try:
        yield
    finally:
        await session.close()


def _env_proxy(url: str) -> str | None:
    """The proxy that HTTP(S)_PROXY / ALL_PROXY (minus NO_PROXY) route ``url`` through, if any."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxies = settings.proxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    bypass = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 - missing from typeshed
    if not proxy or bypass(parts.hostname or "", proxies):
        return None
    return str(proxy)


class HTTPClient:
    """JSON over HTTP to one server (``base_url``), from async code or from blocking code.

    Safe to share between threads and event loops; pickled without its sessions and loop
    thread (a Ray worker rebuilds them on first use).
    """

    def __init__(self, base_url: str, api_key: str, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": "agentenv",
                         "Content-Type": "application/json"}
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._sessions: _Sessions = {}
        self._thread: _LoopThread | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_lock", "_sessions", "_thread"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    async def _session(self) -> tuple[Any, str | None]:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._sessions.get(id(loop))
            if entry is not None and entry[0] is loop:
                return entry[1], entry[3]
            for key, (old_loop, *_rest) in list(self._sessions.items()):
                if old_loop.is_closed():
                    del self._sessions[key]
        import aiohttp

        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                        timeout=aiohttp.ClientTimeout(total=self.timeout),
                                        headers=self._headers)
        lifetime = _session_lifetime(session)
        await lifetime.__anext__()  # registered with this loop: closed at its shutdown
        proxy = _env_proxy(self.url("/"))
        with self._lock:
            self._sessions[id(loop)] = (loop, session, lifetime, proxy)
        return session, proxy

    @contextlib.asynccontextmanager
    async def _request(self, method: str, path: str, body: Mapping[str, Any] | None) -> AsyncIterator[Any]:
        session, proxy = await self._session()
        data = None if body is None else json.dumps(body).encode()
        async with session.request(method, self.url(path), data=data, proxy=proxy) as response:
            if response.status >= 300:
                raise StatusFailure(response.status, server_message(await response.read()),
                                    response.headers.get("Retry-After"))
            yield response

    async def get_json(self, path: str) -> Any:
        """``GET path``: the decoded JSON answer."""
        async with self._request("GET", path, None) as response:
            return decode_json(await response.read())

    async def post_json(self, path: str, body: Mapping[str, Any]) -> Any:
        """``POST path`` with a JSON body: the decoded JSON answer."""
        async with self._request("POST", path, body) as response:
            return decode_json(await response.read())

    async def post_events(self, path: str, body: Mapping[str, Any], on_line: Callable[[bytes], bool]) -> None:
        """``POST path`` with a JSON body, reading the answer (server-sent events) line by line:
        each line goes to ``on_line`` until it returns True or the stream ends."""
        async with self._request("POST", path, body) as response:
            async for line in response.content:
                if on_line(line):
                    break

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` (a call of this client) to completion for a blocking caller."""
        with self._lock:
            if self._thread is None or self._thread.loop.is_closed():
                self._thread = _LoopThread()
                weakref.finalize(self, self._thread.close, self._sessions)
            thread = self._thread
        return thread.run(coro)

    async def aclose(self) -> None:
        """Close the running loop's session (others close with their loops)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._sessions.pop(id(loop), None)
        if entry is not None:
            await entry[2].aclose()  # closes the session

    def close(self) -> None:
        """Close the blocking callers' session and stop their loop; the client stays usable
        (both are made again on demand)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.close(self._sessions)
