"""The two jobs a sandbox run takes, typed: what the candidate's process and the judge process
are asked to do (their keys are the wire schema's: :data:`_schema.JOB`, :data:`_schema.JUDGE_JOB`),
and a frame of what comes back. Public through :mod:`agentenv.sandbox.contract`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

__all__ = ["Frame", "Job", "JudgeJob"]

Frame = Mapping[str, Any]  # one frame of a result channel: its type under schema.TYPE


class _JobRequired(TypedDict):
    nonce: str  # the result channel's frames carry it: the candidate cannot forge a frame
    code: str  # the candidate's solution
    setup: str  # the task's setup, as much of it as the candidate's code needs (no data)
    prelude: str  # imports a benchmark's grader puts before every solution
    items: list[dict[str, Any]]  # per check, what to compute (schema.ITEMS)
    limits: dict[str, Any]  # the process's rlimits (Limits.for_child)
    max_value_bytes: int  # the wire's budget on one value


class Job(_JobRequired, total=False):
    """What the candidate's process runs (the pool adds its ``workdir`` and ``env``)."""

    test_limit: dict[str, float]  # per stdio test: schema.TEST_CPU, TEST_WALL, TEST_STARVED, ...


class JudgeJob(TypedDict):
    """What the judge process runs: checks that need the candidate's live objects."""

    role: Literal["judge"]
    nonce: str  # the judge's own, never seen by the candidate
    setup: str  # the task's whole setup, data included: it runs only here
    prelude: str
    checks: list[dict[str, Any]]  # per check, its program (schema.JUDGE_ITEM)
    limits: dict[str, Any]
    imports: list[list[str]]  # [name, module, attribute]: names the judge imports itself
    packages: list[str]  # exposed packages the judge imports itself when a check names them
    defines: list[str] | None  # what the task asks the candidate to define (None: all it binds)
    float_tolerance: float | None
