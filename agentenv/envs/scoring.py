"""Scoring one submission for an environment: hidden and visible checks in one sandbox run.

Both environments need the same thing per step: the hidden checks' result (reward and
termination) and, when the task has visible checks, their result too (feedback, and picking a
candidate by visible tests). Running them as one sandbox call costs one process, not two; the
checks shared by both lists run once. ``score``/``ascore`` are the sync and async twins;
``Grader`` is the seam both environments grade through (``SandboxGrader`` by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from agentenv.sandbox import RunResult, arun_tests, run_tests
from agentenv.sandbox.result import Failure
from agentenv.tasks.schema import Check, Task

__all__ = ["Grader", "SandboxGrader", "Scored", "ascore", "empty_result", "score"]


@dataclass(frozen=True)
class Scored:
    """The hidden checks' result, and the visible checks' result when the task has any."""

    hidden: RunResult
    visible: RunResult | None


def empty_result(checks: Sequence[Check], reason: str = "no code found in the response") -> RunResult:
    """The result of a submission with no code: every check fails without running anything."""
    failures = tuple(Failure(index=i, check=str(c), kind="no_result", message=reason)
                     for i, c in enumerate(checks))
    return RunResult.from_counts(0, len(checks), timed_out=False, failures=failures)


def _plan(task: Task) -> tuple[list[Check], list[int]]:
    """The combined check list, and where each visible check sits in it."""
    combined: list[Check] = list(task.checks)
    positions: list[int] = []
    for check in task.visible_checks:
        try:
            positions.append(combined.index(check))
        except ValueError:
            combined.append(check)
            positions.append(len(combined) - 1)
    return combined, positions


def _subset(result: RunResult, indices: Sequence[int], checks: Sequence[Check]) -> RunResult:
    """The result restricted to ``indices`` of the combined run, renumbered 0..len-1."""
    by_index = {f.index: f for f in result.failures}
    failures = []
    for new, old in enumerate(indices):
        failure = by_index.get(old)
        if failure is not None:
            failures.append(replace(failure, index=new, check=str(checks[new])))
    total = len(indices)
    passed = total - len(failures)
    return replace(
        result,
        passed=passed,
        total=total,
        fraction=passed / total if total else 0.0,
        failures=tuple(failures),
        passed_indices=tuple(i for i in range(total) if i not in {f.index for f in failures}),
        graded_in_child=min(result.graded_in_child, total),
    )


def _split(task: Task, combined: list[Check], positions: list[int], result: RunResult) -> Scored:
    hidden_idx = list(range(len(task.checks)))
    # When every visible check is also hidden, the combined run is exactly the hidden run.
    hidden = result if len(combined) == len(task.checks) else _subset(result, hidden_idx, task.checks)
    visible = _subset(result, positions, task.visible_checks) if positions else None
    return Scored(hidden=hidden, visible=visible)


def score(task: Task, code: str, *, timeout: float, isolation: str | None = None) -> Scored:
    """Run ``code`` against the task's hidden and visible checks in one sandbox run."""
    combined, positions = _plan(task)
    if not code.strip():
        return _split(task, combined, positions, empty_result(combined))
    result = run_tests(code, combined, timeout=timeout, setup_code=task.setup_code,
                       float_tolerance=task.float_tolerance, isolation=isolation,
                       equality=task.equality, prelude=task.prelude)
    return _split(task, combined, positions, result)


async def ascore(task: Task, code: str, *, timeout: float, isolation: str | None = None) -> Scored:
    """Async twin of :func:`score` for asyncio rollouts."""
    combined, positions = _plan(task)
    if not code.strip():
        return _split(task, combined, positions, empty_result(combined))
    result = await arun_tests(code, combined, timeout=timeout, setup_code=task.setup_code,
                              float_tolerance=task.float_tolerance, isolation=isolation,
                              equality=task.equality, prelude=task.prelude)
    return _split(task, combined, positions, result)


class Grader(Protocol):
    """Grades one submission of a task: hidden checks (and visible ones when the task has any).

    The sandbox (:class:`SandboxGrader`) is the default; a stub grader measures env overhead alone.
    """

    def score(self, task: Task, code: str, *, timeout: float) -> Scored: ...

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored: ...


class SandboxGrader:
    """The default grader: one sandbox run per submission, at the given isolation level."""

    def __init__(self, isolation: str | None = None) -> None:
        self.isolation = isolation

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        return score(task, code, timeout=timeout, isolation=self.isolation)

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored:
        return await ascore(task, code, timeout=timeout, isolation=self.isolation)
