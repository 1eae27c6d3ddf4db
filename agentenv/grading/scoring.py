"""Scoring one submission for an environment: hidden and visible checks, together or apart.

Every step needs the hidden checks' result (reward, and termination by default) and, when the
task has visible checks, their result too (feedback, the RLEF stop, picking a candidate by
visible tests). Two ways to get them:

- together (``score``/``ascore``): one sandbox run over both lists, split afterwards. One
  process, not two, and the checks shared by both lists run once. But the candidate runs the
  hidden inputs in the same process, before the visible ones: whatever it does there (exit
  with a status computed from a hidden input, hang, print) shows in the visible results. Fit
  for feedback that shows everything anyway.
- apart (``score_apart``/``ascore_apart``): the visible checks in a sandbox run of their own,
  in which the candidate never sees a hidden input. Nothing in the visible result depends on
  the hidden checks; what the policy is shown under ``feedback_from="visible"`` comes from it.

``Grader`` is the seam both environments grade through (``SandboxGrader`` by default); the
apart helpers grade through any grader, as two tasks: the hidden checks alone and the visible
checks alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from agentenv.grading.names import asked_names
from agentenv.grading.result import Failure, RunResult
from agentenv.grading.run import arun_tests, run_tests
from agentenv.tasks.schema import Check, StdioCase, Task

__all__ = [
    "Grader",
    "SandboxGrader",
    "Scored",
    "ascore",
    "ascore_apart",
    "asked_by",
    "empty_result",
    "score",
    "score_apart",
    "split_task",
]


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


def _seconds(task: Task, timeout: float) -> float:
    """The run's timeout: the environment's, or the task's stated ``time_limit`` when longer
    (limits stated for C++ are not held against Python, as APPS's and LiveCodeBench's graders
    give Python 4 and 6 s a test whatever the problem says)."""
    return max(timeout, task.time_limit) if task.time_limit is not None else timeout


def asked_by(task: Task) -> frozenset[str] | None:
    """What the task asks the candidate to define: a check's other names are never the
    candidate's (:func:`agentenv.grading.names.asked_names`). Function tasks only: a program's
    stdio cases read no names."""
    if not task.entry_point or any(isinstance(c, StdioCase) for c in task.checks):
        return None
    checks = tuple(c for c in (*task.checks, *task.visible_checks) if isinstance(c, str))
    return asked_names(task.entry_point, task.reference_solution, task.prompt, checks)


def score(task: Task, code: str, *, timeout: float, isolation: str | None = None) -> Scored:
    """Run ``code`` against the task's hidden and visible checks in one sandbox run (under
    ``timeout``, or the task's own ``time_limit`` when longer)."""
    combined, positions = _plan(task)
    if not code.strip():
        return _split(task, combined, positions, empty_result(combined))
    result = run_tests(code, combined, timeout=_seconds(task, timeout), setup_code=task.setup_code,
                       float_tolerance=task.float_tolerance, isolation=isolation,
                       equality=task.equality, prelude=task.prelude, defines=asked_by(task))
    return _split(task, combined, positions, result)


async def ascore(task: Task, code: str, *, timeout: float, isolation: str | None = None) -> Scored:
    """Async twin of :func:`score` for asyncio rollouts."""
    combined, positions = _plan(task)
    if not code.strip():
        return _split(task, combined, positions, empty_result(combined))
    result = await arun_tests(code, combined, timeout=_seconds(task, timeout), setup_code=task.setup_code,
                              float_tolerance=task.float_tolerance, isolation=isolation,
                              equality=task.equality, prelude=task.prelude, defines=asked_by(task))
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


def split_task(task: Task) -> tuple[Task, Task | None]:
    """The task with its hidden checks only, and a task whose checks are its visible ones
    (None when it has none): what :func:`score_apart` grades as two separate runs."""
    hidden = replace(task, visible_checks=()) if task.visible_checks else task
    visible = replace(task, checks=task.visible_checks, visible_checks=()) if task.visible_checks else None
    return hidden, visible


def score_apart(grader: Grader, task: Task, code: str, *, timeout: float,
                parts: tuple[Task, Task | None] | None = None) -> Scored:
    """Hidden and visible checks in separate runs of ``grader`` (``parts``: a cached
    :func:`split_task`), so that the visible result cannot depend on the hidden checks."""
    hidden_task, visible_task = parts if parts is not None else split_task(task)
    # The visible run goes first: nothing the candidate does on this step's hidden inputs can
    # have happened yet, even in a sandbox that kept state between runs.
    visible = grader.score(visible_task, code, timeout=timeout).hidden if visible_task is not None else None
    hidden = grader.score(hidden_task, code, timeout=timeout).hidden
    return Scored(hidden=hidden, visible=visible)


async def ascore_apart(grader: Grader, task: Task, code: str, *, timeout: float,
                       parts: tuple[Task, Task | None] | None = None) -> Scored:
    """Async twin of :func:`score_apart` (the same order: visible run, then hidden run)."""
    hidden_task, visible_task = parts if parts is not None else split_task(task)
    visible = (await grader.ascore(visible_task, code, timeout=timeout)).hidden \
        if visible_task is not None else None
    hidden = (await grader.ascore(hidden_task, code, timeout=timeout)).hidden
    return Scored(hidden=hidden, visible=visible)
