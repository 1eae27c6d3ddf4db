"""``run_tests`` and ``arun_tests``: the sandbox's public entry points.

They plan the checks (:mod:`agentenv.grading`), hand the job to a process layer, and judge
what came back. Candidate behaviour of any kind ends up in the returned ``RunResult``; only
infrastructure faults raise (``SandboxError``).
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import Sequence

from agentenv.errors import ConfigError, IsolationUnavailable
from agentenv.grading import judge, plan_checks
from agentenv.sandbox._limits import DEFAULT_LIMITS, Limits
from agentenv.sandbox._spawn import spawn_run
from agentenv.sandbox._wire import parse_frames
from agentenv.sandbox.result import RunResult
from agentenv.tasks.schema import Check

__all__ = ["ISOLATION_LEVELS", "arun_tests", "run_tests"]

ISOLATION_LEVELS = ("rlimits", "strict")


def _decode(data: bytes, limit: int) -> str:
    return data[: limit + 200].decode("utf-8", "replace")


def run_tests(
    code_str: str,
    checks: Sequence[Check],
    timeout: float = 2.0,
    *,
    setup_code: str = "",
    float_tolerance: float | None = None,
    isolation: str | None = None,
    limits: Limits | None = None,
) -> RunResult:
    """Run ``code_str`` against ``checks`` in a separate process and grade it on the trusted side.

    Each check is scored on its own. The run never takes much longer than ``timeout`` seconds
    and never raises because of what the code does. ``isolation`` names the minimum isolation
    level required (``"rlimits"`` or ``"strict"``); ``None`` takes the best available.
    """
    if not isinstance(code_str, str):
        raise ConfigError(f"code_str must be a str, got {type(code_str).__name__}")
    if isinstance(checks, str):
        raise ConfigError("checks must be a list of checks, not a single string")
    if not (timeout > 0):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isolation is not None and isolation not in ISOLATION_LEVELS:
        raise ConfigError(f"isolation must be one of {ISOLATION_LEVELS} or None, got {isolation!r}")
    if isolation == "strict":
        raise IsolationUnavailable(
            "strict isolation (bubblewrap) is not available in this build yet; "
            "pass isolation=None or 'rlimits'"
        )
    limits = limits or DEFAULT_LIMITS
    plan = plan_checks(checks)
    nonce = secrets.token_hex(16)
    job = {
        "nonce": nonce, "code": code_str, "setup": setup_code or "",
        "items": plan.job_items(), "limits": limits.for_child(timeout, nproc=False),
    }
    raw = spawn_run(job, timeout, limits)
    frames = parse_frames(raw.result, nonce)
    return judge(
        plan, frames, timed_out=raw.timed_out, isolation="rlimits",
        exec_seconds=raw.seconds, stdout=_decode(raw.stdout, limits.max_output),
        stderr=_decode(raw.stderr, limits.max_output), float_tolerance=float_tolerance,
        died=raw.died,
    )


async def arun_tests(
    code_str: str,
    checks: Sequence[Check],
    timeout: float = 2.0,
    *,
    setup_code: str = "",
    float_tolerance: float | None = None,
    isolation: str | None = None,
    limits: Limits | None = None,
) -> RunResult:
    """The asyncio twin of :func:`run_tests` (same arguments, same result)."""
    loop = asyncio.get_running_loop()
    call = functools.partial(
        run_tests, code_str, checks, timeout, setup_code=setup_code,
        float_tolerance=float_tolerance, isolation=isolation, limits=limits,
    )
    return await loop.run_in_executor(None, call)
