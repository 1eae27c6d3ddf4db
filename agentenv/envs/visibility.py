"""What a policy may see of a graded submission, and which tests end its episode.

The score of a turn always comes from the hidden checks. :class:`Visibility` holds the two
options that decide the rest (see :mod:`agentenv.envs.multiturn` for what each leaks):
``feedback_from`` (``"all"``: feedback lists the hidden checks' failures; ``"visible"``: every
field the policy reads comes from a sandbox run of the visible checks alone) and ``stop_when``
(``"hidden"``: the episode ends when the hidden checks pass; ``"visible"``, RLEF: when the
visible ones do). Whenever either names the visible checks they are graded in a run of their own
(:meth:`Visibility.grade`), before the hidden run, so nothing the policy observes can depend on
what the code did on hidden inputs.
"""

from __future__ import annotations

from agentenv.choices import FeedbackSource, StopWhen, parse
from agentenv.grading.result import RunResult
from agentenv.grading.scoring import Grader, Scored, ascore_apart, score_apart, split_task
from agentenv.tasks.schema import Task

__all__ = ["Visibility"]

_NO_CHECKS = RunResult.from_counts(0, 0, timed_out=False)


class Visibility:
    """``feedback_from`` and ``stop_when``, checked, and what they mean for one step."""

    def __init__(self, feedback_from: str = "all", stop_when: str = "hidden") -> None:
        self.feedback_from = parse(FeedbackSource, feedback_from, "feedback_from")
        self.stop_when = parse(StopWhen, stop_when, "stop_when")
        # Visible checks get a sandbox run of their own whenever the policy is shown (or stopped
        # by) their result: then nothing it sees can depend on what the code did on hidden inputs.
        self.apart = self.feedback_from == FeedbackSource.VISIBLE or self.stop_when == StopWhen.VISIBLE
        self._parts: tuple[Task, Task | None] | None = None

    @property
    def shows_hidden(self) -> bool:
        """Whether what the policy is shown comes from the hidden checks."""
        return self.feedback_from == FeedbackSource.ALL

    @property
    def view(self) -> str:
        """What the numbers a step reports were computed from: "hidden" or "visible"."""
        return "hidden" if self.shows_hidden else "visible"

    @property
    def decided_by(self) -> str:
        """Which checks end an episode, as the trajectory records it."""
        return "checks" if self.stop_when == StopWhen.HIDDEN else "visible_checks"

    def begin(self, task: Task) -> None:
        """A new episode (or a restored one) on ``task``: split its checks once, when needed."""
        self._parts = split_task(task) if self.apart else None

    def grade(self, grader: Grader, task: Task, code: str, timeout: float) -> Scored:
        if self.apart:
            return score_apart(grader, task, code, timeout=timeout, parts=self._parts)
        return grader.score(task, code, timeout=timeout)

    async def agrade(self, grader: Grader, task: Task, code: str, timeout: float) -> Scored:
        if self.apart:
            return await ascore_apart(grader, task, code, timeout=timeout, parts=self._parts)
        return await grader.ascore(task, code, timeout=timeout)

    def shown(self, hidden: RunResult, visible: RunResult | None) -> RunResult:
        """What the policy may see. Under ``feedback_from="visible"`` the visible run alone
        (its own sandbox run), never anything computed from the hidden result."""
        if self.shows_hidden:
            return hidden
        return visible if visible is not None else _NO_CHECKS

    def stops_on(self, hidden: RunResult, visible: RunResult | None) -> RunResult:
        """The result whose passing ends the episode: the hidden one, or (RLEF) the visible."""
        if self.stop_when == StopWhen.HIDDEN:
            return hidden
        return visible if visible is not None else _NO_CHECKS

    def isolation(self, hidden: RunResult, visible: RunResult | None) -> str:
        """The isolation level of the run the policy's view came from."""
        if self.shows_hidden:
            return hidden.isolation
        return (visible or hidden).isolation
