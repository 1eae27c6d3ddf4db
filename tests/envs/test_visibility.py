"""What the policy is shown and what ends the episode, for each pair of options."""

from __future__ import annotations

import asyncio

import pytest

from agentenv.envs.visibility import Visibility
from agentenv.errors import ConfigError
from agentenv.grading.result import RunResult
from agentenv.grading.scoring import Scored
from agentenv.tasks.schema import Task

HIDDEN = RunResult.from_counts(1, 2, timed_out=False, isolation="strict")
VISIBLE = RunResult.from_counts(1, 1, timed_out=False, isolation="rlimits")
TASK = Task(name="t", prompt="p", entry_point="f", checks=("assert f(1) == 2", "assert f(2) == 3"),
            visible_checks=("assert f(0) == 1",))


class Recording:
    """A grader that records which checks it was asked to run, in order."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, ...]] = []

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        self.runs.append(tuple(task.checks) + tuple(task.visible_checks))
        return Scored(hidden=RunResult.from_counts(len(task.checks), len(task.checks),
                                                   timed_out=False), visible=None)

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored:
        return self.score(task, code, timeout=timeout)


def test_bad_options_are_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match="feedback_from"):
        Visibility("everything")
    with pytest.raises(ConfigError, match="stop_when"):
        Visibility("all", "never")


@pytest.mark.parametrize(("feedback_from", "stop_when", "apart", "view", "shown", "stops_on"), [
    ("all", "hidden", False, "hidden", HIDDEN, HIDDEN),
    ("visible", "hidden", True, "visible", VISIBLE, HIDDEN),
    ("all", "visible", True, "hidden", HIDDEN, VISIBLE),
    ("visible", "visible", True, "visible", VISIBLE, VISIBLE),
])
def test_each_pair_of_options_decides_the_view_and_the_end(
        feedback_from: str, stop_when: str, apart: bool, view: str, shown: RunResult,
        stops_on: RunResult) -> None:
    v = Visibility(feedback_from, stop_when)
    assert v.apart is apart and v.view == view
    assert v.shown(HIDDEN, VISIBLE) is shown
    assert v.stops_on(HIDDEN, VISIBLE) is stops_on
    assert v.isolation(HIDDEN, VISIBLE) == shown.isolation
    assert v.decided_by == ("checks" if stop_when == "hidden" else "visible_checks")


def test_without_visible_checks_the_visible_view_shows_nothing() -> None:
    v = Visibility("visible", "visible")
    assert v.shown(HIDDEN, None).total == 0
    assert not v.stops_on(HIDDEN, None).all_passed


def test_visible_checks_run_apart_and_first_when_the_options_name_them() -> None:
    together, apart = Visibility("all", "hidden"), Visibility("visible", "hidden")
    for v in (together, apart):
        v.begin(TASK)
    grader = Recording()
    together.grade(grader, TASK, "def f(x): return x + 1", 1.0)
    assert grader.runs == [TASK.checks + TASK.visible_checks]  # one run, both lists
    grader.runs.clear()
    scored = asyncio.run(apart.agrade(grader, TASK, "def f(x): return x + 1", 1.0))
    assert grader.runs == [TASK.visible_checks, TASK.checks]  # the visible run, then the hidden
    assert scored.visible is not None and scored.visible.total == 1 and scored.hidden.total == 2
