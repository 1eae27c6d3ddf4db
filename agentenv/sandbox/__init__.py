"""The sandbox: run untrusted candidate code against checks and return a ``RunResult``.

``run_tests(code_str, checks, timeout=2.0, *, setup_code="", float_tolerance=None,
isolation=None)`` and its asyncio twin ``arun_tests`` are the entry points; they use a
process-wide pool of fork-server workers (:class:`SandboxPool`) started on first use. The
grading policy lives in :mod:`agentenv.grading`; this package owns the process side: the
child-side runner (``_runner``), the wire format (``_wire``), the fork server (``_worker``),
the pool (``_pool``), isolation levels (``_isolation``) and resource limits (``_limits``).
"""

from __future__ import annotations

from agentenv.sandbox._api import arun_tests, run_tests
from agentenv.sandbox._isolation import ISOLATION_LEVELS
from agentenv.sandbox._limits import DEFAULT_LIMITS, Limits
from agentenv.sandbox._pool import (
    Pool,
    SandboxPool,
    default_pool,
    set_default_pool,
    shutdown_default_pool,
)
from agentenv.sandbox.result import Failure, RunResult

__all__ = [
    "DEFAULT_LIMITS",
    "ISOLATION_LEVELS",
    "Failure",
    "Limits",
    "Pool",
    "RunResult",
    "SandboxPool",
    "arun_tests",
    "default_pool",
    "run_tests",
    "set_default_pool",
    "shutdown_default_pool",
]
