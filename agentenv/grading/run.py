"""``run_tests`` and ``arun_tests``: candidate code against checks, in the sandbox, judged here.

They plan the checks (:mod:`agentenv.grading.plan`), hand the job to a sandbox pool
(:mod:`agentenv.sandbox`: untrusted code in, raw results out), judge what came back
(:mod:`agentenv.grading.judging`), and redact secret values from the result
(:mod:`agentenv.grading.redact`). Whatever the candidate does ends up in the returned
``RunResult``; only infrastructure faults raise (``SandboxError``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import secrets
import threading
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor

from agentenv.choices import Equality, IsolationLevel, values
from agentenv.errors import ConfigError, IsolationUnavailable
from agentenv.grading import names
from agentenv.grading.judging import judge
from agentenv.grading.memory import ValuesBudget
from agentenv.grading.memory import values_budget as resolve_values_budget
from agentenv.grading.names import setup_for_candidate
from agentenv.grading.plan import Plan, plan_checks
from agentenv.grading.redact import redact_result
from agentenv.grading.result import RunResult
from agentenv.sandbox.contract import (
    DEFAULT_LIMITS,
    Job,
    JudgeJob,
    Limits,
    Pool,
    default_pool,
    default_size,
    read_frames,
    schema,
)
from agentenv.tasks.schema import Check

__all__ = ["arun_tests", "run_tests"]


_ISOLATION_LEVELS = values(IsolationLevel)
_EQUALITIES = values(Equality)


def _validate(code_str: object, checks: object, timeout: object, isolation: object,
              float_tolerance: object, equality: object = "python", prelude: object = "") -> None:
    if not isinstance(code_str, str):
        raise ConfigError(f"code_str must be a str, got {type(code_str).__name__}")
    if isinstance(checks, (str, bytes)) or not isinstance(checks, Sequence):
        raise ConfigError("checks must be a list of checks (str or StdioCase), not "
                          f"{type(checks).__name__}")
    if not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isolation is not None and isolation not in _ISOLATION_LEVELS:
        raise ConfigError(f"isolation must be one of {_ISOLATION_LEVELS} or None, "
                          f"got {isolation!r}")
    if float_tolerance is not None and not (
            isinstance(float_tolerance, (int, float)) and float_tolerance >= 0):
        raise ConfigError(f"float_tolerance must be a non-negative number, got {float_tolerance!r}")
    if equality not in _EQUALITIES:
        raise ConfigError(f"equality must be one of {_EQUALITIES}, got {equality!r}")
    if not isinstance(prelude, str):
        raise ConfigError(f"prelude must be a str of Python source, got {type(prelude).__name__}")


def run_tests(
    code_str: str,
    checks: Sequence[Check],
    timeout: float = 2.0,
    *,
    setup_code: str = "",
    float_tolerance: float | None = None,
    isolation: str | None = None,
    limits: Limits | None = None,
    pool: Pool | None = None,
    equality: str = "python",
    prelude: str = "",
    values_budget: ValuesBudget | int | None = None,
    defines: Collection[str] | None = None,
) -> RunResult:
    """Run ``code_str`` against ``checks`` in a sandboxed process; judge on the trusted side.

    Each check is scored on its own. The call returns within about ``timeout`` seconds and
    never raises because of what the code does; stdio cases are timed alone, ``timeout`` each
    (a test past it fails alone, as ``timeout``), the run within ``timeout`` per case up to
    ``Limits.max_run_seconds``. ``isolation`` is the minimum level required:
    ``"strict"`` raises ``IsolationUnavailable`` when bubblewrap cannot run here; ``None`` or
    ``"rlimits"`` accept whatever the pool provides (reported in ``RunResult.isolation``).
    ``pool`` defaults to the process-wide :func:`~agentenv.sandbox.default_pool`. Levels are
    :class:`agentenv.choices.IsolationLevel`; equality modes :class:`agentenv.choices.Equality`.
    ``equality`` is how values are compared: ``"python"`` (Python's own ``==``: ``1 == 1.0``, a
    Counter equals a dict with its items) or ``"strict"`` (same exact type all the way down).
    ``prelude`` runs in the candidate's namespace before its code (a benchmark's implicit
    imports, e.g. LiveCodeBench's). The judge runs prelude and ``setup_code`` itself; the
    candidate's process gets only the setup's definitions its code reads
    (:func:`~agentenv.grading.names.setup_for_candidate`), never the setup's data.
    ``values_budget`` (a :class:`~agentenv.grading.memory.ValuesBudget` or bytes) bounds the
    decoded values of every run judged against it at once; by default the process-wide one.
    ``defines`` names what the task asks the candidate to define
    (:func:`~agentenv.grading.names.asked_names`); when given, a check's other names never
    resolve to the candidate's bindings (see :mod:`agentenv.grading.names`).
    """
    _validate(code_str, checks, timeout, isolation, float_tolerance, equality, prelude)
    gate = resolve_values_budget(values_budget)
    limits = limits or DEFAULT_LIMITS
    pool = pool or default_pool()
    if isolation == IsolationLevel.STRICT and pool.level != IsolationLevel.STRICT:
        raise IsolationUnavailable(
            f"strict isolation was required but this sandbox pool runs at {pool.level!r}; "
            "install bubblewrap and allow unprivileged user namespaces, or pass isolation=None")
    asked = None if defines is None else frozenset(str(n) for n in defines)
    plan = plan_checks(checks, setup_code=setup_code or "", prelude=prelude, code=code_str,
                       defines=asked)
    result, objects = _run_plan(plan, code_str, timeout, setup_code, prelude, float_tolerance,
                                equality, limits, pool, gate)
    if objects and not result.timed_out:
        # Calls that returned candidate objects (not plain data): those checks run again in
        # the judge process, which holds such objects as handles. Whether a value is plain is
        # the candidate's own doing, never a verdict, so the second run reveals nothing. The
        # checks before the first such one run again too (the candidate's state: a counter,
        # objects in a registry), and every check after it goes to the judge, in order; the
        # first run stopped at that call, so it cost only the checks before it.
        plan = plan_checks(checks, setup_code=setup_code or "", prelude=prelude, code=code_str,
                           rerouted=objects, defines=asked)
        first = result.exec_seconds
        result, _ = _run_plan(plan, code_str, timeout, setup_code, prelude, float_tolerance,
                              equality, limits, pool, gate)
        result = dataclasses.replace(result, exec_seconds=first + result.exec_seconds)
    return result


def _run_plan(plan: Plan, code_str: str, timeout: float, setup_code: str, prelude: str,
              float_tolerance: float | None, equality: str, limits: Limits,
              pool: Pool, gate: ValuesBudget) -> tuple[RunResult, frozenset[int]]:
    """One sandbox run of ``plan``; with the trusted checks whose calls returned objects."""
    nonce = secrets.token_hex(16)
    stdio_tests = sum(1 for cp in plan.checks if cp.mode == "stdio")
    if stdio_tests:
        limits = limits.for_stdio(stdio_tests)
    run_seconds = limits.run_seconds(timeout, stdio_tests)
    child_limits = limits.for_child(run_seconds, nproc=pool.level == IsolationLevel.STRICT)
    job = Job(
        # the setup's data stays with the judge: the candidate gets the definitions it reads
        nonce=nonce, code=code_str, setup=setup_for_candidate(setup_code or "", code_str),
        prelude=prelude, items=plan.job_items(), limits=child_limits,
        max_value_bytes=limits.max_result_bytes,
    )
    if stdio_tests:
        job["test_limit"] = limits.for_tests(timeout)
    # Checks the trusted side cannot decompose go to a judge process of their own, with a
    # nonce the candidate never sees; its frames come back apart from the candidate's.
    judge_nonce = secrets.token_hex(16)
    judge_job = (JudgeJob(role="judge", nonce=judge_nonce, setup=setup_code or "",
                          prelude=prelude, checks=plan.judge_items(), limits=child_limits,
                          imports=[list(item) for item in plan.imports],
                          packages=sorted(names.exposed_packages()),
                          defines=None if plan.defines is None else sorted(plan.defines),
                          float_tolerance=float_tolerance)
                 if plan.needs_judge else None)
    raw = pool.run(job, float(run_seconds), limits, judge=judge_job)
    frames = read_frames(raw.result, nonce)
    judge_frames = read_frames(raw.judge_result, judge_nonce)
    capped = limits.max_result_bytes if len(raw.result) >= limits.max_result_bytes else None
    # The frames hold copies of what the values need: the raw channel bytes (up to
    # max_result_bytes per run) need not stay alive while this run waits for the values budget.
    raw = dataclasses.replace(raw, result=b"", judge_result=b"")
    trusted = {c.index for c in plan.checks if c.mode == "trusted"}
    objects = frozenset(f[schema.INDEX] for f in frames
                        if f.get(schema.TYPE) == schema.CALL and f.get(schema.KIND) == schema.NOT_PLAIN
                        and f.get(schema.INDEX) in trusted)
    result = judge(
        plan, frames, timed_out=raw.timed_out, isolation=raw.isolation,
        exec_seconds=raw.seconds, stdout=raw.stdout, stderr=raw.stderr,
        float_tolerance=float_tolerance, died=raw.died, equality=equality,
        capped=capped, judge_frames=judge_frames, judge_died=raw.judge_died,
        values_budget=gate,
    )
    return dataclasses.replace(redact_result(result), limits_enforced=raw.limits), objects


# arun_tests' own threads: a sync run blocks its thread for up to its timeout, so runs on the
# event loop's default executor would hold every other ``to_thread`` of the caller behind them.
# As many as the default pool runs at once (at least 8); more runs wait here, not there.
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _grading_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=max(8, default_size()),
                                           thread_name_prefix="agentenv-arun")
        return _executor


def _forget_executor() -> None:  # a forked child has none of its parent's threads
    global _executor, _executor_lock
    _executor, _executor_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_executor)


async def arun_tests(
    code_str: str,
    checks: Sequence[Check],
    timeout: float = 2.0,
    *,
    setup_code: str = "",
    float_tolerance: float | None = None,
    isolation: str | None = None,
    limits: Limits | None = None,
    pool: Pool | None = None,
    equality: str = "python",
    prelude: str = "",
    values_budget: ValuesBudget | int | None = None,
    defines: Collection[str] | None = None,
) -> RunResult:
    """The asyncio twin of :func:`run_tests`: same arguments, same result, off the event loop
    on agentenv's own bounded thread pool (never the loop's default executor)."""
    import asyncio  # loaded already under a running loop; a top-level import costs every sync caller ~20 ms

    loop = asyncio.get_running_loop()
    call = functools.partial(
        run_tests, code_str, checks, timeout, setup_code=setup_code,
        float_tolerance=float_tolerance, isolation=isolation, limits=limits, pool=pool,
        equality=equality, prelude=prelude, values_budget=values_budget, defines=defines,
    )
    return await loop.run_in_executor(_grading_executor(), call)
