"""The attack class files' fixtures, one family of pools: ``pool`` (one strict worker: every run
after an attack lands on the worker the attack ran on), ``pool_of_two`` (two strict workers),
``pool_with_secret`` (two strict workers started while a secret sits in the parent's
environment), ``fallback_pool`` (one worker at the rlimits level, as root only because the test
opts in), and ``listener`` (a loopback TCP server that records every connection)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest
from support.attacks import SECRET, strict_pool

from agentenv.sandbox import SandboxPool


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    """One strict worker: every run after an attack lands on the worker the attack ran on."""
    made = strict_pool(1, "the attack suites")
    yield made
    made.close()


@pytest.fixture(scope="module")
def pool_of_two() -> Iterator[SandboxPool]:
    """Two strict workers."""
    made = strict_pool(2, "the attack suites")
    yield made
    made.close()


@pytest.fixture(scope="module")
def pool_with_secret() -> Iterator[SandboxPool]:
    """A strict pool started while a secret sits in the parent's environment."""
    os.environ["AGENTENV_ATTACK_API_KEY"] = SECRET
    try:
        made = strict_pool(2, "the adversarial suite")
    finally:
        os.environ.pop("AGENTENV_ATTACK_API_KEY", None)
    yield made
    made.close()


@pytest.fixture(scope="module")
def fallback_pool() -> Iterator[SandboxPool]:
    """A pool of one worker at the rlimits level (as root only because the test opts in)."""
    made = SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True)
    yield made
    made.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A real TCP server on 127.0.0.1 that records every connection it accepts."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.1)
    accepted: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(0.5)
                try:
                    accepted.append(conn.recv(100))
                except OSError:
                    accepted.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()
