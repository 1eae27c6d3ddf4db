"""``run_tests`` and ``arun_tests``: the sandbox's public entry points.

They plan the checks (:mod:`agentenv.grading`), hand the job to a fork-server pool
(:mod:`agentenv.sandbox._pool`), and judge what came back. Whatever the candidate does ends up
in the returned ``RunResult``; only infrastructure faults raise (``SandboxError``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import secrets
from collections.abc import Sequence

from agentenv.errors import ConfigError, IsolationUnavailable
from agentenv.grading import judge, plan_checks
from agentenv.sandbox._isolation import ISOLATION_LEVELS
from agentenv.sandbox._limits import DEFAULT_LIMITS, Limits
from agentenv.sandbox._pool import SandboxPool, default_pool
from agentenv.sandbox._wire import parse_frames
from agentenv.sandbox.result import RunResult
from agentenv.tasks.schema import Check

__all__ = ["arun_tests", "run_tests"]


def _validate(code_str: object, checks: object, timeout: object, isolation: object,
              float_tolerance: object) -> None:
    if not isinstance(code_str, str):
        raise ConfigError(f"code_str must be a str, got {type(code_str).__name__}")
    if isinstance(checks, (str, bytes)) or not isinstance(checks, Sequence):
        raise ConfigError("checks must be a list of checks (str or StdioCase), not "
                          f"{type(checks).__name__}")
    if not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isolation is not None and isolation not in ISOLATION_LEVELS:
        raise ConfigError(f"isolation must be one of {ISOLATION_LEVELS} or None, got {isolation!r}")
    if float_tolerance is not None and not (
            isinstance(float_tolerance, (int, float)) and float_tolerance >= 0):
        raise ConfigError(f"float_tolerance must be a non-negative number, got {float_tolerance!r}")


def run_tests(
    code_str: str,
    checks: Sequence[Check],
    timeout: float = 2.0,
    *,
    setup_code: str = "",
    float_tolerance: float | None = None,
    isolation: str | None = None,
    limits: Limits | None = None,
    pool: SandboxPool | None = None,
) -> RunResult:
    """Run ``code_str`` against ``checks`` in a sandboxed process; judge on the trusted side.

    Each check is scored on its own. The call returns within about ``timeout`` seconds and
    never raises because of what the code does. ``isolation`` is the minimum level required:
    ``"strict"`` raises ``IsolationUnavailable`` when bubblewrap cannot run here; ``None`` or
    ``"rlimits"`` accept whatever the pool provides (reported in ``RunResult.isolation``).
    ``pool`` defaults to the process-wide :func:`~agentenv.sandbox.default_pool`.
    """
    _validate(code_str, checks, timeout, isolation, float_tolerance)
    limits = limits or DEFAULT_LIMITS
    pool = pool or default_pool()
    if isolation == "strict" and pool.level != "strict":
        raise IsolationUnavailable(
            f"strict isolation was required but this sandbox pool runs at {pool.level!r}; "
            "install bubblewrap and allow unprivileged user namespaces, or pass isolation=None")
    plan = plan_checks(checks)
    nonce = secrets.token_hex(16)
    job = {
        "nonce": nonce, "code": code_str, "setup": setup_code or "",
        "items": plan.job_items(),
        "limits": limits.for_child(timeout, nproc=pool.level == "strict"),
    }
    raw = pool.run(job, float(timeout), limits)
    result = judge(
        plan, parse_frames(raw.result, nonce), timed_out=raw.timed_out, isolation=raw.isolation,
        exec_seconds=raw.seconds, stdout=raw.stdout, stderr=raw.stderr,
        float_tolerance=float_tolerance, died=raw.died,
    )
    return dataclasses.replace(result, limits_enforced=raw.limits)


async def arun_tests(
    code_str: str,
    checks: Sequence[Check],
    timeout: float = 2.0,
    *,
    setup_code: str = "",
    float_tolerance: float | None = None,
    isolation: str | None = None,
    limits: Limits | None = None,
    pool: SandboxPool | None = None,
) -> RunResult:
    """The asyncio twin of :func:`run_tests`: same arguments, same result, off the event loop."""
    loop = asyncio.get_running_loop()
    call = functools.partial(
        run_tests, code_str, checks, timeout, setup_code=setup_code,
        float_tolerance=float_tolerance, isolation=isolation, limits=limits, pool=pool,
    )
    return await loop.run_in_executor(None, call)
