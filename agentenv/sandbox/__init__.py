"""The sandbox: run untrusted candidate code against checks and return a ``RunResult``.

``run_tests(code_str, checks, timeout=2.0, *, setup_code="", float_tolerance=None,
isolation=None)`` and its asyncio twin ``arun_tests`` are the entry points. The grading policy
lives in :mod:`agentenv.grading`; this package owns the process side: the child-side runner, the
wire format, limits and isolation.
"""

from __future__ import annotations

from agentenv.sandbox._api import ISOLATION_LEVELS, arun_tests, run_tests
from agentenv.sandbox._limits import DEFAULT_LIMITS, Limits
from agentenv.sandbox.result import Failure, RunResult

__all__ = ["DEFAULT_LIMITS", "ISOLATION_LEVELS", "Failure", "Limits", "RunResult", "arun_tests",
           "run_tests"]
