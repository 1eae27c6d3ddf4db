"""What the sandbox suites share: an attack case, candidate code that finds its sockets, and
a strict pool that skips outside CI and fails in it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from agentenv import settings
from agentenv.errors import IsolationUnavailable
from agentenv.sandbox import SandboxPool

# Candidate-side helper: the socket descriptors this process holds (the judge channel among them).
FIND_SOCKETS = """
import os, stat
def sockets():
    found = []
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(fd)
        except OSError:
            pass
    return found
"""


@dataclass(frozen=True)
class Case:
    """One attack (or control): code, checks, setup, and exactly what honest work scores."""

    name: str
    code: str
    checks: tuple[str, ...]
    expected: float = 0.0
    setup: str = ""
    timeout: float = 1.0


def make_case(marker: str, name: str, code: str, checks: tuple[str, ...], **kwargs: object) -> Case:
    """A Case whose code has ``MARKER`` replaced by this run's marker."""
    return Case(name, code.replace("MARKER", marker), checks, **kwargs)  # type: ignore[arg-type]


def strict_pool(size: int, what: str) -> SandboxPool:
    """A strict pool; where bubblewrap cannot run, a skip naming ``what`` needs it, except in CI
    (``AGENTENV_REQUIRE_STRICT=1``), where a missing sandbox must fail the build instead."""
    try:
        return SandboxPool(size=size, isolation="strict")
    except IsolationUnavailable as exc:  # pragma: no cover - CI installs bubblewrap
        if settings.require_strict():
            raise
        pytest.skip(f"{what} need(s) strict isolation: {exc}")
